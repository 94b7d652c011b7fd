/* test_ext_reservation.c -- the reservation controller (reservation.h) end to end on loopback: the real
 * API client against the fake API server, the cache and the controller fed by one watch as main.c wires
 * them, shares bound through the verbs' bind, and Kubernetes' side played by the fake kubelet (admission
 * by device count, device IDs, tessera-reserve's annotation) or, where a test needs a refusal at an exact
 * moment, by the test itself. Every wait polls with a deadline.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "../support/fake_kubelet.h"
#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/base/delivery.h"
#include "extender/base/events.h"
#include "kube/client.h"
#include "extender/metrics.h"
#include "extender/delivery/reservation.h"

#define RNS "tessera"

typedef struct rt {
    fake_api *api;
    fake_kubelet *kl;
    ext_state *st;
    kube_client *k;
    ext_events *ev;
    ext_rsv *rsv;
    ext_verbs v;
    int grace_ms;
    int timeout_ms, retry_ms;   /* 0: the controller's defaults */
    bool ok;
    bool own_image;             /* no --reserve-image: the controller reads its own Pod ($POD_NAMESPACE/$POD_NAME) */
    _Atomic int uuid_events;    /* watch events that showed a reservation with its UUID, as the controller got them */
    _Atomic long long pod_rv;   /* the resourceVersion of the last pod event the controller got */
    _Atomic int pod_deletions;  /* DELETED pod events the controller got */
} rt;

/* Two whole passes of the controller have run since this call: what it was going to do, it did. A
 * test that checks that nothing more happens waits on the controller's own passes, not on the clock. */
static void settle(rt *r) {
    ext_rsv_stats st;
    ext_rsv_get_stats(r->rsv, &st);
    uint64_t from = st.passes;
    WAIT_FOR((ext_rsv_get_stats(r->rsv, &st), st.passes >= from + 3));
}

/* The controller got the pod change that made resourceVersion rv (fake_api_patch's), and passed over it. */
static void seen(rt *r, long long rv) {
    WAIT_FOR(r->pod_rv >= rv);
    settle(r);
}

/* main.c's on_watch_event: the cache first, then the controller. */
static void rt_handler(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    rt *r = user;
    ext_state_on_event(r->st, kind, ev, obj);
    ext_rsv_on_event(r->rsv, kind, ev, obj);
    const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "annotations");
    if (kind == KUBE_POD && cJSON_IsString(cJSON_GetObjectItem(ann, EXT_RSV_ANN_UUID))) r->uuid_events++;
    const cJSON *rv = cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "metadata"), "resourceVersion");
    if (kind == KUBE_POD && cJSON_IsString(rv)) r->pod_rv = atoll(rv->valuestring);
    if (kind == KUBE_POD && ev == KUBE_DELETED) r->pod_deletions++;
}

/* The demo's whole A100 node, renamed n1, with ngpus GPUs. */
static void put_node(fake_api *api, int ngpus) {
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char n[16];
    snprintf(n, sizeof n, "%d", ngpus);
    cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "labels");
    cJSON_ReplaceItemInObject(labels, "nvidia.com/gpu.count", cJSON_CreateString(n));
    cJSON *status = cJSON_GetObjectItem(node, "status");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(status, "capacity"), "nvidia.com/gpu", cJSON_CreateString(n));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(status, "allocatable"), "nvidia.com/gpu", cJSON_CreateString(n));
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(api, "nodes", nj);
    free(nj);
}

/* Cache, client, Events and controller on r->api (which already exists): what one extender process is. */
static void rt_up(rt *r) {
    char err[256], url[128];
    r->ok = false;
    fake_api_url(r->api, url, sizeof url);
    ext_state_config sc = {.standalone = false};
    snprintf(sc.reservation_ns, sizeof sc.reservation_ns, RNS);
    r->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    r->k = kube_new(&kc, err, sizeof err);
    if (!r->st || !r->k) return;
    ext_events_config ec;
    ext_events_config_defaults(&ec);
    ec.drain_ms = 200;
    ec.post_timeout_ms = TEST_PATIENCE_MS;   /* a loaded machine's API server may take seconds: the tests count Events */
    snprintf(ec.instance, sizeof ec.instance, "tessera-test-0");
    r->ev = ext_events_start(r->k, &ec, err, sizeof err);
    ext_rsv_config rc;
    ext_rsv_config_defaults(&rc);
    snprintf(rc.ns, sizeof rc.ns, RNS);
    if (!r->own_image) snprintf(rc.image, sizeof rc.image, "registry.example/tessera:test");
    rc.grace_ms = r->grace_ms;
    rc.timeout_ms = r->timeout_ms;
    rc.retry_ms = r->retry_ms;
    rc.tick_ms = 100;
    r->rsv = ext_rsv_new(&rc, r->st, r->k, r->ev, NULL, err, sizeof err);
    ext_verbs_init(&r->v, r->st, NULL, kube_bind_fn, r->k);
    r->v.events = r->ev;
    r->v.rsv = r->rsv;
    if (!r->ev || !r->rsv || kube_start(r->k, rt_handler, r, err, sizeof err) != 0) return;
    if (!WAIT_FOR(ext_state_ready(r->st))) return;
    r->ok = ext_rsv_start(r->rsv, err, sizeof err) == 0;
}

/* The process dies: nothing is finished or cleaned up beyond stopping threads. */
static void rt_down(rt *r) {
    ext_rsv_stop(r->rsv);
    ext_events_stop(r->ev);
    kube_free(r->k);
    ext_rsv_free(r->rsv);
    ext_state_free(r->st);
    r->rsv = NULL;
    r->ev = NULL;
    r->k = NULL;
    r->st = NULL;
}

/* A fake API with node n1 of ngpus GPUs; with kubelet, the fake kubelet plays its device plugin. */
static void rt_start(rt *r, int ngpus, bool kubelet, int grace_ms) {
    memset(r, 0, sizeof *r);
    char err[256];
    r->grace_ms = grace_ms;
    r->api = fake_api_start(0, err, sizeof err);
    if (!r->api) return;
    put_node(r->api, ngpus);
    if (kubelet) {
        r->kl = fake_kubelet_start(r->api);
        fake_kubelet_add_node(r->kl, "n1", "nvidia.com/gpu", ngpus, "GPU-n1");
    }
    rt_up(r);
}

static void rt_stop(rt *r) {
    rt_down(r);
    fake_kubelet_stop(r->kl);
    fake_api_free(r->api);
}

/* What the webhook adds for the interposer (webhook.h): the volume, the shim init container first, the
 * mounts on the app container c. */
static void add_shim(cJSON *spec, cJSON *c) {
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "name", EXT_DLV_SHIM_VOLUME);
    cJSON_AddObjectToObject(v, "emptyDir");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "volumes"), v);
    cJSON *sh = cJSON_CreateObject();
    cJSON_AddStringToObject(sh, "name", EXT_DLV_SHIM_CONTAINER);
    cJSON_AddStringToObject(sh, "image", "registry.example/tessera:test");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", EXT_DLV_SHIM_VOLUME);
    cJSON_AddStringToObject(m, "mountPath", EXT_DLV_SHIM_DIR);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(sh, "volumeMounts"), m);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "initContainers"), sh);
    cJSON *mounts = cJSON_AddArrayToObject(c, "volumeMounts");
    cJSON_AddItemToArray(mounts, cJSON_Duplicate(m, 1));
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", EXT_DLV_SHIM_VOLUME);
    cJSON_AddStringToObject(m, "mountPath", EXT_DLV_SHIM_PRELOAD);
    cJSON_AddStringToObject(m, "subPath", EXT_DLV_SHIM_PRELOAD_SUB);
    cJSON_AddBoolToObject(m, "readOnly", true);
    cJSON_AddItemToArray(mounts, m);
}

/* A share pod asking mib of GPU memory, waiting to be scheduled (or, with ann, already bound to n1 with that
 * assignment annotation, as a previous leader left it). owned: a ReplicaSet controls it; mutated: the webhook
 * gave it its delivery annotation. */
static char *share_json(const char *name, int mib, bool owned, bool mutated, const char *ann) {
    char uid[128], cm[160], buf[32];
    snprintf(uid, sizeof uid, "uid-%s", name);
    snprintf(cm, sizeof cm, EXT_DLV_CM_PREFIX "%s", name);
    cJSON *p = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", "default");
    cJSON_AddStringToObject(meta, "uid", uid);
    cJSON *a = cJSON_AddObjectToObject(meta, "annotations");
    if (mutated) cJSON_AddStringToObject(a, EXT_DLV_ANN_DELIVERY, cm);
    if (ann) cJSON_AddStringToObject(a, "tessera.io/assignment", ann);
    if (owned) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "apiVersion", "apps/v1");
        cJSON_AddStringToObject(o, "kind", "ReplicaSet");
        cJSON_AddStringToObject(o, "name", "rs");
        cJSON_AddStringToObject(o, "uid", "uid-rs");
        cJSON_AddBoolToObject(o, "controller", true);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), o);
    }
    cJSON *spec = cJSON_AddObjectToObject(p, "spec");
    cJSON_AddStringToObject(spec, "schedulerName", "tessera-scheduler");   /* deploy/scheduler-config.yaml's profile */
    if (ann) cJSON_AddStringToObject(spec, "nodeName", "n1");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", "main");
    cJSON_AddStringToObject(c, "image", "x");
    /* As the API server stores it: requests defaulted from limits, the priority admission's 0, and after the
     * webhook the marker resource and the envFrom of the delivery ConfigMap. */
    snprintf(buf, sizeof buf, "%d", mib);
    cJSON *res = cJSON_AddObjectToObject(c, "resources");
    for (int k = 0; k < 2; k++) {
        cJSON *l = cJSON_AddObjectToObject(res, k ? "requests" : "limits");
        cJSON_AddStringToObject(l, "nvidia.com/gpumem", buf);
        if (mutated) cJSON_AddStringToObject(l, EXT_DLV_MARKER_RESOURCE, "1");
    }
    if (mutated) {
        cJSON *from = cJSON_CreateObject();
        cJSON_AddStringToObject(cJSON_AddObjectToObject(from, "configMapRef"), "name", cm);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "envFrom"), from);
        add_shim(spec, c);
    }
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    cJSON_AddNumberToObject(spec, "priority", 0);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "status"), "phase", "Pending");
    char *s = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    return s;
}

/* Put a pending share and bind it through filter + bind as kube-scheduler would. err "" on success. */
static void bind_share_text(rt *r, const char *name, char *p, char *err, size_t errlen);
static void bind_share(rt *r, const char *name, int mib, bool owned, bool mutated, char *err, size_t errlen) {
    bind_share_text(r, name, share_json(name, mib, owned, mutated, NULL), err, errlen);
}

/* The same with the pod's JSON (taken). */
static void bind_share_text(rt *r, const char *name, char *p, char *err, size_t errlen) {
    char uid[128];
    snprintf(uid, sizeof uid, "uid-%s", name);
    fake_api_put(r->api, "pods", p);
    WAIT_FOR(({
             ext_state_lock(r->st);
             bool seen = ext_state_pod(r->st, uid) != NULL;
             ext_state_unlock(r->st);
             seen;
         }));
    place_pod(&r->v, p, name, uid, "n1", err, errlen);
    free(p);
}

/* A share already bound on GPU gpu of n1 (annotation written by hand). */
static void put_bound_share(rt *r, const char *name, int mib, int gpu, bool owned, bool mutated) {
    char ann[256];
    snprintf(ann, sizeof ann, "{\"version\":1,\"node\":\"n1\",\"policy\":\"binpack\",\"grants\":[{\"gpu\":%d,"
                              "\"memoryMiB\":%d,\"computePermille\":%d}]}", gpu, mib, (int)((mib * 1000LL + 81919) / 81920));
    char *p = share_json(name, mib, owned, mutated, ann);
    fake_api_put(r->api, "pods", p);
    free(p);
}

/* A whole-GPU pod put on n1 directly, as the default scheduler binds it (the kubelet admits it). */
static void put_whole(rt *r, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"uid-%s\"},\"spec\":{"
                          "\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":"
                          "{\"nvidia.com/gpu\":\"1\"},\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Pending\"}}",
             name, name);
    fake_api_put(r->api, "pods", p);
}

/* Reservation pods in the fake API (caller deletes the array). */
static cJSON *reservations(rt *r) {
    char *all = fake_api_list(r->api, "pods");
    cJSON *arr = cJSON_Parse(all), *out = cJSON_CreateArray(), *it;
    free(all);
    cJSON_ArrayForEach(it, arr) {
        const cJSON *meta = cJSON_GetObjectItem(it, "metadata");
        const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "labels"), EXT_RSV_LABEL);
        const cJSON *ns = cJSON_GetObjectItem(meta, "namespace");
        if (cJSON_IsString(l) && !strcmp(l->valuestring, "true") && cJSON_IsString(ns) && !strcmp(ns->valuestring, RNS))
            cJSON_AddItemToArray(out, cJSON_Duplicate(it, 1));
    }
    cJSON_Delete(arr);
    return out;
}

static int count_reservations(rt *r) {
    cJSON *a = reservations(r);
    int n = cJSON_GetArraySize(a);
    cJSON_Delete(a);
    return n;
}

static const char *jpath(const cJSON *o, const char *a, const char *b, const char *c) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    if (c) v = cJSON_GetObjectItemCaseSensitive(v, c);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The delivery ConfigMap of share name (caller deletes), or NULL. */
static cJSON *cm_of(rt *r, const char *name) {
    char cm[160];
    snprintf(cm, sizeof cm, EXT_DLV_CM_PREFIX "%s", name);
    char *t = fake_api_get(r->api, "configmaps", "default", cm);
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    free(t);
    return o;
}

static bool has_cm(rt *r, const char *name) {
    cJSON *o = cm_of(r, name);
    bool y = o != NULL;
    cJSON_Delete(o);
    return y;
}

/* The UUID the share's ConfigMap names ("" if none) into buf. */
static void cm_uuid(rt *r, const char *name, char *buf, size_t len) {
    cJSON *o = cm_of(r, name);
    snprintf(buf, len, "%s", jpath(o, "data", EXT_DLV_ENV_VISIBLE, NULL));
    cJSON_Delete(o);
}

/* The controller's last pass shows reservation `name` in state (pending, ready, refused, releasing): /debug/state. */
static bool rsv_state_is(rt *r, const char *name, const char *state) {
    ext_reply dbg = {0};
    ext_debug_state(&r->v, NULL, &dbg);
    cJSON *dj = dbg.body ? cJSON_Parse(dbg.body) : NULL, *x;
    ext_reply_free(&dbg);
    bool y = false;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(dj, "reservations"))
        y |= !strcmp(jpath(x, "name", NULL, NULL), name) && !strcmp(jpath(x, "state", NULL, NULL), state);
    cJSON_Delete(dj);
    return y;
}

