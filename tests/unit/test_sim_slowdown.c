/* test_sim_slowdown.c -- the slowdown model reproduces the numbers in
 * data/sharing-costs.md (copied into sim/slowdown.h). */
#include "sim_helpers.h"

#include "model/catalog.h"
#include "sim/slowdown.h"

TEST(sim_slowdown_timeslice) {
    CHECK_NEAR(sim_rate_timeslice(1.0, 0.0), 1.0, 1e-12);        /* alone: "the penalty can be neglected" */
    CHECK_NEAR(sim_rate_timeslice(1.0, 1.0), 0.5 * 0.62, 1e-12); /* two busy: (1/n)(1 - 0.38) */
    CHECK_NEAR(sim_rate_timeslice(1.0, 3.0), 0.25 * 0.62, 1e-12);/* four busy: no further loss (Tables 2-3) */
    CHECK_NEAR(sim_rate_timeslice(1.0, 7.0), 0.125 * 0.62, 1e-12);
    /* Notebooks at 5 % barely slow each other */
    CHECK(sim_rate_timeslice(0.05, 0.05) > 0.998);
    /* Two half-busy tenants fit in time, pay only part of the switching cost */
    double r = sim_rate_timeslice(0.5, 0.5);
    CHECK(r > 0.9 && r < 1.0);
}

TEST(sim_slowdown_mig_and_mps) {
    const model_catalog *cat = model_catalog_default();
    const model_gpu_product *a100 = model_catalog_find(cat, "NVIDIA-A100-SXM4-80GB");
    const model_gpu_product *h100 = model_catalog_find(cat, "NVIDIA-H100-80GB-HBM3");
    CHECK(a100 && h100);
    int p3 = model_product_profile_index(a100, "3g.40gb"), p7 = model_product_profile_index(a100, "7g.80gb");
    CHECK(p3 >= 0 && p7 >= 0);
    CHECK_NEAR(sim_mig_sm_share(a100, p3), 42.0 / 108, 1e-9);       /* 0.389 */
    CHECK_NEAR(sim_mig_sm_share(a100, p7), 98.0 / 108, 1e-9);       /* 0.907: the MIG-enable loss */
    CHECK_NEAR(sim_mig_sm_share(h100, model_product_profile_index(h100, "7g.80gb")), 1.0, 1e-9);  /* 132/132 */
    CHECK_NEAR(sim_rate_share(1.0, 42.0 / 108), 0.3889, 1e-4);
    CHECK_NEAR(sim_rate_share(0.1, 42.0 / 108), 1.0, 1e-12);        /* needs less than the slice has */

    /* Through a real GPU and grant: MPS with 4 clients gets 25 % of the threads. */
    model_node *n = model_node_new("x");
    model_gpu *g = model_node_add_gpu(n, h100, MODEL_GPU_MPS, 4, 0);
    CHECK(g);
    model_grant gr = {.gpu = 0, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = 0};
    CHECK_NEAR(sim_rate_grant(g, &gr, 1.0, 3.0), 0.25, 1e-9);
    CHECK_NEAR(sim_rate_grant(g, &gr, 0.2, 3.0), 1.0, 1e-9);
    model_gpu *m = model_node_add_gpu(n, a100, MODEL_GPU_MIG, 1, 0);
    model_grant gm = {.gpu = 1, .mig_inst = 0, .mig_profile = (int8_t)p3, .mig_start = 0, .replica = -1};
    CHECK_NEAR(sim_rate_grant(m, &gm, 1.0, 5.0), 42.0 / 108, 1e-9);  /* MIG: co-tenants do not matter */
    model_gpu *w = model_node_add_gpu(n, a100, MODEL_GPU_WHOLE, 1, 0);
    model_grant ge = {.gpu = 2, .exclusive = true, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1};
    CHECK_NEAR(sim_rate_grant(w, &ge, 1.0, 0.0), 1.0, 1e-12);
    model_grant gs = {.gpu = 2, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1};
    CHECK_NEAR(sim_rate_grant(w, &gs, 1.0, 1.0), 0.31, 1e-9);         /* soft shares time-slice */
    model_node_free(n);
}

/* Time-slicing inside a MIG instance: alone, the MIG rate; with co-tenants of the same
 * instance, time-slicing scaled to the instance's share (data/sharing-costs.md section 7). */
