/* test_policy_topo_random.c -- randomized placement with topology on: many seeds, a cluster of
 * the contract's servers in several GPU modes plus a node of unknown topology, mixes of 1/2/4/8
 * whole GPUs, MIG instances, replicas and fractions, with and without a required alignment,
 * assigned and released through every policy. Every node keeps model_node_check's invariants
 * (never over-committed), and every placed pod that requires an alignment got it. */
#include "harness.h"
#include "policy/policy.h"
#include "policy_helpers.h"
#include "topo_helpers.h"

#define NNODES 7
#define MAXLIVE 64

typedef struct live {
    char uid[32];
    int node;
} live;

static unsigned rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void build_cluster(model_node **nodes) {
    nodes[0] = test_server_node("dgx", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    nodes[1] = test_server_node("pcie8", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    nodes[2] = test_server_node("2socket", TEST_2SOCKET, MODEL_GPU_WHOLE, 1);
    nodes[3] = test_server_node("pcie8-ts", TEST_PCIE8, MODEL_GPU_TIMESLICE, 4);
    nodes[3]->shared_renamed = true;
    nodes[4] = test_server_node("pcie8-mig", TEST_PCIE8, MODEL_GPU_MIG, 1);
    nodes[4]->mig_strategy = MODEL_MIG_MIXED;
    for (int g = 0; g < nodes[4]->ngpus; g++) nodes[4]->gpus[g].mig_dynamic = true;
    nodes[5] = test_server_node("unknown", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    free(nodes[5]->topo);
    nodes[5]->topo = NULL;
    nodes[6] = test_server_node("dgx-2", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
}

static model_request random_request(unsigned *s) {
    static const int whole_k[] = {1, 1, 1, 2, 2, 4, 8};
    model_request r;
    memset(&r, 0, sizeof r);
    switch (rnd(s) % 5) {
    case 0:
    case 1:
        r.kind = MODEL_REQ_WHOLE;
        r.count = whole_k[rnd(s) % 7];
        break;
    case 2:
        r.kind = MODEL_REQ_MIG;
        r.count = 1 + (int)(rnd(s) % 3);
        snprintf(r.mig_profile, sizeof r.mig_profile, "%s", rnd(s) % 2 ? "1g.10gb" : "3g.40gb");
        break;
    case 3:
        r.kind = MODEL_REQ_FRACTION;
        r.count = 1 + (int)(rnd(s) % 2);
        r.memory_mib = 4000 + (int32_t)(rnd(s) % 4) * 8000;
        r.compute_permille = (int16_t)(rnd(s) % 2 ? 250 : 0);
        break;
    default:
        r.kind = MODEL_REQ_SHARED;
        r.count = 1 + (int)(rnd(s) % 3);
        break;
    }
    unsigned t = rnd(s) % 4;
    r.topology = (uint8_t)(t == 0 ? MODEL_ALIGN_NVLINK : t == 1 ? MODEL_ALIGN_NUMA : MODEL_ALIGN_UNKNOWN);
    return r;
}

TEST(policy_topo_randomized_never_overcommits_and_honours_required_alignment) {
    policy_workload *w = policy_workload_new();
    unsigned ws = 99;
    for (int i = 0; i < 60; i++) {
        model_request r = random_request(&ws);
        r.topology = 0;
        policy_workload_add(w, &r, 1 + (long)(rnd(&ws) % 5), NULL, 0);
    }
    CHECK(policy_workload_finish(w, 100, NULL, 0) == 0);
    long placed = 0, required_placed = 0, refused = 0;
    for (int pi = 0; pi < policy_count(); pi++) {
        const policy *p = policy_at(pi);
        for (unsigned seed = 1; seed <= 12; seed++) {
            model_node *nodes[NNODES];
            build_cluster(nodes);
            for (int i = 0; i < NNODES; i++) CHECK(nodes[i] != NULL);
            policy_ctx ctx;
            policy_ctx_init(&ctx, seed);
            ctx.workload = w;
            live pods[MAXLIVE];
            int nlive = 0;
            unsigned s = seed * 7919u + (unsigned)pi;
            for (int step = 0; step < 150; step++) {
                if (nlive > 0 && (nlive == MAXLIVE || rnd(&s) % 3 == 0)) {
                    int v = (int)(rnd(&s) % (unsigned)nlive);
                    CHECK(model_release(nodes[pods[v].node], pods[v].uid) == 0);
                    pods[v] = pods[--nlive];
                    continue;
                }
                model_request r = random_request(&s);
                ctx.decision = (uint64_t)step;
                policy_result res[NNODES];
                model_assignment a;
                char why[512];
                int win = policy_place(p, &ctx, &r, nodes, NNODES, res, &a, why, sizeof why);
                if (win < 0) {
                    refused++;
                    continue;
                }
                char err[256];
                snprintf(pods[nlive].uid, sizeof pods[nlive].uid, "p%d-%u-%d", pi, seed, step);
                CHECK_MSG(model_assign(nodes[win], pods[nlive].uid, &a, err, sizeof err) == 0, "%s: %s", policy_name(p), err);
                pods[nlive++].node = win;
                placed++;
                int need = model_request_required_align(&r);
                int8_t g[MODEL_MAX_GPUS];
                int k = 0;
                for (int q = 0; q < a.ngrants; q++) {
                    bool dup = false;
                    for (int j = 0; j < k; j++) dup |= g[j] == a.grant[q].gpu;
                    if (!dup) g[k++] = a.grant[q].gpu;
                }
                if (need) {
                    required_placed++;
                    CHECK_MSG((int)model_topo_align(nodes[win], g, k) >= need, "%s placed %d GPUs on %s %s-unaligned",
                              policy_name(p), k, nodes[win]->name, model_align_name((model_align)need));
                }
                char bad[256];
                CHECK_MSG(model_node_check(nodes[win], bad, sizeof bad), "%s on %s: %s", policy_name(p),
                          nodes[win]->name, bad);
            }
            for (int i = 0; i < NNODES; i++) {
                char bad[256];
                CHECK_MSG(model_node_check(nodes[i], bad, sizeof bad), "%s", bad);
                model_node_free(nodes[i]);
            }
        }
    }
    policy_workload_free(w);
    /* the run exercised what it claims to */
    CHECK(placed > 2000);
    CHECK(required_placed > 300);
    CHECK(refused > 0);
}
