/* test_policy_topo_random.c -- randomized placement with topology on: many seeds, a cluster of
 * the reference servers in several GPU modes plus a node of unknown topology, mixes of 1/2/4/8
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

/* Topology in the policies, measured: a stream of 1-GPU pods, shares and 2- and 4-GPU pods (none
 * requiring alignment) arriving and leaving on a cluster of DGX, PCIe-with-NVLink-pairs and
 * NUMA-only nodes. Counted: multi-GPU pods placed on a set of the best alignment the server
 * type offers (2 GPUs: nvlink on DGX and PCIe, numa on NUMA-only; 4 GPUs: nvlink on DGX, pcie
 * on PCIe, numa on NUMA-only), and multi-GPU pods no node took. Placed with the topology and the
 * packing term (w_topology 1, the default), without the packing term (0), with it tripled (3),
 * and blind (the same policy with every node's topology hidden while it places). */
typedef struct pack_stats {
    long multi, aligned, refused;
} pack_stats;

static pack_stats pack_run(const policy *p, policy_workload *w, double weight, bool blind, int life, unsigned seed) {
    enum { N = 24, STEPS = 3000, LIVE = 1000 };
    model_topo *hidden[N];
    model_node *nodes[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%02d", i);
        nodes[i] = test_server_node(name, i % 3 == 0 ? TEST_DGX_A100 : i % 3 == 1 ? TEST_PCIE8 : TEST_NUMA8,
                                    MODEL_GPU_WHOLE, 1);
    }
    policy_ctx ctx;
    policy_ctx_init(&ctx, seed);
    ctx.workload = w;
    ctx.w_topology = weight;
    pack_stats st = {0, 0, 0};
    struct { char uid[24]; int node; int until; } pods[LIVE];
    int nlive = 0;
    unsigned s = seed;
    for (int step = 0; step < STEPS; step++) {
        for (int v = 0; v < nlive; v++)
            if (pods[v].until <= step) {
                model_release(nodes[pods[v].node], pods[v].uid);
                pods[v--] = pods[--nlive];
            }
        unsigned k = rnd(&s) % 20;
        model_request r = k < 10 ? req_whole(1, 0) : k < 14 ? req_frac(500, 0) : k < 18 ? req_whole(2, 0) : req_whole(4, 0);
        ctx.decision = (uint64_t)step;
        policy_result res[N];
        model_assignment a;
        for (int i = 0; i < N && blind; i++) hidden[i] = nodes[i]->topo, nodes[i]->topo = NULL;
        int win = nlive < LIVE ? policy_place(p, &ctx, &r, nodes, N, res, &a, NULL, 0) : -1;
        for (int i = 0; i < N && blind; i++) nodes[i]->topo = hidden[i];
        if (r.count >= 2) st.multi++;
        if (win < 0) {
            st.refused += r.count >= 2;
            continue;
        }
        snprintf(pods[nlive].uid, sizeof pods[nlive].uid, "u%d", step);
        if (model_assign(nodes[win], pods[nlive].uid, &a, NULL, 0) != 0) continue;
        pods[nlive].node = win;
        pods[nlive++].until = step + 20 + (int)(rnd(&s) % (unsigned)life);
        if (r.count >= 2) {
            int8_t g[8];
            for (int q = 0; q < a.ngrants; q++) g[q] = a.grant[q].gpu;
            int al = model_topo_align(nodes[win], g, a.ngrants);
            int best = win % 3 == 0 ? MODEL_ALIGN_NVLINK : win % 3 == 2 ? MODEL_ALIGN_NUMA
                     : r.count == 2 ? MODEL_ALIGN_NVLINK : MODEL_ALIGN_PCIE;
            st.aligned += al >= best;
        }
    }
    for (int i = 0; i < N; i++) model_node_free(nodes[i]);
    return st;
}

TEST(policy_topo_alignment_and_packing_measured) {
    policy_workload *w = gpu_mix_workload(50, 20, 10, 0, 20);
    static const char *const names[] = {"binpack", "spread", "fgd-pack", "mig-aware"};
    for (int i = 0; i < 4; i++) {
        const double ws[] = {1, 0, 3, 1};
        pack_stats t[4];
        for (int c = 0; c < 4; c++) {
            t[c] = (pack_stats){0, 0, 0};
            for (unsigned seed = 1; seed <= 4; seed++) {
                pack_stats a = pack_run(policy_find(names[i]), w, ws[c], c == 3, 300, seed);
                t[c].multi += a.multi, t[c].aligned += a.aligned, t[c].refused += a.refused;
            }
        }
        printf("    %-9s multi-GPU pods at their best alignment (no node): w_topology 1: %ld/%ld (%ld), 0: %ld/%ld (%ld), "
               "3: %ld/%ld (%ld); blind: %ld/%ld (%ld)\n",
               names[i], t[0].aligned, t[0].multi, t[0].refused, t[1].aligned, t[1].multi, t[1].refused, t[2].aligned,
               t[2].multi, t[2].refused, t[3].aligned, t[3].multi, t[3].refused);
        /* what topology buys, by a wide margin (the packing term's own effect is small and mixed) */
        CHECK_MSG(t[0].aligned * 100 / t[0].multi >= t[3].aligned * 100 / t[3].multi + 10, "%s", names[i]);
    }
    policy_workload_free(w);
}
