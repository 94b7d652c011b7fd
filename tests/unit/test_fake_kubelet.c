/* test_fake_kubelet.c -- the fake kubelet + device plugin: admits pods until a node's devices are taken, then
 * refuses with the kubelet's exact reason and message; frees devices on delete and on a terminal phase; drops
 * extended resources the node does not register (app containers only); plays tessera-reserve in reservation pods
 * (now, later, or never); several resources per node; random picks never hand one device to two pods; starts
 * containers as the kubelet does (native sidecars first and counted beside the app, CreateContainerConfigError
 * until an envFrom ConfigMap exists, image pull failures, a command the image lacks).
 * Waits poll with deadlines, so a slow machine is slower, not flaky. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "../support/fake_apiserver.h"
#include "../support/fake_kubelet.h"
#include "kube/client.h"
#include "harness.h"

typedef struct env {
    fake_api *f;
    fake_kubelet *k;
} env;

static bool env_init(env *e) {
    char err[256];
    e->f = fake_api_start(0, err, sizeof err);
    e->k = e->f ? fake_kubelet_start(e->f) : NULL;
    return e->k != NULL;
}

static void env_free(env *e) {
    fake_kubelet_stop(e->k); /* before the server it polls */
    fake_api_free(e->f);
}

#define RUN(body)                                                                       \
    do {                                                                                \
        env e_;                                                                         \
        if (env_init(&e_)) body(&e_);                                                   \
        else test_fail(__FILE__, __LINE__, "cannot start the fake API server");         \
        env_free(&e_);                                                                  \
    } while (0)

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A pod on node with one container asking `res: qty` (as requests, or as limits only); res NULL asks nothing.
 * extra_meta is appended inside metadata. */
static void put_pod(env *e, const char *name, const char *node, const char *res, int qty, bool limits_only,
                    const char *extra_meta) {
    char json[2048], r[512] = "{}";
    if (res && limits_only) snprintf(r, sizeof r, "{\"limits\":{\"%s\":\"%d\"}}", res, qty);
    else if (res) snprintf(r, sizeof r, "{\"requests\":{\"cpu\":\"10m\",\"%s\":\"%d\"},\"limits\":{\"%s\":\"%d\"}}",
                           res, qty, res, qty);
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"%s},\"spec\":{\"nodeName\":\"%s\","
             "\"containers\":[{\"name\":\"c\",\"resources\":%s}]}}", name, extra_meta ? extra_meta : "", node, r);
    fake_api_put(e->f, "pods", json);
}

/* The pod's field at "status"/"metadata" + key (annotations under metadata.annotations), or "" / NULL. */
static char *pod_field(env *e, const char *name, const char *section, const char *key) {
    char *s = fake_api_get(e->f, "pods", "default", name);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, section), key);
    char *out = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(o);
    return out;
}

static char *annotation(env *e, const char *name, const char *key) {
    char *s = fake_api_get(e->f, "pods", "default", name);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
    char *out = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(o);
    return out;
}

/* Waits (wait.h's patience) for the pod's status.phase to be set; returns it (malloc'd) or NULL. */
static char *wait_phase(env *e, const char *name) {
    char *p = NULL;
    bool set = WAIT_FOR((free(p), p = pod_field(e, name, "status", "phase"), p && strcmp(p, "Pending") != 0));
    if (!set) { free(p); p = NULL; }
    return p;
}

/* The annotation once it is there, or NULL after ms: TEST_PATIENCE_MS to wait for it, a short time to see that it
 * does not come. */
static char *wait_annotation(env *e, const char *name, const char *key, int ms) {
    for (int64_t end = test_now_ms() + ms;; nap_ms(10)) {
        char *a = annotation(e, name, key);
        if (a || test_now_ms() > end) return a;
    }
}

static char *pod_uid(env *e, const char *name) { return pod_field(e, name, "metadata", "uid"); }

/* Checks the pod reached phase want (and frees what it read). */
#define CHECK_PHASE(e, name, want)                                                      \
    do {                                                                                \
        char *ph_ = wait_phase(e, name);                                                \
        bool ok_ = ph_ && strcmp(ph_, want) == 0;                                       \
        if (!ok_) test_fail(__FILE__, __LINE__, "pod %s phase %s, expected %s", name,   \
                            ph_ ? ph_ : "(none)", want);                                \
        free(ph_);                                                                      \
        if (!ok_) return;                                                               \
    } while (0)

