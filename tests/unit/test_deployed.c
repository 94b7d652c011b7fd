/* test_deployed.c -- soft shares as `kubectl apply -k deploy/` runs tessera (issue 19). Two replicas of the
 * real tessera-extender binary, each started with exactly the arguments and environment of deploy/'s
 * Deployment, with its own Pod as the ReplicaSet makes it (the extender a native sidecar in initContainers)
 * and leader election as deployed; beside each, a fake kube-scheduler that plays deploy/'s
 * KubeSchedulerConfiguration (its own Lease; it calls only its own extender, and only while pods are
 * pending). Pods are created through tessera's webhook; the fake kubelet pulls images, refuses a command an
 * image lacks, and holds a container whose envFrom ConfigMap is missing in CreateContainerConfigError.
 * Timings are deploy/'s own (a 15 s Lease, a 30 s grace), so these tests take a while; each says what it
 * measured. tests/support/deployed.h lists the few things a test machine cannot do as a cluster does.
 */
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "ext_proc.h"
#include "ext_helpers.h"
#include "extender/base/delivery.h"
#include "tests/support/deployed_cluster.h"

#define GPU_NODE "gpu-1"
#define GPU_PREFIX "GPU-9f3c"

typedef deployed_cluster cluster;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* deploy/ of this tree: beside the build directory that holds this binary. */
static bool deploy_dir(char *out, size_t len) {
    char probe[700];
    if (!sibling_binary_path("../deploy", out, len)) return false;
    snprintf(probe, sizeof probe, "%s/kustomization.yaml", out);
    return access(probe, R_OK) == 0;
}

/* deploy/'s cluster with one GPU node of 8 A100s (the demo cluster's gpu-a100-whole) whose first pull of
 * tessera's image takes pull_ms (unpullable: it cannot be pulled there). pod0 (may be NULL): the Pod the API
 * shows for the first replica instead of deploy/'s. */
static bool cluster_start_with(cluster *c, int pull_ms, bool unpullable, const cJSON *pod0, const char *binaries) {
    char bin[1024], dir[640];
    memset(c, 0, sizeof *c);
    if (!extender_path(bin, sizeof bin) || !deploy_dir(dir, sizeof dir)) {
        snprintf(c->err, sizeof c->err, "no build/tessera-extender or deploy/ next to the test binary");
        return false;
    }
    cJSON *node = demo_node_as("gpu-a100-whole", GPU_NODE);
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    deployed_cluster_config cfg = {.extender_bin = bin, .deploy_dir = dir, .gpu_node_json = nj, .gpus = 8,
                                   .uuid_prefix = GPU_PREFIX, .pull_ms = pull_ms, .unpullable = unpullable, .pod0 = pod0,
                                   .image_binaries = binaries};
    int rc = deployed_cluster_start(c, &cfg);
    free(nj);
    return rc == 0;
}

static bool cluster_start(cluster *c, int pull_ms, bool unpullable, const cJSON *pod0) {
    return cluster_start_with(c, pull_ms, unpullable, pod0, NULL);
}

#define cluster_stop deployed_cluster_stop
#define scheduling_calls deployed_cluster_calls
#define lease_replica deployed_cluster_lease_replica
#define create_share deployed_cluster_create_share
#define get_obj deployed_cluster_get
#define bound deployed_cluster_bound
#define reservations deployed_cluster_reservations
#define cm_uuid deployed_cluster_cm_uuid

static const char *ann(const cJSON *pod, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The waiting reason the fake kubelet wrote for the pod's first app container ("" if none). */
static void waiting_reason(cluster *c, const char *name, char *buf, size_t len) {
    cJSON *p = get_obj(c, "pods", "default", name);
    const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                         cJSON_GetObjectItem(p, "status"), "containerStatuses"), 0), "state"), "waiting");
    const cJSON *r = cJSON_GetObjectItem(w, "reason");
    snprintf(buf, len, "%s", cJSON_IsString(r) ? r->valuestring : "");
    cJSON_Delete(p);
}

