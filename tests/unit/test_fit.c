/* test_fit.c -- fit / assign / release on hand-built nodes of every GPU mode, and a
 * long randomized run that must never over-commit and must return to empty. */
#include "harness.h"
#include "model/fit.h"

#include <stdlib.h>

static const model_gpu_product *product(const char *name) {
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), name);
    if (!p) fprintf(stderr, "catalog has no %s\n", name);
    return p;
}

static model_node *node_of(const char *name, const char *prod, int ngpus, model_gpu_mode mode, int replicas) {
    model_node *n = model_node_new(name);
    for (int i = 0; i < ngpus; i++) model_node_add_gpu(n, product(prod), mode, replicas, 0);
    if (mode == MODEL_GPU_TIMESLICE || mode == MODEL_GPU_MPS) {
        n->sharing = mode;
        n->replicas = replicas;
    }
    return n;
}

static model_request req(model_req_kind kind, int count) {
    model_request r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.count = count;
    return r;
}

static bool node_ok(const model_node *n) {
    char why[256];
    if (model_node_check(n, why, sizeof why)) return true;
    fprintf(stdout, "    invariant broken: %s\n", why);
    return false;
}

TEST(fit_whole_gpus_enumerates_combinations_in_order) {
    model_node *n = node_of("a100", "NVIDIA-A100-SXM4-80GB", 8, MODEL_GPU_WHOLE, 1);
    model_request r = req(MODEL_REQ_WHOLE, 2);
    model_assignment a[64];
    char why[256], err[256];
    CHECK_INT(model_fit(n, &r, a, 64, why, sizeof why), 28); /* C(8,2) */
    CHECK_INT(a[0].ngrants, 2);
    CHECK_INT(a[0].grant[0].gpu, 0);
    CHECK_INT(a[0].grant[1].gpu, 1);
    CHECK(a[0].grant[0].exclusive);
    CHECK_INT(model_assign(n, "pod-a", &a[0], err, sizeof err), 0);
    CHECK(node_ok(n));
    CHECK_INT(model_fit(n, &r, a, 64, why, sizeof why), 15); /* C(6,2) */
    CHECK_INT(a[0].grant[0].gpu, 2);
    /* A stale candidate that names GPU 0 again must be refused. */
    model_assignment stale = a[0];
    stale.grant[0].gpu = 0;
    CHECK_INT(model_assign(n, "pod-b", &stale, err, sizeof err), -1);
    CHECK_CONTAINS(err, "GPU 0");
    CHECK(node_ok(n));
    r.count = 7;
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 0);
    CHECK_CONTAINS(why, "needs 7 whole GPUs, 6 of 8 free");
    CHECK_INT(model_release(n, "pod-a"), 0);
    CHECK_INT(model_release(n, "pod-a"), -1);
    CHECK_INT(model_fit(n, &r, NULL, 0, why, sizeof why), 8);
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(fit_fraction_shares_memory_and_compute_without_overcommit) {
    model_node *n = node_of("a100", "NVIDIA-A100-SXM4-80GB", 1, MODEL_GPU_WHOLE, 1);
    model_request r = req(MODEL_REQ_FRACTION, 1);
    r.memory_mib = 40000;
    model_assignment a[4];
    char why[256], err[256];
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].memory_mib, 40000);
    CHECK(!a[0].grant[0].exclusive);
    CHECK_INT(model_assign(n, "p1", &a[0], err, sizeof err), 0);
    CHECK_INT(model_assign(n, "p2", &a[0], err, sizeof err), 0);
    /* 81920 - 80000 = 1920 MiB left: a third share does not fit, nor does the same grant replayed. */
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 0);
    CHECK_CONTAINS(why, "most free: 1920 MiB");
    CHECK_INT(model_assign(n, "p3", &a[0], err, sizeof err), -1);
    CHECK_CONTAINS(err, "1920 MiB free");
    /* A whole-GPU request cannot take a GPU that holds shares. */
    model_request w = req(MODEL_REQ_WHOLE, 1);
    CHECK_INT(model_fit(n, &w, NULL, 0, why, sizeof why), 0);
    /* Compute-only: memory is charged in the same proportion (30 % of 81920). */
    model_release(n, "p1");
    model_release(n, "p2");
    model_request c = req(MODEL_REQ_FRACTION, 1);
    c.compute_permille = 300;
    CHECK_INT(model_fit(n, &c, a, 4, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].memory_mib, 24576);
    CHECK_INT(a[0].grant[0].compute_permille, 300);
    for (int i = 0; i < 3; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "c%d", i);
        CHECK_INT(model_fit(n, &c, a, 4, why, sizeof why), 1);
        CHECK_INT(model_assign(n, uid, &a[0], err, sizeof err), 0);
    }
    CHECK_INT(model_fit(n, &c, a, 4, why, sizeof why), 0); /* 90 % used: 30 % more does not fit */
    CHECK_INT(n->gpus[0].compute_used_permille, 900);
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(fit_whole_means_whole_on_time_sliced_gpus) {
    model_node *n = node_of("t4", "Tesla-T4", 2, MODEL_GPU_TIMESLICE, 4);
    snprintf(n->product_label, sizeof n->product_label, "Tesla-T4-SHARED");
    model_request r = req(MODEL_REQ_WHOLE, 1);
    model_assignment a[8];
    char why[256], err[256];
    CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why), 0);
    CHECK_CONTAINS(why, "time-sliced (4 replicas each)");
    CHECK_CONTAINS(why, "tessera.io/isolation: timeslice");
    r.isolation = MODEL_ISO_TIMESLICE;
    CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why), 2);
    CHECK_INT(a[0].grant[0].replica, 0);
    CHECK_INT(a[0].grant[0].memory_mib, n->gpus[0].memory_mib / 4);
    for (int i = 0; i < 8; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "r%d", i);
        CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why) > 0, 1);
        CHECK_INT(model_assign(n, uid, &a[0], err, sizeof err), 0);
        CHECK(node_ok(n));
    }
    CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why), 0); /* 2 GPUs x 4 replicas taken */
    CHECK_INT(n->gpus[0].replicas_used, 4);
    CHECK_INT(n->gpus[1].replicas_used, 4);
    /* nvidia.com/gpu.shared is not advertised when replicas are not renamed. */
    model_request s = req(MODEL_REQ_SHARED, 1);
    model_release(n, "r3");
    CHECK_INT(model_fit(n, &s, a, 8, why, sizeof why), 0);
    CHECK_CONTAINS(why, "renameByDefault is off");
    n->shared_renamed = true;
    CHECK_INT(model_fit(n, &s, a, 8, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].replica, 3); /* the lowest free replica */
    model_node_free(n);
}