/* Checks s equals want (or, for CHECK_NO_STR, is NULL), freeing s. */
#define CHECK_OWNED_STR(s, want)                                                        \
    do {                                                                                \
        char *s_ = (s);                                                                 \
        bool ok_ = s_ && strcmp(s_, want) == 0;                                         \
        if (!ok_) test_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", #s,    \
                            s_ ? s_ : "(null)", want);                                  \
        free(s_);                                                                       \
        if (!ok_) return;                                                               \
    } while (0)

#define CHECK_NO_STR(s)                                                                 \
    do {                                                                                \
        char *s_ = (s);                                                                 \
        bool bad_ = s_ != NULL;                                                         \
        if (bad_) test_fail(__FILE__, __LINE__, "%s == \"%s\", expected none", #s, s_); \
        free(s_);                                                                       \
        if (bad_) return;                                                               \
    } while (0)

static void admits_until_full(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 2, "GPU-n1");
    put_pod(e, "p1", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "p1", "Running");
    put_pod(e, "p2", "n1", "nvidia.com/gpu", 1, true, NULL); /* limits only count as the request */
    CHECK_PHASE(e, "p2", "Running");
    put_pod(e, "p3", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "p3", "Failed");
    CHECK_OWNED_STR(pod_field(e, "p3", "status", "reason"), "UnexpectedAdmissionError");
    CHECK_OWNED_STR(pod_field(e, "p3", "status", "message"),
                    "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
                    "Requested: 1, Available: 0, which is unexpected");
    char *u1 = pod_uid(e, "p1"), *u2 = pod_uid(e, "p2");
    char *h0 = fake_kubelet_holder(e->k, "n1", "GPU-n1-0"), *h1 = fake_kubelet_holder(e->k, "n1", "GPU-n1-1");
    bool held = u1 && u2 && h0 && h1 && !strcmp(h0, u1) && !strcmp(h1, u2);
    char *d1 = fake_kubelet_devices(e->k, u1);
    bool devs = d1 && !strcmp(d1, "GPU-n1-0");
    free(h0);
    free(h1);
    free(d1);
    free(u2);
    CHECK(held);
    CHECK(devs);

    /* deleting p1 frees GPU-n1-0, which the next pod gets */
    fake_api_delete(e->f, "pods", "default", "p1");
    WAIT_FOR(!(h0 = fake_kubelet_holder(e->k, "n1", "GPU-n1-0")) || (free(h0), false));
    CHECK(fake_kubelet_devices(e->k, u1) == NULL);
    free(u1);
    put_pod(e, "p4", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "p4", "Running");
    char *u4 = pod_uid(e, "p4");
    CHECK_OWNED_STR(fake_kubelet_devices(e->k, u4), "GPU-n1-0");
    free(u4);
    /* a pod asking two when none is free; the switch writes what the predicate admission writes */
    fake_kubelet_set_outof_reason(e->k, true);
    put_pod(e, "p5", "n1", "nvidia.com/gpu", 2, false, NULL);
    CHECK_PHASE(e, "p5", "Failed");
    CHECK_OWNED_STR(pod_field(e, "p5", "status", "reason"), "OutOfnvidia.com/gpu");
    CHECK_OWNED_STR(pod_field(e, "p5", "status", "message"),
                    "Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 2, capacity: 2");
    CHECK_INT(fake_kubelet_admitted(e->k), 3);
    CHECK_INT(fake_kubelet_refused(e->k), 2);
    CHECK_INT(fake_kubelet_double_holds(e->k), 0);
}

TEST(fake_kubelet_admits_until_the_devices_are_taken_then_refuses) { RUN(admits_until_full); }

static void frees_on_terminal_phase(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 1, "GPU-n1");
    put_pod(e, "done", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "done", "Running");
    CHECK(fake_api_patch(e->f, "pods", "default", "done", "{\"status\":{\"phase\":\"Succeeded\"}}") > 0);
    char *h = NULL;
    WAIT_FOR(!(h = fake_kubelet_holder(e->k, "n1", "GPU-n1-0")) || (free(h), h = NULL, false));
    CHECK(h == NULL);
    put_pod(e, "next", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "next", "Running");
    /* pods of nodes nobody registered are not the kubelet's */
    put_pod(e, "elsewhere", "n9", "nvidia.com/gpu", 1, false, NULL);
    nap_ms(50);
    CHECK_NO_STR(pod_field(e, "elsewhere", "status", "phase"));
}

TEST(fake_kubelet_frees_devices_when_a_pod_terminates) { RUN(frees_on_terminal_phase); }

static void drops_unadvertised(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 1, "GPU-n1");
    /* the soft-share marker is dropped from app containers: admitted, holding nothing */
    put_pod(e, "share", "n1", "tessera.io/share", 1, false, NULL);
    CHECK_PHASE(e, "share", "Running");
    char *u = pod_uid(e, "share");
    char *d = fake_kubelet_devices(e->k, u);
    free(u);
    bool none = d == NULL;
    free(d);
    CHECK(none);
    /* ...but not from init containers */
    fake_api_put(e->f, "pods",
                 "{\"metadata\":{\"name\":\"init\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"limits\":{\"tessera.io/share\":\"1\"}}}],"
                 "\"containers\":[{\"name\":\"c\"}]}}");
    CHECK_PHASE(e, "init", "Failed");
    CHECK_OWNED_STR(pod_field(e, "init", "status", "reason"), "OutOftessera.io/share");
    /* a GPU and the marker together: the GPU is allocated */
    fake_api_put(e->f, "pods",
                 "{\"metadata\":{\"name\":\"both\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"tessera.io/share\":\"1\","
                 "\"nvidia.com/gpu\":1}}}]}}");
    CHECK_PHASE(e, "both", "Running");
    u = pod_uid(e, "both");
    CHECK_OWNED_STR(fake_kubelet_devices(e->k, u), "GPU-n1-0");
    free(u);
}

TEST(fake_kubelet_drops_extended_resources_the_node_does_not_register) { RUN(drops_unadvertised); }

#define RSV ",\"labels\":{\"tessera.io/reservation\":\"true\"}"

