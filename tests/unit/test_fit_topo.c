/* test_fit_topo.c -- tessera.io/topology in model_fit: on the three reference servers (README, Topology) (the
 * fixtures the node agent's annotation describes) a required alignment lets through exactly
 * the aligned GPU sets, and a refusal names what the node has instead. */
#include "harness.h"
#include "model/fit.h"
#include "model_helpers.h"
#include "topo_helpers.h"

static model_request whole(int count, model_align topology) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = MODEL_REQ_WHOLE;
    r.count = count;
    r.topology = (uint8_t)topology;
    return r;
}

/* The GPU set of an assignment as digits ("23"). */
static const char *gpus_of(const model_assignment *a) {
    static char buf[MODEL_MAX_GPUS + 1];
    int k = 0;
    for (int i = 0; i < a->ngrants; i++) {
        char c = (char)('0' + a->grant[i].gpu);
        if (!k || buf[k - 1] != c) buf[k++] = c;
    }
    buf[k] = 0;
    return buf;
}

/* Every assignment fit lists meets the alignment, and there are `want` of them. */
static bool all_aligned(const model_node *n, const model_request *r, int want) {
    model_assignment a[256];
    char why[256] = "";
    int found = model_fit(n, r, a, 256, why, sizeof why);
    if (found != want) {
        printf("    %d assignments, expected %d (%s)\n", found, want, why);
        return false;
    }
    for (int i = 0; i < found && i < 256; i++) {
        int8_t g[MODEL_MAX_GPUS];
        int k = 0;
        for (int j = 0; j < a[i].ngrants; j++)
            if (!k || g[k - 1] != a[i].grant[j].gpu) g[k++] = a[i].grant[j].gpu;
        if ((int)model_topo_align(n, g, k) < r->topology) {
            printf("    assignment %s is %s\n", gpus_of(&a[i]), model_align_name(model_topo_align(n, g, k)));
            return false;
        }
    }
    return true;
}

TEST(fit_topo_required_alignment_on_the_three_servers) {
    model_node *d = fixture_node("nodes/topo-dgx-a100.json");
    model_node *p = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    model_node *s = fixture_node("nodes/topo-2socket-4gpu.json");
    CHECK(d && p && s);
    model_request r = whole(4, MODEL_ALIGN_NVLINK);
    CHECK(all_aligned(d, &r, 70));   /* NVSwitch: all C(8,4) */
    r = whole(8, MODEL_ALIGN_NVLINK);
    CHECK(all_aligned(d, &r, 1));
    r = whole(2, MODEL_ALIGN_NVLINK);
    CHECK(all_aligned(p, &r, 4));    /* the four bridged pairs */
    r = whole(4, MODEL_ALIGN_NUMA);
    CHECK(all_aligned(p, &r, 2));    /* one switch each: C(4,4) x 2 */
    r = whole(3, MODEL_ALIGN_NUMA);
    CHECK(all_aligned(p, &r, 8));    /* C(4,3) x 2 */
    r = whole(2, MODEL_ALIGN_NUMA);
    CHECK(all_aligned(s, &r, 2));    /* (0,1) and (2,3) */
    r = whole(2, MODEL_ALIGN_UNKNOWN);
    CHECK(all_aligned(s, &r, 6));    /* nothing required: all pairs, as before */
    model_node_free(d);
    model_node_free(p);
    model_node_free(s);
}