static int count_events(rt *r, const char *reason, const char *pod) {
    char *all = fake_api_events(r->api);
    cJSON *arr = cJSON_Parse(all), *e;
    free(all);
    int n = 0;
    cJSON_ArrayForEach(e, arr) if (!strcmp(jpath(e, "reason", NULL, NULL), reason) &&
                                   !strcmp(jpath(e, "involvedObject", "name", NULL), pod)) n++;
    cJSON_Delete(arr);
    return n;
}

static bool pod_exists(rt *r, const char *ns, const char *name) {
    char *t = fake_api_get(r->api, "pods", ns, name);
    bool y = t != NULL;
    free(t);
    return y;
}

/* Play the kubelet by hand: the one reservation named `name` is refused, or reports uuid. */
static void refuse(rt *r, const char *name) {
    fake_api_patch(r->api, "pods", RNS, name,
                   "{\"status\":{\"phase\":\"Failed\",\"reason\":\"UnexpectedAdmissionError\",\"message\":\"Allocate "
                   "failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: "
                   "0, which is unexpected\"}}");
}
static void report_uuid(rt *r, const char *name, const char *uuid) {
    char patch[256];
    snprintf(patch, sizeof patch, "{\"metadata\":{\"annotations\":{\"" EXT_RSV_ANN_UUID "\":\"%s\"}},\"status\":{\"phase\":\"Running\"}}", uuid);
    fake_api_patch(r->api, "pods", RNS, name, patch);
}

static void rsv_name(int gpu, int attempt, char *buf, size_t len) { ext_rsv_pod_name("n1", gpu, "gpu", attempt, buf, len); }

/* No unit (node, gpu, unit annotation) with two live reservations in the API. */
static bool no_unit_twice(rt *r) {
    cJSON *a = reservations(r), *x, *y;
    bool ok = true;
    cJSON_ArrayForEach(x, a) {
        if (!strcmp(jpath(x, "status", "phase", NULL), "Failed")) continue;
        cJSON_ArrayForEach(y, a) {
            if (x == y || !strcmp(jpath(y, "status", "phase", NULL), "Failed")) continue;
            const char *k[3] = {EXT_RSV_ANN_NODE, EXT_RSV_ANN_GPU, EXT_RSV_ANN_UNIT};
            bool same = true;
            for (int i = 0; i < 3; i++)
                same &= !strcmp(jpath(x, "metadata", "annotations", k[i]), jpath(y, "metadata", "annotations", k[i]));
            if (same) ok = false;
        }
    }
    cJSON_Delete(a);
    return ok;
}

/* ------------------------------------------------------------------ pure parts */

TEST(ext_rsv_names_and_delivery_data) {
    char name[256];
    CHECK_INT(ext_rsv_pod_name("Node_A.example", 3, "gpu", 1, name, sizeof name), 0);
    CHECK(!strncmp(name, "tessera-rsv-node-a-example-", 27));
    CHECK(strlen(name) == strlen("tessera-rsv-node-a-example-") + 8 + strlen("-g3-1"));
    CHECK_CONTAINS(name, "-g3-1");
    CHECK_INT(ext_rsv_pod_name("n", 1, "mig:1g.10gb+me@2", 2, name, sizeof name), 0);
    CHECK_CONTAINS(name, "-g1-m1g10gbme-2-2");
    CHECK_INT(ext_rsv_pod_name("n", 0, "replica:5", 1, name, sizeof name), 0);
    CHECK_CONTAINS(name, "-g0-r5-1");
    CHECK_INT(ext_rsv_name_attempt(name), 1);
    CHECK_INT(ext_rsv_pod_name("n", 0, "bogus", 1, name, sizeof name), -1);
    char cm[128];
    ext_delivery_cm_name("ABC-def", cm, sizeof cm);
    CHECK_STR(cm, "tessera-gpu-abc-def");
    ext_delivery_unit u = {.uuid = "GPU-1234", .memory_mib = 20480, .compute_permille = 250, .device_memory_mib = 81920};
    cJSON *d = ext_delivery_data(&u, 1, NULL);
    char *t = cJSON_PrintUnformatted(d);
    CHECK_STR(t, "{\"NVIDIA_VISIBLE_DEVICES\":\"GPU-1234\",\"NVIDIA_DRIVER_CAPABILITIES\":\"compute,utility\","
                 "\"TESSERA_GPU_UUID\":\"GPU-1234\",\"TESSERA_GPU_MEMORY_MIB\":\"20480\",\"TESSERA_GPU_COMPUTE_PERCENT\":\"25\","
                 "\"TESSERA_ENFORCEMENT\":\"memory=libtessera-cuda compute=time-slicing (not capped)\","
                 "\"CUDA_DEVICE_MEMORY_LIMIT\":\"20480m\",\"CUDA_DEVICE_SM_LIMIT\":\"25\","
                 "\"XLA_PYTHON_CLIENT_MEM_FRACTION\":\"0.25\",\"TF_FORCE_GPU_ALLOW_GROWTH\":\"true\"}");
    free(t);
    cJSON_Delete(d);
    ext_delivery_unit two[2] = {{.uuid = "GPU-a", .memory_mib = 8000, .compute_permille = 98, .device_memory_mib = 81920},
                                {.uuid = "GPU-b", .memory_mib = 8000, .compute_permille = 98, .device_memory_mib = 81920}};
    d = ext_delivery_data(two, 2, NULL);
    CHECK_STR(jpath(d, EXT_DLV_ENV_VISIBLE, NULL, NULL), "GPU-a,GPU-b");
    CHECK_STR(jpath(d, EXT_DLV_ENV_COMPUTE, NULL, NULL), "10");   /* 9.8 % rounded up */
    CHECK_STR(jpath(d, EXT_DLV_ENV_XLA_FRACTION, NULL, NULL), "0.09");   /* 0.0976 rounded down */
    cJSON_Delete(d);
    ext_delivery_unit none = {.memory_mib = 1, .compute_permille = 1, .device_memory_mib = 1};
    CHECK(ext_delivery_data(&none, 1, NULL) == NULL);
}

TEST(ext_rsv_regrant_moves_only_the_grants_of_one_gpu) {
    model_node *n = model_node_new("n");
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    CHECK(p != NULL);
    for (int i = 0; i < 3; i++) model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
    model_assignment a = {.ngrants = 1};
    a.grant[0] = (model_grant){.gpu = 0, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                               .memory_mib = 40000, .compute_permille = 500};
    char err[256];
    CHECK_INT(model_assign(n, "u1", &a, err, sizeof err), 0);
    model_assignment out;
    CHECK_INT(model_regrant(n, &a, 0, 1, &out, err, sizeof err), 0);
    CHECK_INT(out.ngrants, 1);
    CHECK_INT(out.grant[0].gpu, 1);
    CHECK_INT(out.grant[0].memory_mib, 40000);
    CHECK_INT(model_regrant(n, &a, 1, 2, &out, err, sizeof err), -1);   /* nothing on GPU 1 */
    model_assignment big = a;
    big.grant[0].memory_mib = 50000;
    model_assignment w = a;
    w.grant[0].gpu = 2;
    CHECK_INT(model_assign(n, "u2", &w, err, sizeof err), 0);   /* GPU 2 has 40000 MiB taken */
    CHECK_INT(model_regrant(n, &big, 0, 2, &out, err, sizeof err), -1);
    CHECK_CONTAINS(err, "MiB free");
    char why[256];
    CHECK(model_node_check(n, why, sizeof why));   /* n was not touched */
    model_node_free(n);
}

/* Where the waiting shares of a refused GPU go together: the idle GPU of the highest rank, then the lowest
 * index, that the model lets take all of them (not another product: the pods may have excluded it; not a
 * busy GPU; not one ranked 0). */
TEST(ext_rsv_regrant_group_picks_the_ranked_gpu_that_takes_all) {
    model_node *n = model_node_new("n");
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    const model_gpu_product *h100 = model_catalog_find(model_catalog_default(), "NVIDIA-H100-80GB-HBM3");
    CHECK(p != NULL && h100 != NULL);
    if (!p || !h100) { model_node_free(n); return; }
    for (int i = 0; i < 5; i++) model_node_add_gpu(n, i == 2 ? h100 : p, MODEL_GPU_WHOLE, 1, 0);
    model_assignment t[2] = {{.ngrants = 1}, {.ngrants = 1}}, other = {.ngrants = 1}, out[2];
    for (int i = 0; i < 2; i++)
        t[i].grant[0] = (model_grant){.gpu = 0, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                                      .memory_mib = 30000, .compute_permille = 300};
    other.grant[0] = (model_grant){.gpu = 1, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                                   .memory_mib = 40000, .compute_permille = 400};
    char err[256];
    CHECK_INT(model_assign(n, "s1", &t[0], err, sizeof err), 0);
    CHECK_INT(model_assign(n, "s2", &t[1], err, sizeof err), 0);
    CHECK_INT(model_assign(n, "busy", &other, err, sizeof err), 0);   /* GPU 1: not idle */
    const char *uids[2] = {"s1", "s2"};
    int8_t rank[5] = {0, 2, 1, 0, 1};   /* 1 busy, 2 an H100, 3 ranked 0: GPU 4 */
    CHECK_INT(model_regrant_group(n, 2, uids, t, 0, rank, out, err, sizeof err), 4);
    CHECK_INT(out[0].grant[0].gpu, 4);
    CHECK_INT(out[1].grant[0].gpu, 4);
    CHECK_INT(out[1].grant[0].memory_mib, 30000);
    rank[3] = 1;   /* the lower index among equals */
    CHECK_INT(model_regrant_group(n, 2, uids, t, 0, rank, out, err, sizeof err), 3);
    rank[4] = 2;   /* a GPU whose reservation is held comes first, whatever its index */
    CHECK_INT(model_regrant_group(n, 2, uids, t, 0, rank, out, err, sizeof err), 4);
    int8_t none[5] = {0, 2, 0, 0, 0};   /* only the busy GPU is allowed */
    CHECK_INT(model_regrant_group(n, 2, uids, t, 0, none, out, err, sizeof err), -1);
    CHECK_CONTAINS(err, "no other idle GPU");
    char why[256];
    CHECK(model_node_check(n, why, sizeof why));   /* n was not touched */
    model_node_free(n);
}

/* A move keeps the request's constraints: a time-slice replica does not go to an MPS GPU, nor a share to
 * another product (the pod may have excluded it with gpu-models); regrant sees no request, so it keeps both. */
TEST(ext_rsv_regrant_keeps_mode_and_product) {
    model_node *n = model_node_new("n");
    const model_gpu_product *a100 = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    const model_gpu_product *h100 = model_catalog_find(model_catalog_default(), "NVIDIA-H100-80GB-HBM3");
    CHECK(a100 != NULL);
    CHECK(h100 != NULL);
    if (!a100 || !h100) { model_node_free(n); return; }
    model_node_add_gpu(n, a100, MODEL_GPU_TIMESLICE, 4, 0);   /* #0 */
    model_node_add_gpu(n, a100, MODEL_GPU_MPS, 4, 0);         /* #1 */
    model_node_add_gpu(n, a100, MODEL_GPU_TIMESLICE, 4, 0);   /* #2 */
    model_node_add_gpu(n, h100, MODEL_GPU_WHOLE, 1, 0);       /* #3 */
    model_node_add_gpu(n, a100, MODEL_GPU_WHOLE, 1, 0);       /* #4 */
    model_assignment rep = {.ngrants = 1}, frac = {.ngrants = 1}, out;
    rep.grant[0] = (model_grant){.gpu = 0, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = 1,
                                 .memory_mib = 20000, .compute_permille = 250};
    frac.grant[0] = (model_grant){.gpu = 4, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                                  .memory_mib = 8000, .compute_permille = 100};
    char err[256] = "";
    CHECK_INT(model_regrant(n, &rep, 0, 1, &out, err, sizeof err), -1);   /* MPS */
    CHECK_CONTAINS(err, "mps");
    CHECK_INT(model_regrant(n, &rep, 0, 2, &out, err, sizeof err), 0);    /* its twin */
    CHECK_INT(model_regrant(n, &frac, 4, 3, &out, err, sizeof err), -1);  /* another product */
    CHECK_CONTAINS(err, "H100");
    model_node_free(n);
}

/* The cache: a reservation pod is not accounted (its tenants are), and a bound pod whose assignment
 * annotation changes is placed again from the new text. */
TEST(ext_rsv_state_ignores_reservations_and_follows_a_moved_assignment) {
    ext_state_config sc = {.standalone = false};
    snprintf(sc.reservation_ns, sizeof sc.reservation_ns, RNS);
    ext_state *st = ext_state_new(&sc);
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, node);
    cJSON_Delete(node);
    const char *rsv = "{\"metadata\":{\"name\":\"tessera-rsv-x\",\"namespace\":\"" RNS "\",\"uid\":\"uid-r\","
                      "\"labels\":{\"tessera.io/reservation\":\"true\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
                      "[{\"name\":\"reserve\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
                      "\"status\":{\"phase\":\"Running\"}}";
    cJSON *ro = cJSON_Parse(rsv);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, ro);
    cJSON_Delete(ro);
    const char *a0 = "{\"version\":1,\"node\":\"n1\",\"policy\":\"binpack\",\"grants\":[{\"gpu\":0,\"memoryMiB\":8000,"
                     "\"computePermille\":98}]}";
    const char *a3 = "{\"version\":1,\"node\":\"n1\",\"policy\":\"binpack\",\"grants\":[{\"gpu\":3,\"memoryMiB\":8000,"
                     "\"computePermille\":98}]}";
    char *p0 = share_json("s1", 8000, false, true, a0), *p3 = share_json("s1", 8000, false, true, a3);
    cJSON *o0 = cJSON_Parse(p0), *o3 = cJSON_Parse(p3);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, o0);
    ext_state_lock(st);
    bool ignored = ext_state_pod(st, "uid-r") == NULL;
    const ext_pod *p = ext_state_pod(st, "uid-s1");
    int before = p && p->holds ? p->a.grant[0].gpu : -1;
    ext_state_unlock(st);
    ext_state_apply(st, KUBE_POD, KUBE_MODIFIED, o3);
    ext_state_lock(st);
    p = ext_state_pod(st, "uid-s1");
    int after = p && p->holds ? p->a.grant[0].gpu : -1;
    const ext_node *n = ext_state_node(st, "n1");
    bool gpu0_idle = n && n->m && model_gpu_idle(&n->m->gpus[0]);
    ext_state_unlock(st);
    char why[256] = "";
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    cJSON_Delete(o0);
    cJSON_Delete(o3);
    free(p0);
    free(p3);
    ext_state_free(st);
    CHECK(ignored);
    CHECK_INT(before, 0);
    CHECK_INT(after, 3);
    CHECK(gpu0_idle);
    CHECK_MSG(consistent, "%s", why);
}

