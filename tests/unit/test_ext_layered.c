/* test_ext_layered.c -- the extender on a layered node (time-slicing on MIG instances, the
 * demo cluster's gpu-a100-layered: 2 x A100-80GB, 3g.40gb plain + 4 x 1g.10gb x 4 replicas):
 * filter's whole-means-whole reasons, bind's annotation (MIG slot + replica) and its exact
 * recovery after a restart, filling every replica, preempt, /debug/state and the device
 * plugin resource a reservation asks for.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/base/annotation.h"
#include "extender/base/delivery.h"
#include "extender/metrics.h"

#define LAYERED "gpu-a100-layered"
#define MIG1G "\"nvidia.com/mig-1g.10gb\":\"1\""
#define TS "\"tessera.io/isolation\":\"timeslice\""

typedef struct ann_rec {
    char ann[1024];
} ann_rec;

static int keep_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                     const cJSON *annotations, char *err, size_t errlen) {
    (void)ns, (void)name, (void)uid, (void)node, (void)err, (void)errlen;
    ann_rec *r = user;
    const cJSON *a = cJSON_GetObjectItem(annotations, EXT_ANN_ASSIGNMENT);
    snprintf(r->ann, sizeof r->ann, "%s", cJSON_IsString(a) ? a->valuestring : "");
    return 0;
}

/* Whether deploy/scheduler-config.yaml lists res as a managed resource with ignoredByScheduler: true. */
static bool ignored_by_scheduler(const char *res) {
    char *cfg = test_fixture("../../deploy/scheduler-config.yaml", NULL), key[160];
    snprintf(key, sizeof key, "- name: %s\n", res);
    const char *m = cfg ? strstr(cfg, key) : NULL, *ign = m ? strstr(m, "ignoredByScheduler:") : NULL;
    bool yes = ign && !strncmp(ign + strlen("ignoredByScheduler:"), " true", 5);
    free(cfg);
    return yes;
}

/* What kube-scheduler's NodeResourcesFit leaves of the empty demo nodes `in` for pod before the extender
 * is asked (extender-api.md, "When the extender is called"): a node must advertise in status.allocatable
 * every extended resource the pod requests that is not ignoredByScheduler. Returns how many are in out. */
static int fit_candidates(const char *pod, const char *const *in, int n, const char **out) {
    cJSON *p = cJSON_Parse(pod);
    int k = 0;
    for (int i = 0; i < n; i++) {
        cJSON *node = demo_node_as(in[i], in[i]);
        const cJSON *alloc = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "status"), "allocatable"), *c, *q;
        bool fits = node != NULL;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "containers"))
            cJSON_ArrayForEach(q, cJSON_GetObjectItem(cJSON_GetObjectItem(c, "resources"), "requests")) {
                if (!strchr(q->string, '/') || ignored_by_scheduler(q->string)) continue;
                const char *have = cJSON_GetStringValue(cJSON_GetObjectItem(alloc, q->string));
                if (!have || atol(have) < atol(cJSON_GetStringValue(q) ? q->valuestring : "0")) fits = false;
            }
        cJSON_Delete(node);
        if (fits) out[k++] = in[i];
    }
    cJSON_Delete(p);
    return k;
}

/* Filter one pod over the demo's MIG nodes that kube-scheduler's own filters let through; the reply
 * object (caller deletes). */
static cJSON *filter_nodes(ext_verbs *v, const char *pod, const char *const *names, int n) {
    char *args = args_names(pod, names, n);
    int status;
    cJSON *r = call_verb(v, ext_verb_filter, args, &status);
    free(args);
    return status == 200 ? r : (cJSON_Delete(r), NULL);
}

static cJSON *filter_mig_nodes(ext_verbs *v, const char *pod) {
    const char *all[] = {LAYERED, "gpu-a100-mig", "gpu-h100-single"}, *names[3];
    return filter_nodes(v, pod, names, fit_candidates(pod, all, 3, names));
}