static void reservation_annotated(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 2, "GPU-n1");
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/mig-1g.10gb", 2, "MIG-n1");
    /* created over HTTP, as the reservation controller will */
    char err[256], url[128], *resp = NULL;
    fake_api_url(e->f, url, sizeof url);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    kube_client *k = kube_new(&kc, err, sizeof err);
    CHECK(k != NULL);
    int code = kube_request(k, "POST", "/api/v1/namespaces/default/pods",
                                "{\"metadata\":{\"name\":\"rsv\",\"labels\":{\"tessera.io/reservation\":\"true\"}},"
                                "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"reserve\",\"resources\":"
                                "{\"requests\":{\"nvidia.com/mig-1g.10gb\":\"1\"},\"limits\":"
                                "{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}}", 2000, &resp, err, sizeof err);
    free(resp);
    kube_free(k);
    CHECK_INT(code, 201);
    CHECK_PHASE(e, "rsv", "Running");
    CHECK_OWNED_STR(wait_annotation(e, "rsv", "tessera.io/gpu-uuid", TEST_PATIENCE_MS), "MIG-n1-0");

    /* later */
    fake_kubelet_set_reserve_delay_ms(e->k, 500);
    put_pod(e, "late", "n1", "nvidia.com/gpu", 2, false, RSV);
    CHECK_PHASE(e, "late", "Running");
    CHECK_NO_STR(annotation(e, "late", "tessera.io/gpu-uuid"));
    CHECK_OWNED_STR(wait_annotation(e, "late", "tessera.io/gpu-uuid", TEST_PATIENCE_MS), "GPU-n1-0,GPU-n1-1");

    /* never */
    fake_kubelet_set_reserve_silent(e->k, true);
    put_pod(e, "mute", "n1", "nvidia.com/mig-1g.10gb", 1, false, RSV);
    CHECK_PHASE(e, "mute", "Running");
    CHECK_NO_STR(wait_annotation(e, "mute", "tessera.io/gpu-uuid", 400));
    /* an ordinary pod is never annotated */
    fake_kubelet_set_reserve_silent(e->k, false);
    fake_kubelet_set_reserve_delay_ms(e->k, 0);
    put_pod(e, "plain", "n1", "nvidia.com/gpu", 0, false, NULL);
    CHECK_PHASE(e, "plain", "Running");
    CHECK_NO_STR(wait_annotation(e, "plain", "tessera.io/gpu-uuid", 100));
    /* the silent one speaks once the switch is off */
    CHECK_OWNED_STR(wait_annotation(e, "mute", "tessera.io/gpu-uuid", TEST_PATIENCE_MS), "MIG-n1-1");
    CHECK_INT(fake_kubelet_double_holds(e->k), 0);
}

TEST(fake_kubelet_reservation_pods_get_their_gpu_uuid) { RUN(reservation_annotated); }

static void random_picks(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 8, "GPU-n1");
    fake_kubelet_set_random(e->k, 7);
    char name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "r%d", i);
        put_pod(e, name, "n1", "nvidia.com/gpu", 1, false, NULL);
    }
    bool lowest_first = true;
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "r%d", i);
        CHECK_PHASE(e, name, "Running");
        char *u = pod_uid(e, name), *d = fake_kubelet_devices(e->k, u), want[32];
        snprintf(want, sizeof want, "GPU-n1-%d", i);
        lowest_first = lowest_first && d && !strcmp(d, want);
        free(u);
        free(d);
    }
    CHECK(!lowest_first); /* 1 in 40320 for a fair shuffle; the seed makes it never */
    for (int i = 0; i < 8; i++) {
        char dev[32], *h;
        snprintf(dev, sizeof dev, "GPU-n1-%d", i);
        h = fake_kubelet_holder(e->k, "n1", dev);
        bool ok = h != NULL;
        free(h);
        CHECK(ok);
    }
    put_pod(e, "r8", "n1", "nvidia.com/gpu", 1, false, NULL);
    CHECK_PHASE(e, "r8", "Failed");
    CHECK_INT(fake_kubelet_double_holds(e->k), 0);
}

TEST(fake_kubelet_random_picks_hand_each_device_once) { RUN(random_picks); }

/* The reason and message of container `ctr` in the pod's statuses (list "containerStatuses" or
 * "initContainerStatuses"): waiting reason, "running", or "terminated"; "" when absent. */
static void ctr_state(env *e, const char *pod, const char *list, const char *ctr, char *reason, size_t rlen, char *msg,
                      size_t mlen) {
    char *s = fake_api_get(e->f, "pods", "default", pod);
    cJSON *o = s ? cJSON_Parse(s) : NULL, *c;
    free(s);
    reason[0] = msg[0] = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"), list)) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name"), *st = cJSON_GetObjectItemCaseSensitive(c, "state");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, ctr)) continue;
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(st, "waiting");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(w, "reason"), *m = cJSON_GetObjectItemCaseSensitive(w, "message");
        snprintf(reason, rlen, "%s", cJSON_IsString(r) ? r->valuestring
                                     : cJSON_GetObjectItemCaseSensitive(st, "running") ? "running" : "terminated");
        snprintf(msg, mlen, "%s", cJSON_IsString(m) ? m->valuestring : "");
    }
    cJSON_Delete(o);
}

/* The kubelet's container rules the deployed-configuration tests rely on (issue 19): a native sidecar starts
 * before the app containers and its request counts beside theirs; envFrom of a missing ConfigMap holds the
 * container in CreateContainerConfigError until a retry finds it; an image that cannot be pulled and a command
 * the image lacks are reported as the kubelet reports them. */