/* A replica gets admission reviews the moment it starts (the webhook's Service publishes pods that are not
 * Ready). A share reviewed before the controller's first read of its own Pod was refused ("tessera has not
 * read its own Pod yet"): a flaky deployed test under load, a failed `kubectl create` in a rollout. Here the
 * API server holds that read for 1.5 s; the review made at once waits for it and gets the image. */
TEST(ext_rsv_image_first_reviews_wait_for_the_read_of_our_own_pod) {
    rt r;
    memset(&r, 0, sizeof r);
    char err[256], img[256] = "", why[800] = "";
    r.api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(r.api, "%s", err);
    put_node(r.api, 1);
    fake_api_put(r.api, "pods", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"tessera-extender-0\","
                                "\"namespace\":\"tessera\"},\"spec\":{\"containers\":[{\"name\":\"" EXT_RSV_SELF_CONTAINER "\","
                                "\"image\":\"registry.example/tessera:own\"}]}}");
    fake_api_inject_stall(r.api, "GET /api/v1/namespaces/tessera/pods/tessera-extender-0", 1500, 1);
    setenv("POD_NAMESPACE", "tessera", 1);
    setenv("POD_NAME", "tessera-extender-0", 1);
    r.own_image = true;
    rt_up(&r);
    bool known = r.ok && ext_rsv_image(r.rsv, img, sizeof img, why, sizeof why);
    rt_stop(&r);
    unsetenv("POD_NAMESPACE");
    unsetenv("POD_NAME");
    CHECK(r.ok);
    CHECK_MSG(known, "the first review was refused: %s", why);
    CHECK_STR(img, "registry.example/tessera:own");
}

TEST(ext_rsv_share_without_webhook_gets_a_warning_once) {
    rt r;
    /* No fake kubelet: it would start the unmutated share's container at once (nothing holds it back), and a share
     * that started before the controller's first look gets no reservation (nothing could reach it): a race. */
    rt_start(&r, 1, false, 30000);
    if (r.ok) put_bound_share(&r, "plain", 8000, 0, false, false);
    bool warned = r.ok && WAIT_FOR(count_events(&r, EXT_DLV_EV_NOT_MUTATED, "plain") == 1);
    bool reserved = WAIT_FOR(count_reservations(&r) == 1);
    settle(&r);
    int n = count_events(&r, EXT_DLV_EV_NOT_MUTATED, "plain");
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(warned);
    CHECK(reserved);
    CHECK_INT(n, 1);
}

/* ------------------------------------------------------------------ end to end */

TEST(ext_rsv_first_share_makes_one_reservation_and_its_uuid_reaches_the_configmap) {
    rt r;
    rt_start(&r, 2, true, 30000);
    char err[512] = "?", err2[512] = "?";
    if (r.ok) bind_share(&r, "s1", 8000, true, true, err, sizeof err);
    bool cm1 = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    int n1 = count_reservations(&r);
    cJSON *rs = reservations(&r);
    cJSON *rv = cJSON_GetArrayItem(rs, 0);
    char want[256], rname[256], ruid[128];
    rsv_name(0, 1, want, sizeof want);
    snprintf(rname, sizeof rname, "%s", jpath(rv, "metadata", "name", NULL));
    snprintf(ruid, sizeof ruid, "%s", jpath(rv, "metadata", "uid", NULL));
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rv, "spec"), "containers"), 0);
    char res_req[16], prio[64], image[128], gpu_ann[8], unit_ann[16], node_ann[16];
    snprintf(res_req, sizeof res_req, "%s", jpath(c0, "resources", "requests", "nvidia.com/gpu"));
    snprintf(prio, sizeof prio, "%s", jpath(rv, "spec", "priorityClassName", NULL));
    snprintf(image, sizeof image, "%s", jpath(c0, "image", NULL, NULL));
    snprintf(gpu_ann, sizeof gpu_ann, "%s", jpath(rv, "metadata", "annotations", EXT_RSV_ANN_GPU));
    snprintf(unit_ann, sizeof unit_ann, "%s", jpath(rv, "metadata", "annotations", EXT_RSV_ANN_UNIT));
    snprintf(node_ann, sizeof node_ann, "%s", jpath(rv, "metadata", "annotations", EXT_RSV_ANN_NODE));
    /* Pod Security "restricted" (the tessera namespace enforces it): the API server refuses the pod otherwise. */
    const cJSON *sc = cJSON_GetObjectItem(c0, "securityContext");
    const cJSON *drop = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(sc, "capabilities"), "drop"), 0);
    bool restricted = cJSON_IsTrue(cJSON_GetObjectItem(sc, "runAsNonRoot")) &&
                      cJSON_IsFalse(cJSON_GetObjectItem(sc, "allowPrivilegeEscalation")) &&
                      cJSON_IsString(drop) && !strcmp(drop->valuestring, "ALL") &&
                      !strcmp(jpath(sc, "seccompProfile", "type", NULL), "RuntimeDefault") &&
                      !cJSON_GetObjectItem(cJSON_GetObjectItem(rv, "spec"), "volumes");
    cJSON_Delete(rs);
    char *devs = r.kl ? fake_kubelet_devices(r.kl, ruid) : NULL;
    /* The ConfigMap: exact data, owned by the pod. */
    cJSON *cm = cm_of(&r, "s1");
    char *share = fake_api_get(r.api, "pods", "default", "s1");
    cJSON *sp = share ? cJSON_Parse(share) : NULL;
    free(share);
    cJSON *ann = cJSON_Parse(jpath(sp, "metadata", "annotations", "tessera.io/assignment"));
    const cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ann, "grants"), 0);
    int permille = cJSON_GetObjectItem(g0, "computePermille") ? cJSON_GetObjectItem(g0, "computePermille")->valueint : -1;
    ext_delivery_unit du = {.uuid = devs ? devs : "?", .memory_mib = 8000, .compute_permille = permille,
                            .device_memory_mib = 81920};
    cJSON *want_data = ext_delivery_data(&du, 1, NULL);
    bool data_exact = cm && cJSON_Compare(cJSON_GetObjectItem(cm, "data"), want_data, true);
    char pct[16];
    snprintf(pct, sizeof pct, "%d", (permille + 9) / 10);
    bool literal = cm && !strcmp(jpath(cm, "data", EXT_DLV_ENV_HAMI_MEMORY, NULL), "8000m") &&
                   !strcmp(jpath(cm, "data", EXT_DLV_ENV_XLA_FRACTION, NULL), "0.09") &&
                   !strcmp(jpath(cm, "data", EXT_DLV_ENV_CAPS, NULL), "compute,utility") &&
                   !strcmp(jpath(cm, "data", EXT_DLV_ENV_COMPUTE, NULL), pct) &&
                   !strcmp(jpath(cm, "data", EXT_DLV_ENV_TF_GROWTH, NULL), "true");
    const cJSON *own = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cm, "metadata"), "ownerReferences"), 0);
    bool owner = own && !strcmp(jpath(own, "uid", NULL, NULL), "uid-s1") && !strcmp(jpath(own, "kind", NULL, NULL), "Pod") &&
                 !strcmp(jpath(own, "name", NULL, NULL), "s1") && cJSON_IsFalse(cJSON_GetObjectItem(own, "blockOwnerDeletion"));
    bool labels = cm && !strcmp(jpath(cm, "metadata", "labels", EXT_DLV_LABEL_DELIVERY), "true");
    cJSON_Delete(want_data);
    cJSON_Delete(ann);
    cJSON_Delete(sp);
    cJSON_Delete(cm);
    bool delivered = WAIT_FOR(count_events(&r, EXT_DLV_EV_DELIVERED, "s1") == 1);
    /* A second share on that GPU reuses the reservation. */
    if (r.ok) bind_share(&r, "s2", 8000, true, true, err2, sizeof err2);
    bool cm2 = r.ok && WAIT_FOR(has_cm(&r, "s2"));
    char u1[128], u2[128];
    cm_uuid(&r, "s1", u1, sizeof u1);
    cm_uuid(&r, "s2", u2, sizeof u2);
    settle(&r);   /* nothing else may appear */
    int n2 = count_reservations(&r);
    /* Visible: /debug/state and metrics. */
    ext_reply dbg = {0};
    ext_debug_state(&r.v, NULL, &dbg);
    cJSON *dj = dbg.body ? cJSON_Parse(dbg.body) : NULL;
    ext_reply_free(&dbg);
    const cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(dj, "reservations"), 0);
    char dstate[32], duuid[64];
    snprintf(dstate, sizeof dstate, "%s", jpath(d0, "state", NULL, NULL));
    snprintf(duuid, sizeof duuid, "%s", jpath(d0, "uuid", NULL, NULL));
    int dtenants = cJSON_GetArraySize(cJSON_GetObjectItem(d0, "tenants"));
    cJSON_Delete(dj);
    ext_rsv_stats rst;
    ext_rsv_get_stats(r.rsv, &rst);
    static ext_metrics m;   /* zeroed */
    size_t mlen = 0;
    char *metrics = ext_metrics_render(&m, &r.v, NULL, &mlen);
    bool gauge = metrics && strstr(metrics, "tessera_reservations{state=\"ready\"} 1\n") &&
                 strstr(metrics, "tessera_reservation_ops_total{op=\"create\",result=\"ok\"} 1\n") &&
                 strstr(metrics, "tessera_reservation_ops_total{op=\"move\",result=\"error\"} 0\n");
    free(metrics);
    bool two_holds = r.kl && fake_kubelet_double_holds(r.kl) == 0;
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK_STR(err2, "");
    CHECK(cm1);
    CHECK_INT(n1, 1);
    CHECK_MSG(restricted, "the reservation pod does not meet Pod Security \"restricted\"");
    CHECK_STR(rname, want);
    CHECK_STR(res_req, "1");
    CHECK_STR(prio, EXT_RSV_PRIORITY_CLASS);
    CHECK_STR(image, "registry.example/tessera:test");
    CHECK_STR(node_ann, "n1");
    CHECK_STR(gpu_ann, "0");
    CHECK_STR(unit_ann, "gpu");
    CHECK(devs != NULL);
    CHECK_STR(devs ? devs : "", "GPU-n1-0");
    free(devs);
    CHECK(data_exact);
    CHECK(literal);
    CHECK(owner);
    CHECK(labels);
    CHECK(delivered);
    CHECK(cm2);
    CHECK_INT(n2, 1);
    CHECK_STR(u1, "GPU-n1-0");
    CHECK_STR(u2, "GPU-n1-0");
    CHECK_STR(dstate, "ready");
    CHECK_STR(duuid, "GPU-n1-0");
    CHECK_INT(dtenants, 2);
    CHECK_INT(rst.reservations[EXT_RSV_READY], 1);
    CHECK(rst.ops[EXT_RSV_OP_CREATE][0] >= 1);
    CHECK(rst.ops[EXT_RSV_OP_CONFIGMAP][0] >= 2);
    CHECK(gauge);
    CHECK(two_holds);
}

/* Found under load (issue 29): the reply to the reservation's POST came after the watch had shown the pod
 * admitted and its UUID published (the API server, or the controller's thread, was slow). The reply's older
 * copy replaced what the watch had shown, and since nothing changed the pod again the share never got its
 * ConfigMap. Here the fake API server holds that reply until the watch has delivered the UUID. */
TEST(ext_rsv_late_create_reply_does_not_hide_the_published_uuid) {
    rt r;
    rt_start(&r, 1, true, 30000);
    char uuid[64] = "";
    if (r.ok) fake_api_inject_late_reply(r.api, "POST /api/v1/namespaces/" RNS "/pods", 1);
    if (r.ok) put_bound_share(&r, "s1", 8000, 0, false, true);
    bool shown = r.ok && WAIT_FOR(r.uuid_events > 0);
    if (r.api) fake_api_release_replies(r.api);
    bool cm = WAIT_FOR(has_cm(&r, "s1"));
    cm_uuid(&r, "s1", uuid, sizeof uuid);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_MSG(shown, "the watch never showed the reservation's UUID");
    CHECK_MSG(cm, "no ConfigMap: the late reply hid the UUID the watch had shown");
    CHECK_STR(uuid, "GPU-n1-0");
}

/* The same race on a share: the reply to the PATCH that moves it to another GPU comes after the watch showed
 * the share deleted. Taking the reply's copy would bring the deleted share back into the controller's table for
 * good: a reservation for nobody, never released. */
TEST(ext_rsv_late_move_reply_does_not_bring_back_a_deleted_share) {
    rt r;
    rt_start(&r, 2, false, 30000);   /* the test plays the kubelet */
    char first[256];
    rsv_name(0, 1, first, sizeof first);
    if (r.ok) put_bound_share(&r, "s1", 8000, 0, true, true);
    bool created = r.ok && WAIT_FOR(pod_exists(&r, RNS, first));
    if (r.ok) fake_api_inject_late_reply(r.api, "PATCH /api/v1/namespaces/default/pods/s1", 1);
    refuse(&r, first);   /* the controller moves s1 to GPU 1: its PATCH takes effect, the reply waits */
    bool moved = WAIT_FOR(fake_api_requests(r.api, "PATCH /api/v1/namespaces/default/pods/s1") == 1);
    int before = r.pod_deletions;
    fake_api_delete(r.api, "pods", "default", "s1");
    bool gone = WAIT_FOR(r.pod_deletions > before);
    fake_api_release_replies(r.api);
    WAIT_FOR(!pod_exists(&r, RNS, first));
    settle(&r);
    int left = count_reservations(&r);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(created);
    CHECK(moved);
    CHECK(gone);
    CHECK_MSG(left == 0, "%d reservations for a share that was deleted", left);
}

/* Node n1 with 2 GPUs whose kubelet the test plays, an owned share s1 bound and its first reservation (named in
 * first; a second one would be named second) created: true. */
/* The GPU the first grant of share default/name's tessera.io/assignment names, or -1. */
static int assigned_gpu(rt *r, const char *name) {
    char *sp = fake_api_get(r->api, "pods", "default", name);
    cJSON *so = sp ? cJSON_Parse(sp) : NULL;
    free(sp);
    cJSON *ann = cJSON_Parse(jpath(so, "metadata", "annotations", "tessera.io/assignment"));
    const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(ann, "grants"), 0);
    int gpu = g && cJSON_GetObjectItem(g, "gpu") ? cJSON_GetObjectItem(g, "gpu")->valueint : -1;
    cJSON_Delete(ann);
    cJSON_Delete(so);
    return gpu;
}

static bool one_share_two_gpus(rt *r, char *err, size_t errlen, char *first, char *second) {
    rt_start(r, 2, false, 30000);
    rsv_name(0, 1, first, 256);
    rsv_name(1, 1, second, 256);
    if (r->ok) bind_share(r, "s1", 8000, true, true, err, errlen);
    return r->ok && WAIT_FOR(pod_exists(r, RNS, first));
}