TEST(fit_mps_clients_are_pinned_to_their_share) {
    model_node *n = node_of("h100", "NVIDIA-H100-80GB-HBM3", 1, MODEL_GPU_MPS, 4);
    n->shared_renamed = true;
    const model_gpu *g = &n->gpus[0];
    CHECK_INT(g->mps_memory_limit_mib, g->memory_mib / 4);
    CHECK_INT(g->mps_thread_permille, 250);
    model_request r = req(MODEL_REQ_FRACTION, 1);
    r.isolation = MODEL_ISO_MPS;
    r.memory_mib = g->mps_memory_limit_mib + 1;
    char why[256], err[256];
    model_assignment a[4];
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 0);
    r.memory_mib = 1000;
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].memory_mib, g->mps_memory_limit_mib); /* charged the pinned limit */
    CHECK_INT(a[0].grant[0].compute_permille, 250);
    model_request s = req(MODEL_REQ_SHARED, 1);
    for (int i = 0; i < 4; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "m%d", i);
        CHECK_INT(model_fit(n, &s, a, 4, why, sizeof why), 1);
        CHECK_INT(model_assign(n, uid, &a[0], err, sizeof err), 0);
    }
    CHECK_INT(model_fit(n, &s, a, 4, why, sizeof why), 0);
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(fit_static_mig_instances_cern_layout) {
    const model_gpu_product *p = product("NVIDIA-A100-SXM4-40GB");
    model_node *n = model_node_new("mig");
    n->mig_strategy = MODEL_MIG_MIXED;
    model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
    char err[256], why[256];
    CHECK_INT(model_gpu_add_mig_instance(g, model_product_profile_index(p, "3g.20gb"), 4, err, sizeof err), 0);
    CHECK_INT(model_gpu_add_mig_instance(g, model_product_profile_index(p, "2g.10gb"), 0, err, sizeof err), 0);
    CHECK_INT(model_gpu_add_mig_instance(g, model_product_profile_index(p, "2g.10gb"), 2, err, sizeof err), 0);
    model_request r = req(MODEL_REQ_MIG, 2);
    snprintf(r.mig_profile, sizeof r.mig_profile, "2g.10gb");
    model_assignment a[4];
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].mig_start, 0);
    CHECK_INT(a[0].grant[1].mig_start, 2);
    CHECK_INT(model_assign(n, "two", &a[0], err, sizeof err), 0);
    CHECK(node_ok(n));
    r.count = 1;
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 0);
    CHECK_CONTAINS(why, "0 idle instances");
    snprintf(r.mig_profile, sizeof r.mig_profile, "1g.5gb"); /* exists on the product, not on the GPU */
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 0);
    snprintf(r.mig_profile, sizeof r.mig_profile, "1g.10gb+me");
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 0);
    CHECK_CONTAINS(why, "does not exist on NVIDIA-A100-SXM4-40GB");
    /* whole GPU asks on a MIG node are refused with a reason */
    model_request w = req(MODEL_REQ_WHOLE, 1);
    CHECK_INT(model_fit(n, &w, a, 4, why, sizeof why), 0);
    CHECK(why[0] != 0);
    CHECK_INT(model_release(n, "two"), 0);
    CHECK_INT(n->gpus[0].ninst, 3); /* pre-existing instances stay */
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(fit_dynamic_mig_creates_and_destroys_instances) {
    const model_gpu_product *p = product("NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new("dyn");
    model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
    g->mig_dynamic = true;
    model_request r = req(MODEL_REQ_MIG, 1);
    snprintf(r.mig_profile, sizeof r.mig_profile, "3g.40gb");
    model_assignment a[8];
    char why[256], err[256];
    CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why), 2); /* starts 0 and 4 */
    CHECK(a[0].grant[0].mig_create);
    CHECK_INT(a[0].grant[0].mig_start, 0);
    CHECK_INT(a[1].grant[0].mig_start, 4);
    CHECK_INT(model_assign(n, "three", &a[0], err, sizeof err), 0);
    model_request four = req(MODEL_REQ_MIG, 1);
    snprintf(four.mig_profile, sizeof four.mig_profile, "4g.40gb");
    CHECK_INT(model_fit(n, &four, a, 8, why, sizeof why), 0); /* 4g starts only at 0 */
    CHECK_INT(model_fit(n, &r, a, 8, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].mig_start, 4);
    /* two 2g.20gb at once: starts {0,2,4} minus the 3g at 0..3 leaves only 4 -> one; both impossible */
    model_request two = req(MODEL_REQ_MIG, 2);
    snprintf(two.mig_profile, sizeof two.mig_profile, "2g.20gb");
    CHECK_INT(model_fit(n, &two, a, 8, why, sizeof why), 0);
    CHECK_INT(model_release(n, "three"), 0);
    CHECK_INT(n->gpus[0].ninst, 0); /* on-demand instance destroyed */
    CHECK_INT(model_fit(n, &four, a, 8, why, sizeof why), 1);
    CHECK_INT(model_fit(n, &two, a, 8, why, sizeof why), 3); /* {0,2},{0,4},{2,4} */
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(fit_fraction_maps_to_mig_profiles_that_hold_it) {
    const model_gpu_product *p = product("NVIDIA-A100-SXM4-40GB");
    model_node *n = model_node_new("dyn40");
    model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
    g->mig_dynamic = true;
    model_request r = req(MODEL_REQ_FRACTION, 1);
    r.memory_mib = 9000; /* more than 1g.5gb, fits 1g.10gb, 2g.10gb and bigger */
    r.isolation = MODEL_ISO_MIG;
    model_assignment a[64];
    char why[256];
    int nfit = model_fit(n, &r, a, 64, why, sizeof why);
    CHECK(nfit > 0);
    for (int i = 0; i < nfit && i < 64; i++) {
        const model_mig_profile *pr = &p->profiles[a[i].grant[0].mig_profile];
        CHECK_MSG(pr->memory_mib >= 9000, "profile %s holds %d MiB", pr->name, pr->memory_mib);
        CHECK(!pr->media);
    }
    /* default isolation never reaches MIG */
    r.isolation = MODEL_ISO_DEFAULT;
    CHECK_INT(model_fit(n, &r, a, 64, why, sizeof why), 0);
    model_node_free(n);
}

