/* test_sim_replay.c -- the event loop: waiting when full, priority before FIFO,
 * running time stretched by the slowdown model, unschedulable workloads, and no
 * over-commit under any policy on the demo inputs. */
#include "sim_helpers.h"

#include "policy/policy.h"
#include "sim/replay.h"

#define WHOLE1 "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}"
#define WHOLE1_CPU "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\", \"cpu\": \"1\"}}}"
#define TS1 "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}, \"annotations\": {\"tessera.io/isolation\": \"timeslice\"}}"

static int run(const sim_cluster *c, const sim_trace *t, const char *pol, sim_replay_result *r) {
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = pol;
    o.check = true;
    char err[512];
    int rc = sim_replay(c, t, &o, r, err, sizeof err);
    if (rc != 0) fprintf(stdout, "    replay: %s\n", err);
    return rc;
}

TEST(sim_replay_waits_when_full) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 1, "whole");
    char err[256];
    sim_trace *t = trace_of("{\"workloads\": ["
                            "{\"id\": \"a\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " WHOLE1 "},"
                            "{\"id\": \"b\", \"kind\": \"training\", \"arrival\": 10, \"duration\": 50, " WHOLE1 "}]}",
                            err, sizeof err);
    CHECK(c && t);
    sim_replay_result r;
    CHECK(run(c, t, "binpack", &r) == 0);
    CHECK_INT(r.placed, 2);
    CHECK_NEAR(r.start[0], 0, 1e-9);
    CHECK_NEAR(r.start[1], 100, 1e-9);   /* waited for a's GPU */
    CHECK_NEAR(r.end[1], 150, 1e-9);
    CHECK_NEAR(r.kind[SIM_TRAINING].wait_max, 90, 1e-9);
    CHECK_NEAR(r.makespan_s, 150, 1e-9);
    CHECK_NEAR(r.gpu_hours, 150.0 / 3600, 1e-9);
    CHECK_NEAR(r.kind[SIM_TRAINING].slow_mean, 1.0, 1e-9);   /* exclusive: no slowdown */
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

TEST(sim_replay_priority_beats_fifo) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 1, "whole");
    char err[256];
    /* b (priority 0) and c (priority 10) wait for a's GPU; c goes first though later. d has
     * another shape (asks for CPU) and the highest priority: it goes before both. */
    sim_trace *t = trace_of("{\"workloads\": ["
                            "{\"id\": \"a\", \"kind\": \"batch\", \"arrival\": 0, \"duration\": 100, " WHOLE1 "},"
                            "{\"id\": \"b\", \"kind\": \"batch\", \"arrival\": 10, \"duration\": 10, " WHOLE1 "},"
                            "{\"id\": \"c\", \"kind\": \"batch\", \"arrival\": 20, \"priority\": 10, \"duration\": 10, " WHOLE1 "},"
                            "{\"id\": \"d\", \"kind\": \"batch\", \"arrival\": 30, \"priority\": 20, \"duration\": 10, " WHOLE1_CPU "},"
                            "{\"id\": \"e\", \"kind\": \"batch\", \"arrival\": 40, \"duration\": 10, " WHOLE1 "}]}",
                            err, sizeof err);
    CHECK_MSG(c && t, "%s", err);
    sim_replay_result r;
    CHECK(run(c, t, "bestfit", &r) == 0);
    CHECK_NEAR(r.start[3], 100, 1e-9);   /* d: highest priority */
    CHECK_NEAR(r.start[2], 110, 1e-9);   /* c: priority 10 */
    CHECK_NEAR(r.start[1], 120, 1e-9);   /* b: priority 0, arrived before e */
    CHECK_NEAR(r.start[4], 130, 1e-9);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