static void containers_as_the_kubelet(env *e) {
    fake_kubelet_add_node(e->k, "n1", "nvidia.com/gpu", 2, "GPU-c");
    fake_kubelet_add_image(e->k, "reg/app:1", 300, true, "/bin/app");
    fake_kubelet_add_image(e->k, "reg/gone:1", 0, false, "");
    /* a sidecar asking 1 GPU beside an app container asking 2: 3 > 2 devices -> refused */
    fake_api_put(e->f, "pods", "{\"metadata\":{\"name\":\"side3\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"initContainers\":[{\"name\":\"s\",\"image\":\"reg/app:1\",\"restartPolicy\":\"Always\",\"resources\":"
                 "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}],\"containers\":[{\"name\":\"c\",\"image\":\"reg/app:1\","
                 "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}");
    /* a sidecar, then an app container whose ConfigMap does not exist yet */
    fake_api_put(e->f, "pods", "{\"metadata\":{\"name\":\"cfg\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"initContainers\":[{\"name\":\"s\",\"image\":\"reg/app:1\",\"restartPolicy\":\"Always\"}],"
                 "\"containers\":[{\"name\":\"c\",\"image\":\"reg/app:1\",\"command\":[\"/bin/app\"],"
                 "\"envFrom\":[{\"configMapRef\":{\"name\":\"cm1\"}}],\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}");
    fake_api_put(e->f, "pods", "{\"metadata\":{\"name\":\"pull\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"containers\":[{\"name\":\"c\",\"image\":\"reg/gone:1\"}]}}");
    fake_api_put(e->f, "pods", "{\"metadata\":{\"name\":\"nocmd\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"containers\":[{\"name\":\"c\",\"image\":\"reg/app:1\",\"command\":[\"/usr/local/bin/tessera-reserve\"]}]}}");
    char r[64], m[512], side_r[64], side_m[512], app_r[64] = "", app_m[512] = "", pull_r[64] = "", pull_m[512];
    char nocmd_r[64] = "", nocmd_m[512];
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end && (strcmp(app_r, "CreateContainerConfigError") ||
                                strcmp(pull_r, "ImagePullBackOff") || strcmp(nocmd_r, "CrashLoopBackOff"));) {
        nap_ms(10);
        ctr_state(e, "cfg", "containerStatuses", "c", app_r, sizeof app_r, app_m, sizeof app_m);
        ctr_state(e, "pull", "containerStatuses", "c", pull_r, sizeof pull_r, pull_m, sizeof pull_m);
        ctr_state(e, "nocmd", "containerStatuses", "c", nocmd_r, sizeof nocmd_r, nocmd_m, sizeof nocmd_m);
    }
    ctr_state(e, "cfg", "initContainerStatuses", "s", side_r, sizeof side_r, side_m, sizeof side_m);
    char nocmd_last[512] = "";
    {   /* the crash loop's last exit says why */
        char *t = fake_api_get(e->f, "pods", "default", "nocmd");
        cJSON *o = t ? cJSON_Parse(t) : NULL;
        free(t);
        const cJSON *lm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "status"),
                                                                "containerStatuses"), 0), "lastState"), "terminated"), "message");
        snprintf(nocmd_last, sizeof nocmd_last, "%s", cJSON_IsString(lm) ? lm->valuestring : "");
        cJSON_Delete(o);
    }
    char *refused = pod_field(e, "side3", "status", "reason");
    char *phase_wait = pod_field(e, "cfg", "status", "phase");
    fake_api_put(e->f, "configmaps", "{\"metadata\":{\"name\":\"cm1\",\"namespace\":\"default\"},\"data\":"
                 "{\"NVIDIA_VISIBLE_DEVICES\":\"GPU-x\",\"A\":\"1\"}}");
    char *env_a = NULL, *env_v = NULL, *uid = NULL;
    char *s = fake_api_get(e->f, "pods", "default", "cfg");
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "uid");
    uid = cJSON_IsString(u) ? strdup(u->valuestring) : NULL;
    cJSON_Delete(o);
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end && uid && !env_a;) {   /* at the next retry */
        nap_ms(10);
        env_a = fake_kubelet_env(e->k, uid, "c", "A");
    }
    env_v = uid ? fake_kubelet_env(e->k, uid, "c", "NVIDIA_VISIBLE_DEVICES") : NULL;
    ctr_state(e, "cfg", "containerStatuses", "c", r, sizeof r, m, sizeof m);
    char *phase_run = pod_field(e, "cfg", "status", "phase");
    CHECK_STR(refused, "UnexpectedAdmissionError");   /* the sidecar's GPU counts beside the app's */
    CHECK_STR(side_r, "running");                     /* the sidecar started before the app container */
    CHECK_STR(app_r, "CreateContainerConfigError");
    CHECK_STR(app_m, "configmap \"cm1\" not found");
    CHECK_STR(phase_wait, "Pending");
    CHECK_STR(env_a, "1");
    CHECK_STR(env_v, "GPU-x");                        /* envFrom comes after the device plugin's variable */
    CHECK_STR(r, "running");
    CHECK_STR(phase_run, "Running");
    CHECK_STR(pull_r, "ImagePullBackOff");
    CHECK_CONTAINS(pull_m, "Back-off pulling image \"reg/gone:1\"");
    CHECK_STR(nocmd_r, "CrashLoopBackOff");
    CHECK_CONTAINS(nocmd_m, "back-off 10s restarting failed container=c pod=nocmd_default(");
    CHECK_CONTAINS(nocmd_last, "exec: \"/usr/local/bin/tessera-reserve\": stat /usr/local/bin/tessera-reserve: no such file");
    free(refused);
    free(phase_wait);
    free(phase_run);
    free(env_a);
    free(env_v);
    free(uid);
}

TEST(fake_kubelet_starts_containers_as_the_kubelet_does) { RUN(containers_as_the_kubelet); }

/* ---- exec mode: containers as real processes --------------------------------------------------------------- */

#include "ext_proc.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

