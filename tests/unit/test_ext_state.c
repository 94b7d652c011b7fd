/* test_ext_state.c -- the cache fed as the watch feeds it (ext_state_on_event): readiness,
 * pods placed by other schedulers, our annotation honoured, node updates that over-commit,
 * finished and deleted pods, relist mark and sweep, bind assumptions and their expiry.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/base/annotation.h"

static ext_state *cluster_state(int ttl_ms) {
    ext_state_config cfg = {.standalone = false, .assume_ttl_ms = ttl_ms};
    return ext_state_new(&cfg);
}

static void ev(ext_state *st, kube_kind k, kube_event e, const char *json) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    ext_state_on_event(st, k, e, o);
    cJSON_Delete(o);
}

static void ev_node(ext_state *st, kube_event e, cJSON *node) {
    ext_state_on_event(st, KUBE_NODE, e, node);
    cJSON_Delete(node);
}

static void ev_pod(ext_state *st, kube_event e, char *pod) {
    ev(st, KUBE_POD, e, pod);
    free(pod);
}

/* The A100 node with gpu.count / allocatable changed to n GPUs. */
static cJSON *a100_with(const char *name, int n) {
    cJSON *node = demo_node_as("gpu-a100-whole", name);
    char v[16];
    snprintf(v, sizeof v, "%d", n);
    cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "labels");
    cJSON_ReplaceItemInObject(labels, "nvidia.com/gpu.count", cJSON_CreateString(v));
    cJSON *st = cJSON_GetObjectItem(node, "status");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(st, "allocatable"), "nvidia.com/gpu", cJSON_CreateString(v));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(st, "capacity"), "nvidia.com/gpu", cJSON_CreateString(v));
    return node;
}

static void sync_all(ext_state *st) {
    ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    ev_node(st, KUBE_ADDED, a100_with("n1", 8));
    ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    ev(st, KUBE_POD, KUBE_RELIST, NULL);
    ev(st, KUBE_POD, KUBE_SYNCED, NULL);
}

/* Which GPU (array index) pod uid holds first on node, -1 if none; *oc = overcommitted. */
static int held_gpu(ext_state *st, const char *uid, bool *oc) {
    ext_state_lock(st);
    const ext_pod *p = ext_state_pod(st, uid);
    int g = p && p->holds && p->a.ngrants ? p->a.grant[0].gpu : -1;
    if (oc) *oc = p && p->overcommitted;
    ext_state_unlock(st);
    return g;
}

