/* test_policy.c -- every policy on small hand-made nodes where the right choice is
 * obvious, the fragmentation measure by hand, tie-break and normalisation rules, and
 * the fast path checked against model_fit on random states and against the generic path.
 */
#include "harness.h"
#include "policy_helpers.h"
#include "policy/policy_int.h"   /* policy_test_generic_only */

#include <math.h>

static model_gpu_product T4;   /* generic whole-mode product for the hand-made nodes */

static model_node *mknode(const char *name, int gpus, long long cpu_milli) {
    model_product_init_generic(&T4, "T4", 16000, 0);
    model_node *n = model_node_new(name);
    n->track_host = true;
    n->cpu_milli = cpu_milli;
    n->memory_mib = 1 << 20;
    for (int i = 0; i < gpus; i++) model_node_add_gpu(n, &T4, MODEL_GPU_WHOLE, 1, 0);
    return n;
}

/* Take `permille` of GPU g with a placeholder pod (and cpu). */
static int use_gpu(model_node *n, int g, int permille, long long cpu, const char *uid) {
    model_request r = permille >= 1000 ? req_whole(1, cpu) : req_frac(permille, cpu);
    return place_on(n, &r, uid, g);
}

static const model_gpu_product *a100(void) {
    return model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
}

static model_node *mignode(const char *name, int gpus) {
    model_node *n = model_node_new(name);
    for (int i = 0; i < gpus; i++) {
        model_gpu *g = model_node_add_gpu(n, a100(), MODEL_GPU_MIG, 1, 0);
        if (g) g->mig_dynamic = true;
    }
    return n;
}

/* A one-off workload from (request, count) pairs. */
static policy_workload *wl(const model_request *rs, const long *counts, int n) {
    policy_workload *w = policy_workload_new();
    for (int i = 0; i < n; i++) policy_workload_add(w, &rs[i], counts[i], NULL, 0);
    policy_workload_finish(w, 100.0, NULL, 0);
    return w;
}


/* ------------------------------------------------------------ fragmentation */

TEST(policy_frag_by_hand) {
    model_node *n = mknode("n", 4, 10000);
    CHECK(use_gpu(n, 1, 500, 0, "a") == 0);
    CHECK(use_gpu(n, 2, 700, 0, "b") == 0);
    CHECK(use_gpu(n, 3, 1000, 0, "c") == 0);
    /* free: 1000, 500, 300, 0 */
    model_request rs[3] = {req_frac(400, 1000), req_whole(1, 1000), req_cpu(1000)};
    long counts[3] = {2, 1, 1};
    policy_workload *w = wl(rs, counts, 3);
    double per[3];
    double F = policy_frag_node(n, w, per);
    /* order after finish: share (2), then whole and cpu (1 each, first seen first) */
    CHECK_MSG(fabs(per[0] - 300) < 1e-9, "share-400 frag %.1f, expected 300 (the 300 sliver)", per[0]);
    CHECK_MSG(fabs(per[1] - 800) < 1e-9, "whole frag %.1f, expected 800 (every busy GPU)", per[1]);
    CHECK_MSG(fabs(per[2] - 1800) < 1e-9, "CPU-only frag %.1f, expected 1800 (all free GPU)", per[2]);
    CHECK_MSG(fabs(F - 800) < 1e-9, "node frag %.1f, expected 0.5*300 + 0.25*800 + 0.25*1800 = 800", F);

    /* Not enough CPU for a type: all its free GPU counts. */
    model_request big[1] = {req_frac(400, 20000)};
    long one[1] = {1};
    policy_workload *w2 = wl(big, one, 1);
    CHECK(fabs(policy_frag_node(n, w2, NULL) - 1800) < 1e-9);

    /* Model not allowed: likewise. */
    model_request v100 = req_frac(400, 1000);
    v100.nmodels = 1;
    snprintf(v100.models[0], sizeof v100.models[0], "V100M16");
    policy_workload *w3 = wl(&v100, one, 1);
    CHECK(fabs(policy_frag_node(n, w3, NULL) - 1800) < 1e-9);

    model_node *nodes[1] = {n};
    policy_frag_report rep;
    CHECK_INT(policy_frag_cluster(nodes, 1, w, &rep), 0);
    CHECK(fabs(rep.amount_pct - 100.0 * 800 / 4000) < 1e-9);
    CHECK(fabs(rep.ratio_pct - 100.0 * 800 / 1800) < 1e-9);
    CHECK(policy_frag_node(NULL, w, NULL) < 0);
    policy_workload_free(w);
    policy_workload_free(w2);
    policy_workload_free(w3);
    model_node_free(n);
}

/* A fraction that its delivery cannot hand an MPS replica (model_request_for_reservation_delivery)
 * finds no room on an MPS GPU in the measure either, as fit finds no place there: every free
 * replica counts as fragmentation for it. */
TEST(policy_frag_mps_room_follows_the_delivery) {
    model_gpu_product t4;
    model_product_init_generic(&t4, "T4", 16000, 0);
    model_node *n = model_node_new("mps");
    model_node_add_gpu(n, &t4, MODEL_GPU_MPS, 4, 0);
    model_request share = req_frac(250, 0);
    share.isolation = MODEL_ISO_ANY;
    long one = 1;
    policy_workload *any = wl(&share, &one, 1);
    model_request_for_reservation_delivery(&share);
    CHECK(share.no_mps);
    policy_workload *rsv = wl(&share, &one, 1);
    CHECK_MSG(fabs(policy_frag_node(n, any, NULL)) < 1e-9, "frag %.1f: a free replica is room", policy_frag_node(n, any, NULL));
    CHECK_MSG(fabs(policy_frag_node(n, rsv, NULL) - 1000) < 1e-9, "frag %.1f: all free GPU, no room for it",
              policy_frag_node(n, rsv, NULL));
    model_request fit = share;
    CHECK(model_fit(n, &fit, NULL, 0, NULL, 0) == 0);   /* and fit agrees */
    policy_workload_free(any);
    policy_workload_free(rsv);
    model_node_free(n);
}

