/* test_policy_topo_digest.c -- every policy's answers on nodes with a GPU topology, pinned.
 * test_policy_digest.c pins decisions on clusters without topology; the topology terms
 * (policy/score.c: the best-aligned set, the alignment tier, the packing term) are tuned for
 * speed too (issue 30: memos per node, the links' groups kept with the matrix), so this file
 * pins them the same way: a seeded stream of arrivals and departures on a cluster of the
 * reference servers (README, Topology) in several GPU modes, a 16-GPU node whose links follow
 * no pattern (no twins, no groups: the exact fallbacks), a 12-GPU node, and a node without
 * topology, scored by every policy. Unlike the other digests it folds every node's answer,
 * not only the winner's: feasible, score, chosen GPUs and slot, and every few steps the "why"
 * text -- prioritize reports all nodes' scores, so a change on a losing node is a change too.
 * The digests were taken from the code before issue 30's changes.
 *
 * When a change is meant to alter answers, TESSERA_DIGEST_PRINT=1 prints the new digests; say
 * why in the commit that re-pins them.
 */
#include "harness.h"
#include "policy_helpers.h"
#include "topo_helpers.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define TD_NODES 16
#define TD_STEPS 2400

static uint64_t fnv(uint64_t h, int64_t v) {
    for (int i = 0; i < 8; i++) h = (h ^ (uint64_t)((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return fnv(h, 0);
}

static uint64_t xs(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}
static int rndi(uint64_t *x, int m) { return (int)(xs(x) % (uint64_t)m); }

/* One node's answer into the digest. */
static uint64_t fold_one(uint64_t h, const policy_result *r) {
    h = fnv(h, r->feasible);
    if (!r->feasible) return h;
    const policy_choice *c = &r->choice;
    h = fnv(h, c->ngpus);
    for (int i = 0; i < c->ngpus; i++) h = fnv(h, c->gpu[i]);
    h = fnv(h, c->mig_profile);
    h = fnv(h, c->mig_start);
    h = fnv(h, c->replica);
    h = fnv(h, llround(r->score * 1000.0));
    return fnv(h, llround(r->raw * 1000.0));
}

/* A 16-GPU node whose links are drawn at random (seeded): no two GPUs link alike, so
 * model_topo_best_set enumerates, and no level is a union of cliques. */
static model_node *odd_node(const char *name, int ngpus, uint64_t seed) {
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), "NVIDIA-A100-80GB-PCIe");
    model_node *n = model_node_new(name);
    for (int i = 0; i < ngpus; i++) model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
    static const model_link links[] = {MODEL_LINK_SYS, MODEL_LINK_NODE, MODEL_LINK_PHB, MODEL_LINK_PXB, MODEL_LINK_PIX,
                                       MODEL_LINK_NVLINK};
    uint64_t x = seed;
    for (int a = 0; a < ngpus; a++)
        for (int b = a + 1; b < ngpus; b++) {
            model_link l = links[rndi(&x, 6)];
            model_topo_set(n, a, b, l, l == MODEL_LINK_NVLINK ? 1 + rndi(&x, 12) : 0);
        }
    return n;
}

static void build(model_node **nodes) {
    nodes[0] = test_server_node("dgx-0", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    nodes[1] = test_server_node("pcie8-0", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    nodes[2] = test_server_node("dgx-1", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    nodes[3] = test_server_node("pcie8-1", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    nodes[4] = test_server_node("numa8-0", TEST_NUMA8, MODEL_GPU_WHOLE, 1);
    nodes[5] = test_server_node("2socket-0", TEST_2SOCKET, MODEL_GPU_WHOLE, 1);
    nodes[6] = test_server_node("pcie8-ts", TEST_PCIE8, MODEL_GPU_TIMESLICE, 4);
    nodes[6]->shared_renamed = true;
    nodes[7] = test_server_node("pcie8-mig", TEST_PCIE8, MODEL_GPU_MIG, 1);
    nodes[7]->mig_strategy = MODEL_MIG_MIXED;
    for (int g = 0; g < nodes[7]->ngpus; g++) nodes[7]->gpus[g].mig_dynamic = true;
    nodes[8] = test_server_node("unknown", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    free(nodes[8]->topo);
    nodes[8]->topo = NULL;
    nodes[9] = odd_node("odd-16", 16, 0x0dd16ull);
    nodes[10] = odd_node("odd-12", 12, 0x0dd12ull);
    nodes[11] = test_server_node("dgx-host", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    nodes[11]->track_host = true;
    nodes[11]->cpu_milli = 64000;
    nodes[11]->memory_mib = 1 << 20;
    nodes[12] = test_server_node("pcie8-host", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    nodes[12]->track_host = true;
    nodes[12]->cpu_milli = 48000;
    nodes[12]->memory_mib = 1 << 20;
    nodes[13] = test_server_node("dgx-mig", TEST_DGX_A100, MODEL_GPU_MIG, 1);
    nodes[13]->mig_strategy = MODEL_MIG_MIXED;
    for (int g = 0; g < nodes[13]->ngpus; g++) nodes[13]->gpus[g].mig_dynamic = true;
    nodes[14] = test_server_node("numa8-1", TEST_NUMA8, MODEL_GPU_WHOLE, 1);
    nodes[15] = test_server_node("pcie8-2", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
}

static model_request next_request(uint64_t *x) {
    static const int whole_k[] = {1, 1, 1, 2, 2, 3, 4, 4, 5, 8};
    model_request q;
    switch (rndi(x, 9)) {
    case 0:
    case 1:
    case 2:
        q = req_whole(whole_k[rndi(x, 10)], 2000 * rndi(x, 3));
        if (rndi(x, 6) == 0) q.topology = rndi(x, 2) ? MODEL_ALIGN_NVLINK : MODEL_ALIGN_NUMA;
        break;
    case 3:
        q = req_frac(100 * (1 + rndi(x, 9)), 1000);
        break;
    case 4:
        q = req_frac(250 * rndi(x, 3), 1000);
        q.memory_mib = 8000 * (1 + rndi(x, 4));
        q.count = 1 + rndi(x, 2);
        if (q.count == 2 && rndi(x, 2)) q.topology = MODEL_ALIGN_NVLINK;
        break;
    case 5:
        q = req_mig(rndi(x, 2) ? "1g.10gb" : "3g.40gb");
        q.count = 1 + rndi(x, 2);
        break;
    case 6:
        q = req_whole(1 + rndi(x, 2), 0);
        q.isolation = MODEL_ISO_ANY;
        break;
    case 7:
        q = req_whole(1, 0);
        q.kind = MODEL_REQ_SHARED;
        break;
    default:
        q = req_cpu(1000);
        break;
    }
    return q;
}

/* The stream: every step one arrival scored on every node (all answers folded) and placed on
 * the winner; then, two steps in three, one of the pods placed so far leaves (so the cluster keeps
 * churning between nearly full and half empty instead of staying full). */
static uint64_t topo_digest(const char *pname, policy_workload *w, int *placed) {
    model_node *nodes[TD_NODES];
    build(nodes);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 30);
    ctx.workload = w;
    const policy *p = policy_find(pname);
    policy_result res[TD_NODES];
    int live[TD_STEPS], home[TD_STEPS], nlive = 0;
    char uid[32], err[256], why[512];
    uint64_t x = 0x7070c0ffeeull, h = 0xcbf29ce484222325ull;
    *placed = 0;
    for (int k = 0; k < TD_STEPS; k++) {
        home[k] = -1;
        model_request q = next_request(&x);
        ctx.decision = (uint64_t)k;
        for (int i = 0; i < TD_NODES; i++) {
            bool ask = k % 5 == 0;
            int rc = policy_score(p, &q, nodes[i], &ctx, &res[i], ask ? why : NULL, sizeof why);
            h = fnv(h, rc);
            h = fold_one(h, &res[i]);
            if (ask) h = fnv_str(h, why);
        }
        int win = policy_select(p, &ctx, res, TD_NODES);
        h = fnv(h, win);
        if (win >= 0) {
            model_assignment a;
            snprintf(uid, sizeof uid, "pod-%d", k);
            if (policy_materialize(nodes[win], &q, &res[win].choice, &a, err, sizeof err) == 0 &&
                model_assign(nodes[win], uid, &a, err, sizeof err) == 0) {
                home[k] = win;
                live[nlive++] = k;
                (*placed)++;
            } else {
                h = fnv(h, -7);
            }
        }
        if (nlive > 0 && rndi(&x, 3) < 2) {
            int at = rndi(&x, nlive), j = live[at];
            live[at] = live[--nlive];
            snprintf(uid, sizeof uid, "pod-%d", j);
            model_release(nodes[home[j]], uid);
        }
    }
    for (int i = 0; i < TD_NODES; i++) {
        if (!model_node_check(nodes[i], err, sizeof err)) {
            fprintf(stderr, "%s: node %s: %s\n", pname, nodes[i]->name, err);
            *placed = -2;
        }
        model_node_free(nodes[i]);
    }
    return h;
}

/* The stream's own shapes as the target (memory-sized shares and MIG: fgd's generic path). */
static policy_workload *stream_workload(void) {
    policy_workload *w = policy_workload_new();
    uint64_t x = 17;
    for (int k = 0; k < 40; k++) {
        model_request q = next_request(&x);
        policy_workload_add(w, &q, 1 + rndi(&x, 4), NULL, 0);
    }
    policy_workload_finish(w, 95.0, NULL, 0);
    return w;
}

typedef struct pinned {
    const char *policy;
    uint64_t mix;      /* target: whole 1/2/4/8 GPUs and half-GPU shares (the fast measure) */
    uint64_t stream;   /* target: the stream's own shapes */
} pinned;

static const pinned PINNED[] = {
    {"binpack", 0xc0dda2eeb299476eull, 0xc0dda2eeb299476eull},
    {"spread", 0xc0b32c627faff3fbull, 0xc0b32c627faff3fbull},
    {"bestfit", 0xbdb9e4a7270abe39ull, 0xbdb9e4a7270abe39ull},
    {"dotprod", 0xa76d4fde80e8a999ull, 0xa76d4fde80e8a999ull},
    {"gpupacking", 0x4276259a1436a117ull, 0x4276259a1436a117ull},
    {"gpuclustering", 0x5c3e43a480773508ull, 0x5c3e43a480773508ull},
    {"random", 0xaa0b47f86012e529ull, 0xaa0b47f86012e529ull},
    {"fgd", 0xbb0bca32fac8b50cull, 0xfcd9fbd2cd78dea0ull},
    {"mig-aware", 0x14239cd52c4885c1ull, 0xaa56f0ee9816eeaeull},
    {"fgd-pack", 0x16fbe2e7170ba5afull, 0xc9911da56e8bf163ull},
};

static void check_policy(int i) {
    const pinned *pn = &PINNED[i];
    policy_workload *mix = gpu_mix_workload(40, 20, 10, 5, 25), *own = stream_workload();
    int placed_m = 0, placed_s = 0;
    uint64_t m = topo_digest(pn->policy, mix, &placed_m), s = topo_digest(pn->policy, own, &placed_s);
    policy_workload_free(mix);
    policy_workload_free(own);
    const char *e = getenv("TESSERA_DIGEST_PRINT");
    if (e && *e && strcmp(e, "0"))
        fprintf(stderr, "    {\"%s\", 0x%016llxull, 0x%016llxull},   /* placed %d, %d */\n", pn->policy,
                (unsigned long long)m, (unsigned long long)s, placed_m, placed_s);
    CHECK_MSG(placed_m > TD_STEPS / 4 && placed_s > TD_STEPS / 4, "%s: placed only %d, %d of %d", pn->policy, placed_m,
              placed_s, TD_STEPS);
    CHECK_MSG(m == pn->mix, "%s: answers with topology changed: digest 0x%016llx, pinned 0x%016llx", pn->policy,
              (unsigned long long)m, (unsigned long long)pn->mix);
    CHECK_MSG(s == pn->stream, "%s: answers with topology changed (stream target): digest 0x%016llx, pinned 0x%016llx",
              pn->policy, (unsigned long long)s, (unsigned long long)pn->stream);
}

TEST(policy_topo_digest_binpack) { check_policy(0); }
TEST(policy_topo_digest_spread) { check_policy(1); }
TEST(policy_topo_digest_bestfit) { check_policy(2); }
TEST(policy_topo_digest_dotprod) { check_policy(3); }
TEST(policy_topo_digest_gpupacking) { check_policy(4); }
TEST(policy_topo_digest_gpuclustering) { check_policy(5); }
TEST(policy_topo_digest_random) { check_policy(6); }
TEST(policy_topo_digest_fgd) { check_policy(7); }
TEST(policy_topo_digest_mig_aware) { check_policy(8); }
TEST(policy_topo_digest_fgd_pack) { check_policy(9); }