TEST(sim_slowdown_layered_mig) {
    double s = 42.0 / 108.0;   /* A100 3g */
    CHECK_NEAR(sim_rate_mig_timeslice(0.2, 0.0, s), sim_rate_share(0.2, s), 1e-12);
    CHECK_NEAR(sim_rate_mig_timeslice(0.8, 0.0, s), s / 0.8, 1e-12);
    /* two tenants each needing the whole instance: (1/2)(1 - 0.38) of what each needs */
    CHECK_NEAR(sim_rate_mig_timeslice(s, s, s), 0.5 * (1 - SIM_TIMESLICE_LOSS), 1e-12);
    /* idle co-tenants (notebooks) barely cost anything */
    CHECK(sim_rate_mig_timeslice(0.05, 0.02, s) > 0.99);
    /* more co-tenants never help */
    CHECK(sim_rate_mig_timeslice(0.3, 0.6, s) < sim_rate_mig_timeslice(0.3, 0.2, s));
}

/* An MPS share (tessera.io/compute-sharing: mps) is capped at its thread share and never time-sliced: it
 * is not the time-slice rate (data/sharing-costs.md section 7). */
TEST(sim_slowdown_mps_share_is_capped_not_time_sliced) {
    const model_gpu_product *a100 = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new("x");
    model_gpu *g = model_node_add_gpu(n, a100, MODEL_GPU_WHOLE, 1, 0);
    model_grant mps = {.gpu = 0, .mig_inst = -1, .mig_profile = -1, .mig_start = -1, .replica = -1,
                       .compute_permille = 500, .memory_mib = 40960, .mps = true};
    model_grant ts = mps;
    ts.mps = false;
    /* the thread share: the charge rounded up to a whole percent, at least 1 */
    CHECK_NEAR(sim_mps_share(g, &mps), 0.5, 1e-12);
    mps.compute_permille = 333;
    CHECK_NEAR(sim_mps_share(g, &mps), 0.34, 1e-12);
    mps.compute_permille = 1;
    CHECK_NEAR(sim_mps_share(g, &mps), 0.01, 1e-12);
    mps.compute_permille = 500;
    CHECK_NEAR(sim_mps_share(g, &ts), 0, 1e-12);   /* a time-sliced share is no MPS client */
    /* two busy tenants on half a GPU each: MPS 0.5 each (their halves, side by side), time-slicing 0.31 */
    CHECK_NEAR(sim_rate_mps(1.0, 0.5, sim_mps_load(1.0, 1.0, 0.5) * 2), 0.5, 1e-12);
    CHECK_NEAR(sim_rate_grant(g, &mps, 1.0, 1.0), 0.5, 1e-12);
    CHECK_NEAR(sim_rate_grant(g, &ts, 1.0, 1.0), 0.31, 1e-12);
    /* two tenants that need their half: MPS full speed, time-slicing pays part of the switching cost */
    CHECK_NEAR(sim_rate_grant(g, &mps, 0.5, 0.5), 1.0, 1e-12);
    CHECK_NEAR(sim_rate_grant(g, &ts, 0.5, 0.5), 1 - 0.38 * 0.25, 1e-12);
    /* but MPS is not work-conserving: alone, a tenant needing 0.9 stays at its half; time-sliced it runs free */
    CHECK_NEAR(sim_rate_grant(g, &mps, 0.9, 0.0), 0.5 / 0.9, 1e-12);
    CHECK_NEAR(sim_rate_grant(g, &ts, 0.9, 0.0), 1.0, 1e-12);
    /* memory bandwidth: no QoS under MPS. Two clients each capped at half the SMs but using 0.8 of the
     * bandwidth alone ask 2 x 0.8 = 1.6 of it: each runs at 1 / 1.6 */
    double load = 2 * sim_mps_load(0.5, 0.8, 0.5);
    CHECK_NEAR(load, 1.6, 1e-12);
    CHECK_NEAR(sim_rate_mps(0.5, 0.5, load), 1 / 1.6, 1e-12);
    /* a client held below its demand by its cap uses bandwidth at that rate only */
    CHECK_NEAR(sim_mps_load(1.0, 0.8, 0.25), 0.2, 1e-12);
    CHECK_NEAR(sim_mps_load(0.0, 0.3, 0.25), 0.3, 1e-12);
    CHECK_NEAR(sim_rate_mps(0.3, 0.5, 0.9), 1.0, 1e-12);   /* under 1: no contention */
    model_node_free(n);
}