TEST(policy_workload_rules) {
    policy_workload *w = policy_workload_new();
    char err[128];
    model_request a = req_frac(500, 1000), b = req_whole(2, 1000), c = req_cpu(500);
    a.memory_bytes = 1 << 30;   /* host memory is not part of the shape */
    model_request a2 = req_frac(500, 1000);
    CHECK_INT(policy_workload_add(w, &a, 50, err, sizeof err), 0);
    CHECK_INT(policy_workload_add(w, &a2, 40, err, sizeof err), 0);
    CHECK_INT(policy_workload_add(w, &b, 6, err, sizeof err), 0);
    CHECK_INT(policy_workload_add(w, &c, 4, err, sizeof err), 0);
    CHECK_INT(policy_workload_add(w, &c, -1, err, sizeof err), -1);
    CHECK_CONTAINS(err, "negative");
    CHECK_INT(policy_workload_finish(w, 95.0, err, sizeof err), 0);
    /* 90 + 6 = 96 % >= 95 %: two types kept, renormalised */
    CHECK_INT(policy_workload_count(w), 2);
    CHECK(fabs(policy_workload_type(w, 0)->p - 90.0 / 96) < 1e-12);
    CHECK_INT(policy_workload_type(w, 1)->gpus, 2);
    CHECK(policy_workload_type(w, 2) == NULL);
    CHECK_INT(policy_workload_add(w, &a, 1, err, sizeof err), -1);
    CHECK_CONTAINS(err, "finished");
    policy_workload_free(w);

    policy_workload *e = policy_workload_new();
    CHECK_INT(policy_workload_finish(e, 95.0, err, sizeof err), -1);
    CHECK_CONTAINS(err, "no tasks");
    policy_workload_free(e);
}

TEST(policy_gpu_free_by_mode) {
    model_node *n = mignode("m", 1);
    model_gpu *g = &n->gpus[0];
    CHECK_INT(policy_gpu_free(g), 1000);                 /* dynamic, empty: all slices */
    model_request r = req_mig("3g.40gb");
    CHECK(place_on(n, &r, "p", -1) == 0);
    CHECK_INT(policy_gpu_free(g), 1000 * 4 / 7);         /* 3 of 7 compute slices held */
    model_node_free(n);

    model_node *t = model_node_new("ts");
    model_product_init_generic(&T4, "T4", 16000, 0);
    model_gpu *tg = model_node_add_gpu(t, &T4, MODEL_GPU_TIMESLICE, 4, 0);
    CHECK(tg != NULL);
    CHECK_INT(policy_gpu_free(tg), 1000);
    tg->replicas_used = 1;   /* read-only view: one replica of four taken */
    CHECK_INT(policy_gpu_free(tg), 750);
    model_node_free(t);
}

/* ------------------------------------------------------------ simple policies */

TEST(policy_bestfit_tightest_gpu_and_node) {
    model_node *n = mknode("n", 4, 64000);
    CHECK(use_gpu(n, 1, 700, 0, "a") == 0);   /* free 300 */
    CHECK(use_gpu(n, 2, 500, 0, "b") == 0);   /* free 500 */
    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    policy_result res[2];
    model_request r = req_frac(250, 1000);
    model_node *one[1] = {n};
    CHECK_INT(pick("bestfit", &ctx, &r, one, 1, res), 0);
    CHECK_INT(res[0].choice.ngpus, 1);
    CHECK_INT(res[0].choice.gpu[0], 1);        /* 300 free: the tightest that fits */
    r = req_frac(400, 1000);
    CHECK_INT(pick("bestfit", &ctx, &r, one, 1, res), 0);
    CHECK_INT(res[0].choice.gpu[0], 2);        /* 300 is too small now, 500 is next */

    /* Node level: the fuller node wins, scores min-max normalised to 100 / 0. */
    model_node *empty = mknode("empty", 4, 64000);
    model_node *two[2] = {empty, n};
    CHECK_INT(pick("bestfit", &ctx, &r, two, 2, res), 1);
    CHECK(res[1].score == 100 && res[0].score == 0);
    model_node_free(n);
    model_node_free(empty);
}