TEST(fit_topo_refusal_names_the_best_free_set) {
    model_node *p = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    model_node *s = fixture_node("nodes/topo-2socket-4gpu.json");
    CHECK(p && s);
    char why[256];
    model_request r = whole(4, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_fit(p, &r, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "tessera.io/topology: nvlink: no 4 free GPUs here are nvlink-aligned (the best free set is pcie: "
                   "GPUs 0,1,2,3)");
    CHECK(!model_fit_any(p, &r, why, sizeof why));
    CHECK_CONTAINS(why, "the best free set is pcie");
    r = whole(8, MODEL_ALIGN_NUMA);
    CHECK_INT(model_fit(p, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the best free set is none: GPUs 0,1,2,3,4,5,6,7");
    r = whole(2, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_fit(s, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the best free set is numa: GPUs 0,1");
    r = whole(4, MODEL_ALIGN_NUMA);
    CHECK_INT(model_fit(s, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "no 4 free GPUs here are numa-aligned");
    /* Too few GPUs at all is said as before: topology is not the obstacle. */
    r = whole(5, MODEL_ALIGN_NUMA);
    CHECK_INT(model_fit(s, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "needs 5 whole GPUs");
    model_node_free(p);
    model_node_free(s);
}

TEST(fit_topo_partly_taken_pcie8) {
    model_node *p = fixture_node("nodes/topo-pcie8-nvlink-pairs.json");
    CHECK(p);
    char why[256], err[256];
    model_assignment a[64];
    model_request one = whole(1, MODEL_ALIGN_UNKNOWN);
    CHECK(model_fit(p, &one, a, 64, why, sizeof why) == 8);
    model_assignment take = a[1];   /* GPU 1 */
    CHECK_STR(gpus_of(&take), "1");
    CHECK_INT(model_assign(p, "holder", &take, err, sizeof err), 0);
    model_request r = whole(2, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_fit(p, &r, a, 64, why, sizeof why), 3);
    CHECK_STR(gpus_of(&a[0]), "23");
    CHECK_STR(gpus_of(&a[1]), "45");
    CHECK_STR(gpus_of(&a[2]), "67");
    /* With the other switch's pairs taken too, the refusal names the broken pair's best. */
    for (int g = 2; g < 8; g += 2) {
        model_assignment t = {0};
        t.ngrants = 1;
        t.grant[0] = a[0].grant[0];
        t.grant[0].gpu = (int8_t)g;
        char uid[16];
        snprintf(uid, sizeof uid, "h%d", g);
        CHECK_INT(model_assign(p, uid, &t, err, sizeof err), 0);
    }
    CHECK_INT(model_fit(p, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the best free set is pcie: GPUs 0,3");
    char check[256];
    CHECK_MSG(model_node_check(p, check, sizeof check), "%s", check);
    model_node_free(p);
}

TEST(fit_topo_unknown_topology_refuses_required_alignment_only) {
    model_node *n = fixture_node("nodes/plain-a100-80gb-x8.json");
    CHECK(n && n->topo == NULL);
    char why[256];
    model_request r = whole(2, MODEL_ALIGN_NVLINK);
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "this node's is unknown");
    CHECK_CONTAINS(why, "tessera node agent");
    CHECK(!model_fit_any(n, &r, why, sizeof why));
    r = whole(1, MODEL_ALIGN_NVLINK);   /* one GPU: nothing to require */
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 8);
    r = whole(2, MODEL_ALIGN_UNKNOWN);
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 28);
    model_node_free(n);
}

TEST(fit_topo_replicas_and_fractions_span_aligned_gpus) {
    model_node *ts = test_server_node("ts", TEST_PCIE8, MODEL_GPU_TIMESLICE, 4);
    CHECK(ts);
    ts->shared_renamed = true;   /* replicas advertised as nvidia.com/gpu.shared */
    model_request r = whole(2, MODEL_ALIGN_NVLINK);
    r.kind = MODEL_REQ_SHARED;
    CHECK(all_aligned(ts, &r, 4));
    model_node *w = test_server_node("w", TEST_2SOCKET, MODEL_GPU_WHOLE, 1);
    CHECK(w);
    r = whole(2, MODEL_ALIGN_NUMA);
    r.kind = MODEL_REQ_FRACTION;
    r.memory_mib = 1000;
    CHECK(all_aligned(w, &r, 2));
    r.topology = MODEL_ALIGN_NVLINK;
    char why[256];
    CHECK_INT(model_fit(w, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the best free set is numa");
    model_node_free(ts);
    model_node_free(w);
}

TEST(fit_topo_mig_instances_on_one_gpu_need_no_link) {
    model_node *n = test_server_node("m", TEST_PCIE8, MODEL_GPU_MIG, 1);
    CHECK(n);
    char err[256], why[256];
    int pi = model_product_profile_index(n->gpus[0].product, "3g.40gb");
    CHECK(pi >= 0);
    /* GPU 0 and GPU 2 (not bridged) carry two 3g.40gb instances each; the others none. */
    CHECK_INT(model_gpu_add_mig_instance(&n->gpus[0], pi, 0, err, sizeof err), 0);
    CHECK_INT(model_gpu_add_mig_instance(&n->gpus[0], pi, 4, err, sizeof err), 0);
    CHECK_INT(model_gpu_add_mig_instance(&n->gpus[2], pi, 4, err, sizeof err), 0);
    n->mig_strategy = MODEL_MIG_MIXED;
    model_request r = whole(2, MODEL_ALIGN_NVLINK);
    r.kind = MODEL_REQ_MIG;
    snprintf(r.mig_profile, sizeof r.mig_profile, "3g.40gb");
    model_assignment a[16];
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 1);   /* both on GPU 0; (0,2) is only PIX */
    CHECK_STR(gpus_of(&a[0]), "0");
    r.topology = MODEL_ALIGN_NUMA;
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 3);
    model_node_free(n);
}