TEST(fit_gpu_models_and_host_resources) {
    model_node *n = node_of("t4", "Tesla-T4", 1, MODEL_GPU_WHOLE, 1);
    n->track_host = true;
    n->cpu_milli = 4000;
    n->memory_mib = 16384;
    model_request r = req(MODEL_REQ_WHOLE, 1);
    r.nmodels = 1;
    snprintf(r.models[0], sizeof r.models[0], "NVIDIA-A100-SXM4-80GB");
    char why[256], err[256];
    model_assignment a[2];
    CHECK_INT(model_fit(n, &r, a, 2, why, sizeof why), 0);
    CHECK_CONTAINS(why, "Tesla-T4 is not among tessera.io/gpu-models");
    snprintf(r.models[0], sizeof r.models[0], "T4-16GB"); /* the catalog id works too */
    r.cpu_milli = 3000;
    CHECK_INT(model_fit(n, &r, a, 2, why, sizeof why), 1);
    CHECK_INT(a[0].cpu_milli, 3000);
    CHECK_INT(model_assign(n, "gpu", &a[0], err, sizeof err), 0);
    model_request cpu = req(MODEL_REQ_NONE, 0);
    cpu.cpu_milli = 2000;
    CHECK_INT(model_fit(n, &cpu, a, 2, why, sizeof why), 0);
    CHECK_CONTAINS(why, "not enough CPU: needs 2000m, 1000m free");
    cpu.cpu_milli = 1000;
    CHECK_INT(model_fit(n, &cpu, a, 2, why, sizeof why), 1);
    CHECK_INT(model_assign(n, "cpu", &a[0], err, sizeof err), 0);
    CHECK_INT(n->cpu_used_milli, 4000);
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(assign_refuses_forged_and_duplicate_assignments) {
    model_node *n = node_of("a100", "NVIDIA-A100-SXM4-80GB", 2, MODEL_GPU_WHOLE, 1);
    char err[256];
    model_assignment a;
    memset(&a, 0, sizeof a);
    a.ngrants = 1;
    a.grant[0] = (model_grant){.gpu = 5, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                               .memory_mib = 10};
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* no GPU 5 */
    a.grant[0].gpu = 0;
    a.grant[0].exclusive = true; /* whole grant that does not charge the whole GPU */
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1);
    a.grant[0].exclusive = false;
    a.grant[0].memory_mib = 0;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* a share that charges nothing */
    a.grant[0].memory_mib = 90000;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* more than the GPU holds */
    a.grant[0].memory_mib = 1000;
    a.grant[0].replica = 0;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* no replicas on an unshared GPU */
    a.grant[0].replica = -1;
    a.grant[0].mig_profile = 0;
    a.grant[0].mig_start = 0;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* not in MIG mode */
    a.grant[0].mig_profile = -1;
    /* two grants on the same GPU in one assignment are checked against each other */
    a.ngrants = 2;
    a.grant[1] = a.grant[0];
    a.grant[0].memory_mib = a.grant[1].memory_mib = 50000;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1);
    CHECK_INT(n->gpus[0].memory_used_mib, 0); /* nothing half-applied */
    a.ngrants = 1;
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), 0);
    CHECK_INT(model_assign(n, "x", &a, err, sizeof err), -1); /* same pod twice */
    CHECK_CONTAINS(err, "already holds");
    CHECK_INT(model_assign(n, "", &a, err, sizeof err), -1);
    CHECK(node_ok(n));
    model_node_free(n);
}