TEST(policy_spread_and_binpack) {
    model_node *busy = mknode("busy", 2, 64000), *idle = mknode("idle", 2, 64000);
    CHECK(use_gpu(busy, 0, 600, 0, "a") == 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[2];
    model_request r = req_frac(200, 1000);
    model_node *nodes[2] = {busy, idle};
    CHECK_INT(pick("spread", &ctx, &r, nodes, 2, res), 1);    /* the emptiest node */
    CHECK_INT(pick("binpack", &ctx, &r, nodes, 2, res), 0);   /* the fullest node */
    CHECK_INT(res[0].choice.gpu[0], 0);                       /* ... and its fullest GPU */
    model_node *b1[1] = {busy};
    CHECK_INT(pick("spread", &ctx, &r, b1, 1, res), 0);
    CHECK_INT(res[0].choice.gpu[0], 1);                       /* spread: the emptiest GPU */
    model_node_free(busy);
    model_node_free(idle);
}

TEST(policy_dotprod_least_aligned) {
    /* CPU-heavy whole-GPU task: the node with less spare CPU is less aligned with it. */
    model_node *cpu_rich = mknode("rich", 8, 96000), *cpu_poor = mknode("poor", 8, 32000);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[2];
    model_request r = req_whole(1, 32000);
    model_node *nodes[2] = {cpu_rich, cpu_poor};
    CHECK_INT(pick("dotprod", &ctx, &r, nodes, 2, res), 1);
    CHECK_INT((int)res[0].score, (int)(100 * (1 - (0.75 * 0.25 + 1.0 * 0.125) / 2)));
    CHECK_INT((int)res[1].score, (int)(100 * (1 - (0.25 * 0.25 + 1.0 * 0.125) / 2)));
    model_node_free(cpu_rich);
    model_node_free(cpu_poor);
}

TEST(policy_gpupacking_tiers) {
    model_node *shared = mknode("shared", 2, 64000);   /* a GPU with room: tier 1 */
    model_node *used = mknode("used", 2, 64000);       /* a GPU fully used: tier 2 */
    model_node *idle = mknode("idle", 2, 64000);       /* idle: tier 3 */
    CHECK(use_gpu(shared, 0, 500, 0, "a") == 0);
    CHECK(use_gpu(used, 0, 1000, 0, "b") == 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[3];
    model_request r = req_frac(300, 1000);
    model_node *nodes[3] = {idle, used, shared};
    CHECK_INT(pick("gpupacking", &ctx, &r, nodes, 3, res), 2);
    CHECK_INT((int)res[2].score, 100 - 50 / 10);   /* 50 % free on the used GPU */
    CHECK_INT((int)res[1].score, 49);              /* one fully free GPU on a used node */
    CHECK_INT((int)res[0].score, 31);              /* idle node with 2 GPUs: 33 - 2 */
    model_node *two[2] = {idle, used};
    CHECK_INT(pick("gpupacking", &ctx, &r, two, 2, res), 1);
    model_request c = req_cpu(1000);
    CHECK_INT(pick("gpupacking", &ctx, &c, nodes, 3, res) >= 0, 1);
    CHECK(res[0].score == 0 && res[1].score == 0 && res[2].score == 0);
    model_node_free(shared);
    model_node_free(used);
    model_node_free(idle);
}

TEST(policy_gpuclustering_classes) {
    model_node *shares = mknode("shares", 8, 64000), *mixed = mknode("mixed", 8, 64000);
    model_node *idle = mknode("idle", 8, 64000), *other = mknode("other", 8, 64000);
    CHECK(use_gpu(shares, 0, 300, 0, "a") == 0);
    CHECK(use_gpu(mixed, 0, 300, 0, "b") == 0);
    model_request w2 = req_whole(2, 0);
    CHECK(place_on(mixed, &w2, "c", -1) == 0);
    CHECK(place_on(other, &w2, "d", -1) == 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[4];
    model_request r = req_frac(200, 1000);
    model_node *nodes[4] = {other, idle, mixed, shares};
    CHECK_INT(pick("gpuclustering", &ctx, &r, nodes, 4, res), 3);
    /* tiers 75 / 50 / 25 / 0 plus 25 * (8000 - free) / 8000, integer as upstream */
    CHECK_INT((int)res[3].score, 75 + 25 * 300 / 8000);
    CHECK_INT((int)res[2].score, 50 + 25 * 2300 / 8000);
    CHECK_INT((int)res[1].score, 25);
    CHECK_INT((int)res[0].score, 25 * 2000 / 8000);
    /* a 2-GPU task goes where 2-GPU tasks are alone */
    model_request r2 = req_whole(2, 1000);
    CHECK_INT(pick("gpuclustering", &ctx, &r2, nodes, 4, res), 0);
    model_node_free(shares);
    model_node_free(mixed);
    model_node_free(idle);
    model_node_free(other);
}

TEST(policy_random_one_winner_deterministic) {
    model_node *nodes[8];
    char name[16];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = mknode(name, 2, 64000);
    }
    policy_ctx ctx;
    policy_ctx_init(&ctx, 7);
    policy_result res[8];
    model_request r = req_frac(300, 1000);
    int seen[8] = {0};
    for (int d = 0; d < 400; d++) {
        ctx.decision = (uint64_t)d;
        int w = pick("random", &ctx, &r, nodes, 8, res);
        CHECK(w >= 0);
        int hundreds = 0;
        for (int i = 0; i < 8; i++) hundreds += res[i].score == 100;
        CHECK_INT(hundreds, 1);
        CHECK(res[w].score == 100);
        int again = pick("random", &ctx, &r, nodes, 8, res);
        CHECK_INT(again, w);   /* same seed and decision: same node */
        seen[w]++;
    }
    for (int i = 0; i < 8; i++) CHECK_MSG(seen[i] > 20, "node %d won %d of 400 draws", i, seen[i]);
    for (int i = 0; i < 8; i++) model_node_free(nodes[i]);
}

/* ------------------------------------------------------------ fgd */

TEST(policy_fgd_avoids_sliver) {
    /* Target: tasks of half a GPU. GPU 0 has exactly 500 free; a 200 there leaves a
     * 300 sliver no target task can use, GPU 1 (1000 free) keeps both usable. */
    model_node *n = mknode("n", 2, 64000);
    CHECK(use_gpu(n, 0, 500, 0, "a") == 0);
    model_request t = req_frac(500, 1000);
    long one = 1;
    policy_workload *w = wl(&t, &one, 1);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    ctx.workload = w;
    policy_result res[1];
    model_request r = req_frac(200, 1000);
    model_node *nodes[1] = {n};
    char why[512];
    CHECK_INT(policy_score(policy_find("fgd"), &r, n, &ctx, &res[0], why, sizeof why), 0);
    CHECK(res[0].feasible);
    CHECK_INT(res[0].choice.gpu[0], 1);
    CHECK_CONTAINS(why, "fgd: fragmentation");
    CHECK_INT(pick("bestfit", &ctx, &r, nodes, 1, res), 0);
    CHECK_INT(res[0].choice.gpu[0], 0);   /* bestfit strands it */

    /* A choice made stale by a later placement is refused, not forced. */
    CHECK(use_gpu(n, 0, 500, 0, "b") == 0);
    model_assignment a;
    char err[256];
    CHECK_INT(policy_materialize(n, &r, &res[0].choice, &a, err, sizeof err), -1);
    CHECK_CONTAINS(err, "no longer fits");
    policy_frag_report rep;
    CHECK_INT(policy_frag_cluster(NULL, 1, w, &rep), -1);
    CHECK_INT(policy_frag_cluster(nodes, 1, NULL, &rep), -1);
    policy_workload_free(w);
    model_node_free(n);
}

TEST(policy_fgd_quantised_vs_exact) {
    /* Two nodes whose deltas differ by a few milli-GPU: the integer score ties them
     * (tie-break by rank decides), the exact score does not. */
    model_node *a = mknode("a", 1, 64000), *b = mknode("b", 1, 64000);
    CHECK(use_gpu(a, 0, 520, 0, "x") == 0);   /* 480 free */
    CHECK(use_gpu(b, 0, 510, 0, "y") == 0);   /* 490 free */
    model_request t = req_frac(450, 1000);
    long one = 1;
    policy_workload *w = wl(&t, &one, 1);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 3);
    ctx.workload = w;
    policy_result res[2];
    model_request r = req_frac(100, 1000);
    model_node *nodes[2] = {a, b};
    /* a: 480 -> 380, frag 0 -> 380 (delta -380); b: 490 -> 390 (delta -390) */
    int q = pick("fgd", &ctx, &r, nodes, 2, res);
    CHECK(q >= 0);
    CHECK(res[0].score == res[1].score);
    CHECK_INT(q, res[0].rank < res[1].rank ? 0 : 1);
    CHECK(fabs(res[0].raw - (-380)) < 1e-9 && fabs(res[1].raw - (-390)) < 1e-9);
    ctx.fgd_exact = true;
    CHECK_INT(pick("fgd", &ctx, &r, nodes, 2, res), 0);
    policy_workload_free(w);
    model_node_free(a);
    model_node_free(b);
}

TEST(policy_fgd_cpu_only_keeps_gpu_nodes_hostable) {
    /* GPU tasks need 8 cores; a CPU-only task that would leave a node with 6 cores
     * makes its GPUs unreachable, so fgd sends it to the node with CPU to spare. */
    model_node *tight = mknode("tight", 2, 10000), *roomy = mknode("roomy", 2, 64000);
    model_request t = req_frac(500, 8000);
    long one = 1;
    policy_workload *w = wl(&t, &one, 1);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 5);
    ctx.workload = w;
    policy_result res[2];
    model_request r = req_cpu(4000);
    model_node *nodes[2] = {tight, roomy};
    CHECK_INT(pick("fgd", &ctx, &r, nodes, 2, res), 1);
    CHECK(res[0].raw < -1999 && fabs(res[1].raw) < 1e-9);
    policy_workload_free(w);
    model_node_free(tight);
    model_node_free(roomy);
}