/* (a) and (b): a share bound, then no scheduling call at all. Its reservation's container starts 20 s later
 * (a first image pull) and the share is still delivered within 1 s of the UUID; deleting it in the idle cluster
 * releases the reservation after deploy/'s grace. */
TEST(deployed_idle_cluster_delivers_and_releases_with_no_scheduling_call) {
    cluster c = {0};
    bool up = cluster_start(&c, 20000, false, NULL);
    char uid[128] = "", cm[256] = "";
    bool created = up && create_share(&c, 0, "share-a", "0.5", uid, sizeof uid, cm, sizeof cm);
    int64_t t_bound = 0;
    for (int64_t t0 = now_ms(); created && now_ms() - t0 < TEST_PATIENCE_MS && !t_bound; nap(20))
        if (bound(&c, "share-a")) t_bound = now_ms();
    /* the bind's call has returned: the kube-scheduler that made it counted it bound */
    WAIT_FOR(fake_scheduler_bound(c.ks[0]) + fake_scheduler_bound(c.ks[1]) >= 1);
    int calls_after_bind = scheduling_calls(&c);
    /* the reservation: made at once, in deploy/'s image (the native sidecar's, not kube-scheduler's) */
    cJSON *rs = NULL;
    for (int64_t t0 = now_ms(); t_bound && now_ms() - t0 < TEST_PATIENCE_MS; nap(20)) {
        cJSON_Delete(rs);
        rs = reservations(&c);
        if (cJSON_GetArraySize(rs) > 0) break;
    }
    const cJSON *rp = cJSON_GetArrayItem(rs, 0);
    char rname[256] = "", rimage[256] = "";
    snprintf(rname, sizeof rname, "%s", rp ? cJSON_GetObjectItem(cJSON_GetObjectItem(rp, "metadata"), "name")->valuestring : "");
    const cJSON *rc0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rp, "spec"), "containers"), 0);
    snprintf(rimage, sizeof rimage, "%s", cJSON_IsString(cJSON_GetObjectItem(rc0, "image")) ? cJSON_GetObjectItem(rc0, "image")->valuestring : "");
    cJSON_Delete(rs);
    char share_wait[64] = "";
    for (int64_t t0 = now_ms(); rname[0] && now_ms() - t0 < TEST_PATIENCE_MS && !share_wait[0]; nap(50))
        waiting_reason(&c, "share-a", share_wait, sizeof share_wait);
    /* UUID, then ConfigMap: with nothing being scheduled */
    int64_t t_uuid = 0, t_cm = 0;
    char uuid[128] = "", cmv[128] = "";
    for (int64_t t0 = now_ms(); rname[0] && now_ms() - t0 < 20000 + TEST_PATIENCE_MS && !t_cm; nap(10)) {
        if (!t_uuid) {
            cJSON *p = get_obj(&c, "pods", c.d->ns, rname);
            const char *u = ann(p, EXT_RSV_ANN_UUID);
            if (u) { t_uuid = now_ms(); snprintf(uuid, sizeof uuid, "%s", u); }
            cJSON_Delete(p);
        }
        cm_uuid(&c, cm, cmv, sizeof cmv);
        if (cmv[0]) t_cm = now_ms();
    }
    /* the kubelet retries the share's container and it starts with exactly that GPU */
    char *seen = NULL;
    for (int64_t t0 = now_ms(); t_cm && now_ms() - t0 < TEST_PATIENCE_MS && !seen; nap(50))
        seen = fake_kubelet_env(c.kl, uid, "app", EXT_DLV_ENV_VISIBLE);
    int calls_after_delivery = scheduling_calls(&c);
    /* (b): the last share goes; the reservation goes after the grace, still with no call */
    const char *grace_s = deployed_extender_arg(c.d, "--reservation-grace");
    int grace_ms = grace_s ? atoi(grace_s) * 1000 : -1;
    int64_t t_del = now_ms(), t_gone = 0;
    fake_api_delete(c.api, "pods", "default", "share-a");
    for (; seen && now_ms() - t_del < grace_ms + TEST_PATIENCE_MS && !t_gone; nap(50)) {
        cJSON *p = get_obj(&c, "pods", c.d->ns, rname);
        if (!p) t_gone = now_ms();
        cJSON_Delete(p);
    }
    int calls_at_end = scheduling_calls(&c);
    int doubles = c.kl ? fake_kubelet_double_holds(c.kl) : -1;
    int64_t slack_cm = test_slack_ms(1000), slack_grace = test_slack_ms(2000);
    char want_image[256];
    snprintf(want_image, sizeof want_image, "%s", c.d ? c.d->extender_image : "?");
    cluster_stop(&c);
    CHECK_MSG(up, "%s", c.err);
    CHECK_MSG(created, "%s", c.err);
    CHECK_MSG(t_bound, "the share was never bound");
    CHECK_MSG(rname[0], "no reservation was created");
    CHECK_STR(rimage, want_image);   /* the sidecar's image, after kustomization.yaml's images: */
    /* It waits: for its ConfigMap, or before that for its tessera-cuda-shim init container, whose image (tessera's)
     * the node pulls for the first time too. */
    CHECK_MSG(!strcmp(share_wait, "CreateContainerConfigError") || !strcmp(share_wait, "PodInitializing"),
              "the share's container waits in \"%s\"", share_wait);
    CHECK_MSG(t_uuid && t_uuid - t_bound >= 15000, "UUID %lld ms after the bind; the pull takes 20 s",
              (long long)(t_uuid - t_bound));
    CHECK_MSG(t_cm && t_cm - t_uuid <= slack_cm, "ConfigMap %lld ms after the UUID (target: 1 s; %lld ms at this load)",
              (long long)(t_cm - t_uuid), (long long)slack_cm);
    CHECK_STR(cmv, uuid);
    CHECK_MSG(seen && !strcmp(seen, uuid), "the share's container saw NVIDIA_VISIBLE_DEVICES=%s, its GPU is %s",
              seen ? seen : "(not started)", uuid);
    free(seen);
    CHECK_MSG(grace_ms > 0, "deploy/ gives no --reservation-grace");
    CHECK_MSG(t_gone && t_gone - t_del >= grace_ms - 1000 && t_gone - t_del <= grace_ms + slack_grace,
              "the reservation went %lld ms after its last share (grace %d ms; target: grace + 2 s, + %lld ms at this "
              "load)", (long long)(t_gone - t_del), grace_ms, (long long)slack_grace);
    CHECK_INT(calls_after_delivery, calls_after_bind);
    CHECK_INT(calls_at_end, calls_after_bind);
    CHECK_INT(doubles, 0);
    printf("    idle cluster: UUID %lld ms after the bind, ConfigMap %lld ms after the UUID, reservation deleted %lld ms "
           "after its last share (grace %d ms), %d scheduling calls after the bind\n", (long long)(t_uuid - t_bound),
           (long long)(t_cm - t_uuid), (long long)(t_gone - t_del), grace_ms, calls_at_end - calls_after_bind);
}