/* Node n1 with two GPUs (GPU-n1-0, GPU-n1-1) in exec mode under a fresh temporary directory (root: node_root;
 * root/host: host_root). */
static void exec_node(env *e, const char *fake_cuda_dir, char *root, size_t len) {
    const char *node = "n1";
    fake_kubelet_add_node(e->k, node, "nvidia.com/gpu", 2, "GPU-n1");
    snprintf(root, len, "/tmp/tessera-fk-XXXXXX");
    if (!mkdtemp(root)) abort();
    char host[600];
    snprintf(host, sizeof host, "%s/host", root);
    fake_kubelet_set_exec(e->k, node, &(fake_kubelet_exec){.node_root = root, .host_root = host,
                                                           .fake_cuda_dir = fake_cuda_dir,
                                                           .cuda_devices = "GPU-n1-0:81920,GPU-n1-1:81920"});
}

static void rm_root(const char *root) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
}

static cJSON *pod_obj(env *e, const char *ns, const char *name) {
    char *s = fake_api_get(e->f, "pods", ns, name);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    return o;
}

static const char *fk_jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The status of container ctr (in status.<list>) of a pod object. */
static const cJSON *ctr_of(const cJSON *pod, const char *list, const char *ctr) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "status"), list))
        if (!strcmp(fk_jstr(c, "name"), ctr)) return c;
    return NULL;
}

/* state.<key>.<field> (key: running / terminated / waiting), or lastState.terminated.<field> with key "last". */
static const cJSON *state_of(const cJSON *status, const char *key, const char *field) {
    const cJSON *st = !strcmp(key, "last")
                          ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(status, "lastState"),
                                                             "terminated")
                          : cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(status, "state"), key);
    return field ? cJSON_GetObjectItemCaseSensitive(st, field) : st;
}

/* Wait (ms) until container ctr of ns/name shows state key (running / terminated / waiting with reason want, when
 * want is given); the pod object then (caller deletes), or NULL. */
static cJSON *wait_state(env *e, const char *ns, const char *name, const char *list, const char *ctr, const char *key,
                         const char *want, int ms) {
    for (int64_t end = test_now_ms() + ms; test_now_ms() <= end;) {
        cJSON *o = pod_obj(e, ns, name);
        const cJSON *st = state_of(ctr_of(o, list, ctr), key, NULL);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "reason");
        if (st && (!want || (cJSON_IsString(r) && !strcmp(r->valuestring, want)))) return o;
        cJSON_Delete(o);
        nap_ms(10);
    }
    return NULL;
}

static bool gone(int pid, int ms) {
    for (int64_t end = test_now_ms() + ms; test_now_ms() <= end;) {
        if (pid > 0 && kill(pid, 0) != 0) return true;
        char path[64], *stat_line = NULL;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        char buf[512] = "";
        if (f) {
            if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
            fclose(f);
        }
        stat_line = strrchr(buf, ')');
        if (stat_line && stat_line[1] == ' ' && stat_line[2] == 'Z') return true; /* exited, not reaped by init yet */
        nap_ms(10);
    }
    return false;
}