TEST(policy_fgd_pack_strands_per_task_type) {
    /* Half the GPU tasks ask for 2 cores per GPU, half for 16. "lean" has 8 GPUs and 72
     * cores, "fat" 2 GPUs and 80. A 40-core CPU-only task leaves one task of each type
     * placeable on either node, so FGD's measure sees no difference (both decreases 0,
     * the node rank decides). fgd-pack counts the idle GPUs each type could no longer
     * feed: on lean, 16-core tasks strand 8 - 72/16 = 3.5 GPUs before and 8 - 32/16 = 6
     * after, times their popularity 0.5 = +1250 milli; 2-core tasks strand none (a mean
     * of 9 cores per GPU would have said +4444). On fat nothing is stranded. */
    model_node *lean = mknode("lean", 8, 72000), *fat = mknode("fat", 2, 80000);
    model_request types[2] = {req_whole(1, 2000), req_whole(1, 16000)};
    long counts[2] = {1, 1};
    policy_workload *w = wl(types, counts, 2);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 7);
    ctx.workload = w;
    model_request r = req_cpu(40000);
    model_node *nodes[2] = {lean, fat};
    policy_result res[2];
    char why[512];
    CHECK_INT(policy_score(policy_find("fgd-pack"), &r, lean, &ctx, &res[0], why, sizeof why), 0);
    CHECK_CONTAINS(why, "decrease +0.0), stranded idle GPUs +1250 milli (x0.1) -> FGD 46");
    CHECK_INT(policy_score(policy_find("fgd-pack"), &r, fat, &ctx, &res[1], why, sizeof why), 0);
    CHECK_CONTAINS(why, "stranded idle GPUs +0 milli (x0.1) -> FGD 50");
    CHECK_INT(pick("fgd-pack", &ctx, &r, nodes, 2, res), 1);
    CHECK_INT(pick("fgd", &ctx, &r, nodes, 2, res), res[0].rank < res[1].rank ? 0 : 1);   /* a tie for fgd */
    CHECK(res[0].score == res[1].score);
    /* Taking every core strands every idle GPU for both types: 8000 - 1750. */
    model_request all = req_cpu(72000);
    CHECK_INT(policy_score(policy_find("fgd-pack"), &all, lean, &ctx, &res[0], why, sizeof why), 0);
    CHECK_CONTAINS(why, "stranded idle GPUs +6250 milli");
    /* A 4-core GPU task takes a GPU that 16-core tasks could not have fed: stranding
     * drops (8 -> 7 idle GPUs, 72 -> 68 cores: 3.5 -> 2.75 stranded, times 0.5). */
    model_request g = req_whole(1, 4000);
    CHECK_INT(policy_score(policy_find("fgd-pack"), &g, lean, &ctx, &res[0], why, sizeof why), 0);
    CHECK_CONTAINS(why, "stranded idle GPUs -375 milli");
    policy_workload_free(w);
    model_node_free(lean);
    model_node_free(fat);
}

TEST(policy_fgd_needs_workload) {
    model_node *n = mknode("n", 1, 1000);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res;
    char why[128];
    model_request r = req_frac(100, 0);
    CHECK_INT(policy_score(policy_find("fgd"), &r, n, &ctx, &res, why, sizeof why), -1);
    CHECK_CONTAINS(why, "workload");
    CHECK_INT(policy_score(NULL, &r, n, &ctx, &res, why, sizeof why), -1);
    CHECK(policy_find("nope") == NULL);
    model_request bad = req_whole(0, 0);
    CHECK_INT(policy_score(policy_find("spread"), &bad, n, &ctx, &res, why, sizeof why), -1);
    model_node_free(n);
}

/* ------------------------------------------------------------ mig-aware */

TEST(policy_mig_aware_keeps_4g_placeable) {
    if (!a100()) { test_fail(__FILE__, __LINE__, "catalog lacks NVIDIA-A100-SXM4-80GB"); return; }
    model_node *n = mignode("m", 1);
    model_request held = req_mig("2g.20gb");
    /* a 2g.20gb at slots 4-5 */
    model_assignment as[64];
    int k = model_fit(n, &held, as, 64, NULL, 0);
    int placed = -1;
    for (int i = 0; i < k && i < 64; i++)
        if (as[i].grant[0].mig_start == 4) placed = model_assign(n, "h", &as[i], NULL, 0);
    CHECK_INT(placed, 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[1];
    model_request r = req_mig("1g.10gb");
    model_node *nodes[1] = {n};
    CHECK_INT(pick("mig-aware", &ctx, &r, nodes, 1, res), 0);
    CHECK_INT(res[0].choice.mig_start, 6);   /* 0..3 would block the only 4g.40gb slot */
    CHECK(res[0].choice.mig_create);
    model_assignment a;
    char err[256];
    CHECK_INT(policy_materialize(n, &r, &res[0].choice, &a, err, sizeof err), 0);
    CHECK_INT(model_assign(n, "p", &a, err, sizeof err), 0);
    model_request four = req_mig("4g.40gb");
    CHECK_MSG(model_fit(n, &four, NULL, 0, NULL, 0) > 0, "4g.40gb no longer fits");
    CHECK(model_node_check(n, err, sizeof err));
    /* bestfit has no such care: the first free slot */
    model_node *m2 = mignode("m2", 1);
    k = model_fit(m2, &held, as, 64, NULL, 0);
    for (int i = 0; i < k && i < 64; i++)
        if (as[i].grant[0].mig_start == 4) model_assign(m2, "h", &as[i], NULL, 0);
    nodes[0] = m2;
    CHECK_INT(pick("bestfit", &ctx, &r, nodes, 1, res), 0);
    CHECK_INT(res[0].choice.mig_start, 0);
    model_node_free(n);
    model_node_free(m2);
}

TEST(policy_mig_aware_slot_on_empty_gpu) {
    if (!a100()) { test_fail(__FILE__, __LINE__, "catalog lacks NVIDIA-A100-SXM4-80GB"); return; }
    /* Slots 0-3 would block 4g.40gb; of 4, 5 and 6, slot 6 leaves 2g/1g.20gb a start at 4. */
    model_node *n = mignode("m", 1);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[1];
    model_request r = req_mig("1g.10gb");
    model_node *nodes[1] = {n};
    char why[256];
    CHECK_INT(pick("mig-aware", &ctx, &r, nodes, 1, res), 0);
    CHECK_INT(res[0].choice.mig_start, 6);
    CHECK_INT(policy_score(policy_find("mig-aware"), &r, n, &ctx, &res[0], why, sizeof why), 0);
    CHECK_CONTAINS(why, "MIG 1g.10gb@6 (new)");
    model_node_free(n);
}

TEST(policy_mig_aware_packs_and_prefers_idle_instance) {
    if (!a100()) { test_fail(__FILE__, __LINE__, "catalog lacks NVIDIA-A100-SXM4-80GB"); return; }
    /* Two GPUs, one already partitioned: a new 1g goes to the partitioned one so the
     * other keeps its 7g.80gb. */
    model_node *n = mignode("m", 2);
    model_request three = req_mig("3g.40gb");
    CHECK(place_on(n, &three, "h", 1) == 0);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    policy_result res[2];
    model_request r = req_mig("1g.10gb");
    model_node *nodes[2] = {n, NULL};
    CHECK_INT(pick("mig-aware", &ctx, &r, nodes, 1, res), 0);
    CHECK_INT(res[0].choice.gpu[0], 1);

    /* An idle pre-made 1g.10gb instance on another node wins over creating one. */
    model_node *s = model_node_new("static");
    model_gpu *g = model_node_add_gpu(s, a100(), MODEL_GPU_MIG, 1, 0);
    char err[128];
    CHECK_INT(model_gpu_add_mig_instance(g, model_product_profile_index(a100(), "1g.10gb"), 0, err, sizeof err), 0);
    nodes[1] = s;
    CHECK_INT(pick("mig-aware", &ctx, &r, nodes, 2, res), 1);
    CHECK(!res[1].choice.mig_create);
    CHECK(res[1].score >= 50 && res[0].score < 50);
    model_node_free(n);
    model_node_free(s);
}

/* ------------------------------------------------------------ selection rules */

TEST(policy_tiebreak_by_rank_and_scale_0_10) {
    model_node *nodes[6];
    char name[32];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "node-%d", i);
        nodes[i] = mknode(name, 1, 64000);
    }
    CHECK(use_gpu(nodes[5], 0, 1000, 64000, "full") == 0);   /* infeasible */
    policy_result res[6];
    model_request r = req_frac(100, 1000);
    int winners[2];
    for (int s = 0; s < 2; s++) {
        policy_ctx ctx;
        policy_ctx_init(&ctx, 100 + (uint64_t)s * 7);
        int w = pick("spread", &ctx, &r, nodes, 6, res);   /* five equal scores */
        CHECK(w >= 0 && w < 5);
        for (int i = 0; i < 5; i++) CHECK(i == w || res[i].rank > res[w].rank);
        CHECK(res[w].rank == policy_node_rank(&ctx, nodes[w]->name));
        int out[6];
        policy_scores_0_10(policy_find("spread"), &ctx, res, 6, out);
        CHECK_INT(out[5], 0);
        CHECK_INT(out[w], 10);
        for (int i = 0; i < 5; i++) CHECK(i == w || out[i] == 9);
        winners[s] = w;
        ctx.decision = 99;   /* rank tie-break is fixed for the run */
        CHECK_INT(pick("spread", &ctx, &r, nodes, 6, res), w);
    }
    (void)winners;
    for (int i = 0; i < 6; i++) model_node_free(nodes[i]);
}