TEST(ext_rsv_refused_reservation_is_replaced_and_waiting_shares_move) {
    rt r;
    char err[512] = "?", first[256], second[256];
    bool created = one_share_two_gpus(&r, err, sizeof err, first, second);
    bool pending_ev = WAIT_FOR(count_events(&r, EXT_DLV_EV_PENDING, "s1") >= 1);
    refuse(&r, first);
    bool replaced = WAIT_FOR(pod_exists(&r, RNS, second) && !pod_exists(&r, RNS, first));
    /* The share's assignment now names GPU 1, and the cache follows. */
    int ann_gpu = assigned_gpu(&r, "s1");
    bool cache_follows = WAIT_FOR(({
                                  ext_state_lock(r.st);
                                  const ext_pod *p = ext_state_pod(r.st, "uid-s1");
                                  const ext_node *n = ext_state_node(r.st, "n1");
                                  bool y = p && p->holds && p->a.ngrants == 1 && p->a.grant[0].gpu == 1 && n && n->m &&
                                           model_gpu_idle(&n->m->gpus[0]);
                                  ext_state_unlock(r.st);
                                  y;
                              }));
    char why[256] = "";
    bool consistent = all_nodes_consistent(r.st, why, sizeof why);
    report_uuid(&r, second, "GPU-test-1");
    bool cm = WAIT_FOR(has_cm(&r, "s1"));
    char uuid[64];
    cm_uuid(&r, "s1", uuid, sizeof uuid);
    WAIT_FOR(count_events(&r, EXT_DLV_EV_REFUSED, "s1") >= 1);   /* Events are posted by a thread of their own */
    settle(&r);
    int refused_ev = count_events(&r, EXT_DLV_EV_REFUSED, "s1");
    int nres = count_reservations(&r);
    ext_rsv_stats rst;
    ext_rsv_get_stats(r.rsv, &rst);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(created);
    CHECK(pending_ev);
    CHECK(replaced);
    CHECK_INT(ann_gpu, 1);
    CHECK(cache_follows);
    CHECK_MSG(consistent, "%s", why);
    CHECK(cm);
    CHECK_STR(uuid, "GPU-test-1");
    CHECK_INT(refused_ev, 1);
    CHECK_INT(nres, 1);
    CHECK(rst.ops[EXT_RSV_OP_MOVE][0] == 1);
}

TEST(ext_rsv_no_gpu_left_warns_deletes_owned_share_and_leaves_bare_one) {
    rt r;
    memset(&r, 0, sizeof r);
    char err[256];
    r.grace_ms = 30000;
    r.api = fake_api_start(0, err, sizeof err);
    if (r.api) {
        put_node(r.api, 1);
        put_bound_share(&r, "owned", 4000, 0, true, true);
        put_bound_share(&r, "bare", 4000, 0, false, true);
        rt_up(&r);
    }
    char first[256];
    rsv_name(0, 1, first, sizeof first);
    bool created = r.ok && WAIT_FOR(pod_exists(&r, RNS, first));
    refuse(&r, first);
    bool deleted = WAIT_FOR(!pod_exists(&r, "default", "owned"));
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_UNAVAILABLE, "owned") == 1 &&
                       count_events(&r, EXT_DLV_EV_UNAVAILABLE, "bare") == 1);
    settle(&r);   /* nothing more happens */
    bool bare_left = pod_exists(&r, "default", "bare");
    int bare_warn = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "bare");
    int refused = count_events(&r, EXT_DLV_EV_REFUSED, "bare");
    int live = 0;
    cJSON *rs = reservations(&r), *x;
    cJSON_ArrayForEach(x, rs) live += strcmp(jpath(x, "status", "phase", NULL), "Failed") != 0;
    cJSON_Delete(rs);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(created);
    CHECK(deleted);
    CHECK(warned);
    CHECK(bare_left);
    CHECK_INT(bare_warn, 1);
    CHECK_INT(refused, 1);
    CHECK_INT(live, 0);
}

TEST(ext_rsv_last_share_leaving_releases_after_grace) {
    rt r;
    /* The grace is long enough that "a share comes back within it" holds on a loaded machine too: between the
     * two there is only a pass or two of the controller. */
    rt_start(&r, 1, true, 3000);
    char err[512] = "?", name[256];
    rsv_name(0, 1, name, sizeof name);
    if (r.ok) bind_share(&r, "s1", 8000, false, true, err, sizeof err);
    bool cm = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    /* The share leaves; another arrives within the grace: the reservation is kept. */
    int64_t t_left = test_now_ms();
    fake_api_delete(r.api, "pods", "default", "s1");
    bool grace = WAIT_FOR(rsv_state_is(&r, name, "releasing"));
    bool kept_during_grace = pod_exists(&r, RNS, name);
    put_bound_share(&r, "s2", 8000, 0, false, true);
    bool cm2 = WAIT_FOR(has_cm(&r, "s2"));
    /* the grace that s1's leaving started is over, and passes have seen it: s2 holds the reservation */
    int64_t over = t_left + r.grace_ms - test_now_ms();
    if (over > 0) test_nap_ms((int)over);
    settle(&r);
    bool kept = pod_exists(&r, RNS, name);
    char u2[64];
    cm_uuid(&r, "s2", u2, sizeof u2);
    /* The last share leaves: released after the grace, not before (the controller starts counting when it sees
     * the share gone, which is after t0). */
    int64_t t0 = test_now_ms();
    fake_api_delete(r.api, "pods", "default", "s2");
    bool released = WAIT_FOR(!pod_exists(&r, RNS, name));
    int64_t took = test_now_ms() - t0;
    bool device_free = WAIT_FOR(({
                                char *h = fake_kubelet_holder(r.kl, "n1", "GPU-n1-0");
                                bool f = h == NULL;
                                free(h);
                                f;
                            }));
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(cm);
    CHECK(grace);
    CHECK(kept_during_grace);
    CHECK(cm2);
    CHECK(kept);
    CHECK_STR(u2, "GPU-n1-0");
    CHECK(released);
    CHECK_MSG(took >= r.grace_ms, "released %lld ms after its last share left (grace %d ms)", (long long)took, r.grace_ms);
    CHECK(device_free);
}

/* After a restart, everything converges: no orphan reservation (after the grace), every share has its
 * ConfigMap naming the device its reservation holds, no unit reserved twice. */
static bool converged(rt *r, const char *const *shares, int n, char *why, size_t whylen) {
    cJSON *rs = reservations(r), *x;
    bool ok = true;
    int nres = cJSON_GetArraySize(rs);
    for (int i = 0; ok && i < n; i++) {
        if (!pod_exists(r, "default", shares[i])) continue;
        char uuid[128];
        cm_uuid(r, shares[i], uuid, sizeof uuid);
        bool held = false;
        cJSON_ArrayForEach(x, rs) {
            char *d = fake_kubelet_devices(r->kl, jpath(x, "metadata", "uid", NULL));
            if (d && !strcmp(d, uuid)) held = true;
            free(d);
        }
        if (!held) { snprintf(why, whylen, "share %s: ConfigMap names '%s', no reservation holds it", shares[i], uuid); ok = false; }
    }
    int live_shares = 0;
    for (int i = 0; i < n; i++) live_shares += pod_exists(r, "default", shares[i]);
    if (ok && live_shares == 0 && nres != 0) { snprintf(why, whylen, "%d orphan reservations", nres); ok = false; }
    if (ok && live_shares > 0 && nres != 1) { snprintf(why, whylen, "%d reservations for one GPU", nres); ok = false; }
    if (ok && !no_unit_twice(r)) { snprintf(why, whylen, "a unit reserved twice"); ok = false; }
    cJSON_Delete(rs);
    return ok;
}

TEST(ext_rsv_restart_at_each_step_rebuilds_from_the_api) {
    rt r;
    rt_start(&r, 2, true, 300);
    const char *shares[] = {"s1", "s2"};
    char err[512] = "?", why[256] = "";
    bool ok = r.ok;
    /* Step 1: die right after the bind, before any reservation exists (or while it is created). */
    if (ok) bind_share(&r, "s1", 8000, false, true, err, sizeof err);
    rt_down(&r);
    rt_up(&r);
    ok &= r.ok && WAIT_FOR(converged(&r, shares, 2, why, sizeof why) && has_cm(&r, "s1"));
    /* Step 2: die while the second share's ConfigMap may be in flight. */
    if (ok) put_bound_share(&r, "s2", 8000, 0, false, true);
    test_nap_ms(20);   /* any moment will do: a kill point */
    rt_down(&r);
    ok &= count_reservations(&r) == 1 && no_unit_twice(&r);
    rt_up(&r);
    ok &= r.ok && WAIT_FOR(converged(&r, shares, 2, why, sizeof why) && has_cm(&r, "s2"));
    /* Step 3: a ConfigMap lost while we were down is written again. */
    rt_down(&r);
    fake_api_delete(r.api, "configmaps", "default", EXT_DLV_CM_PREFIX "s1");
    rt_up(&r);
    ok &= r.ok && WAIT_FOR(has_cm(&r, "s1") && converged(&r, shares, 2, why, sizeof why));
    /* Step 4: the shares leave while we are down; the orphan is released one grace after the restart. */
    rt_down(&r);
    fake_api_delete(r.api, "pods", "default", "s1");
    fake_api_delete(r.api, "pods", "default", "s2");
    int before = count_reservations(&r);
    rt_up(&r);
    ok &= r.ok && WAIT_FOR(count_reservations(&r) == 0);
    /* Step 5: die during the grace of a fresh reservation; it is still released. */
    if (ok) bind_share(&r, "s3", 8000, false, true, err, sizeof err);
    ok &= WAIT_FOR(has_cm(&r, "s3"));
    fake_api_delete(r.api, "pods", "default", "s3");
    test_nap_ms(50);   /* any moment will do: a kill point */
    rt_down(&r);
    rt_up(&r);
    ok &= r.ok && WAIT_FOR(count_reservations(&r) == 0);
    int doubles = fake_kubelet_double_holds(r.kl);
    rt_stop(&r);
    CHECK_MSG(ok, "%s", why);
    CHECK_STR(err, "");
    CHECK_INT(before, 1);
    CHECK_INT(doubles, 0);
}

/* ------------------------------------------------------------------ mixed burst */

typedef struct burst {
    rt *r;
    int n;
    char errs[8][256];
} burst;

static void *burst_whole(void *arg) {
    burst *b = arg;
    for (int i = 0; i < b->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        test_nap_ms(2);   /* interleaved with the shares' binds */
        put_whole(b->r, name);
    }
    return NULL;
}

static void *burst_shares(void *arg) {
    burst *b = arg;
    for (int i = 0; i < b->n; i++) {
        char name[32], uid[64];
        snprintf(name, sizeof name, "s%d", i);
        snprintf(uid, sizeof uid, "uid-%s", name);
        char *p = share_json(name, 20000, true, true, NULL);
        place_pod(&b->r->v, p, name, uid, "n1", b->errs[i], sizeof b->errs[i]);
        free(p);
    }
    return NULL;
}

TEST(ext_rsv_mixed_burst_never_double_holds_a_device) {
    rt r;
    rt_start(&r, 4, true, 300);
    if (r.kl) fake_kubelet_set_random(r.kl, 7);
    burst bw = {&r, 3, {{0}}}, bs = {&r, 8, {{0}}};
    for (int i = 0; r.ok && i < bs.n; i++) {   /* pending, and in the cache, before the burst starts */
        char name[32];
        snprintf(name, sizeof name, "s%d", i);
        char *p = share_json(name, 20000, true, true, NULL);
        fake_api_put(r.api, "pods", p);
        free(p);
    }
    if (r.ok) WAIT_FOR(({
                       ext_state_stats ss;
                       ext_state_lock(r.st);
                       ext_state_get_stats(r.st, &ss);
                       ext_state_unlock(r.st);
                       ss.pending == bs.n;
                   }));
    if (r.ok) {
        pthread_t a, b;
        pthread_create(&a, NULL, burst_whole, &bw);
        pthread_create(&b, NULL, burst_shares, &bs);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    }
    /* Every bound share ends with its GPU (a ConfigMap naming exactly its reservation's device) or with the
     * Unavailable event (and, being owned, deleted). */
    char why[512] = "";
    bool settled = r.ok && WAIT_FOR(({
                                    bool all = true;
                                    for (int i = 0; i < bs.n && all; i++) {
                                        char name[32];
                                        snprintf(name, sizeof name, "s%d", i);
                                        if (bs.errs[i][0]) continue;   /* never bound */
                                        bool unavailable = count_events(&r, EXT_DLV_EV_UNAVAILABLE, name) > 0;
                                        all = unavailable || has_cm(&r, name);
                                    }
                                    all;
                                }));
    int bound = 0, delivered = 0, unavailable = 0;
    bool exact = true;
    cJSON *rs = reservations(&r), *x;
    for (int i = 0; i < bs.n; i++) {
        char name[32], uuid[128];
        snprintf(name, sizeof name, "s%d", i);
        if (bs.errs[i][0]) continue;
        bound++;
        if (count_events(&r, EXT_DLV_EV_UNAVAILABLE, name) > 0) { unavailable++; continue; }
        cm_uuid(&r, name, uuid, sizeof uuid);
        delivered++;
        bool held = false;
        cJSON_ArrayForEach(x, rs) {
            if (strcmp(jpath(x, "metadata", "annotations", EXT_RSV_ANN_UUID), uuid) != 0) continue;
            char *d = fake_kubelet_devices(r.kl, jpath(x, "metadata", "uid", NULL));
            if (d && !strcmp(d, uuid)) held = true;
            free(d);
        }
        if (!held && exact) snprintf(why, sizeof why, "share %s: ConfigMap names '%s', held by no reservation", name, uuid);
        exact &= held;
    }
    cJSON_Delete(rs);
    int doubles = r.kl ? fake_kubelet_double_holds(r.kl) : -1;
    if (getenv("RSV_BURST_INFO")) fprintf(stderr, "bound %d delivered %d unavailable %d refused %d admitted %d\n", bound, delivered, unavailable, fake_kubelet_refused(r.kl), fake_kubelet_admitted(r.kl));
    bool unit_once = no_unit_twice(&r);
    char cwhy[256] = "";
    bool consistent = r.ok && all_nodes_consistent(r.st, cwhy, sizeof cwhy);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(settled);
    CHECK_MSG(bound >= 2, "bound %d: %s / %s / %s", bound, bs.errs[0], bs.errs[1], bs.errs[5]);
    CHECK_INT(delivered + unavailable, bound);
    CHECK(delivered >= 1);
    CHECK_MSG(exact, "%s", why);
    CHECK_INT(doubles, 0);
    CHECK(unit_once);
    CHECK_MSG(consistent, "%s", cwhy);
}

/* ------------------------------------------------------------------ review of issue 11 */