/* ------------------------------------------------------------ randomized ---- */

static unsigned long long rng_state;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rng_state >> 33) % n);
}

static model_node *random_node(int i) {
    static const char *names[] = {"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4", "NVIDIA-A30"};
    char nm[32];
    snprintf(nm, sizeof nm, "rand-%d", i);
    model_node *n = model_node_new(nm);
    int kind = (int)rnd(6), ngpus = 1 + (int)rnd(8);
    n->track_host = rnd(2);
    n->cpu_milli = 32000;
    n->memory_mib = 262144;
    for (int g = 0; g < ngpus; g++) {
        const model_gpu_product *p = product(names[rnd(5)]);
        if (kind == 0) {
            model_node_add_gpu(n, p, MODEL_GPU_WHOLE, 1, 0);
        } else if (kind == 1 || kind == 2) {
            model_gpu_mode m = kind == 1 ? MODEL_GPU_TIMESLICE : MODEL_GPU_MPS;
            n->sharing = m;
            n->replicas = 4;
            n->shared_renamed = rnd(2);
            model_node_add_gpu(n, p, m, 4, 0);
        } else if (kind == 5) {
            /* layered: 7 x 1g (or 3g + 4 x 1g) with the 1g instances time-sliced */
            if (!p->mig_capable || p->mig_memory_slices != 8) p = product("NVIDIA-A100-SXM4-80GB");
            model_gpu *gpu = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
            n->mig_strategy = MODEL_MIG_MIXED;
            n->mig_sharing = MODEL_GPU_TIMESLICE;
            n->mig_renamed = i % 2;
            int p1 = model_product_profile_index(p, p->memory_mib > 50000 ? "1g.10gb" : "1g.5gb");
            int p3 = model_product_profile_index(p, p->memory_mib > 50000 ? "3g.40gb" : "3g.20gb");
            model_gpu_share_mig_profile(gpu, p1, MODEL_GPU_TIMESLICE, 2 + (int)rnd(3), NULL, 0);
            bool mix = rnd(2);
            if (mix) model_gpu_add_mig_instance(gpu, p3, 4, NULL, 0);
            for (int s = 0; s < (mix ? 4 : 7); s++) model_gpu_add_mig_instance(gpu, p1, s, NULL, 0);
        } else {
            if (!p->mig_capable) p = product("NVIDIA-A100-SXM4-80GB");
            model_gpu *gpu = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
            n->mig_strategy = MODEL_MIG_MIXED;
            if (kind == 3) gpu->mig_dynamic = true;
            else
                for (int s = 0; s < 7; s++) model_gpu_add_mig_instance(gpu, 0, s, NULL, 0); /* 7 x 1g */
        }
    }
    return n;
}