TEST(policy_registry_lists_all) {
    const char *names[] = {"binpack", "spread", "bestfit", "dotprod", "gpupacking", "gpuclustering", "random", "fgd",
                           "mig-aware"};
    CHECK_INT(policy_count(), 10);
    for (int i = 0; i < 9; i++) {
        const policy *p = policy_find(names[i]);
        CHECK_MSG(p != NULL, "%s missing", names[i]);
        CHECK_STR(policy_name(p), names[i]);
        CHECK(policy_summary(p) && policy_summary(p)[0]);
    }
}

/* ------------------------------------------------------------ fast path == model */

static int rnd(uint64_t *x, int m) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((*x >> 33) % (uint64_t)m);
}

/* Random openb-like states and requests: every policy's feasibility equals model_fit's,
 * and its choice materialises into an assignment model_assign accepts. */
TEST(policy_fast_path_agrees_with_model_fit) {
    uint64_t x = 12345;
#define RND(m) rnd(&x, (m))
    model_request t[3] = {req_frac(460, 6000), req_whole(1, 12000), req_cpu(4000)};
    long counts[3] = {5, 3, 1};
    policy_workload *w = wl(t, counts, 3);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 9);
    ctx.workload = w;
    int checked = 0;
    for (int round = 0; round < 60; round++) {
        model_node *n = mknode("r", 1 + RND(8), 16000 + 8000 * RND(8));
        int pods = RND(12);
        char uid[32];
        for (int k = 0; k < pods; k++) {
            int kind = RND(3);
            model_request q = kind == 0 ? req_frac(50 + 50 * RND(19), 1000 * RND(4))
                              : kind == 1 ? req_whole(1 + RND(2), 1000 * RND(4)) : req_cpu(1000 * RND(8));
            snprintf(uid, sizeof uid, "p%d", k);
            place_on(n, &q, uid, -1);
        }
        for (int k = 0; k < 20; k++) {
            int kind = RND(3);
            model_request q = kind == 0 ? req_frac(10 * (1 + RND(99)), 1000 * RND(16))
                              : kind == 1 ? req_whole(1 + RND(4), 1000 * RND(16)) : req_cpu(1000 * RND(40));
            int fits = model_fit(n, &q, NULL, 0, NULL, 0) > 0;
            for (int pi = 0; pi < policy_count(); pi++) {
                policy_result res;
                char why[256];
                CHECK_INT(policy_score(policy_at(pi), &q, n, &ctx, &res, why, sizeof why), 0);
                CHECK_MSG(res.feasible == fits, "%s: feasible %d, model_fit %d (%s)", policy_name(policy_at(pi)),
                          res.feasible, fits, why);
                if (!fits) continue;
                model_node *c = model_node_clone(n);
                model_assignment a;
                char err[256];
                CHECK_MSG(policy_materialize(c, &q, &res.choice, &a, err, sizeof err) == 0, "%s", err);
                CHECK_MSG(model_assign(c, "new", &a, err, sizeof err) == 0, "%s", err);
                CHECK(model_node_check(c, err, sizeof err));
                model_node_free(c);
                checked++;
            }
        }
        model_node_free(n);
    }
    CHECK(checked > 1000);
    policy_workload_free(w);
#undef RND
}

/* The simulator's step: place_until full with fgd, state stays consistent, and the
 * cluster fragmentation only counts free capacity. */
TEST(policy_place_fills_consistently) {
    model_node *nodes[4];
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "n%d", i);
        nodes[i] = mknode(name, 4, 32000);
    }
    model_request t[2] = {req_frac(300, 2000), req_whole(1, 4000)};
    long counts[2] = {3, 1};
    policy_workload *w = wl(t, counts, 2);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 11);
    ctx.workload = w;
    policy_result scratch[4];
    int placed = 0;
    char uid[32], why[256];
    for (int k = 0; k < 200; k++) {
        ctx.decision = (uint64_t)k;
        model_assignment a;
        int win = policy_place(policy_find("fgd"), &ctx, &t[k % 2], nodes, 4, scratch, &a, why, sizeof why);
        if (win < 0) continue;
        snprintf(uid, sizeof uid, "pod-%d", k);
        CHECK_MSG(model_assign(nodes[win], uid, &a, why, sizeof why) == 0, "%s", why);
        placed++;
    }
    CHECK(placed > 20);
    policy_frag_report rep;
    CHECK_INT(policy_frag_cluster(nodes, 4, w, &rep), 0);
    CHECK(rep.frag_milli <= rep.free_milli + 1e-9);
    for (int i = 0; i < 4; i++) {
        CHECK(model_node_check(nodes[i], why, sizeof why));
        model_node_free(nodes[i]);
    }
    policy_workload_free(w);
}