/* The phase once the pod is over (Succeeded / Failed), else (after wait.h's patience) the last one seen. */
static char *wait_over(env *e, const char *name) {
    char *ph = NULL;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end;) {
        free(ph);
        ph = pod_field(e, name, "status", "phase");
        if (ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"))) break;
        nap_ms(10);
    }
    return ph;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* An init container writes into an emptyDir and completes; the app container sees its file, its environment
 * (fieldRef, envFrom, env, $(VAR) in args), a configMap volume and a hostPath directory, paths rewritten to the
 * node's directories; stdout/stderr are kept per container; deleting the pod ends the process. */
static void exec_runs_containers(env *e) {
    char root[256];
    exec_node(e, NULL, root, sizeof root);
    fake_api_put(e->f, "configmaps", "{\"metadata\":{\"name\":\"cm\",\"namespace\":\"default\"},"
                 "\"data\":{\"GREETING\":\"hello\",\"key1\":\"from-the-configmap\\n\"}}");
    fake_api_put(e->f, "pods",
        "{\"metadata\":{\"name\":\"x\",\"namespace\":\"default\",\"labels\":{\"app\":\"demo\"}},"
        "\"spec\":{\"nodeName\":\"n1\",\"terminationGracePeriodSeconds\":1,"
        "\"securityContext\":{\"runAsUser\":1000},"
        "\"volumes\":[{\"name\":\"work\",\"emptyDir\":{}},{\"name\":\"cfg\",\"configMap\":{\"name\":\"cm\"}},"
        "{\"name\":\"mps\",\"hostPath\":{\"path\":\"/run/tessera/mps\",\"type\":\"DirectoryOrCreate\"}}],"
        "\"initContainers\":[{\"name\":\"prep\",\"command\":[\"/bin/sh\",\"-c\","
        "\"echo made > \\\"$1\\\"; echo init-out; echo init-err >&2\",\"sh\",\"/work/file\"],"
        "\"volumeMounts\":[{\"name\":\"work\",\"mountPath\":\"/work\"}]}],"
        "\"containers\":[{\"name\":\"app\",\"command\":[\"/bin/sh\",\"-c\"],"
        "\"args\":[\"cat \\\"$1\\\"; cat \\\"$2\\\"; echo \\\"$3 $POD_NAME $APP $MINE $FAKE_CUDA_UID\\\"; "
        "echo \\\"$DIR\\\"; pwd; echo \\\"$4\\\"; exec sleep 30\","
        "\"sh\",\"/work/file\",\"/etc/cfg/key1\",\"$(GREETING)-$(MINE)\",\"--mps=/run/tessera/mps\"],"
        "\"envFrom\":[{\"configMapRef\":{\"name\":\"cm\"}}],"
        "\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}},"
        "{\"name\":\"APP\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.labels['app']\"}}},"
        "{\"name\":\"MINE\",\"value\":\"mine\"},{\"name\":\"DIR\",\"value\":\"/work/sub\"}],"
        "\"volumeMounts\":[{\"name\":\"work\",\"mountPath\":\"/work\"},{\"name\":\"cfg\",\"mountPath\":\"/etc/cfg\"},"
        "{\"name\":\"mps\",\"mountPath\":\"/run/tessera/mps\"}]}]}}");
    cJSON *o = wait_state(e, "default", "x", "containerStatuses", "app", "running", NULL, TEST_PATIENCE_MS);
    char *uid = pod_uid(e, "x");
    const cJSON *init_code = state_of(ctr_of(o, "initContainerStatuses", "prep"), "terminated", "exitCode");
    const cJSON *init_reason = state_of(ctr_of(o, "initContainerStatuses", "prep"), "terminated", "reason");
    char *phase = pod_field(e, "x", "status", "phase");
    int pid = uid ? fake_kubelet_pid(e->k, uid, "app") : 0;
    char *out = NULL;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end && uid && (!out || !strstr(out, "--mps="));) {
        free(out);
        out = fake_kubelet_log(e->k, uid, "app", 1);
        nap_ms(10);
    }
    char *init_out = uid ? fake_kubelet_log(e->k, uid, "prep", 1) : NULL;
    char *init_err = uid ? fake_kubelet_log(e->k, uid, "prep", 2) : NULL;
    char want[1600];
    snprintf(want, sizeof want, "made\nfrom-the-configmap\nhello-mine x demo mine 1000\n"
             "%s/pods/%s/volumes/kubernetes.io~empty-dir/work/sub\n%s/pods/%s\n--mps=%s/host/run/tessera/mps\n",
             root, uid ? uid : "", root, uid ? uid : "", root);
    char hostdir[600];
    snprintf(hostdir, sizeof hostdir, "%s/host/run/tessera/mps", root);
    struct stat st;
    bool made = stat(hostdir, &st) == 0 && S_ISDIR(st.st_mode);
    fake_api_delete(e->f, "pods", "default", "x");
    bool ended = pid > 0 && gone(pid, TEST_PATIENCE_MS);
    char *out_after = uid ? fake_kubelet_log(e->k, uid, "app", 1) : NULL; /* kept after the pod is gone */
    rm_root(root);
    CHECK(o != NULL);
    CHECK_INT(cJSON_IsNumber(init_code) ? init_code->valueint : -1, 0);
    CHECK(cJSON_IsString(init_reason) && !strcmp(init_reason->valuestring, "Completed"));
    cJSON_Delete(o);
    CHECK_OWNED_STR(phase, "Running");
    CHECK(pid > 0);
    CHECK_STR(out, want);
    free(out);
    CHECK_OWNED_STR(init_out, "init-out\n");
    CHECK_OWNED_STR(init_err, "init-err\n");
    CHECK(made);
    CHECK(ended);
    CHECK(out_after != NULL);
    free(out_after);
    free(uid);
}

TEST(fake_kubelet_exec_runs_containers_with_env_volumes_and_logs) { RUN(exec_runs_containers); }

/* Exit codes and restarts as the kubelet writes them: an init container that fails under restartPolicy Never fails
 * the pod; under Always it loops (CrashLoopBackOff, lastState, restartCount); app containers' exits decide
 * Succeeded / Failed under Never (a signal is 128 + its number; "$$$$" is the kubelet's escape for "$$"); a command
 * that is not there is RunContainerError. */
