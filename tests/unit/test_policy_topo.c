/* test_policy_topo.c -- the policies and GPU topology (issue 22): on the reference servers
 * the topology-aware policies (binpack, spread, fgd-pack, mig-aware) take the aligned sets
 * the README lists, keep aligned sets whole for later multi-GPU pods, and rank nodes by
 * the best alignment they offer; the FGD paper's policies place as the paper does but obey
 * a required alignment. */
#include "harness.h"
#include "model_helpers.h"
#include "policy/policy.h"
#include "policy_helpers.h"
#include "topo_helpers.h"

static const char *const aware[] = {"binpack", "spread", "fgd-pack", "mig-aware"};
static const char *const paper[] = {"bestfit", "dotprod", "gpupacking", "gpuclustering", "random", "fgd"};
#define NAWARE 4
#define NPAPER 6

/* fgd and fgd-pack need a target workload: 1-, 2-, 4- and 8-GPU pods and shares. */
static policy_workload *workload(void) { return gpu_mix_workload(40, 20, 10, 5, 25); }

/* Occupy GPU g with a whole-GPU holder. */
static int take(model_node *n, int g) {
    char uid[16];
    snprintf(uid, sizeof uid, "held-%d", g);
    model_request r = req_whole(1, 0);
    return place_on(n, &r, uid, g);
}

/* The GPUs a policy picks on one node, as digits ("23"); "-" when infeasible. */
static const char *choice_on(const char *pname, const policy_ctx *ctx, const model_request *r, model_node *n,
                             char *why, size_t whylen) {
    static char buf[MODEL_MAX_GPUS + 2];
    policy_result res;
    if (policy_score(policy_find(pname), r, n, ctx, &res, why, whylen) < 0) return "error";
    if (!res.feasible) return "-";
    for (int i = 0; i < res.choice.ngpus; i++) buf[i] = (char)('0' + res.choice.gpu[i]);
    buf[res.choice.ngpus] = 0;
    return buf;
}