/* (c): the replica doing the background work dies (kill -9 of its pod's processes, its Leases left to expire)
 * while 4 shares wait for their reservations: the other replica takes the Lease without any scheduling call
 * and delivers all 4. */
TEST(deployed_killed_background_replica_is_replaced_and_waiting_shares_delivered) {
    cluster c = {0};
    bool up = cluster_start(&c, 8000, false, NULL);
    char uid[4][128], cm[4][256];
    int made = 0;
    for (int i = 0; up && i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "wait-%d", i);
        made += create_share(&c, i % 2, name, "0.75", uid[i], sizeof uid[i], cm[i], sizeof cm[i]);   /* one per GPU */
    }
    int nbound = 0;
    for (int64_t t0 = now_ms(); made == 4 && now_ms() - t0 < TEST_PATIENCE_MS && nbound < 4; nap(50)) {
        nbound = 0;
        for (int i = 0; i < 4; i++) {
            char name[32];
            snprintf(name, sizeof name, "wait-%d", i);
            nbound += bound(&c, name);
        }
    }
    int nres = 0;
    for (int64_t t0 = now_ms(); nbound == 4 && now_ms() - t0 < TEST_PATIENCE_MS && nres < 4; nap(50)) {
        cJSON *rs = reservations(&c);
        nres = cJSON_GetArraySize(rs);
        cJSON_Delete(rs);
    }
    int victim = lease_replica(&c), survivor = 1 - victim;
    char delivered_before[128] = "";
    if (victim >= 0) cm_uuid(&c, cm[0], delivered_before, sizeof delivered_before);
    int64_t t_kill = now_ms();
    if (victim >= 0) deployed_cluster_kill(&c, victim);   /* the node of its pod died: nothing released */
    int calls0 = victim >= 0 ? fake_scheduler_calls(c.ks[survivor]) : 0;
    int64_t t_lease = 0, t_all = 0;
    int ndelivered = 0, right = 0;
    int lease_ms = c.d ? c.d->lease_ms : 0, retry_ms = c.d ? c.d->retry_ms : 0;
    for (; victim >= 0 && now_ms() - t_kill < lease_ms + TEST_PATIENCE_MS && !t_all; nap(50)) {
        if (!t_lease && lease_replica(&c) == survivor) t_lease = now_ms();
        ndelivered = right = 0;
        cJSON *rs = reservations(&c);
        for (int i = 0; i < 4; i++) {
            char v[128];
            cm_uuid(&c, cm[i], v, sizeof v);
            ndelivered += v[0] != 0;
            const cJSON *r;   /* the ConfigMap names the UUID of a live reservation */
            cJSON_ArrayForEach(r, rs) right += v[0] && ann(r, EXT_RSV_ANN_UUID) && !strcmp(ann(r, EXT_RSV_ANN_UUID), v);
        }
        cJSON_Delete(rs);
        if (ndelivered == 4 && right == 4) t_all = now_ms();
    }
    int running = 0;
    for (int64_t t0 = now_ms(); t_all && now_ms() - t0 < TEST_PATIENCE_MS && running < 4; nap(50)) {
        running = 0;
        for (int i = 0; i < 4; i++) running += fake_kubelet_running(c.kl, uid[i], "app");
    }
    int calls1 = victim >= 0 ? fake_scheduler_calls(c.ks[survivor]) : 0;
    int doubles = c.kl ? fake_kubelet_double_holds(c.kl) : -1;
    int64_t slack = test_slack_ms(1500);
    cluster_stop(&c);
    CHECK_MSG(up, "%s", c.err);
    CHECK_MSG(made == 4, "%d of 4 shares created through the webhook: %s", made, c.err);
    CHECK_INT(nbound, 4);
    CHECK_INT(nres, 4);
    CHECK_MSG(victim >= 0, "no replica held the extender's Lease");
    CHECK_STR(delivered_before, "");   /* the kill landed while they waited */
    CHECK_MSG(t_lease, "the surviving replica never took the Lease");
    CHECK_MSG(t_all, "%d of 4 shares delivered (%d naming a live reservation's UUID) %d s after the kill", ndelivered, right,
              (lease_ms + TEST_PATIENCE_MS) / 1000);
    CHECK_INT(running, 4);
    CHECK_INT(calls1, calls0);   /* nothing was scheduled meanwhile */
    CHECK_INT(doubles, 0);
    /* the Lease passes once the dead holder's record is leaseDuration old on the survivor's clock (read every
     * quarter retry period): the target is the lease duration; 1.5 s of slack, stretched on a loaded machine */
    CHECK_MSG(t_lease - t_kill <= lease_ms + retry_ms / 4 + slack,
              "took over %lld ms after the kill (lease %d ms, retry %d ms, slack at this load %lld ms)",
              (long long)(t_lease - t_kill), lease_ms, retry_ms, (long long)slack);
    printf("    kill -9 of the background replica: the other took the Lease after %lld ms (lease %d ms) and delivered "
           "all 4 waiting shares %lld ms after the kill, with no scheduling call\n", (long long)(t_lease - t_kill),
           lease_ms, (long long)(t_all - t_kill));
}

