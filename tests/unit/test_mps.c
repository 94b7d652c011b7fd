/* test_mps.c -- MPS shares (tessera.io/compute-sharing: mps) in the model and the policies: only on
 * unshared GPUs of compute capability 7.0 or later, at most the catalog's mps_max_clients per GPU,
 * never next to time-sliced soft shares, one uid per GPU; the GPU's mode and uid follow its holders
 * and leave with the last one; model_assign refuses what model_fit would not list; model_node_check
 * catches a GPU whose bookkeeping says otherwise; every policy keeps the rules under a random mix of
 * MPS shares of several uids, time-sliced shares and whole GPUs, and packs an MPS share onto a GPU
 * already serving its uid. */
#include "harness.h"
#include "model/fit.h"
#include "model/node.h"
#include "policy/policy.h"
#include "policy/policy_int.h"   /* policy_test_generic_only */
#include "policy_helpers.h"

#include <stdlib.h>
#include <string.h>

static const model_gpu_product *product(const char *gfd) {
    return model_catalog_find(model_catalog_default(), gfd);
}
static const model_gpu_product *a100(void) { return product("NVIDIA-A100-SXM4-80GB"); }
static const model_gpu_product *v100(void) { return product("Tesla-V100-SXM2-16GB"); }

static model_node *whole_node(const char *name, const model_gpu_product *p, int gpus) {
    model_node *n = model_node_new(name);
    for (int i = 0; i < gpus; i++) model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
    return n;
}

static model_request mps_share(int permille, int64_t uid) {
    model_request r = req_frac(permille, 0);
    r.compute_sharing = MODEL_COMPUTE_MPS;
    r.run_as_uid = uid;
    return r;
}

/* Fit r on n and assign the first assignment as uid; 0, or -1 with why. */
static int place(model_node *n, const char *uid, const model_request *r, model_assignment *out, char *why, size_t len) {
    model_assignment a;
    if (model_fit(n, r, &a, 1, why, len) <= 0) return -1;
    if (out) *out = a;
    return model_assign(n, uid, &a, why, len);
}

#define CHECK_NODE(n)                                                                   \
    do {                                                                                \
        char bad_[256];                                                                 \
        CHECK_MSG(model_node_check(n, bad_, sizeof bad_), "%s", bad_);                  \
    } while (0)

TEST(mps_share_takes_an_unshared_gpu_and_marks_it) {
    CHECK(a100() && v100());
    model_node *n = whole_node("a", a100(), 1);
    model_request r = mps_share(300, 1000);
    model_assignment a;
    char why[256];
    CHECK_MSG(place(n, "p1", &r, &a, why, sizeof why) == 0, "%s", why);
    CHECK_INT(a.ngrants, 1);
    CHECK(a.grant[0].mps);
    CHECK_INT(a.mps_uid, 1000);
    CHECK_INT(a.grant[0].compute_permille, 300);
    CHECK_INT(n->gpus[0].mps_clients, 1);
    CHECK_INT(n->gpus[0].mps_uid, 1000);
    char txt[160];
    model_assignment_format(n, &a, txt, sizeof txt);
    CHECK_STR(txt, "GPU 0 MPS share (24576 MiB, 30 percent SMs, uid 1000)");
    CHECK_NODE(n);
    /* the mode leaves with the last client */
    CHECK_INT(model_release(n, "p1"), 0);
    CHECK_INT(n->gpus[0].mps_clients, 0);
    CHECK_INT(n->gpus[0].mps_uid, -1);
    model_request ts = req_frac(300, 0);
    CHECK_MSG(place(n, "p2", &ts, &a, why, sizeof why) == 0, "%s", why);
    CHECK(!a.grant[0].mps);
    CHECK_NODE(n);
    model_node_free(n);
}

TEST(mps_share_memory_only_is_charged_compute_in_proportion) {
    /* gpu-memory 20480 on an 80 GiB A100: a quarter of the memory, so a quarter of the SMs (MPS caps the
     * client's threads at its charge; charged nothing it would run on 1 percent) */
    model_node *n = whole_node("a", a100(), 1);
    model_request r = mps_share(0, 1000);
    r.memory_mib = 20480;
    model_assignment a;
    char why[256];
    CHECK_MSG(place(n, "p", &r, &a, why, sizeof why) == 0, "%s", why);
    CHECK_INT(a.grant[0].memory_mib, 20480);
    CHECK_INT(a.grant[0].compute_permille, 250);
    CHECK_INT(model_fraction_compute(&r, 81920), 250);
    r.compute_sharing = MODEL_COMPUTE_TIMESLICE;   /* time-sliced: competes for time, charged no SMs */
    CHECK_INT(model_fraction_compute(&r, 81920), 0);
    model_node_free(n);
}