static bool passes(const cJSON *reply, const char *node) {
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(reply, "NodeNames"))
        if (cJSON_IsString(it) && !strcmp(it->valuestring, node)) return true;
    return false;
}

static const char *failed_why(const cJSON *reply, const char *node) {
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "FailedNodes"), node);
    if (!f) f = cJSON_GetObjectItem(cJSON_GetObjectItem(reply, "FailedAndUnresolvableNodes"), node);
    return cJSON_IsString(f) ? f->valuestring : "";
}

TEST(ext_layered_filter_whole_means_whole) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    /* nvidia.com/mig-1g.10gb without isolation: the device plugin would hand a replica. */
    char *pod = pod_json("nb", "uid-nb", 0, MIG1G, NULL, NULL);
    const char *all[] = {LAYERED, "gpu-a100-mig", "gpu-h100-single"}, *fit[3];
    CHECK_INT(fit_candidates(pod, all, 3, fit), 1);   /* kube-scheduler asks about the layered node only */
    CHECK_STR(fit[0], LAYERED);
    cJSON *r = filter_mig_nodes(&v, pod);
    free(pod);
    CHECK(r);
    CHECK(!passes(r, LAYERED));
    CHECK_CONTAINS(failed_why(r, LAYERED), "tessera.io/isolation: timeslice");
    cJSON_Delete(r);
    /* With isolation timeslice it passes there (the other MIG nodes advertise no
     * nvidia.com/mig-1g.10gb, so kube-scheduler never asks about them). */
    pod = pod_json("nb2", "uid-nb2", 0, MIG1G, TS, NULL);
    r = filter_mig_nodes(&v, pod);
    free(pod);
    CHECK(r && passes(r, LAYERED));
    cJSON_Delete(r);
    /* The .shared name is not advertised there (renameByDefault is off). kube-scheduler's
     * NodeResourcesFit drops such a node before the extender is asked (deploy's
     * scheduler-config.yaml keeps ignoredByScheduler: false for the .shared names); the
     * filter still refuses it with the reason, for a configuration that ignores them. */
    pod = pod_json("nb3", "uid-nb3", 0, "\"nvidia.com/mig-1g.10gb.shared\":\"1\"", NULL, NULL);
    const char *none[3], *layered[] = {LAYERED};
    CHECK_INT(fit_candidates(pod, layered, 1, none), 0);   /* what the deployed configuration does */
    r = filter_nodes(&v, pod, layered, 1);
    free(pod);
    CHECK(r && !passes(r, LAYERED));
    CHECK_CONTAINS(failed_why(r, LAYERED), "renameByDefault is off");
    cJSON_Delete(r);
    ext_state_free(st);
}

/* Bind, read the annotation back, and rebuild a fresh cache from the bound pod as a restart
 * does: the same instance and replica, not re-derived. */
