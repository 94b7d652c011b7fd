/* test_ext_verbs.c -- the verbs' GPU decisions on clusters of GFD-labelled nodes (copies of
 * the demo cluster's): filter reasons and resolvability, binpack prioritize, bind with the
 * assignment annotation and no trace on failure, preempt dropping and trimming victims.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/base/annotation.h"

#define WHOLE1 "\"nvidia.com/gpu\":\"1\""

typedef struct bind_rec {
    int calls;
    int fail;                 /* answer an error while > 0 */
    char ann[1024];
} bind_rec;

static int rec_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                    const cJSON *annotations, char *err, size_t errlen) {
    bind_rec *r = user;
    r->calls++;
    const cJSON *a = cJSON_GetObjectItem(annotations, EXT_ANN_ASSIGNMENT);
    snprintf(r->ann, sizeof r->ann, "%s", cJSON_IsString(a) ? a->valuestring : "");
    if (r->fail > 0) {
        r->fail--;
        snprintf(err, errlen, "injected 409: Precondition failed: UID in precondition");
        return -1;
    }
    return 0;
}

/* Two 8 x A100-80GB unshared nodes a-0, a-1. */
static ext_state *two_a100(void) {
    char *c = cluster_of("gpu-a100-whole", "a", 2);
    ext_state *st = standalone_state(c);
    free(c);
    return st;
}

/* Place pod name/uid with the given limits and priority on node; returns the bind Error. */
static void put(ext_verbs *v, const char *name, int prio, const char *limits, const char *node, char *err, size_t len) {
    char uid[64];
    snprintf(uid, sizeof uid, "uid-%s", name);
    char *pod = pod_json(name, uid, prio, limits, NULL, NULL);
    place_pod(v, pod, name, uid, node, err, len);
    free(pod);
}

static int node_mem_used(ext_state *st, const char *node) {
    int used = 0;
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, node);
    for (int i = 0; n && n->m && i < n->m->ngpus; i++) used += n->m->gpus[i].memory_used_mib;
    ext_state_unlock(st);
    return used;
}

TEST(ext_verbs_prioritize_binpack_prefers_used_node) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    char err[512];
    put(&v, "p1", 0, "\"nvidia.com/gpumem\":\"8192\"", "a-1", err, sizeof err);
    CHECK_STR(err, "");
    char *pod = pod_json("p2", "uid-p2", 0, "\"nvidia.com/gpumem\":\"8192\"", NULL, NULL);
    const char *names[] = {"a-0", "a-1", "nowhere"};
    char *args = args_names(pod, names, 3);
    int status;
    cJSON *r = call_verb(&v, ext_verb_prioritize, args, &status);
    free(pod);
    free(args);
    int s0 = (int)cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "Score")->valuedouble;
    int s1 = (int)cJSON_GetObjectItem(cJSON_GetArrayItem(r, 1), "Score")->valuedouble;
    int s2 = (int)cJSON_GetObjectItem(cJSON_GetArrayItem(r, 2), "Score")->valuedouble;
    cJSON_Delete(r);
    ext_state_free(st);
    CHECK_INT(status, 200);
    CHECK_INT(s1, 10);
    CHECK(s0 < 10);
    CHECK_INT(s2, 0);
}

