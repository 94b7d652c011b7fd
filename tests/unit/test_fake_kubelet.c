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

/* Waits up to 3 s for the pod's status.phase to be set; returns it (malloc'd) or NULL. */
static char *wait_phase(env *e, const char *name) {
    for (int i = 0; i < 300; i++) {
        char *p = pod_field(e, name, "status", "phase");
        if (p && strcmp(p, "Pending") != 0) return p;
        free(p);
        nap_ms(10);
    }
    return NULL;
}

static char *wait_annotation(env *e, const char *name, const char *key, int ms) {
    for (int t = 0; t <= ms; t += 10) {
        char *a = annotation(e, name, key);
        if (a) return a;
        nap_ms(10);
    }
    return NULL;
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
    for (int i = 0; i < 300 && (h0 = fake_kubelet_holder(e->k, "n1", "GPU-n1-0")); i++) { free(h0); nap_ms(10); }
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
    for (int i = 0; i < 300 && (h = fake_kubelet_holder(e->k, "n1", "GPU-n1-0")); i++) { free(h); h = NULL; nap_ms(10); }
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
    CHECK_OWNED_STR(wait_annotation(e, "rsv", "tessera.io/gpu-uuid", 3000), "MIG-n1-0");

    /* later */
    fake_kubelet_set_reserve_delay_ms(e->k, 500);
    put_pod(e, "late", "n1", "nvidia.com/gpu", 2, false, RSV);
    CHECK_PHASE(e, "late", "Running");
    CHECK_NO_STR(annotation(e, "late", "tessera.io/gpu-uuid"));
    CHECK_OWNED_STR(wait_annotation(e, "late", "tessera.io/gpu-uuid", 3000), "GPU-n1-0,GPU-n1-1");

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
    CHECK_OWNED_STR(wait_annotation(e, "mute", "tessera.io/gpu-uuid", 3000), "MIG-n1-1");
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
    for (int i = 0; i < 300 && (strcmp(app_r, "CreateContainerConfigError") || strcmp(pull_r, "ImagePullBackOff") ||
                                strcmp(nocmd_r, "CrashLoopBackOff")); i++) {
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
    for (int i = 0; i < 300 && uid && !env_a; i++) {   /* the next retry is 1-2 s away */
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