TEST(ext_layered_bind_annotation_and_restart) {
    ext_state *st = demo_state();
    ann_rec rec = {{0}};
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, keep_bind, &rec);
    char err[512];
    char *p1 = pod_json("a", "uid-a", 0, MIG1G, TS, NULL), *p2 = pod_json("b", "uid-b", 0, MIG1G, TS, NULL);
    place_pod(&v, p1, "a", "uid-a", LAYERED, err, sizeof err);
    CHECK_STR(err, "");
    place_pod(&v, p2, "b", "uid-b", LAYERED, err, sizeof err);
    CHECK_STR(err, "");
    free(p1);
    free(p2);
    cJSON *a = cJSON_Parse(rec.ann);
    cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "grants"), 0);
    cJSON *mig = cJSON_GetObjectItem(g0, "mig");
    bool shape = mig && !strcmp(cJSON_GetObjectItem(mig, "profile")->valuestring, "1g.10gb") &&
                 cJSON_IsNumber(cJSON_GetObjectItem(mig, "start")) && cJSON_IsNumber(cJSON_GetObjectItem(g0, "replica"));
    int start = shape ? cJSON_GetObjectItem(mig, "start")->valueint : -1;
    int replica = shape ? cJSON_GetObjectItem(g0, "replica")->valueint : -1;
    cJSON_Delete(a);
    CHECK_MSG(shape, "annotation %s", rec.ann);

    ext_state_lock(st);
    const ext_pod *pb = ext_state_pod(st, "uid-b");
    model_assignment held = pb ? pb->a : (model_assignment){0};
    model_assignment back;
    char why[256] = "";
    int rc = ext_ann_decode(ext_state_node(st, LAYERED)->m, rec.ann, &back, why, sizeof why);
    ext_state_unlock(st);
    CHECK_MSG(rc == 0, "decode: %s", why);
    CHECK(pb != NULL);
    CHECK_INT(back.grant[0].replica, held.grant[0].replica);
    CHECK_INT(back.grant[0].mig_start, held.grant[0].mig_start);
    CHECK_INT(back.grant[0].replica, replica);
    CHECK_INT(back.grant[0].mig_start, start);
    ext_state_free(st);

    /* Restart: a new cache sees pod b bound with its annotation first. */
    ext_state *st2 = demo_state();
    char *txt = pod_json("b", "uid-b", 0, MIG1G, TS, LAYERED);
    cJSON *pod = cJSON_Parse(txt);
    free(txt);
    cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"), EXT_ANN_ASSIGNMENT,
                            rec.ann);
    ext_state_apply(st2, KUBE_POD, KUBE_ADDED, pod);
    cJSON_Delete(pod);
    ext_state_lock(st2);
    const ext_pod *rb = ext_state_pod(st2, "uid-b");
    bool exact = rb && rb->holds && !rb->derived && rb->a.grant[0].replica == replica && rb->a.grant[0].mig_start == start;
    const model_node *m = ext_state_node(st2, LAYERED)->m;
    bool ok = model_node_check(m, why, sizeof why);
    ext_state_unlock(st2);
    ext_state_free(st2);
    CHECK_MSG(exact, "restart did not rebuild the replica from the annotation");
    CHECK_MSG(ok, "%s", why);
}

/* 2 GPUs x 4 instances x 4 replicas = 32 replica pods, then no room; preempting one replica
 * holder makes room for exactly one; /debug/state names who holds each replica. */