TEST(ext_verbs_bind_writes_assignment_annotation) {
    ext_state *st = two_a100();
    bind_rec rec = {0};
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, rec_bind, &rec);
    char err[512];
    put(&v, "w", 0, WHOLE1, "a-0", err, sizeof err);
    CHECK_STR(err, "");
    CHECK_INT(rec.calls, 1);
    cJSON *a = cJSON_Parse(rec.ann);
    cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "grants"), 0);
    bool shape = cJSON_GetObjectItem(a, "version")->valueint == 1 && !strcmp(cJSON_GetObjectItem(a, "node")->valuestring, "a-0") &&
                 cJSON_GetArraySize(cJSON_GetObjectItem(a, "grants")) == 1 && cJSON_IsTrue(cJSON_GetObjectItem(g0, "whole")) &&
                 cJSON_GetObjectItem(g0, "memoryMiB")->valueint == 81920 &&
                 cJSON_GetObjectItem(g0, "computePermille")->valueint == 1000;
    cJSON_Delete(a);
    CHECK_MSG(shape, "annotation %s", rec.ann);
    /* The annotation decodes back to what the cache holds for the pod. */
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "a-0");
    const ext_pod *p = ext_state_pod(st, "uid-w");
    model_assignment back;
    char why[256] = "";
    int rc = ext_ann_decode(n->m, rec.ann, &back, why, sizeof why);
    bool same = p && p->holds && rc == 0 && back.ngrants == p->a.ngrants && back.grant[0].gpu == p->a.grant[0].gpu &&
                back.grant[0].exclusive && p->phase == EXT_POD_BOUND;   /* standalone: recorded at once */
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_MSG(same, "decode: %s", why);
}

TEST(ext_verbs_bind_mig_annotation_names_profile_and_slot) {
    ext_state *st = demo_state();
    bind_rec rec = {0};
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, rec_bind, &rec);
    char err[512];
    put(&v, "m", 0, "\"nvidia.com/mig-3g.20gb\":\"1\"", "gpu-a100-mig", err, sizeof err);
    CHECK_STR(err, "");
    cJSON *a = cJSON_Parse(rec.ann);
    cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(a, "grants"), 0);
    cJSON *mig = cJSON_GetObjectItem(g0, "mig");
    bool ok = mig && !strcmp(cJSON_GetObjectItem(mig, "profile")->valuestring, "3g.20gb") &&
              cJSON_GetObjectItem(mig, "start")->valueint == 4 && cJSON_IsString(cJSON_GetObjectItem(g0, "uuid"));
    cJSON_Delete(a);
    ext_state_free(st);
    CHECK_MSG(ok, "annotation %s", rec.ann);
}

TEST(ext_verbs_bind_until_full_then_no_room) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char err[512], name[16];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "w%d", i);
        put(&v, name, 0, WHOLE1, "a-0", err, sizeof err);
        CHECK_STR(err, "");
    }
    /* kube-scheduler filters w7 and w8 while one GPU is left; w7's bind takes it; w8's bind comes too late.
     * They ask a whole GPU's memory as a share: for nvidia.com/gpu kube-scheduler's own NodeResourcesFit
     * counts the assumed w7 and would never ask tessera about w8, but nvidia.com/gpumem is
     * ignoredByScheduler (deploy/scheduler-config.yaml), so only tessera's accounting stands in between
     * (w8's cycle runs while w7's bind is still in flight: binding is asynchronous). */
    const char *a0[] = {"a-0"};
    for (int i = 7; i < 9; i++) {
        char uid[32];
        snprintf(name, sizeof name, "w%d", i);
        snprintf(uid, sizeof uid, "uid-w%d", i);
        char *pod = pod_json(name, uid, 0, "\"nvidia.com/gpumem\":\"81920\"", NULL, NULL), *args = args_names(pod, a0, 1);
        cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
        bool passed = cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames")) == 1;
        cJSON_Delete(f);
        free(args);
        free(pod);
        CHECK(passed);
    }
    bind_pod(&v, "w7", "uid-w7", "a-0", err, sizeof err);
    CHECK_STR(err, "");
    bind_pod(&v, "w8", "uid-w8", "a-0", err, sizeof err);
    CHECK_CONTAINS(err, "no longer fits");
    ext_state_lock(st);
    const ext_pod *p8 = ext_state_pod(st, "uid-w8");
    bool traced = p8 != NULL;
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    ext_state_unlock(st);
    CHECK(!traced);
    CHECK_INT(s.bound, 8);
    CHECK_INT(atomic_load(&v.bind_outcomes[EXT_BIND_NO_ROOM]), 1);
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);
    /* A retried bind of a pod that is already there succeeds without a second hold. */
    bind_pod(&v, "w3", "uid-w3", "a-0", err, sizeof err);
    CHECK_STR(err, "");
    CHECK_INT(atomic_load(&v.bind_outcomes[EXT_BIND_ALREADY]), 1);
    ext_state_free(st);
}

