/* test_ext_cache.c -- the verbs' answer cache (verbs.h): a node's cached filter verdict and
 * prioritize score are reused only while nothing about the node changed. Every reply of a
 * long-lived ext_verbs (cache warm) must equal, byte for byte, the reply of a fresh one
 * (cache cold) while pods are bound one after another; and a pod or Node event must change
 * the answer at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"

/* Raw reply body of a verb (caller frees); the status must be 200. */
static char *reply_of(ext_verbs *v, verb_fn fn, const char *body) {
    ext_reply r = {0};
    fn(v, body, strlen(body), &r);
    if (r.status != 200) {
        ext_reply_free(&r);
        return NULL;
    }
    return r.body;
}

/* n nodes cycling over the demo cluster's GPU nodes (MIG, time-sliced, MPS, whole, layered). */
static ext_state *mixed_cluster(int n, char ***names_out) {
    static const char *kinds[] = {"gpu-a100-whole", "gpu-a100-mig", "gpu-t4-timeslice", "gpu-h100-mps",
                                  "gpu-h100-single", "gpu-a100-layered"};
    cJSON *list = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(list, "items");
    char **names = calloc((size_t)n, sizeof *names);
    for (int i = 0; i < n; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "n-%04d", i);
        cJSON_AddItemToArray(items, demo_node_as(kinds[i % 6], names[i]));
    }
    char *txt = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    ext_state *st = standalone_state(txt);
    free(txt);
    *names_out = names;
    return st;
}

/* The index of the top-scored node in a prioritize reply (first among equals), -1 if all 0. */
static int top_node(const char *prio) {
    cJSON *r = cJSON_Parse(prio);
    int best = -1, best_score = 0, i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, r) {
        int s = (int)cJSON_GetObjectItem(it, "Score")->valuedouble;
        if (s > best_score) best = i, best_score = s;
        i++;
    }
    cJSON_Delete(r);
    return best;
}

/* Pods of several forms, shapes interleaved as a scheduling queue does, bound to
 * the node prioritize liked best. The warm verbs work on one state; a fresh verbs per pod
 * (new shape ids: never a hit) on a twin state that gets the same binds gives the cold
 * replies; they must agree throughout. Over 1,100 candidates, so the two-thread split runs
 * with the cache. */