/* The share's containers ran (an init container that finished counts too). The patch's resourceVersion. */
static long long mark_started(rt *r, const char *name, bool init_only) {
    return fake_api_patch(r->api, "pods", "default", name,
                   init_only ? "{\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"init\",\"state\":"
                               "{\"terminated\":{\"exitCode\":0}}}],\"containerStatuses\":[{\"name\":\"main\",\"state\":"
                               "{\"waiting\":{\"reason\":\"PodInitializing\"}}}]}}"
                             : "{\"status\":{\"phase\":\"Running\",\"containerStatuses\":[{\"name\":\"main\",\"state\":"
                               "{\"running\":{}}}]}}");
}

static bool node_has_reason(rt *r) {
    ext_state_lock(r->st);
    const ext_node *n = ext_state_node(r->st, "n1");
    bool y = n && n->m && n->m->reason[0];
    ext_state_unlock(r->st);
    return y;
}

/* Review 1: the device plugin restarts (a GPU-operator upgrade): allocatable nvidia.com/gpu is 0 for a while
 * and the node model has a reason and no GPUs. The running share still uses its GPU: its reservation is not
 * released, nothing is given up, and when the inventory comes back everything is as it was. */
TEST(ext_rsv_node_losing_its_gpu_inventory_keeps_the_reservations) {
    rt r;
    rt_start(&r, 1, true, 200);
    char err[512] = "?", name[256], before[64] = "", after[64] = "";
    rsv_name(0, 1, name, sizeof name);
    if (r.ok) bind_share(&r, "s1", 8000, true, true, err, sizeof err);
    bool cm = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    cm_uuid(&r, "s1", before, sizeof before);
    mark_started(&r, "s1", false);
    fake_api_patch(r.api, "nodes", NULL, "n1", "{\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"0\"}}}");
    bool reason = WAIT_FOR(node_has_reason(&r));
    test_nap_ms(4 * r.grace_ms);   /* four grace periods, and passes that saw them: a release would be due */
    settle(&r);
    bool kept = pod_exists(&r, RNS, name), share = pod_exists(&r, "default", "s1");
    int bad = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1") + count_events(&r, EXT_DLV_EV_LOST, "s1");
    put_node(r.api, 1);
    bool back = WAIT_FOR(!node_has_reason(&r));
    test_nap_ms(2 * r.grace_ms);
    settle(&r);
    bool kept2 = pod_exists(&r, RNS, name) && count_reservations(&r) == 1;
    cm_uuid(&r, "s1", after, sizeof after);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(cm);
    CHECK(reason);
    CHECK_MSG(kept, "the reservation of a running share was released while the node had no GPU inventory");
    CHECK(share);
    CHECK_INT(bad, 0);
    CHECK(back);
    CHECK(kept2);
    CHECK_STR(after, before);
}

/* Play a kubelet that refuses every reservation (with reserve_error: tessera-reserve reports that it cannot
 * tell its GPU) until the share is gone (or the test's patience ends). The number of reservations it saw. */
static int refuse_all(rt *r, const char *share, bool reserve_error) {
    int64_t end = test_now_ms() + TEST_PATIENCE_MS;
    int seen = 0;
    while (test_now_ms() < end && pod_exists(r, "default", share)) {
        cJSON *rs = reservations(r), *x;
        cJSON_ArrayForEach(x, rs) {
            if (!strcmp(jpath(x, "status", "phase", NULL), "Failed") ||
                jpath(x, "metadata", "annotations", EXT_RSV_ANN_ERROR)[0])
                continue;
            seen++;
            const char *n = jpath(x, "metadata", "name", NULL);
            if (reserve_error)
                fake_api_patch(r->api, "pods", RNS, n,
                               "{\"metadata\":{\"annotations\":{\"" EXT_RSV_ANN_ERROR "\":\"NVIDIA_VISIBLE_DEVICES names "
                               "device indexes, not UUIDs (deviceIDStrategy=index)\"}},\"status\":{\"phase\":\"Running\"}}");
            else
                refuse(r, n);
        }
        cJSON_Delete(rs);
        test_nap_ms(5);
    }
    return seen;
}

/* Review 2: tessera-reserve's reserve-error is the node's setup, the same on every GPU: no moves, the owned
 * share is given up at once (one Warning, deleted), one reservation tried in all. */
TEST(ext_rsv_reserve_error_gives_up_at_once) {
    rt r;
    rt_start(&r, 2, false, 30000);
    if (r.ok) put_bound_share(&r, "s1", 8000, 0, true, true);
    int seen = r.ok ? refuse_all(&r, "s1", true) : -1;
    bool deleted = !pod_exists(&r, "default", "s1");
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1") == 1);
    settle(&r);
    int unavail = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1"), refused = count_events(&r, EXT_DLV_EV_REFUSED, "s1");
    ext_rsv_stats st;
    ext_rsv_get_stats(r.rsv, &st);
    int left = count_reservations(&r);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_MSG(deleted, "the owned share was not given up (%d reservations tried)", seen);
    CHECK(warned);
    CHECK_INT(unavail, 1);
    CHECK_INT(refused, 0);
    CHECK_INT(seen, 1);
    CHECK_INT((int)st.ops[EXT_RSV_OP_CREATE][0], 1);
    CHECK_INT(left, 0);
}

/* Review 2: the kubelet refuses every reservation (the device plugin is down: UnexpectedAdmissionError). The
 * share is moved between the node's GPUs at most max_attempts (3) reservations in all, then given up: one
 * Warning, deleted. Before, the count was per GPU and tenants went GPU0 -> GPU1 -> GPU0... forever. */
TEST(ext_rsv_repeated_refusals_are_bounded_per_share) {
    rt r;
    rt_start(&r, 2, false, 30000);
    if (r.ok) put_bound_share(&r, "s1", 8000, 0, true, true);
    int seen = r.ok ? refuse_all(&r, "s1", false) : -1;
    bool deleted = !pod_exists(&r, "default", "s1");
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1") == 1);
    settle(&r);
    int unavail = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1");
    ext_rsv_stats st;
    ext_rsv_get_stats(r.rsv, &st);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_MSG(deleted, "the owned share was not given up (%d reservations tried)", seen);
    CHECK(warned);
    CHECK_INT(unavail, 1);
    CHECK_INT(seen, 3);
    CHECK_INT((int)st.ops[EXT_RSV_OP_CREATE][0], 3);
    CHECK_INT((int)st.ops[EXT_RSV_OP_MOVE][0], 2);
}

/* Review 3: a reservation deleted by hand under shares that already started (one only through its init
 * container). Their containers keep the old GPU; tessera does not re-home them: a Warning each, the owned
 * one deleted, the bare one left with its ConfigMap as it was, no new reservation for them. */
TEST(ext_rsv_lost_reservation_of_started_shares_warns_and_does_not_rehome) {
    rt r;
    rt_start(&r, 2, true, 30000);
    char err[512] = "?", err2[512] = "?", name[256], before[64] = "", after[64] = "";
    rsv_name(0, 1, name, sizeof name);
    if (r.ok) bind_share(&r, "own", 8000, true, true, err, sizeof err);
    if (r.ok) bind_share(&r, "bare", 8000, false, true, err2, sizeof err2);
    bool cms = r.ok && WAIT_FOR(has_cm(&r, "own") && has_cm(&r, "bare"));
    cm_uuid(&r, "bare", before, sizeof before);
    mark_started(&r, "own", false);
    seen(&r, mark_started(&r, "bare", true));   /* the controller knows they started */
    fake_api_delete(r.api, "pods", RNS, name);
    bool deleted = WAIT_FOR(!pod_exists(&r, "default", "own"));
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_LOST, "own") == 1 && count_events(&r, EXT_DLV_EV_LOST, "bare") == 1);
    settle(&r);
    int lost_bare = count_events(&r, EXT_DLV_EV_LOST, "bare");
    bool bare_left = pod_exists(&r, "default", "bare");
    cm_uuid(&r, "bare", after, sizeof after);
    int left = count_reservations(&r);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK_STR(err2, "");
    CHECK(cms);
    CHECK(deleted);
    CHECK(warned);
    CHECK_INT(lost_bare, 1);
    CHECK(bare_left);
    CHECK_STR(after, before);
    CHECK_INT(left, 0);
}

/* Review 6: a refused reservation's shares move onto a GPU that a tenant-less reservation still holds (its
 * grace period): it is reused, not skipped. Before, that GPU did not count and the share was given up. */
TEST(ext_rsv_move_reuses_a_reservation_in_its_grace_period) {
    rt r;
    rt_start(&r, 2, false, 30000);   /* the test plays the kubelet */
    char g0[256], g1[256], g1b[256], uuid[64] = "";
    rsv_name(0, 1, g0, sizeof g0);
    rsv_name(1, 1, g1, sizeof g1);
    rsv_name(1, 2, g1b, sizeof g1b);
    if (r.ok) put_bound_share(&r, "old", 8000, 1, false, true);
    bool held = r.ok && WAIT_FOR(pod_exists(&r, RNS, g1));
    report_uuid(&r, g1, "GPU-test-1");
    bool cm_old = WAIT_FOR(has_cm(&r, "old"));
    fake_api_delete(r.api, "pods", "default", "old");   /* GPU 1's reservation is now in its grace */
    bool grace = WAIT_FOR(rsv_state_is(&r, g1, "releasing"));
    put_bound_share(&r, "s1", 8000, 0, true, true);
    bool created = WAIT_FOR(pod_exists(&r, RNS, g0));
    refuse(&r, g0);
    bool cm = WAIT_FOR(has_cm(&r, "s1"));
    cm_uuid(&r, "s1", uuid, sizeof uuid);
    settle(&r);
    bool reused = pod_exists(&r, RNS, g1) && !pod_exists(&r, RNS, g1b);
    int unavail = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "s1");
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(held);
    CHECK(cm_old);
    CHECK(grace);
    CHECK(created);
    CHECK(cm);
    CHECK_STR(uuid, "GPU-test-1");
    CHECK(reused);
    CHECK_INT(unavail, 0);
}

/* Review 7: while a unit's reservation is terminating (the kubelet still counts its device), no new one is
 * made for it: it would be refused for nothing. When it is gone, the next attempt is admitted. */
TEST(ext_rsv_no_new_reservation_while_the_old_one_terminates) {
    rt r;
    rt_start(&r, 1, true, 30000);
    char err[512] = "?", first[256], second[256], uuid[64] = "";
    rsv_name(0, 1, first, sizeof first);
    rsv_name(0, 2, second, sizeof second);
    if (r.ok) bind_share(&r, "s1", 8000, true, true, err, sizeof err);
    bool cm = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    seen(&r, fake_api_patch(r.api, "pods", RNS, first, "{\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}"));
    bool waited = !pod_exists(&r, RNS, second);
    /* The kubelet stops the container and lets go of the device, then the pod object goes (that order). */
    fake_api_patch(r.api, "pods", RNS, first, "{\"status\":{\"phase\":\"Succeeded\"}}");
    WAIT_FOR(({
             char *h = fake_kubelet_holder(r.kl, "n1", "GPU-n1-0");
             bool f = h == NULL;
             free(h);
             f;
         }));
    fake_api_delete(r.api, "pods", RNS, first);
    bool made = WAIT_FOR(pod_exists(&r, RNS, second));
    bool delivered = WAIT_FOR(({
                              cm_uuid(&r, "s1", uuid, sizeof uuid);
                              cJSON *rs = reservations(&r);
                              const char *u = jpath(cJSON_GetArrayItem(rs, 0), "metadata", "annotations", EXT_RSV_ANN_UUID);
                              bool y = u[0] && !strcmp(u, uuid);
                              cJSON_Delete(rs);
                              y;
                          }));
    int refused = fake_kubelet_refused(r.kl);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(cm);
    CHECK_MSG(waited, "a new reservation was made while the old one was terminating");
    CHECK(made);
    CHECK(delivered);
    CHECK_INT(refused, 0);
}

/* Review 8: an owned share the webhook did not mutate is deleted (its replacement passes the webhook); a
 * bare one keeps its Warning (ext_rsv_share_without_webhook_gets_a_warning_once). */
TEST(ext_rsv_unmutated_owned_share_is_deleted) {
    rt r;
    rt_start(&r, 1, true, 30000);
    if (r.ok) put_bound_share(&r, "plain", 8000, 0, true, false);
    bool deleted = r.ok && WAIT_FOR(!pod_exists(&r, "default", "plain"));
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_NOT_MUTATED, "plain") == 1);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(deleted);
    CHECK(warned);
}

/* A ConfigMap already there under a share's delivery name, owned by another pod (a copied annotation). */
static void put_foreign_cm(rt *r, const char *share) {
    char cm[1024];
    snprintf(cm, sizeof cm, "{\"metadata\":{\"name\":\"" EXT_DLV_CM_PREFIX "%s\",\"namespace\":\"default\",\"labels\":"
                            "{\"" EXT_DLV_LABEL_DELIVERY "\":\"true\"},\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":"
                            "\"Pod\",\"name\":\"other\",\"uid\":\"uid-other\"}]},\"data\":{\"" EXT_DLV_ENV_VISIBLE "\":"
                            "\"GPU-of-other\"}}", share);
    fake_api_put(r->api, "configmaps", cm);
}

/* Review 9, the controller's side: a share whose delivery name is another pod's ConfigMap does not take it
 * over (its data and owner stay); a Warning, and the owned share is deleted. */
TEST(ext_rsv_never_takes_over_another_pods_configmap) {
    rt r;
    /* The test plays the kubelet, and starts no share: with their ConfigMaps there, a kubelet would start them,
     * maybe before the controller's first pass, and a share that runs with no reservation is judged as one whose
     * reservation went away (ext_rsv_lost_reservation_of_started_shares_warns_and_does_not_rehome). */
    rt_start(&r, 1, false, 30000);
    char g0[256];
    rsv_name(0, 1, g0, sizeof g0);
    if (r.ok) {
        put_foreign_cm(&r, "bare");
        put_foreign_cm(&r, "own");
        put_bound_share(&r, "bare", 4000, 0, false, true);
        put_bound_share(&r, "own", 4000, 0, true, true);
    }
    bool created = r.ok && WAIT_FOR(pod_exists(&r, RNS, g0));
    report_uuid(&r, g0, "GPU-test-0");
    bool warned = r.ok && WAIT_FOR(count_events(&r, EXT_DLV_EV_CONFLICT, "bare") == 1 &&
                                   count_events(&r, EXT_DLV_EV_CONFLICT, "own") == 1);
    bool deleted = WAIT_FOR(!pod_exists(&r, "default", "own"));
    settle(&r);
    cJSON *cm = cm_of(&r, "bare");
    char data[64], owner[64];
    snprintf(data, sizeof data, "%s", jpath(cm, "data", EXT_DLV_ENV_VISIBLE, NULL));
    const cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cm, "metadata"), "ownerReferences"), 0);
    snprintf(owner, sizeof owner, "%s", jpath(o, "uid", NULL, NULL));
    cJSON_Delete(cm);
    int n = count_events(&r, EXT_DLV_EV_CONFLICT, "bare");
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(created);
    CHECK(warned);
    CHECK(deleted);
    CHECK_STR(data, "GPU-of-other");
    CHECK_STR(owner, "uid-other");
    CHECK_INT(n, 1);
}