TEST(ext_verbs_bind_api_failure_leaves_no_trace) {
    ext_state *st = two_a100();
    bind_rec rec = {.fail = 1};
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, rec_bind, &rec);
    char err[512];
    put(&v, "f", 0, "\"nvidia.com/gpumem\":\"10000\"", "a-0", err, sizeof err);
    CHECK_CONTAINS(err, "injected 409");
    CHECK_INT(node_mem_used(st, "a-0"), 0);
    ext_state_lock(st);
    bool traced = ext_state_pod(st, "uid-f") != NULL;
    ext_state_unlock(st);
    CHECK(!traced);
    bind_pod(&v, "f", "uid-f", "a-0", err, sizeof err);   /* kube-scheduler retries */
    CHECK_STR(err, "");
    CHECK_INT(node_mem_used(st, "a-0"), 10000);
    CHECK_INT(atomic_load(&v.bind_outcomes[EXT_BIND_API_ERROR]), 1);
    ext_state_free(st);
}

TEST(ext_verbs_bind_unknown_pod_or_node) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char err[512];
    bind_pod(&v, "ghost", "uid-ghost", "a-0", err, sizeof err);
    CHECK_CONTAINS(err, "unknown");
    /* a node kube-scheduler knows but tessera has no Node object for: filter says so, and a bind there too */
    put(&v, "p", 0, WHOLE1, "nowhere", err, sizeof err);
    CHECK_CONTAINS(err, "not in tessera's cache");
    bind_pod(&v, "p", "uid-p", "nowhere", err, sizeof err);
    CHECK_CONTAINS(err, "not known");
    CHECK_INT(node_mem_used(st, "a-0"), 0);
    ext_state_free(st);
}

/* Fill node with 8 whole-GPU pods prefix0..7 of the given priorities. */
static void fill(ext_verbs *v, const char *node, const char *prefix, const int *prio) {
    char err[512], name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        put(v, name, prio[i], WHOLE1, node, err, sizeof err);
    }
}

TEST(ext_verbs_filter_failed_vs_unresolvable) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    static const int low[8] = {10, 10, 10, 10, 10, 10, 10, 10};
    fill(&v, "a-0", "low", low);
    const char *names[] = {"a-0", "a-1"};
    struct { int prio; const char *limits; const char *ann; const char *a0; const char *a1; } cases[] = {
        {1000, WHOLE1, NULL, "FailedNodes", "pass"},                 /* eviction helps on a-0 */
        {10, WHOLE1, NULL, "FailedAndUnresolvableNodes", "pass"},    /* nobody lower to evict */
        {1000, "\"nvidia.com/gpu\":\"9\"", NULL, "FailedAndUnresolvableNodes", "FailedAndUnresolvableNodes"},
        {1000, WHOLE1, "\"tessera.io/gpu-models\":\"NVIDIA-H100-80GB-HBM3\"", "FailedAndUnresolvableNodes",
         "FailedAndUnresolvableNodes"},
        {1000, "\"cpu\":\"1\"", NULL, "pass", "pass"},                /* no GPU asked: not ours to judge */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *pod = pod_json("q", "uid-q", cases[k].prio, cases[k].limits, cases[k].ann, NULL);
        char *args = args_names(pod, names, 2);
        int status;
        cJSON *r = call_verb(&v, ext_verb_filter, args, &status);
        free(pod);
        free(args);
        for (int i = 0; i < 2; i++) {
            const char *want = i == 0 ? cases[k].a0 : cases[k].a1;
            bool ok;
            if (!strcmp(want, "pass")) {
                ok = false;
                const cJSON *it;
                cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "NodeNames")) ok |= !strcmp(it->valuestring, names[i]);
            } else {
                const cJSON *why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, want), names[i]);
                ok = cJSON_IsString(why) && why->valuestring[0];
            }
            if (!ok) {
                char *txt = cJSON_PrintUnformatted(r);
                test_fail(__FILE__, __LINE__, "case %zu node %s: expected %s, got %s", k, names[i], want, txt);
                free(txt);
                cJSON_Delete(r);
                ext_state_free(st);
                return;
            }
        }
        cJSON_Delete(r);
    }
    ext_state_free(st);
}