/* (d): a reservation whose image cannot be pulled: within seconds, not at --reservation-timeout, the share's
 * Event and /debug/state name the kubelet's reason. */
TEST(deployed_unpullable_reservation_image_is_reported_within_seconds) {
    cluster c = {0};
    bool up = cluster_start(&c, 0, true, NULL);
    char uid[128] = "", cm[256] = "";
    bool created = up && create_share(&c, 0, "pull-a", "0.5", uid, sizeof uid, cm, sizeof cm);
    int64_t t_bound = 0;
    for (int64_t t0 = now_ms(); created && now_ms() - t0 < TEST_PATIENCE_MS && !t_bound; nap(20))
        if (bound(&c, "pull-a")) t_bound = now_ms();
    int64_t t_event = 0, t_debug = 0;
    char event[1024] = "", waiting[512] = "";
    int leader = -1;
    for (; t_bound && now_ms() - t_bound < TEST_PATIENCE_MS && (!t_event || !t_debug); nap(50)) {
        if (!t_event) {
            char *all = fake_api_events(c.api);
            cJSON *evs = all ? cJSON_Parse(all) : NULL, *e;
            free(all);
            cJSON_ArrayForEach(e, evs) {
                const cJSON *io = cJSON_GetObjectItem(e, "involvedObject"), *msg = cJSON_GetObjectItem(e, "message");
                const cJSON *type = cJSON_GetObjectItem(e, "type"), *n = cJSON_GetObjectItem(io, "name");
                /* the reservation's (the share's own tessera-cuda-shim, in the same image, has its own Event) */
                if (cJSON_IsString(n) && !strcmp(n->valuestring, "pull-a") && cJSON_IsString(msg) && cJSON_IsString(type) &&
                    !strcmp(type->valuestring, "Warning") && strstr(msg->valuestring, "ErrImagePull") &&
                    strstr(msg->valuestring, "reservation")) {
                    t_event = now_ms();
                    snprintf(event, sizeof event, "%s", msg->valuestring);
                }
            }
            cJSON_Delete(evs);
        }
        if (!t_debug && (leader = lease_replica(&c)) >= 0) {
            long code;
            cJSON *st = http(c.rep[leader].verbs_port, "/debug/state", NULL, &code);
            const cJSON *w = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "reservations"), 0), "waiting");
            if (cJSON_IsString(w) && (strstr(w->valuestring, "ErrImagePull") || strstr(w->valuestring, "ImagePullBackOff"))) {
                t_debug = now_ms();
                snprintf(waiting, sizeof waiting, "%s", w->valuestring);
            }
            cJSON_Delete(st);
        }
    }
    int64_t within = test_slack_ms(5000);   /* "within seconds": 5 s, stretched on a loaded machine */
    cluster_stop(&c);
    CHECK_MSG(up, "%s", c.err);
    CHECK_MSG(t_bound, "the share was never bound");
    CHECK_MSG(t_event && t_event - t_bound <= within, "no Warning naming ErrImagePull on the share within %lld ms (%lld ms)",
              (long long)within, (long long)(t_event ? t_event - t_bound : -1));
    CHECK_CONTAINS(event, "the kubelet cannot start reservation");
    CHECK_CONTAINS(event, "pull access denied");
    CHECK_MSG(t_debug && t_debug - t_bound <= within, "/debug/state did not name the pull failure within %lld ms",
              (long long)within);
    printf("    unpullable image: Warning on the share %lld ms after the bind (\"%.80s...\"), /debug/state waiting=\"%.60s\"\n",
           (long long)(t_event - t_bound), event, waiting);
}