TEST(ext_layered_fill_preempt_and_debug_state) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char err[512], name[32], uid[48];
    int bound = 0;
    for (int i = 0; i < 33; i++) {
        snprintf(name, sizeof name, "r%d", i);
        snprintf(uid, sizeof uid, "uid-r%d", i);
        char *pod = pod_json(name, uid, 0, MIG1G, TS, NULL);
        place_pod(&v, pod, name, uid, LAYERED, err, sizeof err);
        free(pod);
        bound += err[0] == 0;
    }
    CHECK_INT(bound, 32);
    CHECK(err[0] != 0);   /* the 33rd: no free replica */
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);

    /* preempt: a high-priority replica pod; victims r5 and r6 proposed, one is enough */
    char *hi = pod_json("hi", "uid-hi", 1000, MIG1G, TS, NULL);
    char body[4096];
    snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{\"" LAYERED
             "\":{\"Pods\":[{\"UID\":\"uid-r5\"},{\"UID\":\"uid-r6\"}],\"NumPDBViolations\":0}}}", hi);
    free(hi);
    int status;
    cJSON *r = call_verb(&v, ext_verb_preempt, body, &status);
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "NodeNameToMetaVictims"), LAYERED);
    int nvict = cJSON_GetArraySize(cJSON_GetObjectItem(e, "Pods"));
    cJSON_Delete(r);
    CHECK_INT(status, 200);
    CHECK_INT(nvict, 1);

    ext_reply out = {0};
    ext_debug_state(&v, NULL, &out);
    cJSON *d = out.body ? cJSON_Parse(out.body) : NULL;
    ext_reply_free(&out);
    const cJSON *n, *holders = NULL;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(d, "nodes")) {
        const cJSON *nm = cJSON_GetObjectItem(n, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, LAYERED)) continue;
        const cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(n, "gpus"), 0), *in;
        cJSON_ArrayForEach(in, cJSON_GetObjectItem(g0, "mig"))
            if (cJSON_GetObjectItem(in, "replicaHolders") && !holders) holders = cJSON_GetObjectItem(in, "replicaHolders");
    }
    bool named = cJSON_GetArraySize(holders) == 4 && cJSON_IsString(cJSON_GetArrayItem(holders, 0));
    cJSON_Delete(d);
    /* the replica gauges count the instances' replicas: all 32 taken on the layered node's GPUs */
    static ext_metrics m;   /* zeroed */
    size_t mlen = 0;
    char *metrics = ext_metrics_render(&m, &v, NULL, &mlen);
    long taken = 0, free_left = 0;
    for (const char *p = metrics; p && (p = strstr(p, "\ntessera_gpu_replicas_")); p++) {
        bool used = !strncmp(p, "\ntessera_gpu_replicas_allocated{node=\"" LAYERED "\"", 39 + strlen(LAYERED));
        bool fre = !strncmp(p, "\ntessera_gpu_replicas_free{node=\"" LAYERED "\"", 34 + strlen(LAYERED));
        const char *sp = (used || fre) ? strchr(p + 1, ' ') : NULL;
        if (sp && used) taken += atol(sp + 1);
        if (sp && fre) free_left += atol(sp + 1);
    }
    free(metrics);
    ext_state_free(st);
    CHECK_MSG(named, "/debug/state lists no replica holders for the layered node");
    CHECK_INT(taken, 32);
    CHECK_INT(free_left, 0);
}

/* What a reservation pod asks the device plugin for, for a replica of a shared instance. */
TEST(ext_layered_reservation_resource_names) {
    model_node *n = model_node_new("x");
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
    int p1 = model_product_profile_index(p, "1g.10gb");
    model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 2, NULL, 0);
    model_gpu_add_mig_instance(g, p1, 0, NULL, 0);
    model_grant gr = {.gpu = 0, .mig_inst = 0, .mig_profile = (int8_t)p1, .mig_start = 0, .replica = 1};
    char buf[96], err[128];
    n->mig_strategy = MODEL_MIG_MIXED;
    CHECK_INT(ext_rsv_resource(n, g, &gr, buf, sizeof buf, err, sizeof err), 0);
    CHECK_STR(buf, "nvidia.com/mig-1g.10gb");
    n->mig_renamed = true;
    CHECK_INT(ext_rsv_resource(n, g, &gr, buf, sizeof buf, err, sizeof err), 0);
    CHECK_STR(buf, "nvidia.com/mig-1g.10gb.shared");
    n->mig_strategy = MODEL_MIG_SINGLE;
    CHECK_INT(ext_rsv_resource(n, g, &gr, buf, sizeof buf, err, sizeof err), 0);
    CHECK_STR(buf, "nvidia.com/gpu.shared");
    /* each replica is its own unit, so its own reservation pod */
    ext_rsv_unit_of(g, &gr, buf, sizeof buf);
    CHECK_STR(buf, "mig:1g.10gb@0/r1");
    char name[128];
    CHECK_INT(ext_rsv_pod_name("node-a", 0, buf, 1, name, sizeof name), 0);
    CHECK_CONTAINS(name, "-g0-m1g10gb-0-r1-1");
    CHECK(ext_rsv_pod_name("node-a", 0, "mig:1g.10gb@0/rx", 1, name, sizeof name) < 0);
    gr.replica = -1;   /* a plain instance keeps the plain name */
    CHECK_INT(ext_rsv_resource(n, g, &gr, buf, sizeof buf, err, sizeof err), 0);
    CHECK_STR(buf, "nvidia.com/gpu");
    ext_rsv_unit_of(g, &gr, buf, sizeof buf);
    CHECK_STR(buf, "mig:1g.10gb@0");
    model_node_free(n);
}