TEST(ext_verbs_filter_invalid_request_is_unresolvable_everywhere) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    char *pod = pod_json("bad", "uid-bad", 0, WHOLE1, "\"tessera.io/isolation\":\"sometimes\"", NULL);
    const char *names[] = {"a-0", "a-1"};
    char *args = args_names(pod, names, 2);
    int status;
    cJSON *r = call_verb(&v, ext_verb_filter, args, &status);
    free(pod);
    free(args);
    const cJSON *why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedAndUnresolvableNodes"), "a-1");
    char w[300];
    snprintf(w, sizeof w, "%s", cJSON_IsString(why) ? why->valuestring : "");
    int npass = cJSON_GetArraySize(cJSON_GetObjectItem(r, "NodeNames"));
    cJSON_Delete(r);
    ext_state_free(st);
    CHECK_INT(status, 200);
    CHECK_INT(npass, 0);
    CHECK_CONTAINS(w, "isolation");
}

static cJSON *preempt_meta(ext_verbs *v, const char *pod, const char *node_a, const char *const *uids_a, int na,
                           const char *node_b, const char *const *uids_b, int nb) {
    cJSON *args = cJSON_CreateObject();
    cJSON_AddItemToObject(args, "Pod", cJSON_Parse(pod));
    cJSON_AddNullToObject(args, "NodeNameToVictims");
    cJSON *m = cJSON_AddObjectToObject(args, "NodeNameToMetaVictims");
    for (int side = 0; side < 2; side++) {
        const char *node = side ? node_b : node_a;
        const char *const *uids = side ? uids_b : uids_a;
        int n = side ? nb : na;
        if (!node) continue;
        cJSON *e = cJSON_AddObjectToObject(m, node);
        cJSON *pods = cJSON_AddArrayToObject(e, "Pods");
        for (int i = 0; i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "UID", uids[i]);
            cJSON_AddItemToArray(pods, o);
        }
        cJSON_AddNumberToObject(e, "NumPDBViolations", 0);
    }
    char *body = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    int status;
    cJSON *r = call_verb(v, ext_verb_preempt, body, &status);
    free(body);
    return status == 200 ? r : (cJSON_Delete(r), NULL);
}

static bool has_uid(const cJSON *victims, const char *uid) {
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(victims, "Pods"))
        if (!strcmp(cJSON_GetObjectItem(it, "UID")->valuestring, uid)) return true;
    return false;
}