/* Review 11: a bare share given up (no GPU could be reserved) is tried again after the backoff, and gets its
 * GPU once one can be had; the Warning is not repeated. */
TEST(ext_rsv_given_up_bare_share_is_retried) {
    rt r;
    memset(&r, 0, sizeof r);
    rt_start(&r, 1, false, 30000);
    rt_down(&r);
    r.retry_ms = 200;
    rt_up(&r);
    char first[256], second[256], uuid[64] = "";
    rsv_name(0, 1, first, sizeof first);
    rsv_name(0, 2, second, sizeof second);
    if (r.ok) put_bound_share(&r, "bare", 8000, 0, false, true);
    /* deadlines, not sleeps: generous, since a loaded machine once took 3.2 s over a 3 s one */
    bool created = r.ok && WAIT_FOR(pod_exists(&r, RNS, first));
    refuse(&r, first);
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_UNAVAILABLE, "bare") == 1);
    bool retried = WAIT_FOR(pod_exists(&r, RNS, second));
    report_uuid(&r, second, "GPU-later");
    bool cm = WAIT_FOR(has_cm(&r, "bare"));
    cm_uuid(&r, "bare", uuid, sizeof uuid);
    int n = count_events(&r, EXT_DLV_EV_UNAVAILABLE, "bare");
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(created);
    CHECK(warned);
    CHECK(retried);
    CHECK(cm);
    CHECK_STR(uuid, "GPU-later");
    CHECK_INT(n, 1);
}

/* Review 12: a reservation whose container cannot start says why in the share's Pending Event and in
 * /debug/state, and after --reservation-timeout it counts as refused (here: the only GPU, so given up). The
 * timeout runs from the pod's creationTimestamp, so a restart does not reset it: the first controller (default
 * timeout, 5 minutes) says why, a second one with a 2 s timeout gives up, and never before the pod is that old. */
TEST(ext_rsv_stuck_reservation_says_why_and_times_out) {
    rt r;
    rt_start(&r, 1, false, 30000);
    char first[256], waiting[256] = "";
    rsv_name(0, 1, first, sizeof first);
    int64_t t_put = test_now_ms();
    if (r.ok) put_bound_share(&r, "s1", 8000, 0, true, true);
    bool created = r.ok && WAIT_FOR(pod_exists(&r, RNS, first));
    fake_api_patch(r.api, "pods", RNS, first,
                   "{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{\"name\":\"reserve\",\"state\":{\"waiting\":"
                   "{\"reason\":\"ImagePullBackOff\",\"message\":\"Back-off pulling image \\\"registry.example/tessera:test\\\"\"}}}]}}");
    bool said = WAIT_FOR(({
                         char *all = fake_api_events(r.api);
                         /* a pull that fails is a Warning at once, not only at --reservation-timeout */
                         bool y = all && strstr(all, "the kubelet cannot start reservation") &&
                                  strstr(all, ": ImagePullBackOff: Back-off pulling image") && strstr(all, "\"Warning\"");
                         free(all);
                         y;
                     }));
    ext_reply dbg = {0};
    WAIT_FOR(({
             ext_reply_free(&dbg);
             memset(&dbg, 0, sizeof dbg);
             ext_debug_state(&r.v, NULL, &dbg);
             dbg.body && strstr(dbg.body, "ImagePullBackOff");
         }));
    cJSON *dj = dbg.body ? cJSON_Parse(dbg.body) : NULL;
    ext_reply_free(&dbg);
    snprintf(waiting, sizeof waiting, "%s", jpath(cJSON_GetArrayItem(cJSON_GetObjectItem(dj, "reservations"), 0), "waiting", NULL, NULL));
    cJSON_Delete(dj);
    bool waits = pod_exists(&r, "default", "s1");
    rt_down(&r);
    r.timeout_ms = 2000;
    rt_up(&r);
    bool gave_up = r.ok && WAIT_FOR(!pod_exists(&r, "default", "s1"));
    /* creationTimestamp has whole seconds, so the pod may count as up to 1 s older than it is */
    int64_t took = test_now_ms() - t_put;
    bool why = WAIT_FOR(({
                        char *all = fake_api_events(r.api);
                        bool y = all && strstr(all, "no GPU UUID 2 s after its creation (its container waits: ImagePullBackOff");
                        free(all);
                        y;
                    }));
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(created);
    CHECK(said);
    CHECK_CONTAINS(waiting, "ImagePullBackOff: Back-off pulling image");
    CHECK_MSG(waits, "given up within the default 5-minute timeout");
    CHECK(gave_up);
    CHECK_MSG(took >= r.timeout_ms - 1000, "given up %lld ms after the share came, before the 2 s timeout",
              (long long)took);
    CHECK(why);
}

/* Review 13: a late watch event for a reservation tessera deleted (here after its DELETED) does not make it
 * live again: the next share on that GPU gets a new reservation, not the dead one's UUID. */
TEST(ext_rsv_late_event_does_not_revive_a_deleted_reservation) {
    rt r;
    rt_start(&r, 1, true, 200);
    char err[512] = "?", err2[512] = "?", first[256], olduid[128] = "", uuid[64] = "";
    rsv_name(0, 1, first, sizeof first);
    if (r.ok) bind_share(&r, "s1", 8000, false, true, err, sizeof err);
    bool cm = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    char *old = fake_api_get(r.api, "pods", RNS, first);
    cJSON *o = old ? cJSON_Parse(old) : NULL;
    free(old);
    snprintf(olduid, sizeof olduid, "%s", jpath(o, "metadata", "uid", NULL));
    fake_api_delete(r.api, "pods", "default", "s1");
    bool released = WAIT_FOR(!pod_exists(&r, RNS, first));
    bool forgotten = WAIT_FOR(({
                              ext_reply d = {0};
                              ext_debug_state(&r.v, NULL, &d);
                              bool y = d.body && !strstr(d.body, first);
                              ext_reply_free(&d);
                              y;
                          }));
    WAIT_FOR(({
             char *h = fake_kubelet_holder(r.kl, "n1", "GPU-n1-0");
             bool f = h == NULL;
             free(h);
             f;
         }));
    if (o) ext_rsv_on_event(r.rsv, KUBE_POD, KUBE_MODIFIED, o);   /* late, stale */
    cJSON_Delete(o);
    if (r.ok) bind_share(&r, "s2", 8000, false, true, err2, sizeof err2);
    bool made = WAIT_FOR(count_reservations(&r) == 1);
    bool cm2 = WAIT_FOR(has_cm(&r, "s2"));
    cm_uuid(&r, "s2", uuid, sizeof uuid);
    cJSON *rs = reservations(&r);
    const char *nu = jpath(cJSON_GetArrayItem(rs, 0), "metadata", "uid", NULL);
    bool fresh = nu[0] && strcmp(nu, olduid) != 0;
    char *held = fake_kubelet_devices(r.kl, nu);
    cJSON_Delete(rs);
    bool exact = held && !strcmp(held, uuid);
    free(held);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK_STR(err2, "");
    CHECK(cm);
    CHECK(released);
    CHECK(forgotten);
    CHECK_MSG(made, "no new reservation: the deleted one was taken as live");
    CHECK(fresh);
    CHECK(cm2);
    CHECK(exact);
}

/* A reservation pod as another replica (or a crash mid-create) left it: admitted, with uuid. */
static void put_rsv(rt *r, int gpu, int attempt, const char *uuid) {
    char name[256], p[2048];
    rsv_name(gpu, attempt, name, sizeof name);
    snprintf(p, sizeof p, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" RNS "\",\"uid\":\"uid-%s\",\"labels\":{\""
                          EXT_RSV_LABEL "\":\"true\"},\"annotations\":{\"" EXT_RSV_ANN_NODE "\":\"n1\",\"" EXT_RSV_ANN_GPU
                          "\":\"%d\",\"" EXT_RSV_ANN_UNIT "\":\"gpu\",\"" EXT_RSV_ANN_UUID "\":\"%s\"}},\"spec\":{\"nodeName\":"
                          "\"n1\",\"containers\":[{\"name\":\"reserve\",\"image\":\"x\",\"resources\":{\"limits\":{"
                          "\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}", name, name, gpu, uuid);
    fake_api_put(r->api, "pods", p);
}

/* Review 15: two live reservations for one unit; the started share's ConfigMap names the second one's
 * device. That one is kept (the container uses it) and the ConfigMap is left as it is. */
TEST(ext_rsv_duplicate_kept_is_the_one_the_started_share_uses) {
    rt r;
    memset(&r, 0, sizeof r);
    char err[256], a1[256], a2[256], uuid[64] = "";
    r.grace_ms = 30000;
    r.api = fake_api_start(0, err, sizeof err);
    rsv_name(0, 1, a1, sizeof a1);
    rsv_name(0, 2, a2, sizeof a2);
    if (r.api) {
        put_node(r.api, 2);
        put_rsv(&r, 0, 1, "GPU-a");
        put_rsv(&r, 0, 2, "GPU-b");
        put_bound_share(&r, "s1", 8000, 0, false, true);
        mark_started(&r, "s1", false);
        ext_delivery_unit du = {.uuid = "GPU-b", .memory_mib = 8000, .compute_permille = 98, .device_memory_mib = 81920};
        cJSON *data = ext_delivery_data(&du, 1, NULL);
        cJSON *cm = cJSON_CreateObject();
        cJSON *meta = cJSON_AddObjectToObject(cm, "metadata");
        cJSON_AddStringToObject(meta, "name", EXT_DLV_CM_PREFIX "s1");
        cJSON_AddStringToObject(meta, "namespace", "default");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "labels"), EXT_DLV_LABEL_DELIVERY, "true");
        cJSON *own = cJSON_CreateObject();
        cJSON_AddStringToObject(own, "kind", "Pod");
        cJSON_AddStringToObject(own, "name", "s1");
        cJSON_AddStringToObject(own, "uid", "uid-s1");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), own);
        cJSON_AddItemToObject(cm, "data", data);
        char *t = cJSON_PrintUnformatted(cm);
        fake_api_put(r.api, "configmaps", t);
        free(t);
        cJSON_Delete(cm);
        rt_up(&r);
    }
    bool one = r.ok && WAIT_FOR(count_reservations(&r) == 1);
    settle(&r);
    bool kept = pod_exists(&r, RNS, a2) && !pod_exists(&r, RNS, a1);
    cm_uuid(&r, "s1", uuid, sizeof uuid);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(one);
    CHECK_MSG(kept, "kept the reservation the running share does not use");
    CHECK_STR(uuid, "GPU-b");
}

/* Review 1, the other way a share's GPU stops decoding: the node's labels now say fewer GPUs (a relabel) while
 * a share runs on GPU 1. The reservation its assignment names stays; the node goes on working for others. */
TEST(ext_rsv_share_whose_gpu_left_the_labels_keeps_its_reservation) {
    rt r;
    rt_start(&r, 2, true, 200);
    char g1[256], g0[256];
    rsv_name(1, 1, g1, sizeof g1);
    rsv_name(0, 1, g0, sizeof g0);
    if (r.ok) put_bound_share(&r, "s1", 8000, 1, false, true);
    bool cm = r.ok && WAIT_FOR(has_cm(&r, "s1"));
    mark_started(&r, "s1", false);
    put_node(r.api, 1);
    bool shrunk = WAIT_FOR(({
                           ext_state_lock(r.st);
                           const ext_node *n = ext_state_node(r.st, "n1");
                           bool y = n && n->m && n->m->ngpus == 1 && !n->m->reason[0];
                           ext_state_unlock(r.st);
                           y;
                       }));
    test_nap_ms(4 * r.grace_ms);   /* four grace periods, and passes that saw them: a release would be due */
    settle(&r);
    bool kept = pod_exists(&r, RNS, g1);
    put_bound_share(&r, "s2", 8000, 0, false, true);   /* the node still serves others */
    bool other = WAIT_FOR(has_cm(&r, "s2") && pod_exists(&r, RNS, g0));
    rt_stop(&r);
    CHECK(r.ok);
    CHECK(cm);
    CHECK(shrunk);
    CHECK_MSG(kept, "the reservation of a running share was released when its GPU left the labels");
    CHECK(other);
}

/* ------------------------------------------------------------------ what enforces a share (issue 27) */

/* An MPS share's ConfigMap: the client's pipe and log directories (tessera-reserve's, when it published valid
 * ones), its thread percentage (the charged compute, rounded up, at least 1; a memory-only share's memory share) and
 * its pinned limit in NVIDIA's "<ordinal>=<limit>" syntax; and the enforcement line of every kind of unit. */