/* prioritize, called as kube-scheduler calls it: only when two or more nodes are left after its own filters
 * and the extender's, and only with those nodes (extender-api.md, "When the extender is called"). Of the
 * demo's MIG nodes only the layered one advertises nvidia.com/mig-1g.10gb, so a second layered node (a copy,
 * same allocatable) is added; with one replica already taken on the first, binpack gives it 10 and the empty
 * copy less. Then the annotation decoder refuses a replica out of range or on an instance created on demand. */
TEST(ext_layered_prioritize_and_bad_annotations) {
    ext_state *st = demo_state();
    cJSON *copy = demo_node_as(LAYERED, LAYERED "-b");
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, copy);
    cJSON_Delete(copy);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    char perr[512];
    char *first = pod_json("p0", "uid-p0", 0, MIG1G, TS, NULL);
    place_pod(&v, first, "p0", "uid-p0", LAYERED, perr, sizeof perr);
    free(first);
    CHECK_STR(perr, "");
    char *pod = pod_json("p", "uid-p", 0, MIG1G, TS, NULL);
    const char *both[] = {LAYERED, LAYERED "-b"};
    cJSON *fr = filter_nodes(&v, pod, both, 2);
    const char *names[2];
    int nn = 0;
    const cJSON *it, *passed = cJSON_GetObjectItem(fr, "NodeNames");
    cJSON_ArrayForEach(it, passed)
        if (cJSON_IsString(it) && nn < 2) names[nn++] = it->valuestring;
    CHECK_INT(nn, 2);
    char *args = args_names(pod, names, nn);
    int status;
    cJSON *r = call_verb(&v, ext_verb_prioritize, args, &status);
    free(pod);
    free(args);
    CHECK_INT(status, 200);
    CHECK_INT(cJSON_GetArraySize(r), nn);
    int layered_score = -1, copy_score = -1;
    cJSON_ArrayForEach(it, r) {
        const char *host = cJSON_GetStringValue(cJSON_GetObjectItem(it, "Host"));
        int sc = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(it, "Score"));
        if (host && !strcmp(host, LAYERED)) layered_score = sc;
        if (host && !strcmp(host, LAYERED "-b")) copy_score = sc;
    }
    cJSON_Delete(r);
    cJSON_Delete(fr);
    CHECK_INT(layered_score, 10);
    CHECK_MSG(copy_score >= 0 && copy_score < 10, "empty copy scored %d", copy_score);

    ext_state_lock(st);
    const model_node *m = ext_state_node(st, LAYERED)->m;
    model_assignment a;
    char err[256];
    static const char *bad[] = {
        "{\"version\":1,\"node\":\"" LAYERED "\",\"grants\":[{\"gpu\":0,\"mig\":{\"profile\":\"1g.10gb\",\"start\":0},\"replica\":99}]}",
        "{\"version\":1,\"node\":\"" LAYERED "\",\"grants\":[{\"gpu\":0,\"mig\":{\"profile\":\"1g.10gb\",\"start\":0,\"create\":true},\"replica\":1}]}",
    };
    int accepted = -1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ext_ann_decode(m, bad[i], &a, err, sizeof err) == 0) accepted = (int)i;
    int good = ext_ann_decode(m, "{\"version\":1,\"node\":\"" LAYERED "\",\"grants\":[{\"gpu\":1,\"mig\":{\"profile\":"
                                 "\"1g.10gb\",\"start\":2,\"create\":false},\"replica\":3,\"memoryMiB\":2432,\"computePermille\":35}]}",
                              &a, err, sizeof err);
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_INT(accepted, -1);
    CHECK_INT(good, 0);
    CHECK_INT(a.grant[0].replica, 3);
    CHECK_INT(a.grant[0].mig_start, 2);
}