static void warm_equals_cold(const char *policy_name, policy_tiebreak tie) {
    static const char *forms[][2] = {
        {"\"nvidia.com/gpumem\":\"8192\"", NULL},
        {"\"nvidia.com/gpumem\":\"10240\",\"nvidia.com/gpucores\":\"30\"", NULL},
        {"\"nvidia.com/gpu\":\"1\"", NULL},
        {"\"nvidia.com/mig-1g.5gb\":\"1\"", NULL},
        {"\"nvidia.com/gpu.shared\":\"1\"", NULL},
        {"\"nvidia.com/gpu\":\"2\"", NULL},
        {"\"cpu\":\"1\"", "\"tessera.io/gpu-fraction\":\"0.5\""},
        {"\"nvidia.com/mig-1g.10gb\":\"1\"", "\"tessera.io/isolation\":\"timeslice\""},   /* layered replicas */
    };
    const int nforms = (int)(sizeof forms / sizeof *forms), nnodes = 1100, npods = 56;
    char **names, **names2;
    ext_state *st = mixed_cluster(nnodes, &names), *twin = mixed_cluster(nnodes, &names2);
    ext_verbs v, tv;
    ext_verbs_init(&v, st, policy_find(policy_name), NULL, NULL);
    v.ctx.tiebreak = tie;
    ext_verbs_init(&tv, twin, v.pol, NULL, NULL);   /* binds on the twin */
    int bound = 0;
    for (int i = 0; i < npods && !test_failed(); i++) {
        const int f = (i / 4 + (i % 4 == 2 ? 1 : 0)) % nforms;   /* runs k, k, k+1, k; then k+1, ... */
        char name[32], uid[48];
        snprintf(name, sizeof name, "p%02d", i);
        snprintf(uid, sizeof uid, "uid-cache-%02d", i);
        char *pod = pod_json(name, uid, 0, forms[f][0], forms[f][1], NULL);
        char *args = args_names(pod, (const char *const *)names, nnodes);
        ext_verbs cold;
        ext_verbs_init(&cold, twin, v.pol, NULL, NULL);
        cold.ctx = v.ctx;
        unsigned long long h0 = v.cache_hits;
        char *wf = reply_of(&v, ext_verb_filter, args), *cf = reply_of(&cold, ext_verb_filter, args);
        unsigned long long h1 = v.cache_hits;
        char *wp = reply_of(&v, ext_verb_prioritize, args), *cp = reply_of(&cold, ext_verb_prioritize, args);
        /* This shape was answered one or two pods ago (a second shape in between): only the
         * nodes that took those pods need new answers. */
        bool repeat = i > 0 && i % 4 != 2;
        unsigned long long fh = h1 - h0, ph = v.cache_hits - h1;
        bool same_f = wf && cf && !strcmp(wf, cf), same_p = wp && cp && !strcmp(wp, cp);
        int top = same_p ? top_node(wp) : -1;
        free(wf);
        free(cf);
        free(wp);
        free(cp);
        free(args);
        free(pod);
        CHECK_MSG(same_f, "%s pod %d (form %d): warm filter reply differs from a cold one", policy_name, i, f);
        CHECK_MSG(same_p, "%s pod %d (form %d): warm prioritize reply differs from a cold one", policy_name, i, f);
        CHECK_MSG(!repeat || (fh >= (unsigned)nnodes - 2 && ph >= (unsigned)nnodes - 2),
                  "%s pod %d: a repeated shape got %llu filter and %llu prioritize answers from the cache, of %d",
                  policy_name, i, fh, ph, nnodes);
        if (top >= 0) {
            char err[512];
            bind_pod(&v, name, uid, names[top], err, sizeof err);
            CHECK_MSG(!err[0], "%s pod %d: bind to %s: %s", policy_name, i, names[top], err);
            bind_pod(&tv, name, uid, names[top], err, sizeof err);
            CHECK_MSG(!err[0], "%s pod %d: twin bind to %s: %s", policy_name, i, names[top], err);
            bound++;
        }
    }
    char why[256] = "";
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    unsigned long long hits = v.cache_hits;
    for (int i = 0; i < nnodes; i++) free(names[i]), free(names2[i]);
    free(names);
    free(names2);
    ext_state_free(st);
    ext_state_free(twin);
    CHECK_MSG(consistent, "%s", why);
    CHECK_MSG(bound > npods / 2, "%s: only %d of %d pods bound", policy_name, bound, npods);
    CHECK_MSG(hits >= (unsigned long long)(nnodes - 2) * 2 * (npods * 3 / 4 - 1), "%s: only %llu cache hits",
              policy_name, hits);
}

TEST(ext_cache_binpack_warm_replies_equal_cold) { warm_equals_cold("binpack", POLICY_TIE_RANK); }
TEST(ext_cache_bestfit_warm_replies_equal_cold) { warm_equals_cold("bestfit", POLICY_TIE_RANK); }
TEST(ext_cache_migaware_random_tiebreak_warm_equals_cold) { warm_equals_cold("mig-aware", POLICY_TIE_RANDOM); }

/* A call that finds half its candidates cached (every other node, asked about before) reads those on the
 * caller's thread and computes the other half, over SPLIT_MIN of them: split with the helper. Its replies must
 * be the cold ones, byte for byte and in the body's order: the nodes that fail (MIG and time-sliced nodes
 * refuse a memory request) keep their reasons whether cached or computed. */