TEST(ext_verbs_preempt_trims_victims_and_drops_useless_nodes) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    static const int pa[8] = {10, 10, 10, 10, 10, 20, 30, 40};
    static const int pb[8] = {10, 10, 10, 10, 10, 10, 10, 10};
    fill(&v, "a-0", "x", pa);
    fill(&v, "a-1", "y", pb);
    char *pod = pod_json("hi", "uid-hi", 1000, "\"nvidia.com/gpu\":\"2\"", NULL, NULL);
    /* a-0: three victims proposed where two GPUs are needed: the priority-40 one is spared.
     * a-1: one GPU pod and a pod tessera does not know: only one GPU is freed -> dropped. */
    const char *va[] = {"uid-x5", "uid-x6", "uid-x7"};
    const char *vb[] = {"uid-y0", "uid-not-a-gpu-pod"};
    cJSON *r = preempt_meta(&v, pod, "a-0", va, 3, "a-1", vb, 2);
    CHECK(r);
    cJSON *m = cJSON_GetObjectItem(r, "NodeNameToMetaVictims");
    cJSON *a0 = cJSON_GetObjectItem(m, "a-0");
    bool ok = a0 && cJSON_GetArraySize(cJSON_GetObjectItem(a0, "Pods")) == 2 && has_uid(a0, "uid-x5") &&
              has_uid(a0, "uid-x6") && !has_uid(a0, "uid-x7") && !cJSON_GetObjectItem(m, "a-1") &&
              cJSON_IsNumber(cJSON_GetObjectItem(a0, "NumPDBViolations"));
    char *txt = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    /* Preempt changes nothing: every pod still holds its GPU. */
    ext_state_lock(st);
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    ext_state_unlock(st);
    /* A victim set that frees nothing the pod can use: the node is dropped. */
    const char *vc[] = {"uid-not-a-gpu-pod"};
    cJSON *r2 = preempt_meta(&v, pod, "a-0", vc, 1, NULL, NULL, 0);
    int n2 = cJSON_GetArraySize(cJSON_GetObjectItem(r2, "NodeNameToMetaVictims"));
    cJSON_Delete(r2);
    free(pod);
    ext_state_free(st);
    CHECK_MSG(ok, "reply %s", txt);
    free(txt);
    CHECK_INT(s.bound, 16);
    CHECK_INT(n2, 0);
}

TEST(ext_verbs_preempt_full_victims_form) {
    ext_state *st = two_a100();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    static const int pa[8] = {10, 10, 10, 10, 10, 20, 30, 40};
    fill(&v, "a-0", "x", pa);
    char *pod = pod_json("hi", "uid-hi", 1000, "\"nvidia.com/gpu\":\"2\"", NULL, NULL);
    char *v5 = pod_json("x5", "uid-x5", 20, WHOLE1, NULL, "a-0"), *v6 = pod_json("x6", "uid-x6", 30, WHOLE1, NULL, "a-0");
    char *v7 = pod_json("x7", "uid-x7", 40, WHOLE1, NULL, "a-0");
    size_t cap = strlen(pod) + strlen(v5) + strlen(v6) + strlen(v7) + 256;
    char *body = malloc(cap);
    snprintf(body, cap, "{\"Pod\":%s,\"NodeNameToVictims\":{\"a-0\":{\"Pods\":[%s,%s,%s],\"NumPDBViolations\":1}},"
             "\"NodeNameToMetaVictims\":null}", pod, v5, v6, v7);
    int status;
    cJSON *r = call_verb(&v, ext_verb_preempt, body, &status);
    cJSON *a0 = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "NodeNameToMetaVictims"), "a-0");
    bool ok = status == 200 && a0 && cJSON_GetArraySize(cJSON_GetObjectItem(a0, "Pods")) == 2 && !has_uid(a0, "uid-x7") &&
              cJSON_GetObjectItem(a0, "NumPDBViolations")->valueint == 1;
    cJSON_Delete(r);
    free(body);
    free(pod);
    free(v5);
    free(v6);
    free(v7);
    ext_state_free(st);
    CHECK(ok);
}