static void exec_exit_codes(env *e) {
    char root[256];
    exec_node(e, NULL, root, sizeof root);
    static const char *const pods[] = {
        "{\"metadata\":{\"name\":\"init-never\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"restartPolicy\":\"Never\",\"initContainers\":[{\"name\":\"i\",\"command\":[\"/bin/sh\",\"-c\",\"exit 3\"]}],"
        "\"containers\":[{\"name\":\"app\",\"command\":[\"/bin/sh\",\"-c\",\"echo never > /dev/stderr\"]}]}}",
        "{\"metadata\":{\"name\":\"init-loop\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"initContainers\":[{\"name\":\"i\",\"command\":[\"/bin/sh\",\"-c\",\"echo try; exit 4\"]}],"
        "\"containers\":[{\"name\":\"app\",\"command\":[\"/bin/sh\",\"-c\",\"sleep 30\"]}]}}",
        "{\"metadata\":{\"name\":\"ok\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"a\",\"command\":[\"/bin/true\"]},"
        "{\"name\":\"b\",\"command\":[\"/bin/sh\",\"-c\",\"exit 0\"]}]}}",
        "{\"metadata\":{\"name\":\"bad\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"a\",\"command\":[\"/bin/sh\",\"-c\",\"kill -9 $$$$\"]},"
        "{\"name\":\"b\",\"command\":[\"/bin/sh\",\"-c\",\"exit 7\"]}]}}",
        "{\"metadata\":{\"name\":\"missing\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"containers\":[{\"name\":\"a\",\"command\":[\"no-such-program\"]}]}}"};
    for (size_t i = 0; i < sizeof pods / sizeof *pods; i++) fake_api_put(e->f, "pods", pods[i]);
    char *ph_never = wait_over(e, "init-never");
    cJSON *never = pod_obj(e, "default", "init-never");
    const cJSON *never_code = state_of(ctr_of(never, "initContainerStatuses", "i"), "terminated", "exitCode");
    const cJSON *never_app = state_of(ctr_of(never, "containerStatuses", "app"), "running", NULL);
    cJSON *loop = wait_state(e, "default", "init-loop", "initContainerStatuses", "i", "waiting", "CrashLoopBackOff",
                             TEST_PATIENCE_MS);
    const cJSON *loop_st = ctr_of(loop, "initContainerStatuses", "i");
    const cJSON *loop_last = state_of(loop_st, "last", "exitCode");
    const cJSON *loop_msg = state_of(loop_st, "waiting", "message");
    char *ph_loop = pod_field(e, "init-loop", "status", "phase");
    /* it runs again after the back-off */
    cJSON *again = NULL;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end && !again;) {
        cJSON *o = pod_obj(e, "default", "init-loop");
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(ctr_of(o, "initContainerStatuses", "i"), "restartCount");
        if (cJSON_IsNumber(rc) && rc->valueint >= 1) again = o;
        else cJSON_Delete(o), nap_ms(10);
    }
    char *loop_uid = pod_uid(e, "init-loop");
    char *tries = NULL;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end && loop_uid && (!tries || strncmp(tries, "try\ntry\n", 8));) {
        free(tries);
        tries = fake_kubelet_log(e->k, loop_uid, "i", 1);
        nap_ms(10);
    }
    char *ph_ok = wait_over(e, "ok"), *ph_bad = wait_over(e, "bad");
    cJSON *bad = pod_obj(e, "default", "bad");
    const cJSON *bad_a = state_of(ctr_of(bad, "containerStatuses", "a"), "terminated", "exitCode");
    const cJSON *bad_b = state_of(ctr_of(bad, "containerStatuses", "b"), "terminated", "exitCode");
    const cJSON *bad_reason = state_of(ctr_of(bad, "containerStatuses", "b"), "terminated", "reason");
    cJSON *missing = wait_state(e, "default", "missing", "containerStatuses", "a", "waiting", "CrashLoopBackOff", TEST_PATIENCE_MS);
    const cJSON *missing_last = state_of(ctr_of(missing, "containerStatuses", "a"), "last", "message");
    rm_root(root);
    CHECK_OWNED_STR(ph_never, "Failed");
    CHECK(cJSON_IsNumber(never_code) && never_code->valueint == 3);
    CHECK(never_app == NULL); /* the app container never ran */
    cJSON_Delete(never);
    CHECK(loop != NULL);
    CHECK(cJSON_IsNumber(loop_last) && loop_last->valueint == 4);
    CHECK(cJSON_IsString(loop_msg) && strstr(loop_msg->valuestring, "back-off 10s restarting failed container=i pod="
                                                                    "init-loop_default("));
    cJSON_Delete(loop);
    CHECK_OWNED_STR(ph_loop, "Pending");
    CHECK(again != NULL);
    cJSON_Delete(again);
    CHECK(tries && !strncmp(tries, "try\ntry\n", 8)); /* each run's output appended */
    free(tries);
    free(loop_uid);
    CHECK_OWNED_STR(ph_ok, "Succeeded");
    CHECK_OWNED_STR(ph_bad, "Failed");
    CHECK(cJSON_IsNumber(bad_a) && bad_a->valueint == 137);
    CHECK(cJSON_IsNumber(bad_b) && bad_b->valueint == 7);
    CHECK(cJSON_IsString(bad_reason) && !strcmp(bad_reason->valuestring, "Error"));
    cJSON_Delete(bad);
    CHECK(missing != NULL);
    CHECK(cJSON_IsString(missing_last) &&
          strstr(missing_last->valuestring, "exec: \"no-such-program\": executable file not found in $PATH"));
    cJSON_Delete(missing);
}

TEST(fake_kubelet_exec_exit_codes_restarts_and_phases) { RUN(exec_exit_codes); }

/* The NVIDIA runtime's stand-ins: a container given a GPU gets the fake driver's directory on LD_LIBRARY_PATH and
 * its bin/ first on PATH (with compute), FAKE_CUDA_DEVICES/STATE, FAKE_CUDA_UID from runAsUser; utility-only gets
 * no libraries; no GPU, nothing. A file mounted at /etc/ld.so.preload (written by an init container into an
 * emptyDir, as tessera's shim installer does) becomes LD_PRELOAD, its path rewritten; a missing one is a start
 * error as runc reports it. */