static model_request random_request(const model_node *n) {
    static const char *profiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.5gb", "3g.20gb", "1g.6gb"};
    static const model_isolation isos[] = {MODEL_ISO_DEFAULT, MODEL_ISO_ANY, MODEL_ISO_MIG, MODEL_ISO_MPS, MODEL_ISO_TIMESLICE};
    model_request r = req((model_req_kind)(rnd(5)), 1 + (int)rnd(3));
    r.isolation = isos[rnd(5)];
    if (r.kind == MODEL_REQ_NONE) r.count = 0;
    if (r.kind == MODEL_REQ_FRACTION) {
        switch (rnd(3)) {
        case 0: r.memory_mib = 1 + (int)rnd(40000); break;
        case 1: r.compute_permille = (int16_t)(1 + rnd(1000)); break;
        default: r.memory_permille = (int16_t)(1 + rnd(1000)); r.compute_permille = (int16_t)rnd(500);
        }
    }
    if (r.kind == MODEL_REQ_MIG) {
        snprintf(r.mig_profile, sizeof r.mig_profile, "%s", profiles[rnd(8)]);
        r.mig_replica = rnd(3) == 0 && r.isolation != MODEL_ISO_MIG;
    }
    r.cpu_milli = rnd(8000);
    r.memory_bytes = (int64_t)rnd(32768) << 20;
    return r;
}

static bool usage_is_empty(const model_node *n) {
    if (n->nlive || n->cpu_used_milli || n->memory_used_mib) return false;
    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        if (g->memory_used_mib || g->compute_used_permille || g->replicas_used || g->nholders ||
            g->exclusive_holder != -1 || g->replica_used[0] || g->replica_used[1])
            return false;
        for (int k = 0; k < g->ninst; k++)
            if (g->inst[k].holder != -1 || g->inst[k].on_demand || g->inst[k].rep_used) return false;
    }
    return true;
}

TEST(fit_randomized_assign_release_never_overcommits) {
    const char *env = getenv("TESSERA_SEED");
    rng_state = env ? strtoull(env, NULL, 10) : 20261122;
    enum { NODES = 40, STEPS = 30000 };
    model_node *nodes[NODES];
    int ninst0[NODES];
    for (int i = 0; i < NODES; i++) {
        nodes[i] = random_node(i);
        ninst0[i] = nodes[i]->gpus[0].ninst;
    }
    static model_assignment cand[256];
    char why[256], err[256], uid[MODEL_UID_LEN];
    int placed = 0, refused_forgeries = 0, next_uid = 0, layered_placed = 0;
    for (int step = 0; step < STEPS; step++) {
        model_node *n = nodes[rnd(NODES)];
        unsigned op = rnd(10);
        if (op < 5) {
            model_request r = random_request(n);
            int nfit = model_fit(n, &r, cand, 256, why, sizeof why);
            if (nfit == 0) {
                CHECK_MSG(why[0] != 0, "no fit and no reason");
                continue;
            }
            snprintf(uid, sizeof uid, "pod-%d", next_uid++);
            int pick = (int)rnd((unsigned)(nfit < 256 ? nfit : 256));
            CHECK_MSG(model_assign(n, uid, &cand[pick], err, sizeof err) == 0, "fit offered what assign refused: %s", err);
            placed++;
            layered_placed += cand[pick].grant[0].mig_profile >= 0 && cand[pick].grant[0].replica >= 0;
        } else if (op < 8) {
            if (n->nlive == 0) continue;
            int k = (int)rnd((unsigned)n->nallocs);
            if (n->allocs[k].uid[0]) {
                snprintf(uid, sizeof uid, "%s", n->allocs[k].uid);
                CHECK_INT(model_release(n, uid), 0);
            }
        } else {
            /* a forged assignment: random fields; it may be accepted only if it is honest */
            model_assignment f;
            memset(&f, 0, sizeof f);
            f.ngrants = 1 + (int)rnd(2);
            for (int g = 0; g < f.ngrants; g++) {
                f.grant[g].gpu = (int8_t)rnd(10);
                f.grant[g].exclusive = rnd(4) == 0;
                f.grant[g].replica = (int16_t)((int)rnd(6) - 1);
                f.grant[g].mig_profile = (int8_t)((int)rnd(9) - 1);
                f.grant[g].mig_start = (int8_t)rnd(8);
                f.grant[g].mig_create = rnd(2);
                f.grant[g].memory_mib = (int32_t)rnd(90000);
                f.grant[g].compute_permille = (int16_t)rnd(1100);
            }
            snprintf(uid, sizeof uid, "forged-%d", next_uid++);
            if (model_assign(n, uid, &f, err, sizeof err) != 0) refused_forgeries++;
        }
        CHECK_MSG(model_node_check(n, why, sizeof why), "step %d node %s: %s", step, n->name, why);
    }
    CHECK_MSG(placed > 3000, "only %d placements: the random requests are too rarely feasible", placed);
    CHECK_MSG(layered_placed > 100, "only %d replicas of shared MIG instances placed", layered_placed);
    CHECK(refused_forgeries > 0);
    for (int i = 0; i < NODES; i++) {
        model_node *n = nodes[i];
        while (n->nlive) {
            for (int k = 0; k < n->nallocs; k++)
                if (n->allocs[k].uid[0]) {
                    snprintf(uid, sizeof uid, "%s", n->allocs[k].uid);
                    model_release(n, uid);
                }
        }
        CHECK_MSG(usage_is_empty(n), "node %s not empty after releasing everything", n->name);
        CHECK_INT(n->gpus[0].ninst, ninst0[i]);
        CHECK(node_ok(n));
        model_node_free(n);
    }
}