TEST(ext_verbs_annotation_decode_rejects_foreign_values) {
    ext_state *st = two_a100();
    ext_state_lock(st);
    const model_node *m = ext_state_node(st, "a-0")->m;
    model_assignment a;
    char err[256];
    static const char *bad[] = {
        "", "not json", "[]", "{\"version\":2,\"node\":\"a-0\",\"grants\":[]}",
        "{\"version\":1,\"node\":\"a-1\",\"grants\":[]}",
        "{\"version\":1,\"node\":\"a-0\",\"grants\":[{\"gpu\":99,\"whole\":true}]}",
        "{\"version\":1,\"node\":\"a-0\",\"grants\":[{\"gpu\":\"0\"}]}",
        "{\"version\":1,\"node\":\"a-0\",\"grants\":[{\"gpu\":0,\"mig\":{\"profile\":\"9g.99gb\",\"start\":0}}]}",
        "{\"version\":1,\"node\":\"a-0\",\"grants\":[{\"gpu\":0,\"computePermille\":5000}]}",
        "{\"version\":1,\"node\":\"a-0\",\"grants\":{}}",
    };
    int accepted = -1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ext_ann_decode(m, bad[i], &a, err, sizeof err) == 0) accepted = (int)i;
    int good = ext_ann_decode(m, "{\"version\":1,\"node\":\"a-0\",\"grants\":[{\"gpu\":3,\"memoryMiB\":100,\"computePermille\":10}]}",
                              &a, err, sizeof err);
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_INT(accepted, -1);
    CHECK_INT(good, 0);
    CHECK_INT(a.ngrants, 1);
    CHECK_INT(a.grant[0].gpu, 3);
    CHECK_INT(a.grant[0].memory_mib, 100);
}

/* With soft shares delivered by reservations, a fraction never maps onto an MPS replica: an
 * MPS client needs the device plugin's daemon mounts, which a reservation cannot hand over.
 * isolation: mps is refused with a reason that says so and points to tessera.io/compute-sharing: mps
 * (an MPS share of an unshared GPU, which tessera's reservation serves); isolation: any skips the MPS node
 * but still takes a time-slice replica. Without the flag (delivery none) both fit there. */
TEST(ext_verbs_reservation_delivery_keeps_fractions_off_mps) {
    const char *names[] = {"gpu-h100-mps", "gpu-t4-timeslice"};
    const char *isos[] = {"mps", "any"};
    for (int deliver = 0; deliver < 2; deliver++) {
        for (int k = 0; k < 2; k++) {
            ext_state *st = demo_state();
            ext_verbs v;
            ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
            v.fraction_no_mps = deliver;
            char ann[128];
            snprintf(ann, sizeof ann, "\"tessera.io/gpu-fraction\":\"0.2\",\"tessera.io/isolation\":\"%s\"", isos[k]);
            /* as kube-scheduler gets it: the webhook's marker makes the annotation-only pod reach tessera
             * (deploy/scheduler-config.yaml managedResources); without it tessera is never asked */
            char *pod = pod_json("f", "uid-f", 0, "\"tessera.io/share\":\"1\"", ann, NULL);
            char *args = args_names(pod, names, 2);
            int status;
            cJSON *r = call_verb(&v, ext_verb_filter, args, &status);
            free(pod);
            free(args);
            const cJSON *ok = cJSON_GetObjectItem(r, "NodeNames");
            const cJSON *failed = cJSON_GetObjectItem(r, "FailedNodes");
            const cJSON *mps_why = cJSON_GetObjectItem(failed, "gpu-h100-mps");
            if (!mps_why) mps_why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedAndUnresolvableNodes"), "gpu-h100-mps");
            bool mps_ok = false, ts_ok = false;
            const cJSON *it;
            cJSON_ArrayForEach(it, ok) {
                if (!strcmp(it->valuestring, "gpu-h100-mps")) mps_ok = true;
                if (!strcmp(it->valuestring, "gpu-t4-timeslice")) ts_ok = true;
            }
            bool says_why = cJSON_IsString(mps_why) && strstr(mps_why->valuestring, "MPS");
            bool names_flag = cJSON_IsString(mps_why) && strstr(mps_why->valuestring, "--soft-share-delivery=none") &&
                              strstr(mps_why->valuestring, "tessera.io/compute-sharing: mps");   /* what tessera delivers */
            cJSON_Delete(r);
            ext_state_free(st);
            CHECK_INT(status, 200);
            CHECK_INT(mps_ok, !deliver);
            CHECK_INT(ts_ok, k == 1);   /* a replica of a time-sliced GPU is deliverable (isolation any) */
            if (deliver) CHECK(says_why);
            if (deliver && k == 0) CHECK(names_flag);
        }
    }
}