/* Issue 19, deliver 2: tessera's Pod without a container named tessera-extender (renamed in a copy of the
 * Deployment): tessera says so at start, in the log, /readyz and an Event on its Pod, and never falls back to
 * another container's image (kube-scheduler's, which has no tessera-reserve). */
TEST(deployed_missing_own_container_is_said_at_start_not_guessed) {
    char dir[640], err[512] = "";
    deployed *d = deploy_dir(dir, sizeof dir) ? deployed_load(dir, err, sizeof err) : NULL;
    cJSON *pod = d ? deployed_pod(d, deployed_cluster_pods[0], "cp-1") : NULL;
    cJSON *ic = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "initContainers"), *x;
    cJSON_ArrayForEach(x, ic) {
        cJSON *n = cJSON_GetObjectItem(x, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, "tessera-extender")) cJSON_SetValuestring(n, "extender");
    }
    cluster c = {0};
    bool up = pod && cluster_start(&c, 0, false, pod);
    char why[2048] = "";
    bool said = false;
    for (int64_t t0 = now_ms(); up && now_ms() - t0 < TEST_PATIENCE_MS && !said; nap(50)) {
        long code;
        char *txt = http_text(c.rep[0].ops_port, "/readyz", &code);
        snprintf(why, sizeof why, "%s", txt ? txt : "");
        free(txt);
        said = strstr(why, "reserve-image") && strstr(why, "has no container named tessera-extender");
    }
    char *events = up ? fake_api_events(c.api) : NULL;
    bool event = events && strstr(events, "TesseraReserveImageUnknown") && strstr(events, deployed_cluster_pods[0]);
    free(events);
    /* the other replica's Pod is deploy/'s own: it knows the image (once it has read its Pod: asked again until then,
     * a slow start under the sanitizers can come after the first replica's warning) */
    char other[256] = "";
    for (int64_t t0 = now_ms(); up && now_ms() - t0 < TEST_PATIENCE_MS && !other[0]; nap(50)) {
        long code = 0;
        cJSON *st = http(c.rep[1].verbs_port, "/debug/state", NULL, &code);
        const cJSON *img = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "reservation_controller"), "reserve_image");
        snprintf(other, sizeof other, "%s", cJSON_IsString(img) ? img->valuestring : "");
        cJSON_Delete(st);
    }
    char want[256];
    snprintf(want, sizeof want, "%s", d ? d->extender_image : "?");
    cluster_stop(&c);
    cJSON_Delete(pod);
    deployed_free(d);
    CHECK_MSG(d, "%s", err);
    CHECK_MSG(up, "%s", c.err);
    CHECK_MSG(said, "/readyz: %s", why);
    CHECK(event);
    CHECK_STR(other, want);
}