/* model_fit_any is model_fit's "> 0" without counting: the same answer and, when nothing
 * fits, the same reason, on random states of every mode and random requests of every
 * form (the randomized filling goes through model_fit's first assignment). */
static int rnd_fit(uint64_t *x, int m) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (int)(*x % (uint64_t)m);
}

TEST(fit_any_agrees_with_fit) {
    const model_gpu_product *a100 = product("NVIDIA-A100-SXM4-80GB"), *t4 = product("Tesla-T4");
    CHECK(a100 && t4);
    uint64_t x = 0x51ed270b1a2d4e6full;
#define RND(m) rnd_fit(&x, m)
    const char *profs[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.5gb"};
    int checked = 0, fits = 0;
    for (int round = 0; round < 60; round++) {
        int mode = RND(5);
        model_node *n = mode == 0   ? node_of("w", "Tesla-T4", 1 + RND(8), MODEL_GPU_WHOLE, 1)
                        : mode == 1 ? node_of("t", "Tesla-T4", 1 + RND(4), MODEL_GPU_TIMESLICE, 2 + RND(4))
                        : mode == 2 ? node_of("m", "Tesla-T4", 1 + RND(4), MODEL_GPU_MPS, 2 + RND(4))
                                    : node_of("g", "NVIDIA-A100-SXM4-80GB", 1 + RND(8), MODEL_GPU_MIG, 1);
        if (mode == 1) n->shared_renamed = RND(2);
        for (int i = 0; i < n->ngpus && mode >= 3; i++) n->gpus[i].mig_dynamic = mode == 3 || RND(2);
        char uid[32], why1[256], why2[256];
        for (int k = 0; k < 40; k++) {
            model_request r = req((model_req_kind)(1 + RND(4)), 1 + RND(3));
            if (r.kind == MODEL_REQ_MIG) snprintf(r.mig_profile, sizeof r.mig_profile, "%s", profs[RND(7)]);
            if (r.kind == MODEL_REQ_FRACTION) {
                r.count = 1;
                r.compute_permille = (int16_t)(100 * (1 + RND(9)));
                if (RND(2)) r.memory_mib = 1000 * (1 + RND(12));
            }
            r.isolation = (model_isolation)RND(5);
            if (r.kind == MODEL_REQ_MIG) r.isolation = MODEL_ISO_DEFAULT;
            int all = model_fit(n, &r, NULL, 0, why1, sizeof why1);
            bool any = model_fit_any(n, &r, why2, sizeof why2);
            CHECK_MSG(any == (all > 0), "round %d step %d: model_fit %d, model_fit_any %d", round, k, all, any);
            if (!any) CHECK_STR(why2, why1);
            CHECK_INT(model_fit_any(n, &r, NULL, 0), any);
            checked++;
            if (!any) continue;
            fits++;
            model_assignment a;
            CHECK(model_fit(n, &r, &a, 1, NULL, 0) > 0);
            snprintf(uid, sizeof uid, "p%d", k);
            CHECK_INT(model_assign(n, uid, &a, why1, sizeof why1), 0);
            if (RND(4) == 0) {
                snprintf(uid, sizeof uid, "p%d", RND(k + 1));
                model_release(n, uid);
            }
        }
        CHECK(node_ok(n));
        model_node_free(n);
    }
#undef RND
    CHECK_MSG(checked == 2400 && fits > 250, "checked %d, fits %d", checked, fits);
}

/* ------------------------------------------------ layered sharing ---- */

/* One A100-80GB, mixed: 3g.40gb@4 plain, 4 x 1g.10gb time-sliced 4 ways. */
static model_node *layered_node(bool renamed) {
    model_node *n = model_node_new("a100-layered");
    const model_gpu_product *p = product("NVIDIA-A100-SXM4-80GB");
    model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
    int p1 = model_product_profile_index(p, "1g.10gb"), p3 = model_product_profile_index(p, "3g.40gb");
    model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 4, NULL, 0);
    model_gpu_add_mig_instance(g, p3, 4, NULL, 0);
    for (int s = 0; s < 4; s++) model_gpu_add_mig_instance(g, p1, s, NULL, 0);
    n->mig_strategy = MODEL_MIG_MIXED;
    n->mig_sharing = MODEL_GPU_TIMESLICE;
    n->mig_renamed = renamed;
    return n;
}

static model_request mig_req(const char *profile, model_isolation iso, bool replica) {
    model_request r = req(MODEL_REQ_MIG, 1);
    snprintf(r.mig_profile, sizeof r.mig_profile, "%s", profile);
    r.isolation = iso;
    r.mig_replica = replica;
    return r;
}

