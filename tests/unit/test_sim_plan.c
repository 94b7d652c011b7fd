/* test_sim_plan.c -- targets parse with clear errors; the planner finds the smallest
 * count per group, and one node fewer in any group misses a target. */
#include "sim_helpers.h"

#include "sim/plan.h"

TEST(sim_plan_targets_parse) {
    sim_target t;
    char err[256];
    CHECK(sim_target_parse("wait.p95.inference<=30s", &t, err, sizeof err) == 0);
    CHECK_STR(t.metric, "wait.p95.inference");
    CHECK_INT(t.op, SIM_OP_LE);
    CHECK_NEAR(t.value, 30, 0);
    CHECK(sim_target_parse("wait.p99.all<5m", &t, err, sizeof err) == 0);
    CHECK_NEAR(t.value, 300, 0);
    CHECK_INT(t.op, SIM_OP_LT);
    CHECK(sim_target_parse("unschedulable==0", &t, err, sizeof err) == 0);
    CHECK_INT(t.op, SIM_OP_EQ);
    CHECK(sim_target_parse("slowdown.mean.notebook<=1.2", &t, err, sizeof err) == 0);
    CHECK(sim_target_parse("alloc.mean>=50", &t, err, sizeof err) == 0);
    CHECK_INT(t.op, SIM_OP_GE);
    CHECK(sim_target_parse("wait.p95.inferenc<=30s", &t, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "unknown kind \"inferenc\"");
    CHECK(sim_target_parse("wait.p42.all<=30s", &t, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "\"p42\" is not a statistic of wait");
    CHECK(sim_target_parse("latency<=3", &t, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "unknown metric \"latency\"");
    CHECK(sim_target_parse("wait.p95.all<=soon", &t, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "is not a duration");
    CHECK(sim_target_parse("wait.p95.all", &t, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "expected <metric><op><value>");
}

static void add_target(sim_plan_opts *o, const char *s) {
    char err[256];
    if (sim_target_parse(s, &o->targets[o->ntargets++], err, sizeof err) != 0) test_fail(__FILE__, __LINE__, "%s", err);
}

/* Six one-GPU jobs at once and "nobody waits": exactly six one-GPU nodes. */
TEST(sim_plan_finds_the_minimum) {
    char json[4096] = "{\"workloads\": [", err[512];
    for (int i = 0; i < 6; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"id\": \"j%d\", \"kind\": \"training\", \"arrival\": %d, \"duration\": 1000,"
                 " \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}}}}", i ? "," : "", i, i);
    strcat(json, "]}");
    sim_trace *t = trace_of(json, err, sizeof err);
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 1, "whole");
    CHECK_MSG(t && c, "%s", err);
    sim_plan_opts o = {0};
    add_target(&o, "wait.max.all<=0");
    add_target(&o, "unschedulable==0");
    sim_plan_result p;
    CHECK_MSG(sim_plan(c, t, "bestfit", &o, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.met);
    CHECK_INT(p.cluster->groups[0].count, 6);
    CHECK_NEAR(p.measured[0], 0, 0);
    sim_replay_result r;
    p.cluster->groups[0].count = 5;
    CHECK_INT(sim_plan_check(p.cluster, t, "bestfit", &o, &r, err, sizeof err), 0);
    CHECK_NEAR(r.kind[SIM_TRAINING].wait_max, 1000 - 5, 1e-9);   /* the sixth waits for the first */
    sim_replay_result_free(&r);
    sim_plan_result_free(&p);
    sim_cluster_free(c);
    sim_trace_free(t);
}

/* On the demo inputs: every group at its planned count minus one misses a target. */
TEST(sim_plan_demo_count_minus_one_fails) {
    char err[512];
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    sim_plan_opts o = {0};
    add_target(&o, "wait.p95.inference<=30s");
    add_target(&o, "unschedulable==0");
    sim_plan_result p;
    CHECK_MSG(sim_plan(c, t, "fgd", &o, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.met);
    CHECK(p.measured[0] <= 30);
    CHECK_NEAR(p.measured[1], 0, 0);
    for (int g = 0; g < p.cluster->ngroups; g++) {
        if (p.cluster->groups[g].count == 0) continue;
        sim_cluster *less = sim_cluster_clone(p.cluster);
        less->groups[g].count--;
        sim_replay_result r;
        CHECK_INT(sim_plan_check(less, t, "fgd", &o, &r, err, sizeof err), 0);
        sim_replay_result_free(&r);
        sim_cluster_free(less);
    }
    sim_plan_result_free(&p);
    sim_cluster_free(c);
    sim_trace_free(t);
}

/* Pods that take time-slice replicas only: "whole" cannot serve them, timeslice:4 can,
 * four to a GPU; the planner picks the sharing and the count. */
TEST(sim_plan_chooses_sharing) {
    char json[4096] = "{\"workloads\": [", err[512];
    for (int i = 0; i < 8; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"id\": \"n%d\", \"kind\": \"notebook\", \"arrival\": 0, \"duration\": 600, \"gpuUtil\": 0.05,"
                 " \"pod\": {\"resources\": {\"requests\": {\"nvidia.com/gpu\": \"1\"}},"
                 " \"annotations\": {\"tessera.io/isolation\": \"timeslice\"}}}", i ? "," : "", i);
    strcat(json, "]}");
    sim_trace *t = trace_of(json, err, sizeof err);
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 4, 1, "whole");
    CHECK_MSG(t && c, "%s", err);
    sim_plan_opts o = {0};
    add_target(&o, "wait.max.all<=0");
    add_target(&o, "unschedulable==0");
    o.nsharing = 2;
    CHECK(sim_sharing_parse("whole", &o.sharing[0], err, sizeof err) == 0);
    CHECK(sim_sharing_parse("timeslice:4", &o.sharing[1], err, sizeof err) == 0);
    sim_plan_result p;
    CHECK_MSG(sim_plan(c, t, "binpack", &o, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.met);
    CHECK_INT(p.cluster->groups[0].sharing.kind, SIM_SHARE_TIMESLICE);
    CHECK_INT(p.cluster->groups[0].count, 2);
    sim_plan_result_free(&p);
    /* Without the option, no count of whole GPUs helps: reported, not looped forever. */
    o.nsharing = 0;
    o.max_scale = 4;
    CHECK(sim_plan(c, t, "binpack", &o, &p, err, sizeof err) == 0);
    CHECK(!p.met);
    CHECK_NEAR(p.measured[1], 8, 0);
    sim_plan_result_free(&p);
    sim_cluster_free(c);
    sim_trace_free(t);
}

/* On the demo inputs the plan compares the sharing options on the shared groups, a layered
 * one among them, and says whether layering needs fewer GPUs (spread: fewer than MIG alone
 * and time-slicing alone, as sim/README.md shows). */
TEST(sim_plan_compares_layered_sharing_on_the_demo) {
    char err[512];
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    sim_plan_opts o = {0};
    add_target(&o, "wait.p95.inference<=30s");
    add_target(&o, "unschedulable==0");
    const char *opts[] = {"timeslice:4", "mig:on-demand", "mig:3g.40gb+4g.40gb", "mig:3g.40gb+4g.40gb+timeslice:4"};
    o.nsharing = 4;
    o.seed = 42;   /* `tessera-sim plan`'s default, what make sim and sim/README.md show */
    for (int k = 0; k < 4; k++) CHECK(sim_sharing_parse(opts[k], &o.sharing[k], err, sizeof err) == 0);
    sim_plan_result p;
    CHECK_MSG(sim_plan(c, t, "spread", &o, &p, err, sizeof err) == 0, "%s", err);
    CHECK_INT(p.nopt, 4);
    CHECK_STR(p.opt[3], "mig:3g.40gb+4g.40gb+timeslice:4");
    int lay, mig, ts;
    sim_plan_layering(&p, &lay, &mig, &ts);
    CHECK_INT(lay, 3);
    CHECK(mig == 1 || mig == 2);
    CHECK_INT(ts, 0);
    CHECK_MSG(lay >= 0 && mig >= 0 && ts >= 0 && p.opt_gpus[lay] < p.opt_gpus[mig] && p.opt_gpus[lay] < p.opt_gpus[ts],
              "layered %d, MIG %d, time-slicing %d GPUs", lay >= 0 ? p.opt_gpus[lay] : -9, mig >= 0 ? p.opt_gpus[mig] : -9,
              ts >= 0 ? p.opt_gpus[ts] : -9);
    sim_plan_result_free(&p);
    sim_cluster_free(c);
    sim_trace_free(t);
}

/* soft:timeslice against soft:mps. Eight inference pods of half a GPU each, needing that half (gpuUtil
 * 0.5), and a slowdown target of 1.05: time-sliced two to a GPU they pay part of the switching cost
 * (1 - 0.38 x 0.25: 1.105x), so each needs a GPU of its own -- 8 GPUs under spread, never under binpack,
 * which packs them two to a GPU however many GPUs there are; as MPS shares two share a GPU at full
 * speed: 4 GPUs under both. The options take no part in the per-group search. */
TEST(sim_plan_compares_mps_and_time_sliced_soft_shares) {
    char json[4096] = "{\"workloads\": [", err[512];
    for (int i = 0; i < 8; i++)
        snprintf(json + strlen(json), sizeof json - strlen(json),
                 "%s{\"id\": \"i%d\", \"kind\": \"inference\", \"arrival\": 0, \"duration\": 600, \"gpuUtil\": 0.5,"
                 " \"pod\": {\"annotations\": {\"tessera.io/gpu-fraction\": \"0.5\"}}}", i ? "," : "", i);
    strcat(json, "]}");
    sim_trace *t = trace_of(json, err, sizeof err);
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 2, 4, "whole");
    CHECK_MSG(t && c, "%s", err);
    sim_plan_opts o = {0};
    add_target(&o, "slowdown.p95.inference<=1.05");
    add_target(&o, "wait.max.all<=0");
    add_target(&o, "unschedulable==0");
    const char *opts[] = {"soft:timeslice", "soft:mps", "whole"};
    for (int k = 0; k < 3; k++) {
        int soft = sim_plan_soft_parse(opts[k], &o.soft[k], err, sizeof err);
        CHECK(soft >= 0 && sim_sharing_parse(soft ? "whole" : opts[k], &o.sharing[k], err, sizeof err) == 0);
    }
    o.nsharing = 3;
    o.max_scale = 8;
    const char *pols[] = {"spread", "binpack"};
    int want_ts[] = {8, -1};
    for (int i = 0; i < 2; i++) {
        sim_plan_result p;
        CHECK_MSG(sim_plan(c, t, pols[i], &o, &p, err, sizeof err) == 0, "%s", err);
        CHECK_STR(p.opt[0], "soft:timeslice");
        CHECK_STR(p.opt[1], "soft:mps");
        CHECK_MSG(p.opt_gpus[0] == want_ts[i] && p.opt_gpus[1] == 4, "%s: time-sliced %d GPUs, MPS %d", pols[i],
                  p.opt_gpus[0], p.opt_gpus[1]);
        CHECK_INT(p.opt_gpus[2], -2);  /* whole: no shared group to set */
        int ts, mps;
        sim_plan_soft(&p, &ts, &mps);
        CHECK_INT(ts, 0);
        CHECK_INT(mps, 1);
        /* the plan itself ran the trace as given (time-sliced) */
        CHECK_INT(p.met, want_ts[i] > 0);
        sim_plan_result_free(&p);
    }
    sim_compute m;
    CHECK_INT(sim_plan_soft_parse("soft:mps:tenant", &m, err, sizeof err), 1);
    CHECK_INT(m, SIM_COMPUTE_MPS_TENANT);
    CHECK_INT(sim_plan_soft_parse("timeslice:4", &m, err, sizeof err), 0);
    CHECK_INT(sim_plan_soft_parse("soft:trace", &m, err, sizeof err), -1);
    CHECK_CONTAINS(err, "expected soft:timeslice, soft:mps or soft:mps:tenant");
    sim_cluster_free(c);
    sim_trace_free(t);
}