TEST(mps_modes_never_mix_on_one_gpu_and_the_reasons_say_why) {
    model_node *n = whole_node("a", a100(), 1);
    model_request m1000 = mps_share(250, 1000), m2000 = mps_share(250, 2000), ts = req_frac(250, 0);
    char why[256];
    CHECK_MSG(place(n, "m1", &m1000, NULL, why, sizeof why) == 0, "%s", why);
    /* same uid joins */
    CHECK_MSG(place(n, "m2", &m1000, NULL, why, sizeof why) == 0, "%s", why);
    /* another uid does not */
    CHECK_INT(model_fit(n, &m2000, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "needs 1 x fraction (25 percent SMs) mps uid=2000; GPU 0 runs MPS clients as uid 1000; this pod "
                   "runs as uid 2000 (MPS serves one user at a time)");
    /* nor a time-sliced share */
    CHECK_INT(model_fit(n, &ts, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "needs 1 x fraction (25 percent SMs); GPU 0 serves MPS clients (uid 1000); a time-sliced share never "
                   "joins them");
    CHECK(!model_fit_any(n, &ts, NULL, 0));
    CHECK(!strchr(why, '%'));
    /* a whole GPU neither (the GPU is in use) */
    model_request whole = req_whole(1, 0);
    CHECK_INT(model_fit(n, &whole, NULL, 0, NULL, 0), 0);
    CHECK_NODE(n);
    model_release(n, "m1");
    model_release(n, "m2");
    /* the other way round */
    CHECK_MSG(place(n, "t1", &ts, NULL, why, sizeof why) == 0, "%s", why);
    CHECK_INT(model_fit(n, &m1000, NULL, 0, why, sizeof why), 0);
    CHECK_STR(why, "needs 1 x fraction (25 percent SMs) mps uid=1000; GPU 0 carries time-sliced soft shares; an MPS "
                   "share never joins them");
    CHECK_NODE(n);
    model_node_free(n);
    /* with several GPUs each request finds its own */
    n = whole_node("b", a100(), 3);
    CHECK_MSG(place(n, "m", &m1000, NULL, why, sizeof why) == 0, "%s", why);
    CHECK_MSG(place(n, "t", &ts, NULL, why, sizeof why) == 0, "%s", why);
    CHECK_MSG(place(n, "o", &m2000, NULL, why, sizeof why) == 0, "%s", why);
    CHECK_INT(n->gpus[0].mps_uid, 1000);
    CHECK_INT(model_gpu_timeslice_shares(&n->gpus[1]), 1);
    CHECK_INT(n->gpus[2].mps_uid, 2000);
    CHECK_NODE(n);
    model_node_free(n);
}

TEST(mps_share_needs_volta_unshared_non_mig_gpus) {
    char why[256];
    model_request r = mps_share(250, 1000);
    /* V100 (7.0) is enough */
    model_node *n = whole_node("v", v100(), 1);
    CHECK(model_fit_any(n, &r, why, sizeof why));
    model_node_free(n);
    /* a model the catalog does not know and nothing says its compute capability: no */
    model_gpu_product generic, pascal = *v100();
    model_product_init_generic(&generic, "Tesla-P100", 16000, 0);
    n = whole_node("g", &generic, 1);
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "GPU 0 (Tesla-P100): compute capability unknown");
    model_node_free(n);
    /* Pascal (6.0): MPS runs there, without per-client limits */
    pascal.cc_major = 6;
    n = whole_node("p", &pascal, 1);
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "has compute capability 6.0; MPS shares need 7.0 (Volta) or later");
    model_node_free(n);
    /* device-plugin time-slicing, MPS replicas and MIG: not unshared */
    n = model_node_new("ts");
    model_node_add_gpu(n, a100(), MODEL_GPU_TIMESLICE, 4, 0);
    n->sharing = MODEL_GPU_TIMESLICE;
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "an MPS share (tessera.io/compute-sharing: mps) takes an unshared GPU, and the GPUs here are "
                        "time-sliced replicas");
    model_node_free(n);
    n = model_node_new("mig");
    model_gpu *g = model_node_add_gpu(n, a100(), MODEL_GPU_MIG, 1, 0);
    g->mig_dynamic = true;
    n->mig_strategy = MODEL_MIG_MIXED;
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the GPUs here are MIG-enabled");
    model_node_free(n);
}