/* The generic path (MIG static and dynamic, time-slicing, memory-sized and isolated
 * requests) against model_fit the same way, with a workload of every kind of type. */
TEST(policy_generic_path_agrees_with_model_fit) {
    if (!a100()) { test_fail(__FILE__, __LINE__, "catalog lacks NVIDIA-A100-SXM4-80GB"); return; }
    uint64_t x = 777;
    const char *profs[] = {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.5gb"};
    model_request t[6] = {req_mig("1g.10gb"), req_mig("3g.40gb"), req_mig("7g.80gb"), req_frac(250, 1000),
                          req_whole(1, 1000), req_cpu(500)};
    t[3].memory_mib = 4000;
    long counts[6] = {5, 3, 1, 4, 2, 1};
    policy_workload *w = wl(t, counts, 6);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 21);
    ctx.workload = w;
    model_product_init_generic(&T4, "T4", 16000, 0);
    int checked = 0, feasible = 0;
    char uid[32], err[256];
    for (int round = 0; round < 80; round++) {
        int type = rnd(&x, 3);
        model_node *n = model_node_new("g");
        int ngpu = 1 + rnd(&x, 4);
        for (int i = 0; i < ngpu; i++) {
            if (type == 0) {
                model_gpu *g = model_node_add_gpu(n, a100(), MODEL_GPU_MIG, 1, 0);
                g->mig_dynamic = rnd(&x, 4) != 0;
                if (!g->mig_dynamic)   /* a static layout: 3g + 2g + 1g + 1g */
                    for (int k = 0; k < 4; k++)
                        model_gpu_add_mig_instance(g, model_product_profile_index(a100(), k == 0 ? "3g.40gb" : k == 1 ? "2g.20gb" : "1g.10gb"),
                                                   k == 0 ? 4 : k == 1 ? 0 : k + 0, err, sizeof err);
            } else if (type == 1) {
                model_node_add_gpu(n, &T4, MODEL_GPU_TIMESLICE, 4, 0);
                n->sharing = MODEL_GPU_TIMESLICE;
                n->replicas = 4;
                n->shared_renamed = rnd(&x, 2);
            } else {
                model_node_add_gpu(n, &T4, MODEL_GPU_WHOLE, 1, 0);
            }
        }
        for (int k = 0; k < 20; k++) {
            int kind = rnd(&x, 6);
            model_request q = kind == 0 ? req_mig(profs[rnd(&x, 8)])
                              : kind == 1 ? req_frac(100 * (1 + rnd(&x, 9)), 0)
                              : kind == 2 ? req_whole(1 + rnd(&x, 2), 0) : req_cpu(0);
            if (kind == 1 && rnd(&x, 2)) q.memory_mib = 1000 * (1 + rnd(&x, 8));
            if (kind == 3) { q.kind = MODEL_REQ_SHARED; q.count = 1; }
            if (kind == 4) q = req_frac(200, 0), q.isolation = MODEL_ISO_ANY;
            if (kind == 5) q = req_whole(1, 0), q.isolation = MODEL_ISO_ANY;
            int fits = model_fit(n, &q, NULL, 0, NULL, 0) > 0;
            model_assignment keep;
            bool have = false;
            for (int pi = 0; pi < policy_count(); pi++) {
                policy_result res;
                char why[256];
                CHECK_INT(policy_score(policy_at(pi), &q, n, &ctx, &res, why, sizeof why), 0);
                if (res.feasible != fits) model_node_free(n);
                CHECK_MSG(res.feasible == fits, "%s on %s node: feasible %d, model_fit %d (%s)", policy_name(policy_at(pi)),
                          type == 0 ? "MIG" : type == 1 ? "time-sliced" : "whole", res.feasible, fits, why);
                checked++;
                if (!fits) continue;
                feasible++;
                model_assignment a;
                CHECK_MSG(policy_materialize(n, &q, &res.choice, &a, err, sizeof err) == 0, "%s: %s",
                          policy_name(policy_at(pi)), err);
                if (policy_at(pi) == policy_find("fgd")) {   /* keep the node filling up, through fgd's choice */
                    keep = a;
                    have = true;
                }
            }
            if (have) {
                snprintf(uid, sizeof uid, "p%d", k);
                CHECK_MSG(model_assign(n, uid, &keep, err, sizeof err) == 0, "%s", err);
            }
        }
        CHECK(model_node_check(n, err, sizeof err));
        policy_frag_report rep;
        model_node *one[1] = {n};
        CHECK_INT(policy_frag_cluster(one, 1, w, &rep), 0);
        CHECK(rep.frag_milli >= 0 && rep.frag_milli <= rep.free_milli + 1e-9);
        model_node_free(n);
    }
    CHECK(checked > 5000 && feasible > 1000);
    policy_workload_free(w);
}

/* ------------------------------------------------------------ memory-sized shares: fast == generic */

/* One request on one node under one policy, on the fast path and forced down the generic
 * one (model_fit's candidates): the same return, feasibility, choice, score, raw value,
 * rank and explanation. */
static bool same_fast_generic(const policy *p, const model_request *q, const model_node *n, const policy_ctx *ctx,
                              const char *what) {
    policy_result a, b;
    char wa[512], wb[512];
    int ra = policy_score(p, q, n, ctx, &a, wa, sizeof wa);
    policy_test_generic_only = true;
    int rb = policy_score(p, q, n, ctx, &b, wb, sizeof wb);
    policy_test_generic_only = false;
    bool same = ra == rb && a.feasible == b.feasible && a.rank == b.rank && !strcmp(wa, wb);
    if (same && a.feasible) {
        same = a.score == b.score && a.raw == b.raw && a.choice.ngpus == b.choice.ngpus &&
               a.choice.mig_profile == b.choice.mig_profile && a.choice.mig_start == b.choice.mig_start &&
               a.choice.mig_create == b.choice.mig_create && a.choice.replica == b.choice.replica;
        for (int i = 0; same && i < a.choice.ngpus; i++) same = a.choice.gpu[i] == b.choice.gpu[i];
    }
    if (!same)
        test_fail(__FILE__, __LINE__,
                  "%s, %s, request %d MiB / %d%% mem / %d permille: fast rc %d feasible %d GPU %d score %.17g raw %.17g (%s)"
                  " vs generic rc %d feasible %d GPU %d score %.17g raw %.17g (%s)",
                  what, policy_name(p), q->memory_mib, q->memory_permille / 10, q->compute_permille, ra, a.feasible,
                  a.choice.ngpus ? a.choice.gpu[0] : -1, a.score, a.raw, wa, rb, b.feasible,
                  b.choice.ngpus ? b.choice.gpu[0] : -1, b.score, b.raw, wb);
    return same;
}