TEST(policy_topo_aware_sets_on_the_three_servers) {
    policy_workload *w = workload();
    policy_ctx ctx;
    policy_ctx_init(&ctx, 7);
    ctx.workload = w;
    const struct {
        const char *fixture;
        int k;
        const char *set, *align;
    } cases[] = {
        {"nodes/topo-dgx-a100.json", 4, "0123", "nvlink (NV12)"},
        {"nodes/topo-dgx-a100.json", 8, "01234567", "nvlink (NV12)"},
        {"nodes/topo-pcie8-nvlink-pairs.json", 2, "01", "nvlink (NV12)"},
        {"nodes/topo-pcie8-nvlink-pairs.json", 4, "0123", "pcie (PIX)"},
        {"nodes/topo-pcie8-nvlink-pairs.json", 8, "01234567", "none (SYS)"},
        {"nodes/topo-2socket-4gpu.json", 2, "01", "numa (NODE)"},
        {"nodes/topo-2socket-4gpu.json", 4, "0123", "none (SYS)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        model_node *n = fixture_node(cases[c].fixture);
        CHECK(n);
        model_request r = req_whole(cases[c].k, 0);
        for (int p = 0; p < NAWARE; p++) {
            char why[512];
            const char *got = choice_on(aware[p], &ctx, &r, n, why, sizeof why);
            CHECK_MSG(!strcmp(got, cases[c].set), "%s, %s k=%d: %s (%s)", cases[c].fixture, aware[p], cases[c].k, got,
                      why);
            char want[64];
            snprintf(want, sizeof want, "GPUs %c", cases[c].set[0]);
            CHECK_CONTAINS(why, want);
            CHECK_CONTAINS(why, cases[c].align);
        }
        model_node_free(n);
    }
    policy_workload_free(w);
}

TEST(policy_topo_partly_taken_pcie8) {
    policy_workload *w = workload();
    policy_ctx ctx;
    policy_ctx_init(&ctx, 7);
    ctx.workload = w;
    model_node *n = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    CHECK(n && take(n, 1) == 0);
    char why[512];
    /* GPU 1 taken: a 2-GPU pod goes to the bridged pair (2,3), not (0,2). */
    model_request two = req_whole(2, 0);
    for (int p = 0; p < NAWARE; p++) CHECK_STR(choice_on(aware[p], &ctx, &two, n, why, sizeof why), "23");
    /* The paper's policies take the lowest idle GPUs, unless the pod requires NVLink. */
    for (int p = 0; p < NPAPER; p++) CHECK_STR(choice_on(paper[p], &ctx, &two, n, why, sizeof why), "02");
    two.topology = MODEL_ALIGN_NVLINK;
    for (int p = 0; p < NPAPER; p++) CHECK_STR(choice_on(paper[p], &ctx, &two, n, why, sizeof why), "23");
    model_node_free(n);

    /* (0,1) whole and GPU 2 taken: a 1-GPU pod goes to 3, a share too. */
    n = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    CHECK(n && take(n, 2) == 0);
    model_request one = req_whole(1, 0), share = req_frac(300, 0);
    for (int p = 0; p < NAWARE; p++) {
        CHECK_MSG(!strcmp(choice_on(aware[p], &ctx, &one, n, why, sizeof why), "3"), "%s: %s", aware[p], why);
        CHECK_MSG(!strcmp(choice_on(aware[p], &ctx, &share, n, why, sizeof why), "3"), "%s: %s", aware[p], why);
    }
    CHECK_STR(choice_on("fgd", &ctx, &one, n, why, sizeof why), "0");   /* as the paper */
    model_node_free(n);
    policy_workload_free(w);
}

TEST(policy_topo_node_with_nvlink_set_beats_numa_set_whatever_the_packing) {
    policy_workload *w = workload();
    policy_ctx ctx;
    policy_ctx_init(&ctx, 3);
    ctx.workload = w;
    /* fuller: a NUMA-only node with GPUs 0-3 taken (its free 4-7 are a numa set): every packing
     * term prefers it; fresh: an idle DGX, whose 4-GPU set is nvlink. */
    model_node *fuller = test_server_node("fuller", TEST_NUMA8, MODEL_GPU_WHOLE, 1), *fresh = fixture_node("nodes/topo-dgx-a100.json");
    CHECK(fuller && fresh);
    for (int g = 0; g < 4; g++) CHECK(take(fuller, g) == 0);
    model_node *nodes[2] = {fuller, fresh};
    model_request r = req_whole(4, 0);
    policy_result res[2];
    for (int p = 0; p < NAWARE; p++) CHECK_MSG(pick(aware[p], &ctx, &r, nodes, 2, res) == 1, "%s", aware[p]);
    /* Without the topology the packing decides: binpack takes the fuller node. */
    model_node *fuller_unknown = model_node_clone(fuller);
    free(fuller_unknown->topo);
    fuller_unknown->topo = NULL;
    model_node *plain = model_node_clone(fresh);
    free(plain->topo);
    plain->topo = NULL;
    model_node *nodes2[2] = {fuller_unknown, plain};
    CHECK_INT(pick("binpack", &ctx, &r, nodes2, 2, res), 0);
    /* Unknown is not ranked below a known-bad node: a 4-GPU pod on a 2-socket node (none) and
     * on a node of unknown topology -- the same tier, so the packing decides (binpack: the
     * fuller one, which here is the unknown one). */
    model_node *bad = fixture_node("nodes/topo-2socket-4gpu.json");
    model_node *nodes3[2] = {bad, fuller_unknown};
    CHECK_INT(pick("binpack", &ctx, &r, nodes3, 2, res), 1);
    CHECK(res[0].feasible && res[1].feasible);
    CHECK(res[0].score < 100 && res[1].score <= 100);   /* tier 0 both */
    model_node_free(fuller);
    model_node_free(fresh);
    model_node_free(fuller_unknown);
    model_node_free(plain);
    model_node_free(bad);
    policy_workload_free(w);
}

TEST(policy_topo_required_alignment_is_a_fit_rule_for_every_policy) {
    policy_workload *w = workload();
    policy_ctx ctx;
    policy_ctx_init(&ctx, 5);
    ctx.workload = w;
    model_node *p8 = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    model_node *plain = fixture_node("nodes/plain-a100-80gb-x8.json");
    CHECK(p8 && plain);
    model_request r = req_whole(4, 0);
    r.topology = MODEL_ALIGN_NVLINK;
    for (int i = 0; i < policy_count(); i++) {
        const char *name = policy_name(policy_at(i));
        char why[512];
        CHECK_MSG(!strcmp(choice_on(name, &ctx, &r, p8, why, sizeof why), "-"), "%s placed 4 GPUs on pcie8", name);
        CHECK_CONTAINS(why, "the best free set is pcie");
        CHECK_MSG(!strcmp(choice_on(name, &ctx, &r, plain, why, sizeof why), "-"), "%s on unknown topology", name);
        CHECK_CONTAINS(why, "node agent");
    }
    r.topology = MODEL_ALIGN_NUMA;
    for (int i = 0; i < policy_count(); i++) {
        const char *name = policy_name(policy_at(i));
        char why[512];
        const char *got = choice_on(name, &ctx, &r, p8, why, sizeof why);
        CHECK_MSG(!strcmp(got, "0123") || !strcmp(got, "4567"), "%s: %s", name, got);
    }
    model_node_free(p8);
    model_node_free(plain);
    policy_workload_free(w);
}

TEST(policy_topo_place_materialises_a_set_far_down_the_fit_list) {
    /* 16 GPUs in NVLink quads (0-3, 4-7, 8-11, 12-15), PIX between quads of a socket, SYS across:
     * with GPU 0 taken, a 4-GPU pod's best set (4,5,6,7) comes after C(14,3) = 364 sets that
     * start at GPU 1 in model_fit's order. */
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new("quads");
    for (int g = 0; g < 16; g++) model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
    for (int a = 0; a < 16; a++)
        for (int b = a + 1; b < 16; b++)
            model_topo_set(n, a, b, a / 4 == b / 4 ? MODEL_LINK_NVLINK : a / 8 == b / 8 ? MODEL_LINK_PIX : MODEL_LINK_SYS,
                           4);
    CHECK(take(n, 0) == 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    model_request r = req_whole(4, 0);
    policy_result res[1];
    model_assignment a;
    char why[256];
    model_node *nodes[1] = {n};
    CHECK_MSG(policy_place(policy_find("binpack"), &ctx, &r, nodes, 1, res, &a, why, sizeof why) == 0, "%s", why);
    CHECK_INT(a.ngrants, 4);
    for (int i = 0; i < 4; i++) CHECK_INT(a.grant[i].gpu, 4 + i);
    CHECK(model_assign(n, "quad", &a, why, sizeof why) == 0);
    model_node_free(n);
}