TEST(mps_unknown_model_takes_mps_shares_when_gfd_labels_its_compute_capability) {
    const char *node =
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"new\",\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-Future-GPU\","
        "\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"49152\",\"nvidia.com/gpu.compute.major\":\"%s\","
        "\"nvidia.com/gpu.compute.minor\":\"%s\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"1\"}}}";
    const char *cc[][2] = {{"12", "0"}, {"6", "1"}, {"x", "0"}};
    bool want[] = {true, false, false};
    for (int i = 0; i < 3; i++) {
        char json[1024], err[256], why[256];
        snprintf(json, sizeof json, node, cc[i][0], cc[i][1]);
        model_node *n = model_node_from_json_text(json, strlen(json), NULL, err, sizeof err);
        CHECK_MSG(n && !n->reason[0], "%s %s", err, n ? n->reason : "");
        model_request r = mps_share(500, 1000);
        bool fits = model_fit_any(n, &r, why, sizeof why);
        model_node_free(n);
        CHECK_MSG(fits == want[i], "compute capability %s.%s: fits %d (%s)", cc[i][0], cc[i][1], fits, why);
    }
}

TEST(mps_clients_are_capped_per_gpu) {
    /* V100: 16 clients (the catalog's mps_max_clients below compute capability 7.5) */
    model_node *n = whole_node("v", v100(), 1);
    model_request r = mps_share(50, 1000);   /* 5 percent: room for 20 by compute */
    char why[256], uid[16];
    for (int i = 0; i < 16; i++) {
        snprintf(uid, sizeof uid, "p%d", i);
        CHECK_MSG(place(n, uid, &r, NULL, why, sizeof why) == 0, "client %d: %s", i, why);
    }
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "GPU 0 serves 16 MPS clients, the most its MPS server takes");
    CHECK_NODE(n);
    model_node_free(n);
}