TEST(sim_replay_timeslice_slowdown_follows_tenants) {
    sim_cluster *c = one_group("Tesla-T4", 1, 1, "timeslice:2");
    char err[256];
    /* a runs alone for 50 s, then shares with b at (1/2)(1 - 0.38) = 0.31 each */
    sim_trace *t = trace_of("{\"workloads\": ["
                            "{\"id\": \"a\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100, " TS1 "},"
                            "{\"id\": \"b\", \"kind\": \"training\", \"arrival\": 50, \"duration\": 100, " TS1 "}]}",
                            err, sizeof err);
    CHECK_MSG(c && t, "%s", err);
    sim_replay_result r;
    CHECK(run(c, t, "binpack", &r) == 0);
    double shared = 50 / 0.31;   /* a's remaining 50 s of work at 0.31 */
    CHECK_NEAR(r.end[0], 50 + shared, 1e-6);
    CHECK_NEAR(r.end[1], 50 + shared + 50, 1e-6);   /* b did 50 s of work meanwhile, 50 left alone */
    CHECK_NEAR(r.kind[SIM_TRAINING].slow_mean, (50 + shared) / 100, 1e-6);
    CHECK_NEAR(r.kind[SIM_TRAINING].wait_max, 0, 1e-9);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

TEST(sim_replay_unschedulable_is_counted_not_queued) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 2, 4, "whole");
    char err[256];
    sim_trace *t = trace_of("{\"workloads\": ["
                            "{\"id\": \"big\", \"kind\": \"training\", \"arrival\": 0, \"duration\": 100,"
                            " \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"8\"}}}},"
                            "{\"id\": \"mig\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100,"
                            " \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/mig-1g.10gb\": \"1\"}}}},"
                            "{\"id\": \"ok\", \"kind\": \"training\", \"arrival\": 5, \"duration\": 100, " WHOLE1 "}]}",
                            err, sizeof err);
    CHECK_MSG(c && t, "%s", err);
    sim_replay_result r;
    CHECK(run(c, t, "fgd", &r) == 0);
    CHECK_INT(r.unschedulable, 2);
    CHECK_INT(r.unschedulable_kind[SIM_TRAINING], 1);
    CHECK_INT(r.unschedulable_kind[SIM_INFERENCE], 1);
    CHECK_INT(r.placed, 1);
    CHECK_NEAR(r.start[2], 5, 1e-9);
    CHECK_NEAR(r.start[0], -1, 0);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* The simulator narrows fractions as the extender does by default (its reservations cannot
 * hold an MPS client, model_request_for_reservation_delivery): on a cluster of MPS GPUs a
 * 2 GiB share that takes any isolation has nowhere to go, unless --soft-share-delivery none.
 * An MPS replica asked for as such (nvidia.com/gpu with isolation mps: the device plugin's
 * own unit) still goes there. */