TEST(ext_cache_half_cached_call_equals_cold) {
    const int nnodes = 2400;
    char **names, **names2;
    ext_state *st = mixed_cluster(nnodes, &names), *twin = mixed_cluster(nnodes, &names2);
    const char *odd[1200];
    for (int i = 0; i < nnodes / 2; i++) odd[i] = names[2 * i + 1];
    char *pod = pod_json("half", "uid-half", 0, "\"nvidia.com/gpumem\":\"20480\"", NULL, NULL);
    char *some = args_names(pod, odd, nnodes / 2), *all = args_names(pod, (const char *const *)names, nnodes);
    ext_verbs v, cold;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    ext_verbs_init(&cold, twin, v.pol, NULL, NULL);
    free(reply_of(&v, ext_verb_filter, some));
    free(reply_of(&v, ext_verb_prioritize, some));
    unsigned long long h0 = v.cache_hits;
    char *wf = reply_of(&v, ext_verb_filter, all), *cf = reply_of(&cold, ext_verb_filter, all);
    unsigned long long h1 = v.cache_hits;
    char *wp = reply_of(&v, ext_verb_prioritize, all), *cp = reply_of(&cold, ext_verb_prioritize, all);
    unsigned long long h2 = v.cache_hits;
    bool same_f = wf && cf && !strcmp(wf, cf), same_p = wp && cp && !strcmp(wp, cp);
    cJSON *fr = wf ? cJSON_Parse(wf) : NULL;
    int failed = fr ? cJSON_GetArraySize(cJSON_GetObjectItem(fr, "FailedAndUnresolvableNodes")) +
                          cJSON_GetArraySize(cJSON_GetObjectItem(fr, "FailedNodes")) : -1;
    cJSON_Delete(fr);
    free(wf), free(cf), free(wp), free(cp), free(some), free(all), free(pod);
    for (int i = 0; i < nnodes; i++) free(names[i]), free(names2[i]);
    free(names);
    free(names2);
    ext_state_free(st);
    ext_state_free(twin);
    CHECK_MSG(same_f, "a half-cached filter reply differs from a cold one");
    CHECK_MSG(same_p, "a half-cached prioritize reply differs from a cold one");
    CHECK_MSG(h1 - h0 == (unsigned)nnodes / 2 && h2 - h1 == (unsigned)nnodes / 2,
              "%llu filter and %llu prioritize answers came from the cache, not the %d asked about before",
              h1 - h0, h2 - h1, nnodes / 2);
    CHECK_MSG(failed > nnodes / 4, "only %d of %d nodes refused the pod: the reasons were not exercised", failed,
              nnodes);
}

/* The random policy draws per pod: its scores are never served from the cache. */
TEST(ext_cache_random_policy_is_not_cached) {
    char **names;
    ext_state *st = mixed_cluster(10, &names);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("random"), NULL, NULL);
    char *pod = pod_json("r", "uid-r", 0, "\"nvidia.com/gpumem\":\"1024\"", NULL, NULL);
    char *args = args_names(pod, (const char *const *)names, 10);
    char *a = reply_of(&v, ext_verb_prioritize, args), *b = reply_of(&v, ext_verb_prioritize, args);
    unsigned long long hits = v.cache_hits;
    bool ok = a && b;
    free(a);
    free(b);
    free(args);
    free(pod);
    for (int i = 0; i < 10; i++) free(names[i]);
    free(names);
    ext_state_free(st);
    CHECK(ok);
    CHECK_MSG(hits == 0, "random policy: %llu prioritize answers came from the cache", hits);
}

/* A verdict cached for a node is dropped by a pod event (another scheduler filled it) and
 * by a Node event (relabelled to a smaller GPU). */