TEST(mps_assign_refuses_what_fit_would_not_list) {
    model_node *n = whole_node("a", a100(), 2);
    model_request ts = req_frac(250, 0), m = mps_share(250, 1000);
    model_assignment a, b;
    char err[256];
    CHECK(place(n, "t", &ts, &a, err, sizeof err) == 0);   /* GPU 0 time-sliced */
    CHECK(model_fit(n, &m, &b, 1, err, sizeof err) == 1);   /* lands on GPU 1 */
    CHECK_INT(b.grant[0].gpu, 1);
    /* forged onto GPU 0 */
    model_assignment f = b;
    f.grant[0].gpu = 0;
    CHECK_INT(model_assign(n, "f1", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "GPU 0 carries time-sliced soft shares");
    /* an MPS grant without a valid uid, or charging no compute */
    f = b;
    f.mps_uid = -1;
    CHECK_INT(model_assign(n, "f2", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "no valid uid");
    f = b;
    f.grant[0].compute_permille = 0;
    CHECK_INT(model_assign(n, "f3", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "charges no compute");
    /* an MPS flag on a whole GPU */
    f = b;
    f.grant[0].exclusive = true;
    f.grant[0].memory_mib = n->gpus[1].memory_mib;
    f.grant[0].compute_permille = 1000;
    CHECK_INT(model_assign(n, "f4", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "an MPS share is a soft share");
    /* the real one, then a time-sliced share forged onto it, and an MPS share of another uid */
    CHECK_INT(model_assign(n, "m", &b, err, sizeof err), 0);
    f = a;
    f.grant[0].gpu = 1;
    CHECK_INT(model_assign(n, "f5", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "GPU 1 serves MPS clients (uid 1000)");
    f = b;
    f.mps_uid = 2000;
    CHECK_INT(model_assign(n, "f6", &f, err, sizeof err), -1);
    CHECK_CONTAINS(err, "runs MPS clients as uid 1000; this pod runs as uid 2000");
    CHECK_NODE(n);
    CHECK_INT(n->nlive, 2);
    model_node_free(n);
}

TEST(mps_node_check_catches_wrong_bookkeeping) {
    model_node *n = whole_node("a", a100(), 2);
    model_request m = mps_share(250, 1000);
    char err[256];
    CHECK(place(n, "m1", &m, NULL, err, sizeof err) == 0);
    CHECK(place(n, "m2", &m, NULL, err, sizeof err) == 0);
    CHECK_NODE(n);
    n->gpus[0].mps_clients = 1;
    CHECK(!model_node_check(n, err, sizeof err));
    CHECK_CONTAINS(err, "mps_clients 1, MPS grants 2");
    n->gpus[0].mps_clients = 2;
    n->gpus[0].mps_uid = 7;
    CHECK(!model_node_check(n, err, sizeof err));
    CHECK_CONTAINS(err, "mps_uid 7, its MPS shares run as 1000");
    n->gpus[0].mps_uid = 1000;
    /* two uids on one GPU, or an MPS grant next to a time-sliced one: as if assign had let them in */
    n->allocs[1].a.mps_uid = 2000;
    CHECK(!model_node_check(n, err, sizeof err));
    CHECK_CONTAINS(err, "MPS shares of different uids");
    n->allocs[1].a.mps_uid = 1000;
    n->allocs[1].a.grant[0].mps = false;
    n->gpus[0].mps_clients = 1;
    CHECK(!model_node_check(n, err, sizeof err));
    CHECK_CONTAINS(err, "mixes 1 MPS shares with 1 other grants");
    n->allocs[1].a.grant[0].mps = true;
    n->gpus[0].mps_clients = 2;
    CHECK_NODE(n);
    model_node_free(n);
}

TEST(mps_regrant_moves_shares_with_their_uid) {
    model_node *n = whole_node("a", a100(), 3);
    model_request m = mps_share(250, 1000), o = mps_share(250, 2000);
    model_assignment a1, a2, b, moved[2];
    char err[256];
    CHECK(place(n, "m1", &m, &a1, err, sizeof err) == 0);
    CHECK(place(n, "m2", &m, &a2, err, sizeof err) == 0);
    CHECK(place(n, "o", &o, &b, err, sizeof err) == 0);
    CHECK_INT(a1.grant[0].gpu, 0);
    CHECK_INT(b.grant[0].gpu, 1);
    /* GPU 0's reservation refused: its two clients move together to the idle GPU 2, not to GPU 1 (uid 2000) */
    const char *uids[] = {"m1", "m2"};
    model_assignment from[] = {a1, a2};
    int8_t rank[MODEL_MAX_GPUS] = {0, 1, 1};
    int g = model_regrant_group(n, 2, uids, from, 0, rank, moved, err, sizeof err);
    CHECK_MSG(g == 2, "moved to %d: %s", g, err);
    CHECK(moved[0].grant[0].mps);
    CHECK_INT(moved[1].mps_uid, 1000);
    /* and a single move onto GPU 1 is refused for the uid */
    CHECK_INT(model_regrant(n, &a1, 0, 1, &moved[0], err, sizeof err), -1);
    CHECK_CONTAINS(err, "runs MPS clients as uid 2000");
    model_node_free(n);
}

TEST(mps_set_sharing_marks_a_decoded_assignment_as_fit_would) {
    model_node *n = whole_node("a", a100(), 2);
    model_request m = mps_share(250, 1000);
    model_assignment fit, bare;
    char err[256];
    CHECK(model_fit(n, &m, &fit, 1, err, sizeof err) == 2);
    bare = fit;   /* what the annotation gives back: GPUs and amounts, no mode */
    bare.grant[0].mps = false;
    bare.mps_uid = 0;
    model_assignment_set_sharing(&bare, &m);
    CHECK(bare.grant[0].mps);
    CHECK_INT(bare.mps_uid, 1000);
    CHECK(!memcmp(&bare.grant[0], &fit.grant[0], sizeof bare.grant[0]));
    /* a time-sliced request leaves its grants time-sliced, and whole GPUs are never marked */
    model_request ts = req_frac(250, 0);
    model_assignment_set_sharing(&bare, &ts);
    CHECK(!bare.grant[0].mps);
    model_assignment w = {.ngrants = 1};
    w.grant[0].exclusive = true;
    w.grant[0].replica = w.grant[0].mig_profile = -1;
    model_assignment_set_sharing(&w, &m);
    CHECK(!w.grant[0].mps);
    model_node_free(n);
}

/* ------------------------------------------------------------ policies */

static unsigned rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Shares of 1/8, 1/4 and 1/2, MPS of three uids or time-sliced, memory-sized sometimes; whole GPUs. */
static model_request random_request(unsigned *s) {
    unsigned k = rnd(s) % 10;
    if (k == 0) return req_whole(1 + (int)(rnd(s) % 2), 0);
    static const int sizes[] = {125, 250, 500};
    model_request r = req_frac(sizes[rnd(s) % 3], 0);
    if (rnd(s) % 4 == 0) r.memory_mib = 4096 * (1 + (int32_t)(rnd(s) % 4));
    if (k >= 5) {
        r.compute_sharing = MODEL_COMPUTE_MPS;
        r.run_as_uid = 1000 * (1 + (int64_t)(rnd(s) % 3));
        if (rnd(s) % 4 == 0) r.compute_permille = 0;   /* memory only: charged compute in proportion */
        if (!r.compute_permille && !r.memory_mib) r.memory_mib = 8192;
    }
    return r;
}

/* Every policy, many seeds, MPS shares of three uids with time-sliced shares and whole GPUs arriving and
 * leaving on A100 and V100 nodes and a time-sliced node: every step keeps model_node_check's invariants
 * (one mode and one uid per GPU, client caps, never over-committed), every policy's feasibility agrees
 * with model_fit, and the fast path's answer for a time-sliced share equals the generic one on nodes
 * where some GPUs serve MPS clients. */
TEST(mps_policies_random_mix_keeps_the_rules) {
    policy_workload *w = policy_workload_new();
    unsigned ws = 5;
    for (int i = 0; i < 40; i++) {
        model_request r = random_request(&ws);
        policy_workload_add(w, &r, 1 + (long)(rnd(&ws) % 4), NULL, 0);
    }
    CHECK(policy_workload_finish(w, 100, NULL, 0) == 0);
    long placed = 0, placed_mps = 0, refused = 0, compared = 0;
    enum { NN = 4, LIVE = 96 };
    for (int pi = 0; pi < policy_count(); pi++) {
        const policy *p = policy_at(pi);
        for (unsigned seed = 1; seed <= 6; seed++) {
            model_node *nodes[NN] = {whole_node("a100-a", a100(), 4), whole_node("a100-b", a100(), 2),
                                     whole_node("v100", v100(), 4), model_node_new("ts")};
            model_node_add_gpu(nodes[3], a100(), MODEL_GPU_TIMESLICE, 4, 0);
            nodes[3]->sharing = MODEL_GPU_TIMESLICE;
            nodes[3]->replicas = 4;
            policy_ctx ctx;
            policy_ctx_init(&ctx, seed);
            ctx.workload = w;
            struct { char uid[32]; int node; } pods[LIVE];
            int nlive = 0;
            unsigned s = seed * 7919u + (unsigned)pi;
            for (int step = 0; step < 160; step++) {
                if (nlive > 0 && (nlive == LIVE || rnd(&s) % 3 == 0)) {
                    int v = (int)(rnd(&s) % (unsigned)nlive);
                    CHECK(model_release(nodes[pods[v].node], pods[v].uid) == 0);
                    CHECK_NODE(nodes[pods[v].node]);
                    pods[v] = pods[--nlive];
                    continue;
                }
                model_request r = random_request(&s);
                ctx.decision = (uint64_t)step;
                policy_result res[NN];
                for (int i = 0; i < NN; i++) {
                    char why[256];
                    CHECK_INT(policy_score(p, &r, nodes[i], &ctx, &res[i], why, sizeof why), 0);
                    bool fits = model_fit_any(nodes[i], &r, NULL, 0);
                    CHECK_MSG(res[i].feasible == fits, "%s on %s: feasible %d, model_fit %d (%s)", policy_name(p),
                              nodes[i]->name, res[i].feasible, fits, why);
                    if (r.compute_sharing == MODEL_COMPUTE_TIMESLICE && r.kind == MODEL_REQ_FRACTION &&
                        !policy_draws_per_decision(p)) {
                        /* the fast path skips GPUs serving MPS clients exactly as model_fit does (random draws
                         * by a candidate's index, which the two paths number differently) */
                        policy_result g;
                        policy_test_generic_only = true;
                        int rc = policy_score(p, &r, nodes[i], &ctx, &g, NULL, 0);
                        policy_test_generic_only = false;
                        CHECK_INT(rc, 0);
                        CHECK_MSG(g.feasible == res[i].feasible && (!g.feasible || g.choice.gpu[0] == res[i].choice.gpu[0]),
                                  "%s on %s: fast GPU %d, generic GPU %d", policy_name(p), nodes[i]->name,
                                  res[i].feasible ? res[i].choice.gpu[0] : -1, g.feasible ? g.choice.gpu[0] : -1);
                        compared++;
                    }
                }
                int win = policy_select(p, &ctx, res, NN);
                if (win < 0) {
                    refused++;
                    continue;
                }
                model_assignment a;
                char err[256];
                CHECK_MSG(policy_materialize(nodes[win], &r, &res[win].choice, &a, err, sizeof err) == 0, "%s", err);
                snprintf(pods[nlive].uid, sizeof pods[nlive].uid, "p%d-%u-%d", pi, seed, step);
                CHECK_MSG(model_assign(nodes[win], pods[nlive].uid, &a, err, sizeof err) == 0, "%s: %s", policy_name(p), err);
                pods[nlive++].node = win;
                placed++;
                placed_mps += r.compute_sharing == MODEL_COMPUTE_MPS;
                CHECK_NODE(nodes[win]);
            }
            for (int i = 0; i < NN; i++) {
                CHECK_NODE(nodes[i]);
                model_node_free(nodes[i]);
            }
        }
    }
    policy_workload_free(w);
    CHECK_MSG(placed > 2000 && placed_mps > 800 && refused > 100 && compared > 3000,
              "placed %ld (MPS %ld), refused %ld, compared %ld", placed, placed_mps, refused, compared);
}

/* An MPS share goes where its uid is already served when a policy packs: the GPUs it may take are the
 * idle ones and those serving its uid, and the packing policies' tightest-GPU key prefers the latter;
 * so no preference term is needed (sim/README.md, "MPS shares"). Spread spreads, by design. */
TEST(mps_packing_policies_join_the_gpu_serving_the_uid) {
    const char *packers[] = {"binpack", "bestfit", "gpupacking", "fgd", "fgd-pack", "mig-aware", "dotprod"};
    policy_workload *w = policy_workload_new();
    model_request shape = mps_share(250, 1000), whole = req_whole(1, 0);
    policy_workload_add(w, &shape, 4, NULL, 0);
    policy_workload_add(w, &whole, 4, NULL, 0);
    CHECK(policy_workload_finish(w, 100, NULL, 0) == 0);
    for (size_t i = 0; i < sizeof packers / sizeof packers[0]; i++) {
        model_node *n = whole_node("a", a100(), 4);
        model_request other = mps_share(250, 2000), mine = mps_share(250, 1000);
        char err[256];
        CHECK(place(n, "o", &other, NULL, err, sizeof err) == 0);   /* GPU 0: uid 2000 */
        model_assignment a;
        CHECK(model_fit_on(n, &mine, 1u << 2, &a, 1, err, sizeof err) == 1 && model_assign(n, "m1", &a, err, sizeof err) == 0);
        policy_ctx ctx;
        policy_ctx_init(&ctx, 3);
        ctx.workload = w;
        policy_result res;
        char why[512];
        const policy *p = policy_find(packers[i]);
        CHECK_INT(policy_score(p, &mine, n, &ctx, &res, why, sizeof why), 0);
        model_node_free(n);
        CHECK_MSG(res.feasible && res.choice.gpu[0] == 2, "%s chose GPU %d (%s)", packers[i], res.choice.gpu[0], why);
    }
    policy_workload_free(w);
}

/* The fragmentation measure (fgd, fgd-pack, mig-aware) sees the mode rule: what a GPU serving MPS clients
 * leaves free is no room for a time-sliced share, nor for an MPS share of another uid. */
TEST(mps_fragmentation_measure_knows_who_may_join) {
    model_node *n = whole_node("a", a100(), 2);
    model_request m1000 = mps_share(500, 1000), m2000 = mps_share(250, 2000), ts = req_frac(250, 0);
    char err[256];
    CHECK(place(n, "m", &m1000, NULL, err, sizeof err) == 0);   /* GPU 0: 500 free, uid 1000 */
    CHECK(place(n, "t", &ts, NULL, err, sizeof err) == 0);      /* GPU 1: 750 free, time-sliced */
    struct { model_request r; double frag; } cases[] = {
        {ts, 500},        /* GPU 0's 500 is a sliver for time-sliced shares */
        {m2000, 1250},    /* uid 2000 fits on neither */
        {mps_share(250, 1000), 750},   /* uid 1000 joins GPU 0, not GPU 1 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        policy_workload *w = policy_workload_new();
        policy_workload_add(w, &cases[i].r, 1, NULL, 0);
        CHECK(policy_workload_finish(w, 100, NULL, 0) == 0);
        double f = policy_frag_node(n, w, NULL);
        policy_workload_free(w);
        CHECK_MSG(f == cases[i].frag, "case %zu: fragmentation %g, expected %g", i, f, cases[i].frag);
    }
    model_node_free(n);
}