TEST(ext_state_ready_only_after_both_kinds_sync) {
    ext_state *st = cluster_state(0);
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    CHECK(!ext_state_ready(st));
    char *pod = pod_json("p", "uid-p", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    const char *names[] = {"n1"};
    char *args = args_names(pod, names, 1);
    int status;
    cJSON *r = call_verb(&v, ext_verb_filter, args, &status);
    const cJSON *e = cJSON_GetObjectItem(r, "Error");
    bool err_set = cJSON_IsString(e) && strstr(e->valuestring, "not synced");
    cJSON_Delete(r);
    ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    ev_node(st, KUBE_ADDED, a100_with("n1", 8));
    ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    bool half = ext_state_ready(st);
    ev(st, KUBE_POD, KUBE_RELIST, NULL);
    ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    bool full = ext_state_ready(st);
    r = call_verb(&v, ext_verb_filter, args, &status);
    int npass = cJSON_GetArraySize(cJSON_GetObjectItem(r, "NodeNames"));
    cJSON_Delete(r);
    free(pod);
    free(args);
    ext_state_free(st);
    CHECK_INT(status, 200);
    CHECK(err_set);
    CHECK(!half);
    CHECK(full);
    CHECK_INT(npass, 1);
}

TEST(ext_state_foreign_pods_and_our_annotation) {
    ext_state *st = cluster_state(0);
    sync_all(st);
    /* Placed by the default scheduler: no annotation, so the first fit stands in for the
     * device plugin's unknown choice. */
    ev_pod(st, KUBE_ADDED, pod_json("foreign", "uid-f", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    const char *ann = "\"tessera.io/assignment\":\"{\\\"version\\\":1,\\\"node\\\":\\\"n1\\\",\\\"grants\\\":[{\\\"gpu\\\":5,"
                      "\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\"";
    ev_pod(st, KUBE_ADDED, pod_json("ours", "uid-o", 0, "\"nvidia.com/gpu\":\"1\"", ann, "n1"));
    /* A broken annotation is not trusted: re-derived. */
    ev_pod(st, KUBE_ADDED, pod_json("odd", "uid-x", 0, "\"nvidia.com/gpu\":\"1\"", "\"tessera.io/assignment\":\"{oops\"", "n1"));
    bool oc;
    int gf = held_gpu(st, "uid-f", &oc), go = held_gpu(st, "uid-o", NULL), gx = held_gpu(st, "uid-x", NULL);
    ext_state_lock(st);
    bool derived = ext_state_pod(st, "uid-f")->derived && !ext_state_pod(st, "uid-o")->derived && ext_state_pod(st, "uid-x")->derived;
    ext_state_unlock(st);
    char why[256];
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    ext_state_free(st);
    CHECK_INT(gf, 0);
    CHECK_INT(go, 5);
    CHECK_INT(gx, 1);
    CHECK(!oc);
    CHECK(derived);
    CHECK_MSG(consistent, "%s", why);
}

TEST(ext_state_node_shrink_overcommits_and_recovers) {
    ext_state *st = cluster_state(0);
    sync_all(st);
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev_pod(st, KUBE_ADDED, pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev_node(st, KUBE_MODIFIED, a100_with("n1", 1));
    bool oca, ocb;
    int ga = held_gpu(st, "uid-a", &oca), gb = held_gpu(st, "uid-b", &ocb);
    ext_state_lock(st);
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    ext_state_unlock(st);
    char why[256];
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    ev_node(st, KUBE_MODIFIED, a100_with("n1", 8));
    bool oc2;
    int gb2 = held_gpu(st, "uid-b", &oc2);
    ext_state_free(st);
    CHECK_INT(ga, 0);
    CHECK(!oca);
    CHECK_INT(gb, -1);
    CHECK(ocb);
    CHECK_INT(s.overcommitted, 1);
    CHECK_INT(s.bound, 2);      /* kept, not dropped */
    CHECK_MSG(consistent, "%s", why);
    CHECK(gb2 >= 0);
    CHECK(!oc2);
}

TEST(ext_state_finished_deleted_and_terminating_pods) {
    ext_state *st = cluster_state(0);
    sync_all(st);
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev_pod(st, KUBE_ADDED, pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    /* terminating: deletionTimestamp set, still running -> still holds */
    char *t = pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1");
    cJSON *o = cJSON_Parse(t);
    free(t);
    cJSON_AddStringToObject(cJSON_GetObjectItem(o, "metadata"), "deletionTimestamp", "2026-01-01T00:00:00Z");
    ext_state_on_event(st, KUBE_POD, KUBE_MODIFIED, o);
    int gb = held_gpu(st, "uid-b", NULL);
    /* finished: phase Succeeded releases */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "status"), "phase", cJSON_CreateString("Succeeded"));
    ext_state_on_event(st, KUBE_POD, KUBE_MODIFIED, o);
    cJSON_Delete(o);
    int gb2 = held_gpu(st, "uid-b", NULL);
    ev_pod(st, KUBE_DELETED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ext_state_lock(st);
    size_t left = ext_state_pod_count(st);
    const ext_node *n = ext_state_node(st, "n1");
    int holders = 0;
    for (int i = 0; i < n->m->ngpus; i++) holders += n->m->gpus[i].nholders;
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_INT(gb, 1);
    CHECK_INT(gb2, -1);
    CHECK_INT((int)left, 0);
    CHECK_INT(holders, 0);
}

TEST(ext_state_relist_marks_and_sweeps) {
    ext_state *st = cluster_state(0);
    sync_all(st);
    ev_node(st, KUBE_ADDED, a100_with("n2", 8));
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev_pod(st, KUBE_ADDED, pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev_pod(st, KUBE_ADDED, pod_json("c", "uid-c", 0, "\"cpu\":\"1\"", NULL, "n1"));   /* no GPU: not cached */
    /* A relist (after 410 Gone) that no longer has pod b nor node n2: deletes we missed. */
    ev(st, KUBE_POD, KUBE_RELIST, NULL);
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1"));
    ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    ev_node(st, KUBE_ADDED, a100_with("n1", 8));
    ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    ext_state_lock(st);
    size_t pods = ext_state_pod_count(st);
    bool b_gone = ext_state_pod(st, "uid-b") == NULL, n2_gone = ext_state_node(st, "n2") == NULL;
    int nodes = ext_state_node_count(st);
    ext_state_unlock(st);
    int ga = held_gpu(st, "uid-a", NULL);
    ext_state_free(st);
    CHECK_INT((int)pods, 1);
    CHECK(b_gone);
    CHECK(n2_gone);
    CHECK_INT(nodes, 1);
    CHECK_INT(ga, 0);
}

TEST(ext_state_pod_before_its_node) {
    ext_state *st = cluster_state(0);
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"2\"", NULL, "late"));
    int before = held_gpu(st, "uid-a", NULL);
    ev_node(st, KUBE_ADDED, a100_with("late", 8));
    int after = held_gpu(st, "uid-a", NULL);
    ev_node(st, KUBE_DELETED, a100_with("late", 8));
    int gone = held_gpu(st, "uid-a", NULL);
    ext_state_free(st);
    CHECK_INT(before, -1);
    CHECK_INT(after, 0);
    CHECK_INT(gone, -1);
}

static int ok_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                   const cJSON *annotations, char *err, size_t errlen) {
    const cJSON *a = cJSON_GetObjectItem(annotations, EXT_ANN_ASSIGNMENT);
    if (user && cJSON_IsString(a)) snprintf(user, 1024, "%s", a->valuestring);
    return 0;
}

TEST(ext_state_assumption_expires_unless_confirmed) {
    ext_state *st = cluster_state(1000);
    sync_all(st);
    char ann[1024] = "";
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, ok_bind, ann);
    /* The pending pods come from the watch. */
    ev_pod(st, KUBE_ADDED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL));
    ev_pod(st, KUBE_ADDED, pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL));
    char err[512];
    bind_pod(&v, "a", "uid-a", "n1", err, sizeof err);
    CHECK_STR(err, "");
    char ann_a[1024];
    snprintf(ann_a, sizeof ann_a, "%s", ann);
    bind_pod(&v, "b", "uid-b", "n1", err, sizeof err);
    CHECK_STR(err, "");
    int ga = held_gpu(st, "uid-a", NULL), gb = held_gpu(st, "uid-b", NULL);
    /* The watch confirms a (with the annotation the Binding carried); b never shows up. */
    char inner[1200], *q = inner;
    for (const char *s = ann_a; *s && q < inner + sizeof inner - 3; s++) {
        if (*s == '"') *q++ = '\\';
        *q++ = *s;
    }
    *q = 0;
    char annkv[1400];
    snprintf(annkv, sizeof annkv, "\"tessera.io/assignment\":\"%s\"", inner);
    ev_pod(st, KUBE_MODIFIED, pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", annkv, "n1"));
    ext_state_lock(st);
    int early = ext_state_expire(st, ext_now_ms());
    int late = ext_state_expire(st, ext_now_ms() + 5000);
    ext_pod_phase pa = ext_state_pod(st, "uid-a")->phase, pb = ext_state_pod(st, "uid-b")->phase;
    ext_state_unlock(st);
    int ga2 = held_gpu(st, "uid-a", NULL), gb2 = held_gpu(st, "uid-b", NULL);
    ext_state_free(st);
    CHECK(ga >= 0 && gb >= 0 && ga != gb);
    CHECK_INT(early, 0);
    CHECK_INT(late, 1);
    CHECK_INT(pa, EXT_POD_BOUND);
    CHECK_INT(pb, EXT_POD_PENDING);   /* released, back to what the watch said */
    CHECK_INT(ga2, ga);               /* the confirmed pod kept exactly its GPU */
    CHECK_INT(gb2, -1);
}