TEST(ext_cache_pod_and_node_events_change_the_answer) {
    char *c = cluster_of("gpu-a100-whole", "a", 1);
    ext_state *st = standalone_state(c);
    free(c);
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    const char *names[] = {"a-0"};
    char *pod = pod_json("big", "uid-big", 0, "\"nvidia.com/gpumem\":\"40000\"", NULL, NULL);
    char *args = args_names(pod, names, 1);
    int status;
    cJSON *r1 = call_verb(&v, ext_verb_filter, args, &status);
    cJSON *r2 = call_verb(&v, ext_verb_filter, args, &status);   /* from the cache */
    unsigned long long hits_before = v.cache_hits;

    /* Eight whole GPUs taken by a pod the default scheduler placed. */
    char *other = pod_json("foreign", "uid-foreign", 0, "\"nvidia.com/gpu\":\"8\"", NULL, "a-0");
    cJSON *o = cJSON_Parse(other);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, o);
    cJSON *r3 = call_verb(&v, ext_verb_filter, args, &status);
    ext_state_apply(st, KUBE_POD, KUBE_DELETED, o);
    cJSON *r4 = call_verb(&v, ext_verb_filter, args, &status);   /* room again */

    /* The node relabelled as a 16 GB T4: 40,000 MiB no longer fits any GPU. */
    cJSON *t4 = demo_node_as("gpu-t4-timeslice", "a-0");
    ext_state_apply(st, KUBE_NODE, KUBE_MODIFIED, t4);
    cJSON *r5 = call_verb(&v, ext_verb_filter, args, &status);

    bool pass1 = cJSON_GetArraySize(cJSON_GetObjectItem(r1, "NodeNames")) == 1;
    bool pass2 = cJSON_GetArraySize(cJSON_GetObjectItem(r2, "NodeNames")) == 1;
    bool fail3 = json_has(cJSON_GetObjectItem(r3, "FailedAndUnresolvableNodes"), "a-0");   /* same priority */
    bool pass4 = cJSON_GetArraySize(cJSON_GetObjectItem(r4, "NodeNames")) == 1;
    bool fail5 = json_has(cJSON_GetObjectItem(r5, "FailedAndUnresolvableNodes"), "a-0") ||
                 json_has(cJSON_GetObjectItem(r5, "FailedNodes"), "a-0");
    char *s5 = cJSON_PrintUnformatted(r5);
    cJSON_Delete(r1);
    cJSON_Delete(r2);
    cJSON_Delete(r3);
    cJSON_Delete(r4);
    cJSON_Delete(r5);
    cJSON_Delete(o);
    cJSON_Delete(t4);
    free(other);
    free(args);
    free(pod);
    ext_state_free(st);
    CHECK(pass1 && pass2);
    CHECK_MSG(hits_before >= 1, "the repeated filter was not served from the cache");
    CHECK_MSG(fail3, "a node filled by a foreign pod still passes (stale cache)");
    CHECK_MSG(pass4, "the node does not pass again after the foreign pod left");
    CHECK_MSG(fail5, "a node relabelled to T4 still passes a 40,000 MiB request: %s", s5);
    free(s5);
}

/* --online-workload: each pod counts once in the estimate however often kube-scheduler
 * prioritizes it, fgd-pack scores against the estimate, and a score cached under one
 * estimate is not served under the next (the cache keys on the workload's version). */
TEST(ext_online_workload_counts_each_pod_once) {
    char **names;
    ext_state *st = mixed_cluster(10, &names);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("fgd-pack"), NULL, NULL);
    char err[256];
    v.online = policy_online_new(1000, 100, err, sizeof err);
    char *pa = pod_json("a", "uid-online-a", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    char *pb = pod_json("b", "uid-online-b", 0, "\"nvidia.com/gpumem\":\"8192\"", NULL, NULL);
    char *aa = args_names(pa, (const char *const *)names, 10), *ab = args_names(pb, (const char *const *)names, 10);
    char *r1 = reply_of(&v, ext_verb_prioritize, aa);
    uint64_t ver1 = policy_workload_version(v.ctx.workload);
    char *r2 = reply_of(&v, ext_verb_prioritize, aa);   /* a retry: no new arrival */
    uint64_t ver2 = policy_workload_version(v.ctx.workload);
    unsigned long long hits2 = v.cache_hits;
    char *r3 = reply_of(&v, ext_verb_prioritize, ab);   /* a new pod: warm-up rebuilds the estimate */
    uint64_t ver3 = policy_workload_version(v.ctx.workload);
    char *r4 = reply_of(&v, ext_verb_prioritize, aa);   /* a's shape again, under the new estimate */
    unsigned long long hits4 = v.cache_hits;
    long arrivals = policy_online_arrivals(v.online);
    bool ok = r1 && r2 && r3 && r4 && top_node(r1) >= 0 && top_node(r3) >= 0 && !strcmp(r1, r2);
    free(r1), free(r2), free(r3), free(r4);
    free(aa), free(ab), free(pa), free(pb);
    policy_online_free(v.online);
    for (int i = 0; i < 10; i++) free(names[i]);
    free(names);
    ext_state_free(st);
    CHECK(ok);
    CHECK_INT((int)arrivals, 2);
    CHECK(ver1 != 0 && ver1 == ver2 && ver3 != ver1);
    CHECK_MSG(hits2 > 0, "the retry was not served from the cache");
    CHECK_MSG(hits4 == hits2, "%llu scores cached under the old estimate were served under the new one", hits4 - hits2);
}