static model_request req_mem(int mib, int mem_permille, int permille, long long cpu) {
    model_request r = req_frac(permille, cpu);
    r.memory_mib = mib;
    r.memory_permille = (int16_t)mem_permille;
    return r;
}

/* Hand-made states where memory and compute disagree about which GPUs take a share: a
 * GPU with compute but not memory, one with memory but not compute, partly used ones,
 * one held whole; HAMi-style requests (gpumem + gpucores, gpumem-percentage, gpumem
 * alone) that are memory-bound on some GPUs and compute-bound on others. */
TEST(policy_fast_memory_share_equals_generic) {
    model_request t[3] = {req_frac(460, 6000), req_whole(1, 12000), req_cpu(4000)};
    long counts[3] = {5, 3, 1};
    policy_workload *w = wl(t, counts, 3);
    policy_ctx ctx[4];
    for (int k = 0; k < 4; k++) {
        policy_ctx_init(&ctx[k], 5 + (uint64_t)k);
        ctx[k].decision = (uint64_t)(7 * k);
        ctx[k].workload = k < 3 ? w : NULL;   /* none: mig-aware measures against the request's shape */
    }
    ctx[1].fgd_exact = true;
    ctx[2].tiebreak = POLICY_TIE_RANDOM;
    ctx[2].w_memory = 2.0;

    model_node *n = mknode("hand", 8, 64000);
    model_request pods[] = {
        req_mem(0, 0, 300, 1000),       /* GPU 1: compute-only 30% (4800 MiB) */
        req_mem(14000, 0, 100, 1000),   /* GPU 2: 90% compute free, 2000 MiB free */
        req_mem(1000, 0, 900, 1000),    /* GPU 3: 10% compute free, 15000 MiB free */
        req_whole(1, 1000),             /* GPU 4: held whole */
        req_mem(6000, 0, 200, 1000),    /* GPU 5: two shares, 70% and 8000 MiB free */
        req_mem(2000, 0, 100, 1000),
        req_mem(10240, 0, 500, 1000),   /* GPU 6: 50% and 5760 MiB free */
    };
    int at[] = {1, 2, 3, 4, 5, 5, 6};
    char uid[32];
    for (int k = 0; k < (int)(sizeof pods / sizeof pods[0]); k++) {
        snprintf(uid, sizeof uid, "h%d", k);
        CHECK_INT(place_on(n, &pods[k], uid, at[k]), 0);
    }
    /* and a node where every GPU lacks one or the other */
    model_node *tight = mknode("tight", 3, 64000);
    CHECK_INT(place_on(tight, &pods[1], "t0", 0), 0);
    CHECK_INT(place_on(tight, &pods[2], "t1", 1), 0);
    CHECK_INT(place_on(tight, &pods[6], "t2", 2), 0);

    model_request qs[] = {
        req_mem(10240, 0, 300, 2000),   /* HAMi gpumem 10240 + gpucores 30: memory-bound */
        req_mem(2000, 0, 100, 2000),    /* fits the memory-short GPU 2 exactly */
        req_mem(4000, 0, 850, 2000),    /* compute-bound */
        req_mem(4000, 0, 0, 2000),      /* gpumem alone: charges no compute */
        req_mem(0, 250, 300, 2000),     /* gpumem-percentage 25 + gpucores 30 */
        req_mem(0, 500, 0, 2000),       /* gpumem-percentage alone */
        req_mem(1000, 900, 200, 2000),  /* both given: memory_mib wins, as in model_fit */
        req_mem(16000, 0, 1000, 2000),  /* a whole GPU's worth, as a share */
        req_mem(17000, 0, 100, 2000),   /* more than any GPU has */
        req_mem(5760, 0, 500, 2000),    /* exactly GPU 6's remainder */
        req_mem(8000, 0, 300, 200000),  /* more host CPU than the node has */
    };
    int compared = 0;
    for (int qi = 0; qi < (int)(sizeof qs / sizeof qs[0]); qi++)
        for (int k = 0; k < 4; k++)
            for (int pi = 0; pi < policy_count(); pi++) {
                CHECK(same_fast_generic(policy_at(pi), &qs[qi], n, &ctx[k], "hand node"));
                CHECK(same_fast_generic(policy_at(pi), &qs[qi], tight, &ctx[k], "tight node"));
                compared += 2;
            }
    /* the states by hand do what they say: GPU 2 has compute but not memory for 10240 MiB */
    policy_result res;
    CHECK_INT(policy_score(policy_find("bestfit"), &qs[0], tight, &ctx[0], &res, NULL, 0), 0);
    CHECK(!res.feasible);
    CHECK_INT(policy_score(policy_find("spread"), &qs[1], tight, &ctx[0], &res, NULL, 0), 0);
    CHECK(res.feasible && res.choice.gpu[0] == 0);   /* the emptiest, with exactly its 2000 MiB */
    model_node_free(n);
    model_node_free(tight);

    /* random partly used nodes, memory-sized and compute-only pods mixed */
    uint64_t x = 4242;
    for (int round = 0; round < 120; round++) {
        model_node *r = mknode("r", 1 + rnd(&x, 8), 16000 + 8000 * rnd(&x, 8));
        r->track_host = rnd(&x, 4) != 0;
        int npods = rnd(&x, 16);
        for (int k = 0; k < npods; k++) {
            int kind = rnd(&x, 4);
            model_request q = kind == 0 ? req_whole(1, 1000 * rnd(&x, 4))
                              : req_mem(kind == 1 ? 1000 * rnd(&x, 15) : 0, kind == 2 ? 50 * rnd(&x, 15) : 0,
                                        50 * rnd(&x, 19), 1000 * rnd(&x, 4));
            if (q.kind == MODEL_REQ_FRACTION && !q.memory_mib && !q.memory_permille && !q.compute_permille)
                q.compute_permille = 100;
            snprintf(uid, sizeof uid, "p%d", k);
            place_on(r, &q, uid, rnd(&x, 8));
        }
        for (int k = 0; k < 12; k++) {
            model_request q = req_mem(rnd(&x, 2) ? 512 * rnd(&x, 32) : 0, rnd(&x, 3) ? 0 : 25 * rnd(&x, 41),
                                      rnd(&x, 5) ? 10 * rnd(&x, 101) : 0, 1000 * rnd(&x, 16));
            if (!q.memory_mib && !q.memory_permille) q.memory_mib = 1000;
            const policy_ctx *c = &ctx[rnd(&x, 4)];
            for (int pi = 0; pi < policy_count(); pi++) {
                CHECK(same_fast_generic(policy_at(pi), &q, r, c, "random node"));
                compared++;
            }
        }
        model_node_free(r);
    }
    CHECK(compared > 10000);
    policy_workload_free(w);
}