/* Issue 19, deliver 3: kube-scheduler records FailedScheduling with the extender's reasons as a Go format string;
 * what `kubectl describe pod` shows must read as tessera wrote it. Eight shares of 0.8 fill the node's GPUs; a
 * share of 0.25 then fits nowhere, and its reason speaks of percentages. */
TEST(deployed_failed_scheduling_events_read_as_written) {
    cluster c = {0};
    bool up = cluster_start(&c, 0, false, NULL);
    int made = 0;
    char uid[128], cm[256];
    for (int i = 0; up && i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "big-%d", i);
        made += create_share(&c, 0, name, "0.8", uid, sizeof uid, cm, sizeof cm);
    }
    int nbound = 0;
    for (int64_t t0 = now_ms(); made == 8 && now_ms() - t0 < TEST_PATIENCE_MS && nbound < 8; nap(50)) {
        nbound = 0;
        for (int i = 0; i < 8; i++) {
            char name[32];
            snprintf(name, sizeof name, "big-%d", i);
            nbound += bound(&c, name);
        }
    }
    bool small = nbound == 8 && create_share(&c, 0, "small", "0.25", uid, sizeof uid, cm, sizeof cm);
    char msg[2048] = "";
    for (int64_t t0 = now_ms(); small && now_ms() - t0 < TEST_PATIENCE_MS && !msg[0]; nap(50)) {
        char *all = fake_api_events(c.api);
        cJSON *evs = all ? cJSON_Parse(all) : NULL, *e;
        free(all);
        cJSON_ArrayForEach(e, evs) {
            const cJSON *r = cJSON_GetObjectItem(e, "reason"), *n = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "involvedObject"), "name");
            const cJSON *m = cJSON_GetObjectItem(e, "message");
            if (cJSON_IsString(r) && !strcmp(r->valuestring, "FailedScheduling") && cJSON_IsString(n) &&
                !strcmp(n->valuestring, "small") && cJSON_IsString(m))
                snprintf(msg, sizeof msg, "%s", m->valuestring);
        }
        cJSON_Delete(evs);
    }
    bool placed = bound(&c, "small");
    cluster_stop(&c);
    CHECK_MSG(up, "%s", c.err);
    CHECK_INT(nbound, 8);
    CHECK(small);
    CHECK(!placed);
    CHECK_MSG(msg[0], "no FailedScheduling Event for the share that fits nowhere");
    CHECK_MSG(!strstr(msg, "%!"), "kubectl describe would show: %s", msg);
    CHECK_CONTAINS(msg, "25 percent");
    printf("    FailedScheduling as kubectl shows it: %.200s\n", msg);
}