static void exec_gpu_stand_ins(env *e) {
    char root[256];
    exec_node(e, "/opt/fake-cuda", root, sizeof root);
    const char *show = "\"command\":[\"/bin/sh\",\"-c\",\"echo \\\"$LD_LIBRARY_PATH|${PATH%%:*}|$FAKE_CUDA_DEVICES|"
                       "$NVIDIA_VISIBLE_DEVICES|$FAKE_CUDA_UID|$LD_PRELOAD\\\"\"]";
    char pod[4096];
    snprintf(pod, sizeof pod,
             "{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
             "\"restartPolicy\":\"Never\",\"volumes\":[{\"name\":\"tessera-cuda\",\"emptyDir\":{}}],"
             "\"initContainers\":[{\"name\":\"shim\",\"command\":[\"/bin/sh\",\"-c\","
             "\"mkdir -p \\\"$1/lib\\\" && echo /opt/tessera/lib/libtessera-cuda.so > \\\"$1/ld.so.preload\\\"\","
             "\"sh\",\"/opt/tessera\"],\"volumeMounts\":[{\"name\":\"tessera-cuda\",\"mountPath\":\"/opt/tessera\"}]}],"
             "\"containers\":[{\"name\":\"app\",%s,\"securityContext\":{\"runAsUser\":2000},"
             "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},"
             "\"volumeMounts\":[{\"name\":\"tessera-cuda\",\"mountPath\":\"/opt/tessera\"},"
             "{\"name\":\"tessera-cuda\",\"mountPath\":\"/etc/ld.so.preload\",\"subPath\":\"ld.so.preload\","
             "\"readOnly\":true}]},"
             "{\"name\":\"util\",%s,\"env\":[{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"GPU-n1-1\"},"
             "{\"name\":\"NVIDIA_DRIVER_CAPABILITIES\",\"value\":\"utility\"}]},"
             "{\"name\":\"cpu\",%s}]}}", show, show, show);
    fake_api_put(e->f, "pods", pod);
    fake_api_put(e->f, "pods",
                 "{\"metadata\":{\"name\":\"nopreload\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],\"containers\":[{\"name\":\"app\","
                 "\"command\":[\"/bin/true\"],\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/etc/ld.so.preload\","
                 "\"subPath\":\"ld.so.preload\"}]}]}}");
    char *ph = wait_over(e, "gpu");
    char *uid = pod_uid(e, "gpu");
    char *app = uid ? fake_kubelet_log(e->k, uid, "app", 1) : NULL;
    char *util = uid ? fake_kubelet_log(e->k, uid, "util", 1) : NULL;
    char *cpu = uid ? fake_kubelet_log(e->k, uid, "cpu", 1) : NULL;
    char want_app[1200];
    snprintf(want_app, sizeof want_app, "/opt/fake-cuda|/opt/fake-cuda/bin|GPU-n1-0:81920,GPU-n1-1:81920|GPU-n1-0|2000|"
             "%s/pods/%s/volumes/kubernetes.io~empty-dir/tessera-cuda/lib/libtessera-cuda.so\n", root, uid ? uid : "");
    cJSON *np = wait_state(e, "default", "nopreload", "containerStatuses", "app", "waiting", "CrashLoopBackOff", TEST_PATIENCE_MS);
    const cJSON *np_last = state_of(ctr_of(np, "containerStatuses", "app"), "last", "message");
    rm_root(root);
    CHECK_OWNED_STR(ph, "Succeeded");
    CHECK_STR(app, want_app);
    CHECK_OWNED_STR(util, "|/usr/local/sbin|GPU-n1-0:81920,GPU-n1-1:81920|GPU-n1-1|0|\n");
    CHECK_OWNED_STR(cpu, "|/usr/local/sbin|||0|\n");
    free(app);
    free(uid);
    CHECK(cJSON_IsString(np_last) && strstr(np_last->valuestring, "to rootfs at \"/etc/ld.so.preload\": not a directory"));
    cJSON_Delete(np);
}

TEST(fake_kubelet_exec_nvidia_runtime_and_preload_stand_ins) { RUN(exec_gpu_stand_ins); }

/* The pid on the first whole line of the file at path, or 0 (no file yet, or the line not written whole yet). */
static int read_pid_line(const char *path) {
    char *text = read_text(path);
    int pid = text && strchr(text, '\n') ? atoi(text) : 0;
    free(text);
    return pid;
}

/* A process that ignores SIGTERM and one that left the container's process group (setsid) are both gone after
 * the kubelet stops: the grace period, then SIGKILL to the group, then the pod's marker. */
static void exec_stop_kills_everything(env *e) {
    char root[256];
    exec_node(e, NULL, root, sizeof root);
    fake_api_put(e->f, "pods",
                 "{\"metadata\":{\"name\":\"stubborn\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
                 "\"terminationGracePeriodSeconds\":1,\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],"
                 "\"containers\":[{\"name\":\"app\",\"command\":[\"/bin/sh\",\"-c\","
                 "\"trap '' TERM; setsid sleep 60 & echo $! > \\\"$1\\\"; while :; do sleep 1; done\","
                 "\"sh\",\"/v/escaped.pid\"],\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\"}]}]}}");
    cJSON *o = wait_state(e, "default", "stubborn", "containerStatuses", "app", "running", NULL, TEST_PATIENCE_MS);
    cJSON_Delete(o);
    char *uid = pod_uid(e, "stubborn");
    int pid = uid ? fake_kubelet_pid(e->k, uid, "app") : 0;
    char path[700];
    snprintf(path, sizeof path, "%s/pods/%s/volumes/kubernetes.io~empty-dir/v/escaped.pid", root, uid ? uid : "");
    int escaped = 0;   /* the file exists before the shell has written the pid and its newline into it */
    WAIT_FOR((escaped = read_pid_line(path)) > 0);
    bool escaped_ran = escaped > 0 && kill(escaped, 0) == 0;
    fake_kubelet_stop(e->k);
    e->k = NULL;
    bool main_gone = pid > 0 && gone(pid, TEST_PATIENCE_MS), escaped_gone = escaped > 0 && gone(escaped, TEST_PATIENCE_MS);
    if (!escaped_gone && escaped > 0) kill(escaped, SIGKILL);
    rm_root(root);
    free(uid);
    CHECK(pid > 0);
    CHECK(escaped_ran);
    CHECK(main_gone);
    CHECK(escaped_gone);
}

TEST(fake_kubelet_exec_stop_leaves_no_process) { RUN(exec_stop_kills_everything); }