/* A pod with a quarter share, bound to n1 with annotation ann; uid_of_pod < 0: no runAsUser; mps: the
 * compute-sharing annotation. */
static char *share_pod(const char *name, const char *uid, bool mps, int uid_of_pod, const char *ann) {
    char *base = pod_json(name, uid, 0, "\"tessera.io/share\":\"1\"",
                          mps ? "\"tessera.io/gpu-fraction\":\"0.25\",\"tessera.io/compute-sharing\":\"mps\""
                              : "\"tessera.io/gpu-fraction\":\"0.25\"", "n1");
    cJSON *o = cJSON_Parse(base);
    free(base);
    cJSON *anns = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "annotations");
    if (ann) cJSON_AddStringToObject(anns, EXT_ANN_ASSIGNMENT, ann);
    if (uid_of_pod >= 0)
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(cJSON_GetObjectItem(o, "spec"), "securityContext"), "runAsUser",
                                uid_of_pod);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* After a restart the cache is rebuilt from the pods alone: the tessera.io/assignment annotation names
 * GPUs and amounts, the pod says how it shares compute and as which uid. MPS shares come back as MPS
 * clients of their uid, so a time-sliced share or another uid's MPS share is still kept off their GPU,
 * and the GPU's mode leaves with its last client. */
TEST(ext_state_rebuilds_mps_shares_from_the_pods) {
    /* the annotations a first extender wrote: model_fit on the same node, encoded */
    model_node *m = NULL;
    char err[256];
    {
        cJSON *node = a100_with("n1", 8);
        m = model_node_from_json(node, NULL, err, sizeof err);
        cJSON_Delete(node);
    }
    CHECK(m);
    model_request r;
    char *p1 = share_pod("m1", "uid-m1", true, 1000, NULL);
    CHECK_MSG(model_request_from_pod_json(p1, strlen(p1), &r, err, sizeof err) == 0, "%s", err);
    free(p1);
    model_assignment a1, a2;
    CHECK(model_fit(m, &r, &a1, 1, err, sizeof err) > 0 && model_assign(m, "uid-m1", &a1, err, sizeof err) == 0);
    CHECK(model_fit(m, &r, &a2, 1, err, sizeof err) > 0 && model_assign(m, "uid-m2", &a2, err, sizeof err) == 0);
    CHECK_INT(a1.grant[0].gpu, a2.grant[0].gpu);   /* one GPU, two clients of uid 1000 */
    char *ann1 = ext_ann_encode(m, &a1, "binpack"), *ann2 = ext_ann_encode(m, &a2, "binpack");
    int gpu = a1.grant[0].gpu;
    model_node_free(m);

    ext_state *st = cluster_state(0);
    ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    ev_node(st, KUBE_ADDED, a100_with("n1", 8));
    ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    ev(st, KUBE_POD, KUBE_RELIST, NULL);
    ev_pod(st, KUBE_ADDED, share_pod("m1", "uid-m1", true, 1000, ann1));
    ev_pod(st, KUBE_ADDED, share_pod("m2", "uid-m2", true, 1000, ann2));
    ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    /* a time-sliced share and another uid's MPS share, written (by hand) onto the same GPU: refused there */
    ev_pod(st, KUBE_ADDED, share_pod("t", "uid-t", false, -1, ann1));
    ev_pod(st, KUBE_ADDED, share_pod("o", "uid-o", true, 2000, ann1));
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "n1");
    int clients = n->m->gpus[gpu].mps_clients, mps_uid = n->m->gpus[gpu].mps_uid;
    const ext_pod *t = ext_state_pod(st, "uid-t"), *o = ext_state_pod(st, "uid-o");
    int t_gpu = t && t->holds ? t->a.grant[0].gpu : -1, o_gpu = o && o->holds ? o->a.grant[0].gpu : -1;
    bool t_mps = t && t->holds && t->a.grant[0].mps, o_mps = o && o->holds && o->a.grant[0].mps;
    char why[256];
    bool consistent = model_node_check(n->m, why, sizeof why);
    ext_state_unlock(st);
    /* the last client leaves: the GPU is nobody's MPS GPU any more */
    ev_pod(st, KUBE_DELETED, share_pod("m1", "uid-m1", true, 1000, ann1));
    ev_pod(st, KUBE_DELETED, share_pod("m2", "uid-m2", true, 1000, ann2));
    ext_state_lock(st);
    int after = n->m->gpus[gpu].mps_clients;
    ext_state_unlock(st);
    ext_state_free(st);
    free(ann1);
    free(ann2);
    CHECK_INT(clients, 2);
    CHECK_INT(mps_uid, 1000);
    CHECK_MSG(consistent, "%s", why);
    CHECK(t_gpu >= 0 && t_gpu != gpu && !t_mps);   /* re-derived elsewhere, time-sliced */
    CHECK(o_gpu >= 0 && o_gpu != gpu && o_mps);     /* re-derived elsewhere, an MPS client of uid 2000 */
    CHECK_INT(after, 0);
}