/* ------------------------------------------------------------ layered sharing */

/* Replicas of time-sliced MIG instances, under every policy: feasible exactly when model_fit
 * says so, a choice that materialises, the default path equal to the generic one, and a
 * free replica of a 1g instance counted as less capacity than a free 1g instance. */
TEST(policy_layered_mig_agrees_with_model_fit) {
    uint64_t x = 4242;
    model_request t[5] = {req_mig("1g.10gb"), req_mig("1g.10gb"), req_mig("3g.40gb"), req_frac(100, 1000), req_cpu(500)};
    t[0].isolation = MODEL_ISO_TIMESLICE;
    t[1].mig_replica = true;
    t[3].isolation = MODEL_ISO_TIMESLICE;
    t[3].memory_mib = 2000;
    long counts[5] = {6, 3, 2, 3, 1};
    policy_workload *w = wl(t, counts, 5);
    policy_ctx ctx[2];
    policy_ctx_init(&ctx[0], 3);
    ctx[0].workload = w;
    policy_ctx_init(&ctx[1], 4);   /* no workload: mig-aware against the request's shape */
    int checked = 0, feasible = 0, replicas = 0;
    char uid[MODEL_UID_LEN], err[256];
    for (int round = 0; round < 24; round++) {
        bool single = round % 3 == 2, renamed = (round / 3) % 2;
        model_node *n = layered_node("layered", 1 + rnd(&x, 3), single, 2 + rnd(&x, 3), renamed);
        /* idle: a free replica of a 1g is 1/R of a free 1g instance's capacity */
        CHECK_INT(policy_gpu_free(&n->gpus[0]), 1000 * (single ? 7 : 7) / 7);
        for (int k = 0; k < 30; k++) {
            int kind = rnd(&x, 7);
            model_request q = kind <= 2 ? req_mig(kind == 2 ? "3g.40gb" : "1g.10gb")
                              : kind == 3 ? req_frac(50 * (1 + rnd(&x, 4)), 0)
                              : kind == 4 ? req_whole(1, 0) : req_cpu(0);
            if (kind == 0) q.isolation = rnd(&x, 2) ? MODEL_ISO_TIMESLICE : MODEL_ISO_ANY;
            if (kind == 1) q.mig_replica = true;
            if (kind == 3) q.isolation = rnd(&x, 2) ? MODEL_ISO_TIMESLICE : MODEL_ISO_ANY;
            if (kind == 4) q.isolation = rnd(&x, 2) ? MODEL_ISO_TIMESLICE : MODEL_ISO_DEFAULT;
            if (kind == 5) { q.kind = MODEL_REQ_SHARED; q.count = 1; }
            int fits = model_fit(n, &q, NULL, 0, NULL, 0) > 0;
            model_assignment keep;
            bool have = false;
            for (int c = 0; c < 2; c++)
                for (int pi = 0; pi < policy_count(); pi++) {
                    const policy *p = policy_at(pi);
                    policy_result res;
                    char why[256];
                    /* fgd and fgd-pack need a workload */
                    if (c == 1 && (p == policy_find("fgd") || p == policy_find("fgd-pack"))) continue;
                    CHECK_MSG(policy_score(p, &q, n, &ctx[c], &res, why, sizeof why) == 0, "%s: %s", policy_name(p), why);
                    CHECK_MSG(res.feasible == fits, "%s: feasible %d, model_fit %d (%s)", policy_name(p), res.feasible,
                              fits, why);
                    CHECK(same_fast_generic(p, &q, n, &ctx[c], "layered"));
                    checked++;
                    if (!fits || !res.feasible) continue;
                    feasible++;
                    model_assignment a;
                    CHECK_MSG(policy_materialize(n, &q, &res.choice, &a, err, sizeof err) == 0, "%s: %s",
                              policy_name(p), err);
                    if (c == 0 && p == policy_find("fgd")) keep = a, have = true;
                }
            if (have) {
                snprintf(uid, sizeof uid, "p%d", k);
                CHECK_MSG(model_assign(n, uid, &keep, err, sizeof err) == 0, "%s", err);
                replicas += keep.grant[0].replica >= 0 && keep.grant[0].mig_profile >= 0;
            }
            if (k % 4 == 3 && n->nlive) {   /* departures: replicas come back */
                int j = rnd(&x, n->nallocs);
                if (n->allocs[j].uid[0]) {
                    snprintf(uid, sizeof uid, "%s", n->allocs[j].uid);
                    model_release(n, uid);
                }
            }
            CHECK(model_node_check(n, err, sizeof err));
        }
        policy_frag_report rep;
        model_node *one[1] = {n};
        CHECK_INT(policy_frag_cluster(one, 1, w, &rep), 0);
        CHECK(rep.frag_milli >= 0 && rep.frag_milli <= rep.free_milli + 1e-9);
        model_node_free(n);
    }
    CHECK_MSG(checked > 5000 && feasible > 1000 && replicas > 50, "checked %d feasible %d replicas %d", checked, feasible,
              replicas);
    policy_workload_free(w);
}

/* Free capacity of a layered GPU by hand: replicas taken lower R in 1/R steps of the instance. */
TEST(policy_layered_free_capacity) {
    model_node *n = layered_node("one", 1, false, 4, false);
    model_request q = req_mig("1g.10gb");
    q.isolation = MODEL_ISO_TIMESLICE;
    int R0 = policy_gpu_free(&n->gpus[0]);
    CHECK_INT(R0, 1000);   /* nothing held: 3 + 4 of 7 compute slices */
    model_assignment a[8];
    char err[256];
    CHECK(model_fit(n, &q, a, 8, NULL, 0) == 4);
    CHECK_INT(model_assign(n, "a", &a[0], err, sizeof err), 0);
    /* one replica of a 1g = 1/4 of 1/7 of the GPU */
    CHECK_INT(policy_gpu_free(&n->gpus[0]), (7000 - 1000 / 4) / 7);
    model_request whole1g = req_mig("3g.40gb");
    CHECK(model_fit(n, &whole1g, a, 8, NULL, 0) == 1);
    CHECK_INT(model_assign(n, "b", &a[0], err, sizeof err), 0);
    CHECK_INT(policy_gpu_free(&n->gpus[0]), (4000 - 250) / 7);
    /* the frag measure: a 1g-replica type still has room, a plain 1g type does not */
    model_request types[2] = {q, req_mig("1g.10gb")};
    long counts[2] = {1, 1};
    policy_workload *w = wl(types, counts, 2);
    double per[2];
    CHECK(policy_frag_node(n, w, per) >= 0);
    CHECK(per[0] == 0);                                   /* room: nothing is fragmented for it */
    CHECK(per[1] == policy_gpu_free(&n->gpus[0]));        /* no plain 1g: every free bit is stranded */
    policy_workload_free(w);
    model_node_free(n);
}