TEST(fit_whole_means_whole_on_layered_mig) {
    model_node *n = layered_node(false);
    model_assignment a[16];
    char why[256], err[256];
    /* nvidia.com/mig-1g.10gb: 1 without isolation: the device plugin would hand a replica, so no. */
    model_request r = mig_req("1g.10gb", MODEL_ISO_DEFAULT, false);
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 0);
    CHECK_CONTAINS(why, "the 1g.10gb instances here are time-sliced: nvidia.com/mig-1g.10gb buys a replica");
    CHECK_CONTAINS(why, "tessera.io/isolation: timeslice");
    r.isolation = MODEL_ISO_MIG;
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 0);
    /* The plain 3g.40gb is still a whole instance for a plain request. */
    model_request r3 = mig_req("3g.40gb", MODEL_ISO_DEFAULT, false);
    CHECK_INT(model_fit(n, &r3, a, 16, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].replica, -1);
    /* With isolation timeslice (or any): one candidate per shared instance, its lowest replica. */
    r.isolation = MODEL_ISO_TIMESLICE;
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 4);
    CHECK_INT(a[0].grant[0].replica, 0);
    CHECK_INT(a[0].grant[0].mig_start, 0);
    CHECK_INT(a[0].grant[0].memory_mib, a[1].grant[0].memory_mib);   /* an equal share of the instance */
    CHECK(a[0].grant[0].memory_mib > 0 && a[0].grant[0].memory_mib <= 10240 / 4);
    int share_compute = a[0].grant[0].compute_permille;
    CHECK_INT(share_compute, 142 / 4);
    r.isolation = MODEL_ISO_ANY;
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 4);
    int free0 = model_gpu_free_compute(&n->gpus[0]);
    for (int i = 0; i < 16; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "p%d", i);
        CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why) > 0, 1);
        CHECK_INT(model_assign(n, uid, &a[0], err, sizeof err), 0);
        CHECK(node_ok(n));
    }
    CHECK_INT(n->gpus[0].inst[1].rep_used, 0xf);
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 0);   /* 4 instances x 4 replicas taken */
    CHECK(model_gpu_free_compute(&n->gpus[0]) < free0);
    CHECK_INT(model_gpu_free_replicas(&n->gpus[0]), 1);         /* the idle 3g */
    /* Release one: its replica comes back, the next fit takes exactly it. */
    CHECK_INT(model_release(n, "p6"), 0);   /* p4..p7 took 1g@1's replicas 0..3 */
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 1);
    CHECK_INT(a[0].grant[0].mig_start, 1);
    CHECK_INT(a[0].grant[0].replica, 2);
    CHECK(node_ok(n));
    /* Forged: a plain grant on a shared instance, a replica that does not exist, one taken. */
    model_assignment f = a[0];
    f.grant[0].replica = -1;
    CHECK(model_assign(n, "forged", &f, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "shared by 4 replicas; a grant takes one of them");
    f.grant[0].replica = 4;
    CHECK(model_assign(n, "forged", &f, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "has no replica 4");
    f.grant[0].replica = 0;
    CHECK(model_assign(n, "forged", &f, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "replica 0 is taken");
    f = a[0];
    f.grant[0].mig_start = 4;   /* the plain 3g.40gb by replica */
    f.grant[0].mig_profile = (int8_t)model_product_profile_index(n->gpus[0].product, "3g.40gb");
    CHECK(model_assign(n, "forged", &f, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "is not shared by replicas");
    char buf[128];
    model_assignment_format(n, &a[0], buf, sizeof buf);
    CHECK_STR(buf, "GPU 0 mig 1g.10gb@1 replica 2");
    /* nvidia.com/mig-1g.10gb.shared is not advertised without renameByDefault. */
    model_request rs = mig_req("1g.10gb", MODEL_ISO_DEFAULT, true);
    CHECK_INT(model_fit(n, &rs, a, 16, why, sizeof why), 0);
    CHECK_CONTAINS(why, "renameByDefault is off");
    model_node_free(n);

    /* renameByDefault: the .shared name asks a replica outright; the plain name buys none. */
    n = layered_node(true);
    CHECK_INT(model_fit(n, &rs, a, 16, why, sizeof why), 4);
    CHECK_INT(a[0].grant[0].replica, 0);
    r.isolation = MODEL_ISO_TIMESLICE;
    CHECK_INT(model_fit(n, &r, a, 16, why, sizeof why), 0);
    CHECK_CONTAINS(why, "nvidia.com/mig-1g.10gb.shared");
    rs.isolation = MODEL_ISO_MPS;   /* the instances are time-sliced, not MPS */
    CHECK_INT(model_fit(n, &rs, a, 16, why, sizeof why), 0);
    /* Fractions: charged what they declare, against what is left of the instance (as on a
     * time-sliced GPU): two 4 GiB shares fit a 1g.10gb, a third does not; 12 GB never. */
    model_request fr = req(MODEL_REQ_FRACTION, 1);
    fr.isolation = MODEL_ISO_TIMESLICE;
    fr.memory_mib = 4096;
    CHECK_INT(model_fit(n, &fr, a, 16, why, sizeof why), 4);
    CHECK_INT(a[0].grant[0].replica, 0);
    CHECK_INT(a[0].grant[0].memory_mib, 4096);
    CHECK_INT(model_assign(n, "f1", &a[0], err, sizeof err), 0);
    CHECK_INT(model_fit(n, &fr, a, 16, why, sizeof why), 4);
    CHECK_INT(a[0].grant[0].replica, 1);   /* same instance, next replica */
    CHECK_INT(model_assign(n, "f2", &a[0], err, sizeof err), 0);
    CHECK_INT(model_fit(n, &fr, a, 16, why, sizeof why), 3);   /* 1g@0 has ~1.5 GiB left */
    CHECK(node_ok(n));
    model_assignment big = a[0];
    big.grant[0].memory_mib = 10000;   /* forged: more than the instance holds */
    CHECK(model_assign(n, "big", &big, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "MiB and");
    fr.memory_mib = 12000;
    CHECK_INT(model_fit(n, &fr, a, 16, why, sizeof why), 0);
    model_node_free(n);
}

TEST(fit_layered_mig_single_strategy) {
    model_node *n = model_node_new("h100-single");
    const model_gpu_product *p = product("NVIDIA-H100-80GB-HBM3");
    int p1 = model_product_profile_index(p, "1g.10gb");
    for (int i = 0; i < 2; i++) {
        model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
        model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 2, NULL, 0);
        for (int s = 0; s < 7; s++) model_gpu_add_mig_instance(g, p1, s, NULL, 0);
    }
    n->mig_strategy = MODEL_MIG_SINGLE;
    n->mig_sharing = MODEL_GPU_TIMESLICE;
    snprintf(n->product_label, sizeof n->product_label, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED");
    model_assignment a[32];
    char why[256], err[256];
    model_request w = req(MODEL_REQ_WHOLE, 1);
    CHECK_INT(model_fit(n, &w, a, 32, why, sizeof why), 0);
    CHECK_CONTAINS(why, "time-sliced replica of a MIG slice");
    w.isolation = MODEL_ISO_MIG;   /* a whole slice: none here, every slice is shared */
    CHECK_INT(model_fit(n, &w, a, 32, why, sizeof why), 0);
    w.isolation = MODEL_ISO_TIMESLICE;
    CHECK_INT(model_fit(n, &w, a, 32, why, sizeof why), 14);
    CHECK_INT(model_assign(n, "a", &a[0], err, sizeof err), 0);
    CHECK_INT(model_fit(n, &w, a, 32, why, sizeof why), 14);   /* replica 1 of the same slice next */
    CHECK_INT(a[0].grant[0].replica, 1);
    model_request s = req(MODEL_REQ_SHARED, 1);
    CHECK_INT(model_fit(n, &s, a, 32, why, sizeof why), 0);
    CHECK_CONTAINS(why, "renameByDefault is off");
    n->mig_renamed = true;
    CHECK_INT(model_fit(n, &s, a, 32, why, sizeof why), 14);
    CHECK_INT(model_fit(n, &w, a, 32, why, sizeof why), 0);
    CHECK_CONTAINS(why, "nvidia.com/gpu.shared");
    CHECK(node_ok(n));
    model_node_free(n);
}

TEST(regrant_moves_a_layered_replica) {
    model_node *n = model_node_new("two");
    const model_gpu_product *p = product("NVIDIA-A100-SXM4-80GB");
    int p1 = model_product_profile_index(p, "1g.10gb");
    for (int i = 0; i < 2; i++) {
        model_gpu *g = model_node_add_gpu(n, p, MODEL_GPU_MIG, 1, 0);
        model_gpu_share_mig_profile(g, p1, MODEL_GPU_TIMESLICE, 2, NULL, 0);
        model_gpu_add_mig_instance(g, p1, 0, NULL, 0);
    }
    n->mig_strategy = MODEL_MIG_MIXED;
    n->mig_sharing = MODEL_GPU_TIMESLICE;
    model_request r = mig_req("1g.10gb", MODEL_ISO_TIMESLICE, false);
    model_assignment a[4], moved;
    char why[256], err[256];
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 2);
    CHECK_INT(model_assign(n, "x", &a[1], err, sizeof err), 0);   /* GPU 1 replica 0 */
    CHECK_INT(model_fit(n, &r, a, 4, why, sizeof why), 2);
    CHECK_INT(model_regrant(n, &a[0], 0, 1, &moved, err, sizeof err), 0);
    CHECK_INT(moved.grant[0].gpu, 1);
    CHECK_INT(moved.grant[0].replica, 1);   /* replica 0 there is taken */
    model_node_free(n);
}