/* (d), the other way a reservation cannot start: an image without tessera-reserve (what every reservation ran
 * when tessera took kube-scheduler's image): the kubelet's exec error reaches the share within seconds, through
 * the crash loop's last exit. */
TEST(deployed_reservation_crash_loop_names_the_exec_error) {
    cluster c = {0};
    bool up = cluster_start_with(&c, 0, false, NULL, "/usr/local/bin/tessera-extender");
    char uid[128] = "", cm[256] = "";
    bool created = up && create_share(&c, 0, "crash-a", "0.5", uid, sizeof uid, cm, sizeof cm);
    char event[2048] = "";
    int64_t t0 = now_ms(), t_event = 0;
    for (; created && now_ms() - t0 < TEST_PATIENCE_MS && !t_event; nap(50)) {
        char *all = fake_api_events(c.api);
        cJSON *evs = all ? cJSON_Parse(all) : NULL, *e;
        free(all);
        cJSON_ArrayForEach(e, evs) {
            const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "involvedObject"), "name"), *m = cJSON_GetObjectItem(e, "message");
            /* the reservation's crash loop (the share's own tessera-cuda-shim fails the same way: its own Event) */
            if (cJSON_IsString(n) && !strcmp(n->valuestring, "crash-a") && cJSON_IsString(m) &&
                strstr(m->valuestring, "no such file") && strstr(m->valuestring, "reservation")) {
                t_event = now_ms();
                snprintf(event, sizeof event, "%s", m->valuestring);
            }
        }
        cJSON_Delete(evs);
    }
    int64_t within = test_slack_ms(15000);   /* the first failed start and its Event: seconds, stretched by load */
    bool shim_told = created && WAIT_FOR(({   /* its own Event, which may come after the reservation's */
        char *all = fake_api_events(c.api);
        bool y = all && strstr(all, EXT_DLV_EV_ENFORCEMENT) && strstr(all, "cannot install libtessera-cuda.so");
        free(all);
        y;
    }));
    cluster_stop(&c);
    CHECK_MSG(up, "%s", c.err);
    CHECK(created);
    CHECK_MSG(t_event && t_event - t0 <= within, "no Event on the share names the exec error within %lld ms",
              (long long)within);
    CHECK_CONTAINS(event, "/usr/local/bin/tessera-reserve");
    CHECK_MSG(shim_told, "no %s Event: the share's own tessera-cuda-shim cannot start either", EXT_DLV_EV_ENFORCEMENT);
    printf("    image without tessera-reserve: the share was told %lld ms after its creation: %.160s...\n",
           (long long)(t_event - t0), event);
}