TEST(sim_replay_fraction_never_on_mps_with_reservation_delivery) {
    sim_cluster *c = one_group("Tesla-T4", 1, 1, "mps:4");
    char err[256];
    sim_trace *t = trace_of("{\"workloads\": ["
                            "{\"id\": \"share\", \"kind\": \"notebook\", \"arrival\": 0, \"duration\": 100,"
                            " \"pod\": {\"resources\": {\"limits\": {\"nvidia.com/gpumem\": \"2048\"}},"
                            " \"annotations\": {\"tessera.io/isolation\": \"any\"}}},"
                            "{\"id\": \"replica\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, "
                            "\"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}},"
                            " \"annotations\": {\"tessera.io/isolation\": \"mps\"}}}]}",
                            err, sizeof err);
    CHECK_MSG(c && t, "%s", err);
    sim_replay_result r;
    CHECK(run(c, t, "binpack", &r) == 0);
    CHECK_INT(r.unschedulable, 1);
    CHECK_INT(r.unschedulable_kind[SIM_NOTEBOOK], 1);
    CHECK_INT(r.placed, 1);
    sim_replay_result_free(&r);
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = "binpack";
    o.check = true;
    o.soft_share_delivery_none = true;
    CHECK(sim_replay(c, t, &o, &r, err, sizeof err) == 0);
    CHECK_INT(r.unschedulable, 0);
    CHECK_INT(r.placed, 2);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* Every policy on the demo inputs: all placed, all departed, model_node_check after
 * every change (o.check), waits never negative, and the same result twice. */
TEST(sim_replay_demo_every_policy_consistent) {
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    for (int i = 0; i < policy_count(); i++) {
        const char *name = policy_name(policy_at(i));
        sim_replay_result r, r2;
        CHECK_MSG(run(c, t, name, &r) == 0, "%s", name);
        CHECK_MSG(r.placed + r.unschedulable == t->n, "%s: %d placed", name, r.placed);
        CHECK_INT(r.gpus, 40);
        for (int w = 0; w < t->n; w++)
            if (r.start[w] >= 0) {
                CHECK(r.start[w] >= t->w[w].arrival);
                CHECK(r.end[w] - r.start[w] >= t->w[w].duration * 0.999);   /* never faster than dedicated */
            }
        CHECK(r.nsamples == 100 && r.alloc_pct[0] == 0);
        for (int s = 0; s < r.nsamples; s++) CHECK(r.alloc_pct[s] >= 0 && r.alloc_pct[s] <= 100.0001);
        CHECK(r.frag_mean_pct >= 0);
        CHECK(run(c, t, name, &r2) == 0);
        CHECK_NEAR(r2.makespan_s, r.makespan_s, 0);
        CHECK_NEAR(r2.all.wait_p95, r.all.wait_p95, 0);
        sim_replay_result_free(&r);
        sim_replay_result_free(&r2);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
}

TEST(sim_replay_percentile_nearest_rank) {
    double v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    CHECK_NEAR(sim_percentile(v, 10, 50), 5, 0);
    CHECK_NEAR(sim_percentile(v, 10, 95), 10, 0);
    CHECK_NEAR(sim_percentile(v, 10, 0), 1, 0);
    CHECK_NEAR(sim_percentile(v, 0, 50), 0, 0);
}

TEST(sim_replay_empty_trace) {
    sim_cluster *c = one_group("Tesla-T4", 2, 1, "whole");
    char err[256];
    sim_trace *t = trace_of("{\"workloads\": []}", err, sizeof err);
    CHECK(c && t);
    sim_replay_result r;
    CHECK(run(c, t, "fgd", &r) == 0);
    CHECK_INT(r.placed, 0);
    CHECK_INT(r.gpus, 2);
    CHECK_NEAR(r.gpu_hours, 0, 0);
    CHECK_INT(r.all.n, 0);
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* The demo trace on the demo cluster with its MIG groups layered (every instance time-sliced):
 * every policy places everything, never over-commits (model_node_check after every change),
 * and some workloads really land on replicas of MIG instances. */
TEST(sim_replay_layered_cluster_every_policy_consistent) {
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    char err[256];
    for (int g = 0; g < c->ngroups; g++)
        if (c->groups[g].sharing.kind == SIM_SHARE_MIG || c->groups[g].sharing.kind == SIM_SHARE_MIG_ON_DEMAND)
            CHECK(sim_sharing_parse("mig:3g.40gb+4g.40gb+timeslice:4", &c->groups[g].sharing, err, sizeof err) == 0);
    for (int i = 0; i < policy_count(); i++) {
        const char *name = policy_name(policy_at(i));
        sim_replay_result r;
        CHECK_MSG(run(c, t, name, &r) == 0, "%s", name);
        CHECK_MSG(r.placed + r.unschedulable == t->n, "%s: %d placed", name, r.placed);
        for (int w = 0; w < t->n; w++)
            if (r.start[w] >= 0) CHECK(r.end[w] - r.start[w] >= t->w[w].duration * 0.999);
        sim_replay_result_free(&r);
    }
    /* replicas are used: place the trace's first fraction on a layered node by hand */
    model_node *n = sim_group_node(&c->groups[1], NULL, "lay", err, sizeof err);
    CHECK_MSG(n != NULL, "%s", err);
    if (n) {
        model_request q = t->shapes[t->w[0].shape].req;
        model_assignment a[8];
        int k = model_fit(n, &q, a, 8, err, sizeof err);
        bool replica = false;
        for (int j = 0; j < k && j < 8; j++) replica |= a[j].grant[0].mig_profile >= 0 && a[j].grant[0].replica >= 0;
        CHECK_MSG(replica, "the first demo workload (%d fits) cannot take a replica of a time-sliced instance", k);
        model_node_free(n);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
}

#define MPS_HALF(uid) "\"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.5\", \"tessera.io/compute-sharing\": \"mps\"}, " \
                      "\"securityContext\": {\"runAsUser\": " #uid "}}"
#define TS_HALF "\"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.5\"}}"

/* Two busy workloads on halves of one GPU, 100 s of work each: as MPS shares each runs at its half
 * (0.5: 200 s), time-sliced at (1/2)(1 - 0.38) = 0.31 (322.6 s). A second GPU is there, and an MPS share
 * of another uid takes it rather than join. */
TEST(sim_replay_mps_shares_run_at_their_thread_share) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 2, "whole");
    char err[256];
    const char *forms[] = {MPS_HALF(1000), TS_HALF};
    double want[] = {100 / 0.5, 100 / 0.31};
    for (int k = 0; k < 2; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"workloads\": [{\"id\": \"a\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, %s},"
                 "{\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, %s}]}", forms[k], forms[k]);
        sim_trace *t = trace_of(json, err, sizeof err);
        CHECK_MSG(c && t, "%s", err);
        sim_replay_result r;
        CHECK(run(c, t, "binpack", &r) == 0);   /* binpack: both on GPU 0 */
        CHECK_NEAR(r.end[0], want[k], 1e-6);
        CHECK_NEAR(r.end[1], want[k], 1e-6);
        CHECK_NEAR(r.kind[SIM_INFERENCE].slow_mean, want[k] / 100, 1e-6);
        sim_replay_result_free(&r);
        sim_trace_free(t);
    }
    /* another uid: its own GPU, so both run alone at their cap (0.5: 200 s) */
    sim_trace *t = trace_of("{\"workloads\": [{\"id\": \"a\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, "
                            MPS_HALF(1000) "}, {\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, "
                            MPS_HALF(2000) "}, {\"id\": \"c\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, "
                            MPS_HALF(3000) "}]}", err, sizeof err);
    CHECK_MSG(t, "%s", err);
    sim_replay_result r;
    CHECK(run(c, t, "binpack", &r) == 0);
    CHECK_NEAR(r.end[0], 200, 1e-6);
    CHECK_NEAR(r.end[1], 200, 1e-6);
    CHECK_NEAR(r.start[2], 200, 1e-6);   /* uid 3000 waited for a GPU of its own */
    sim_replay_result_free(&r);
    sim_trace_free(t);
    sim_cluster_free(c);
}

/* memBandwidth: MPS clients contend for memory bandwidth (no QoS). Two clients on halves, each needing
 * 0.5 of the SMs and 0.8 of the bandwidth alone, ask 1.6: each runs at 1/1.6. Time-sliced, memBandwidth
 * changes nothing (one context runs at a time). */
TEST(sim_replay_mps_clients_share_memory_bandwidth) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 1, "whole");
    char err[256];
    const char *forms[] = {MPS_HALF(1000), TS_HALF};
    double want[] = {100 * 1.6, 100 / (1 - 0.38 * 0.25)};
    for (int k = 0; k < 2; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"workloads\": [{\"id\": \"a\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, "
                 "\"gpuUtil\": 0.5, \"memBandwidth\": 0.8, %s},"
                 "{\"id\": \"b\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 100, \"gpuUtil\": 0.5, "
                 "\"memBandwidth\": 0.8, %s}]}", forms[k], forms[k]);
        sim_trace *t = trace_of(json, err, sizeof err);
        CHECK_MSG(c && t, "%s", err);
        sim_replay_result r;
        CHECK(run(c, t, "binpack", &r) == 0);
        CHECK_NEAR(r.end[0], want[k], 1e-4);   /* (memBandwidth is kept as a float) */
        sim_replay_result_free(&r);
        sim_trace_free(t);
    }
    sim_cluster_free(c);
}

/* The demo trace with every soft share an MPS share, of one uid and of a uid per tenant, replays under
 * every policy with model_node_check after every change (run() sets check). */
TEST(sim_replay_demo_as_mps_shares_every_policy_consistent) {
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    char err[512];
    for (int mode = SIM_COMPUTE_MPS; mode <= SIM_COMPUTE_MPS_TENANT; mode++) {
        sim_trace *m = sim_trace_compute_sharing(t, (sim_compute)mode, err, sizeof err);
        CHECK_MSG(m, "%s", err);
        for (int i = 0; i < policy_count(); i++) {
            sim_replay_result r;
            CHECK_MSG(run(c, m, policy_name(policy_at(i)), &r) == 0, "%s", policy_name(policy_at(i)));
            CHECK_INT(r.placed + r.unschedulable, m->n);
            sim_replay_result_free(&r);
        }
        sim_trace_free(m);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
}