TEST(ext_delivery_mps_data_and_enforcement_lines) {
    ext_delivery_share mps = {.mps = true, .shim = true, .mps_mounts = true};
    ext_delivery_unit q = {.uuid = "GPU-8c0a", .memory_mib = 20480, .compute_permille = 250, .device_memory_mib = 81920};
    cJSON *d = ext_delivery_data(&q, 1, &mps);
    char pipe[128], logd[128], thr[16], pin[32], enf[256];
    snprintf(pipe, sizeof pipe, "%s", jpath(d, EXT_DLV_ENV_MPS_PIPE, NULL, NULL));
    snprintf(logd, sizeof logd, "%s", jpath(d, EXT_DLV_ENV_MPS_LOG, NULL, NULL));
    snprintf(thr, sizeof thr, "%s", jpath(d, EXT_DLV_ENV_MPS_THREADS, NULL, NULL));
    snprintf(pin, sizeof pin, "%s", jpath(d, EXT_DLV_ENV_MPS_PINNED, NULL, NULL));
    snprintf(enf, sizeof enf, "%s", jpath(d, EXT_DLV_ENV_ENFORCEMENT, NULL, NULL));
    cJSON_Delete(d);
    CHECK_STR(pipe, "/run/tessera/mps/GPU-8c0a/pipe");
    CHECK_STR(logd, "/run/tessera/mps/GPU-8c0a/log");
    CHECK_STR(thr, "25");
    CHECK_STR(pin, "0=20480M");
    CHECK_STR(enf, "memory=mps-pinned-limit+libtessera-cuda compute=mps-active-threads");
    /* memory only (gpumem 20000 of 81920): charged 24.4 percent of the GPU -> 25 threads; a tiny compute -> 1 */
    ext_delivery_unit m = {.uuid = "GPU-8c0a", .memory_mib = 20000, .compute_permille = 0, .device_memory_mib = 81920};
    d = ext_delivery_data(&m, 1, &mps);
    snprintf(thr, sizeof thr, "%s", jpath(d, EXT_DLV_ENV_MPS_THREADS, NULL, NULL));
    cJSON_Delete(d);
    CHECK_STR(thr, "25");
    ext_delivery_unit t = {.uuid = "GPU-8c0a", .memory_mib = 100, .compute_permille = 1, .device_memory_mib = 81920};
    d = ext_delivery_data(&t, 1, &mps);
    snprintf(thr, sizeof thr, "%s", jpath(d, EXT_DLV_ENV_MPS_THREADS, NULL, NULL));
    cJSON_Delete(d);
    CHECK_STR(thr, "1");
    /* the directories tessera-reserve --mps published, when a share pod can reach them */
    ext_delivery_unit a = q;
    a.mps_pipe = "/run/tessera/mps/GPU-8c0a/pipe-2";
    a.mps_log = "/run/tessera/mps/../../etc";
    d = ext_delivery_data(&a, 1, &mps);
    snprintf(pipe, sizeof pipe, "%s", jpath(d, EXT_DLV_ENV_MPS_PIPE, NULL, NULL));
    snprintf(logd, sizeof logd, "%s", jpath(d, EXT_DLV_ENV_MPS_LOG, NULL, NULL));
    cJSON_Delete(d);
    CHECK_STR(pipe, "/run/tessera/mps/GPU-8c0a/pipe-2");
    CHECK_STR(logd, "/run/tessera/mps/GPU-8c0a/log");
    /* a time-sliced share has no CUDA_MPS_*; an MPS client talks to one daemon: never two units */
    d = ext_delivery_data(&q, 1, NULL);
    bool no_mps = d && !cJSON_GetObjectItem(d, EXT_DLV_ENV_MPS_THREADS) && !cJSON_GetObjectItem(d, EXT_DLV_ENV_MPS_PIPE);
    cJSON_Delete(d);
    CHECK(no_mps);
    ext_delivery_unit two[2] = {q, q};
    CHECK(ext_delivery_data(two, 2, &mps) == NULL);
    /* the enforcement line of each kind of unit and pod */
    static const struct { ext_delivery_unit u; ext_delivery_share s; const char *want; } lines[] = {
        {{.uuid = "g"}, {.shim = true}, "memory=libtessera-cuda compute=time-slicing (not capped)"},
        {{.uuid = "g"}, {.shim = false}, "memory=not enforced (the pod has no tessera-cuda-shim init container: it was "
                                         "admitted by a tessera without it; re-create it) compute=time-slicing (not capped)"},
        {{.uuid = "MIG-1", .mig = true}, {.shim = true}, "memory=mig-instance+libtessera-cuda compute=mig-instance"},
        {{.uuid = "MIG-1", .mig = true, .replica = true}, {.shim = true},
         "memory=mig-instance+libtessera-cuda compute=time-slicing within the mig-instance (not capped)"},
        {{.uuid = "g", .replica = true}, {.shim = true}, "memory=libtessera-cuda compute=time-slicing (not capped)"},
        {{.uuid = "g"}, {.mps = true, .shim = true, .mps_mounts = false},
         "memory=libtessera-cuda compute=not capped (the pod has no MPS volumes: it was admitted by a tessera without "
         "them; re-create it)"},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char line[600];
        ext_delivery_enforcement(&lines[i].u, 1, &lines[i].s, line, sizeof line);
        CHECK_STR(line, lines[i].want);
        CHECK_MSG(!strchr(line, '%'), "a '%%' in %s", line);
    }
}

/* The type and message of the last Event reason on pod ("" when none). */
static void event_of(rt *r, const char *reason, const char *pod, char *type, size_t tlen, char *msg, size_t mlen) {
    char *all = fake_api_events(r->api);
    cJSON *arr = cJSON_Parse(all), *e;
    free(all);
    type[0] = msg[0] = 0;
    cJSON_ArrayForEach(e, arr) if (!strcmp(jpath(e, "reason", NULL, NULL), reason) &&
                                   !strcmp(jpath(e, "involvedObject", "name", NULL), pod)) {
        snprintf(type, tlen, "%s", jpath(e, "type", NULL, NULL));
        snprintf(msg, mlen, "%s", jpath(e, "message", NULL, NULL));
    }
    cJSON_Delete(arr);
}

/* /debug/state's entry of share pod (default/name) in "shares", as text "state|enforcement|problem". */
static void debug_share(rt *r, const char *name, char *buf, size_t len) {
    cJSON *o = cJSON_CreateObject(), *x;
    ext_rsv_debug(r->rsv, o);
    char pod[128];
    snprintf(pod, sizeof pod, "default/%s", name);
    buf[0] = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(o, "shares")) if (!strcmp(jpath(x, "pod", NULL, NULL), pod))
        snprintf(buf, len, "%s|%s|%s", jpath(x, "state", NULL, NULL), jpath(x, "enforcement", NULL, NULL),
                 jpath(x, "problem", NULL, NULL));
    cJSON_Delete(o);
}

/* A share as an older tessera's webhook left it: the delivery ConfigMap wired in, no interposer. */
static char *share_without_shim(const char *name, int mib) {
    char *t = share_json(name, mib, false, true, NULL);
    cJSON *p = cJSON_Parse(t);
    free(t);
    cJSON *spec = cJSON_GetObjectItem(p, "spec");
    cJSON_DeleteItemFromObject(spec, "initContainers");
    cJSON_DeleteItemFromObject(spec, "volumes");
    cJSON_DeleteItemFromObject(cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0), "volumeMounts");
    t = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    return t;
}

/* The ConfigMap, the TesseraGPUDelivered Event and /debug/state say what enforces each share: the interposer for a
 * share the webhook gave it; "not enforced", as a Warning, for one admitted without it. */
TEST(ext_rsv_delivery_says_what_enforces_each_share) {
    rt r;
    rt_start(&r, 2, true, 30000);
    char err[512] = "?", err2[512] = "?";
    if (r.ok) {
        bind_share(&r, "s1", 8000, false, true, err, sizeof err);
        bind_share_text(&r, "old", share_without_shim("old", 8000), err2, sizeof err2);
    }
    bool cms = r.ok && WAIT_FOR(has_cm(&r, "s1") && has_cm(&r, "old"));
    bool evs = WAIT_FOR(count_events(&r, EXT_DLV_EV_DELIVERED, "s1") == 1 && count_events(&r, EXT_DLV_EV_DELIVERED, "old") == 1);
    cJSON *c1 = cm_of(&r, "s1"), *c2 = cm_of(&r, "old");
    char enf1[256], enf2[512], t1[32], m1[1024], t2[32], m2[1024], d1[1024] = "", d2[1024] = "";
    snprintf(enf1, sizeof enf1, "%s", jpath(c1, "data", EXT_DLV_ENV_ENFORCEMENT, NULL));
    snprintf(enf2, sizeof enf2, "%s", jpath(c2, "data", EXT_DLV_ENV_ENFORCEMENT, NULL));
    cJSON_Delete(c1);
    cJSON_Delete(c2);
    event_of(&r, EXT_DLV_EV_DELIVERED, "s1", t1, sizeof t1, m1, sizeof m1);
    event_of(&r, EXT_DLV_EV_DELIVERED, "old", t2, sizeof t2, m2, sizeof m2);
    WAIT_FOR((debug_share(&r, "old", d2, sizeof d2), !strncmp(d2, "delivered|", 10)));
    debug_share(&r, "s1", d1, sizeof d1);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK_STR(err2, "");
    CHECK(cms);
    CHECK(evs);
    CHECK_STR(enf1, "memory=libtessera-cuda compute=time-slicing (not capped)");
    CHECK_STR(t1, "Normal");
    CHECK_CONTAINS(m1, "enforced by: memory=libtessera-cuda compute=time-slicing (not capped)");
    CHECK_STR(d1, "delivered|memory=libtessera-cuda compute=time-slicing (not capped)|");
    CHECK_CONTAINS(enf2, "memory=not enforced (the pod has no tessera-cuda-shim init container");
    CHECK_STR(t2, "Warning");
    CHECK_CONTAINS(m2, "memory=not enforced");
    CHECK_CONTAINS(d2, "re-create the pod");
}

/* The share's tessera-cuda-shim runs as soon as the pod is admitted, before the ConfigMap exists: that does not make
 * the share "started" (it still moves when its reservation is refused). When the shim fails, a Warning says why,
 * once per cause (not per retry of the crash loop), and /debug/state shows it. */
TEST(ext_rsv_shim_container_neither_pins_a_share_nor_fails_quietly) {
    rt r;
    char err[512] = "?", first[256], second[256];
    bool created = one_share_two_gpus(&r, err, sizeof err, first, second);
    seen(&r, fake_api_patch(r.api, "pods", "default", "s1",
                   "{\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":[{\"name\":\"" EXT_DLV_SHIM_CONTAINER "\","
                   "\"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\"}}}],\"containerStatuses\":[{\"name\":"
                   "\"main\",\"state\":{\"waiting\":{\"reason\":\"CreateContainerConfigError\"}}}]}}"));   /* known to the controller */
    refuse(&r, first);
    bool moved = WAIT_FOR(pod_exists(&r, RNS, second) && !pod_exists(&r, RNS, first));
    /* the installer fails, and goes on failing in a crash loop */
    static const char *const loop[] = {
        "{\"status\":{\"initContainerStatuses\":[{\"name\":\"" EXT_DLV_SHIM_CONTAINER "\",\"restartCount\":1,\"state\":"
        "{\"waiting\":{\"reason\":\"CrashLoopBackOff\",\"message\":\"back-off 10s restarting failed container\"}},"
        "\"lastState\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\",\"message\":\"tessera-reserve: --install-shim: "
        "cannot write /opt/tessera/lib: Read-only file system\"}}}]}}",
        "{\"status\":{\"initContainerStatuses\":[{\"name\":\"" EXT_DLV_SHIM_CONTAINER "\",\"restartCount\":2,\"state\":"
        "{\"running\":{}},\"lastState\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\",\"message\":\"tessera-reserve: "
        "--install-shim: cannot write /opt/tessera/lib: Read-only file system\"}}}]}}",
    };
    fake_api_patch(r.api, "pods", "default", "s1", loop[0]);
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_ENFORCEMENT, "s1") == 1);
    seen(&r, fake_api_patch(r.api, "pods", "default", "s1", loop[1]));   /* the retry: no second Warning */
    int nwarn = count_events(&r, EXT_DLV_EV_ENFORCEMENT, "s1");
    char t[32], m[1400], d[1400];
    event_of(&r, EXT_DLV_EV_ENFORCEMENT, "s1", t, sizeof t, m, sizeof m);
    debug_share(&r, "s1", d, sizeof d);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(created);
    CHECK_MSG(moved, "a share whose only finished container is tessera-cuda-shim did not move");
    CHECK(warned);
    CHECK_INT(nwarn, 1);
    CHECK_STR(t, "Warning");
    CHECK_CONTAINS(m, "Read-only file system");
    CHECK_CONTAINS(m, "do not start");
    CHECK_MSG(!strncmp(d, "failed|", 7), "%s", d);
    CHECK_CONTAINS(d, "init container tessera-cuda-shim: exit code 1");
}

/* ------------------------------------------------------------------ MPS reservations (issue 27) */

#define MNS EXT_RSV_DEFAULT_MPS_NS

/* A share as the webhook leaves one that asks tessera.io/compute-sharing: mps and runs as uid: share_json's t
 * (taken), with the annotation, the pod's runAsUser and the daemon's two host directories on its container. */
static char *mps_share_from(char *t, int uid) {
    cJSON *p = cJSON_Parse(t);
    free(t);
    cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"),
                            "tessera.io/compute-sharing", "mps");
    cJSON *spec = cJSON_GetObjectItem(p, "spec");
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(spec, "securityContext"), "runAsUser", uid);
    cJSON *mounts = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "containers"), 0), "volumeMounts");
    static const char *const v[2][3] = {{EXT_DLV_MPS_VOLUME, EXT_DLV_MPS_ROOT, EXT_DLV_MPS_ROOT},
                                        {EXT_DLV_MPS_SHM_VOLUME, EXT_DLV_MPS_SHM, EXT_DLV_DEV_SHM}};
    for (int i = 0; i < 2; i++) {
        cJSON *vol = cJSON_CreateObject();
        cJSON_AddStringToObject(vol, "name", v[i][0]);
        cJSON *hp = cJSON_AddObjectToObject(vol, "hostPath");
        cJSON_AddStringToObject(hp, "path", v[i][1]);
        cJSON_AddStringToObject(hp, "type", "Directory");
        cJSON_AddItemToArray(cJSON_GetObjectItem(spec, "volumes"), vol);
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "name", v[i][0]);
        cJSON_AddStringToObject(m, "mountPath", v[i][2]);
        cJSON_AddItemToArray(mounts, m);
    }
    t = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    return t;
}

static char *mps_share_json(const char *name, int mib, int uid) {
    char *t = share_json(name, mib, false, true, NULL);
    return mps_share_from(t, uid);
}

/* The same for a share a controller owns (a ReplicaSet's): tessera would delete it to have it re-created. */
static char *mps_owned_share_json(const char *name, int mib, int uid) {
    return mps_share_from(share_json(name, mib, true, true, NULL), uid);
}

/* Reservation pods (labelled) in namespace ns. */
static int count_in(rt *r, const char *ns) {
    char *all = fake_api_list(r->api, "pods");
    cJSON *arr = cJSON_Parse(all), *it;
    free(all);
    int n = 0;
    cJSON_ArrayForEach(it, arr) n += !strcmp(jpath(it, "metadata", "labels", EXT_RSV_LABEL), "true") &&
                                     !strcmp(jpath(it, "metadata", "namespace", NULL), ns);
    cJSON_Delete(arr);
    return n;
}

/* The reservation pod ns/name (caller deletes), or NULL. */
static cJSON *rsv_pod(rt *r, const char *ns, const char *name) {
    char *t = fake_api_get(r->api, "pods", ns, name);
    cJSON *o = t ? cJSON_Parse(t) : NULL;
    free(t);
    return o;
}

/* The GPU of an MPS share is reserved by a pod in tessera-node that runs tessera-reserve --mps as root with only the
 * capabilities its daemon needs and the node's MPS directories; the share's ConfigMap makes it that daemon's client
 * with its limits, and the Event says the driver caps its SMs. */
