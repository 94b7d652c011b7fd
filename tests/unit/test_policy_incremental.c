/* test_policy_incremental.c -- policy_inc_place must decide exactly as policy_place:
 * thousands of shuffled openb pods on two copies of the 1,213-node openb cluster, every
 * policy, the same winner and the same assignment at every step, with releases mixed in
 * (touches after release) and a tiny shape cache (eviction, log compaction).
 */
#include "harness.h"
#include "policy_helpers.h"

#include "policy/incremental.h"

#define PODS 2500

static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static bool same_assignment(const model_node *n, const model_assignment *a, const model_assignment *b) {
    char x[256], y[256];
    model_assignment_format(n, a, x, sizeof x);
    model_assignment_format(n, b, y, sizeof y);
    return a->ngrants == b->ngrants && a->cpu_milli == b->cpu_milli && a->memory_mib == b->memory_mib && !strcmp(x, y);
}

/* Place PODS shuffled pods of the default list with policy `name` both ways; every
 * `release_every`-th step also releases a random earlier pod from both clusters. Only
 * the first `nodes` nodes are used (0: all): 300 nodes overflow, so the "nothing fits"
 * path is exercised too. */
static void run_both(const char *name, int nodes, int max_shapes, int release_every, policy_tiebreak tb) {
    int np = 0;
    model_request *pods = openb_load_pods("data/openb/openb_pod_list_default.csv", &np);
    CHECK_MSG(pods && np > PODS, "cannot read the openb default pod list (run from the repo root)");
    policy_workload *w = openb_workload("default");
    openb_cluster *a = openb_load_nodes("data/openb/openb_node_list_gpu_node.csv");
    openb_cluster *b = openb_load_nodes("data/openb/openb_node_list_gpu_node.csv");
    CHECK(w && a && b && a->n == 1213);
    if (nodes <= 0 || nodes > a->n) nodes = a->n;

    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)max_shapes;
    for (int i = np - 1; i > 0; i--) {
        int j = (int)(xs(&rng) % (uint64_t)(i + 1));
        model_request t = pods[i];
        pods[i] = pods[j];
        pods[j] = t;
    }
    const policy *p = policy_find(name);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    ctx.workload = w;
    ctx.tiebreak = tb;
    policy_inc *inc = policy_inc_new(p, &ctx, a->nodes, nodes, max_shapes);
    policy_result *scratch = malloc((size_t)b->n * sizeof *scratch);
    int *where = malloc(PODS * sizeof *where);
    CHECK(p && inc && scratch && where);

    int placed = 0, failed = 0, mismatch = -1;
    char why1[256], why2[256], uid[32];
    for (int k = 0; k < PODS && mismatch < 0; k++) {
        model_assignment x, y;
        ctx.decision = (uint64_t)k;
        int i1 = policy_inc_place(inc, &pods[k], (uint64_t)k, &x, why1, sizeof why1);
        int i2 = policy_place(p, &ctx, &pods[k], b->nodes, nodes, scratch, &y, why2, sizeof why2);
        where[k] = i1;
        if (i1 != i2 || (i1 >= 0 && !same_assignment(a->nodes[i1], &x, &y))) { mismatch = k; break; }
        if (i1 >= 0) {
            snprintf(uid, sizeof uid, "pod-%d", k);
            if (model_assign(a->nodes[i1], uid, &x, NULL, 0) < 0 || model_assign(b->nodes[i2], uid, &y, NULL, 0) < 0) {
                mismatch = k;
                break;
            }
            policy_inc_touch(inc, i1);
            placed++;
        } else {
            failed++;
        }
        if (release_every && k % release_every == release_every - 1) {
            int victim = (int)(xs(&rng) % (uint64_t)(k + 1));
            if (where[victim] >= 0) {
                snprintf(uid, sizeof uid, "pod-%d", victim);
                model_release(a->nodes[where[victim]], uid);
                model_release(b->nodes[where[victim]], uid);
                policy_inc_touch(inc, where[victim]);
                where[victim] = -1;
                placed--;
            }
        }
    }
    policy_inc_stats st = policy_inc_get_stats(inc);
    policy_inc_free(inc);
    free(scratch);
    free(where);
    free(pods);
    openb_cluster_free(a);
    openb_cluster_free(b);
    policy_workload_free(w);
    CHECK_MSG(mismatch < 0, "%s: decision %d differs between policy_inc_place and policy_place", name, mismatch);
    CHECK_MSG(placed > 200 && (nodes < 1213 ? failed > 50 : failed == 0), "%s: %d pods placed, %d failed", name,
              placed, failed);
    if (tb == POLICY_TIE_RANK && max_shapes == 0)
        CHECK_MSG(st.scored < (long)PODS * nodes / 4, "%s: %ld node scores for %d places: not incremental", name,
                  st.scored, PODS);
}

TEST(policy_inc_same_as_place_every_policy) {
    for (int i = 0; i < policy_count(); i++) {
        run_both(policy_name(policy_at(i)), 300, 0, 0, POLICY_TIE_RANK);
        if (test_failed()) return;
    }
}

/* Departures: a release touches its node; later picks must see the freed room. */
TEST(policy_inc_same_as_place_with_releases) {
    run_both("fgd", 0, 0, 3, POLICY_TIE_RANK);
    if (!test_failed()) run_both("bestfit", 0, 0, 2, POLICY_TIE_RANK);
    if (!test_failed()) run_both("random", 0, 0, 4, POLICY_TIE_RANK);
}

/* Three cached shapes for ~150 shapes in the trace: constant eviction and log compaction. */
TEST(policy_inc_same_as_place_tiny_cache) {
    run_both("gpupacking", 300, 3, 5, POLICY_TIE_RANK);
    if (!test_failed()) run_both("dotprod", 0, 1, 0, POLICY_TIE_RANK);
}

TEST(policy_inc_random_tiebreak_falls_back) { run_both("gpuclustering", 300, 0, 0, POLICY_TIE_RANDOM); }

TEST(policy_inc_bad_input) {
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    CHECK(policy_inc_new(NULL, &ctx, NULL, 0, 0) == NULL);
    CHECK(policy_inc_new(policy_find("fgd"), &ctx, NULL, 3, 0) == NULL);
    policy_inc *s = policy_inc_new(policy_find("fgd"), &ctx, NULL, 0, 0);   /* no workload: error on place */
    CHECK(s != NULL);
    model_request r = req_frac(500, 1000);
    model_assignment a;
    char why[128];
    CHECK_INT(policy_inc_place(s, &r, 0, &a, why, sizeof why), -1);
    CHECK_CONTAINS(why, "no node fits");
    policy_inc_touch(s, 7);   /* out of range: ignored */
    policy_inc_free(s);

    model_node *n = model_node_new("n0");
    model_gpu_product prod;
    model_product_init_generic(&prod, "X", 16000, 0);
    model_node_add_gpu(n, &prod, MODEL_GPU_WHOLE, 1, 0);
    s = policy_inc_new(policy_find("fgd"), &ctx, &n, 1, 0);
    CHECK(s != NULL);
    int rc = policy_inc_place(s, &r, 0, &a, why, sizeof why);
    policy_inc_free(s);
    model_node_free(n);
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(why, "workload");
}