TEST(ext_rsv_mps_share_is_served_by_an_mps_reservation_in_tessera_node) {
    rt r;
    rt_start(&r, 2, true, 30000);
    char err[512] = "?", name[256];
    rsv_name(0, 1, name, sizeof name);
    if (r.ok) bind_share_text(&r, "m1", mps_share_json("m1", 20480, 1000), err, sizeof err);
    bool made = r.ok && WAIT_FOR(pod_exists(&r, MNS, name));
    bool none_plain = !pod_exists(&r, RNS, name);
    cJSON *rp = rsv_pod(&r, MNS, name);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rp, "spec"), "containers"), 0);
    char body[2048] = "";
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(c0, "command"))
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s ", x->valuestring);
    const cJSON *sc = cJSON_GetObjectItem(c0, "securityContext");
    char *caps = cJSON_PrintUnformatted(cJSON_GetObjectItem(sc, "capabilities"));
    snprintf(body + strlen(body), sizeof body - strlen(body), "| uid %d nonroot %d esc %d ro %d | %s |",
             cJSON_GetObjectItem(sc, "runAsUser") ? cJSON_GetObjectItem(sc, "runAsUser")->valueint : -1,
             cJSON_IsTrue(cJSON_GetObjectItem(sc, "runAsNonRoot")), cJSON_IsTrue(cJSON_GetObjectItem(sc, "allowPrivilegeEscalation")),
             cJSON_IsTrue(cJSON_GetObjectItem(sc, "readOnlyRootFilesystem")), caps ? caps : "");
    free(caps);
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(c0, "volumeMounts")) {
        const char *vn = jpath(x, "name", NULL, NULL);
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(cJSON_GetObjectItem(rp, "spec"), "volumes"))
            if (!strcmp(jpath(v, "name", NULL, NULL), vn))
                snprintf(body + strlen(body), sizeof body - strlen(body), " %s:%s", jpath(v, "hostPath", "path", NULL),
                         jpath(x, "mountPath", NULL, NULL));
    }
    char mps_ann[16], sa[64];
    snprintf(mps_ann, sizeof mps_ann, "%s", jpath(rp, "metadata", "annotations", EXT_RSV_ANN_MPS));
    snprintf(sa, sizeof sa, "%s", jpath(rp, "spec", "serviceAccountName", NULL));
    cJSON_Delete(rp);
    bool cm = WAIT_FOR(has_cm(&r, "m1"));
    cJSON *o = cm_of(&r, "m1");
    char uuid[64], pipe[128], thr[16], pin[32], enf[256], want_pipe[160];
    snprintf(uuid, sizeof uuid, "%s", jpath(o, "data", EXT_DLV_ENV_UUID, NULL));
    snprintf(pipe, sizeof pipe, "%s", jpath(o, "data", EXT_DLV_ENV_MPS_PIPE, NULL));
    snprintf(thr, sizeof thr, "%s", jpath(o, "data", EXT_DLV_ENV_MPS_THREADS, NULL));
    snprintf(pin, sizeof pin, "%s", jpath(o, "data", EXT_DLV_ENV_MPS_PINNED, NULL));
    snprintf(enf, sizeof enf, "%s", jpath(o, "data", EXT_DLV_ENV_ENFORCEMENT, NULL));
    cJSON_Delete(o);
    snprintf(want_pipe, sizeof want_pipe, "/run/tessera/mps/%s/pipe", uuid);
    bool ev = WAIT_FOR(count_events(&r, EXT_DLV_EV_DELIVERED, "m1") == 1);
    char t[32], m[1024], d[1024];
    event_of(&r, EXT_DLV_EV_DELIVERED, "m1", t, sizeof t, m, sizeof m);
    debug_share(&r, "m1", d, sizeof d);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(made);
    CHECK(none_plain);
    CHECK_STR(mps_ann, "true");
    CHECK_STR(sa, EXT_RSV_SERVICE_ACCOUNT);
    CHECK_STR(body, "/usr/local/bin/tessera-reserve --mps --mps-root=/run/tessera/mps | uid 0 nonroot 0 esc 0 ro 1 | "
                    "{\"drop\":[\"ALL\"],\"add\":[\"CHOWN\",\"DAC_OVERRIDE\",\"FOWNER\",\"KILL\",\"SETGID\",\"SETUID\"]} |"
                    " /run/tessera/mps:/run/tessera/mps /run/tessera/mps/shm:/dev/shm");
    CHECK(cm);
    CHECK_STR(pipe, want_pipe);
    CHECK_STR(thr, "25");   /* 20480 of 81920 MiB, memory only: charged its memory's share of the SMs */
    CHECK_STR(pin, "0=20480M");
    CHECK_STR(enf, "memory=mps-pinned-limit+libtessera-cuda compute=mps-active-threads");
    CHECK(ev);
    CHECK_STR(t, "Normal");
    CHECK_CONTAINS(m, "compute=mps-active-threads");
    CHECK_MSG(!strncmp(d, "delivered|memory=mps-pinned-limit", 33), "%s", d);
}

/* A reservation kept in its grace period serves only shares of its own mode: the GPU's last MPS share leaves, a
 * time-sliced share lands on that GPU, and the MPS reservation goes before a plain one is made for it (the share
 * is never handed the MPS daemon's GPU without its reservation being of its kind). */
TEST(ext_rsv_reservation_in_its_grace_serves_only_its_own_mode) {
    rt r;
    rt_start(&r, 1, true, 30000);
    char err[512] = "?", err2[512] = "?", first[256];
    rsv_name(0, 1, first, sizeof first);
    if (r.ok) bind_share_text(&r, "m1", mps_share_json("m1", 20480, 1000), err, sizeof err);
    bool mps_ready = r.ok && WAIT_FOR(has_cm(&r, "m1"));
    fake_api_delete(r.api, "pods", "default", "m1");
    bool idle = WAIT_FOR(({
                         ext_state_lock(r.st);
                         const ext_node *n = ext_state_node(r.st, "n1");
                         bool y = n && n->m && model_gpu_idle(&n->m->gpus[0]);
                         ext_state_unlock(r.st);
                         y;
                     }));
    bool kept = idle && pod_exists(&r, MNS, first);   /* its grace period */
    if (kept) bind_share(&r, "t1", 8000, false, true, err2, sizeof err2);
    bool replaced = kept && WAIT_FOR(count_in(&r, MNS) == 0 && count_in(&r, RNS) == 1);
    bool cm = WAIT_FOR(has_cm(&r, "t1"));
    cJSON *o = cm_of(&r, "t1");
    bool plain = o && !cJSON_GetObjectItem(cJSON_GetObjectItem(o, "data"), EXT_DLV_ENV_MPS_PIPE);
    cJSON_Delete(o);
    int doubles = fake_kubelet_double_holds(r.kl);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(mps_ready);
    CHECK(idle);
    CHECK_MSG(kept, "the MPS reservation did not wait out its grace period");
    CHECK_STR(err2, "");
    CHECK_MSG(replaced, "the time-sliced share was not given a reservation of its own kind");
    CHECK(cm);
    CHECK(plain);
    CHECK_INT(doubles, 0);
}

/* An MPS reservation whose daemon does not start (tessera.io/reserve-error with the daemon's last log lines) is
 * treated like a reservation the kubelet refused: deleted, so its GPU is free again, and its waiting share moves to
 * another GPU of the node, with a Warning that quotes the daemon. */
TEST(ext_rsv_mps_daemon_that_fails_frees_the_gpu_and_moves_the_share) {
    rt r;
    rt_start(&r, 2, false, 30000);   /* the test plays the kubelet */
    char err[512] = "?", first[256], second[256];
    rsv_name(0, 1, first, sizeof first);
    rsv_name(1, 1, second, sizeof second);
    if (r.ok) bind_share_text(&r, "m1", mps_share_json("m1", 20480, 1000), err, sizeof err);
    bool made = r.ok && WAIT_FOR(pod_exists(&r, MNS, first));
    fake_api_patch(r.api, "pods", MNS, first,
                   "{\"metadata\":{\"annotations\":{\"" EXT_RSV_ANN_ERROR "\":\"nvidia-cuda-mps-control exited with status 1: "
                   "[2026-12-04 15:00:00.000 Control 42] Failed to start: the GPU is in exclusive-process mode\"}},"
                   "\"status\":{\"phase\":\"Running\"}}");
    bool moved = WAIT_FOR(!pod_exists(&r, MNS, first) && pod_exists(&r, MNS, second));
    int gpu = assigned_gpu(&r, "m1");
    /* The Event is posted by the events queue, after the move: wait for it. */
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_REFUSED, "m1") >= 1);
    char t[32], m[2048];
    event_of(&r, EXT_DLV_EV_REFUSED, "m1", t, sizeof t, m, sizeof m);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(made);
    CHECK_MSG(moved, "the share did not move off the GPU whose daemon failed");
    CHECK_INT(gpu, 1);
    CHECK_MSG(warned, "no TesseraGPURefused Event on the share that moved");
    CHECK_STR(t, "Warning");
    CHECK_CONTAINS(m, "exclusive-process mode");
}

/* The MPS daemon of a reservation dies for good under a share that already runs (tessera-reserve --mps spent its
 * restarts: tessera.io/reserve-error beside the UUID it keeps, the pod still Running, so the kubelet still holds the
 * device). The reservation is not deleted (the GPU stays held while the share uses it), the share, though a
 * controller owns it, is neither deleted nor told its GPU is lost: it gets one TesseraGPUEnforcementFailed Warning
 * that quotes the daemon. Once the share ends, the reservation goes. */
TEST(ext_rsv_mps_daemon_dead_under_a_started_share_keeps_the_reservation) {
    rt r;
    rt_start(&r, 2, false, 30000);   /* the test plays the kubelet */
    char err[512] = "?", first[256], second[256];
    rsv_name(0, 1, first, sizeof first);
    rsv_name(1, 1, second, sizeof second);
    if (r.ok) bind_share_text(&r, "m1", mps_owned_share_json("m1", 20480, 1000), err, sizeof err);
    bool made = r.ok && WAIT_FOR(pod_exists(&r, MNS, first));
    fake_api_patch(r.api, "pods", MNS, first,
                   "{\"metadata\":{\"annotations\":{\"" EXT_RSV_ANN_UUID "\":\"GPU-n1-0\",\"" EXT_RSV_ANN_MPS_PIPE
                   "\":\"/run/tessera/mps/GPU-n1-0/pipe\",\"" EXT_RSV_ANN_MPS_LOG "\":\"/run/tessera/mps/GPU-n1-0/log\"}},"
                   "\"status\":{\"phase\":\"Running\"}}");
    bool delivered = WAIT_FOR(has_cm(&r, "m1"));
    seen(&r, mark_started(&r, "m1", false));
    /* what tessera-reserve publishes when its restarts are spent: the error, the UUID kept, the directories gone */
    long long rv = fake_api_patch(r.api, "pods", MNS, first,
                   "{\"metadata\":{\"annotations\":{\"" EXT_RSV_ANN_ERROR "\":\"the MPS control daemon of GPU GPU-n1-0 "
                   "(pid 4242) was killed by signal 9 (Killed): the MPS shares of this GPU lost their server; control.log: "
                   "[2026-12-04 15:00:00.000 Control 4242] Accepting connection (restarted 5 times in a row, at most 5: "
                   "given up)\",\"" EXT_RSV_ANN_MPS_PIPE "\":null,\"" EXT_RSV_ANN_MPS_LOG "\":null}}}");
    bool warned = WAIT_FOR(count_events(&r, EXT_DLV_EV_ENFORCEMENT, "m1") >= 1);
    seen(&r, rv);
    settle(&r);
    bool kept = pod_exists(&r, MNS, first), share_kept = pod_exists(&r, "default", "m1");
    bool no_other = !pod_exists(&r, MNS, second) && count_in(&r, MNS) == 1;
    int gpu = assigned_gpu(&r, "m1"), warnings = count_events(&r, EXT_DLV_EV_ENFORCEMENT, "m1");
    int lost = count_events(&r, EXT_DLV_EV_LOST, "m1");
    bool refused_view = rsv_state_is(&r, first, "refused");
    char t[32], m[2048], d[1024];
    event_of(&r, EXT_DLV_EV_ENFORCEMENT, "m1", t, sizeof t, m, sizeof m);
    debug_share(&r, "m1", d, sizeof d);
    /* the share ends: nothing uses the GPU any more, the reservation goes */
    fake_api_delete(r.api, "pods", "default", "m1");
    bool released = WAIT_FOR(!pod_exists(&r, MNS, first));
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(made);
    CHECK(delivered);
    CHECK_MSG(warned, "no %s Warning for the started share", EXT_DLV_EV_ENFORCEMENT);
    CHECK_MSG(kept, "the reservation whose daemon died was deleted while its share runs: its GPU is no longer held");
    CHECK_MSG(share_kept, "the started share was deleted");
    CHECK(no_other);
    CHECK_INT(gpu, 0);
    CHECK_INT(warnings, 1);
    CHECK_INT(lost, 0);
    CHECK(refused_view);
    CHECK_STR(t, "Warning");
    CHECK_CONTAINS(m, "the MPS control daemon of GPU 0 on node n1 failed (reservation " MNS "/");
    CHECK_CONTAINS(m, "was killed by signal 9");
    CHECK_CONTAINS(m, "compute is not capped");
    CHECK_CONTAINS(m, "the GPU stays held for this pod until it ends");
    CHECK_MSG(!strncmp(d, "failed|", 7) && strstr(d, "MPS control daemon"), "%s", d);
    CHECK_MSG(released, "the reservation stayed after its last share ended");
}

/* An API answer that arrives after the watch showed a later state of the same pod (a create's answer processed after
 * the watch's MODIFIED that carried the UUID, with a fake kubelet that publishes at once) must not overwrite it: the
 * watch does not tell that state again, and the share would wait for a UUID the table had lost. */
TEST(ext_rsv_an_older_state_never_overwrites_a_newer_one) {
    rt r;
    rt_start(&r, 1, false, 30000);
    char name[256];
    rsv_name(0, 1, name, sizeof name);
    char newer[1024], older[1024];
    static const char *const fmt =
        "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"" RNS "\",\"uid\":\"uid-r1\",\"resourceVersion\":\"%s\","
        "\"labels\":{\"" EXT_RSV_LABEL "\":\"true\"},\"annotations\":{\"" EXT_RSV_ANN_NODE "\":\"n1\",\"" EXT_RSV_ANN_GPU
        "\":\"0\",\"" EXT_RSV_ANN_UNIT "\":\"gpu\"%s}},\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"%s\"}}";
    snprintf(newer, sizeof newer, fmt, name, "120", ",\"" EXT_RSV_ANN_UUID "\":\"GPU-n1-0\"", "Running");
    snprintf(older, sizeof older, fmt, name, "100", "", "Pending");
    cJSON *n = cJSON_Parse(newer), *o = cJSON_Parse(older);
    if (r.ok) {
        ext_rsv_on_event(r.rsv, KUBE_POD, KUBE_MODIFIED, n);
        ext_rsv_on_event(r.rsv, KUBE_POD, KUBE_MODIFIED, o);
    }
    char uuid[64] = "";
    WAIT_FOR(({
             cJSON *d = cJSON_CreateObject();
             ext_rsv_debug(r.rsv, d);
             snprintf(uuid, sizeof uuid, "%s", jpath(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "reservations"), 0), "uuid",
                                                    NULL, NULL));
             cJSON_Delete(d);
             uuid[0] != 0;
         }));
    cJSON_Delete(n);
    cJSON_Delete(o);
    rt_stop(&r);
    CHECK(r.ok);
    CHECK_STR(uuid, "GPU-n1-0");
}
