/* test_sim_quota.c -- namespace quotas in the replay (sim/quota.h): the spec parser, and on
 * small traces what quotas do to waits: a quota on one team shortens the other's waits and
 * lengthens its own; refuse refuses; wait lets small workloads pass a large one that does not
 * fit its quota, fifo does not (and so bounds the large one's wait).
 */
#include <stdio.h>
#include <string.h>

#include "sim_helpers.h"
#include "sim/plan.h"
#include "sim/quota.h"
#include "sim/replay.h"

TEST(sim_quota_spec_parses_and_refuses_with_a_reason) {
    sim_quotas q = {0};
    char err[300], buf[300];
    CHECK(sim_quotas_parse(&q, "a=gpu-milli:2000,gpu-memory-mib:81920;b=gpu-memory-mib:40960", err, sizeof err) == 0);
    CHECK_INT(q.n, 2);
    CHECK_INT(q.q[0].gpu_milli, 2000);
    CHECK_INT(q.q[1].gpu_milli, -1);
    CHECK_INT(q.q[1].memory_mib, 40960);
    CHECK(sim_quotas_parse(&q, "a=gpu-milli:1000", err, sizeof err) == 0);   /* the last one wins */
    CHECK_INT(q.n, 2);
    CHECK_INT(q.q[0].gpu_milli, 1000);
    sim_quotas_format(&q, buf, sizeof buf);
    CHECK_STR(buf, "a=gpu-milli:1000;b=gpu-memory-mib:40960");
    CHECK(sim_quotas_map(&q, "team-1=a,team-2=a", err, sizeof err) == 0);
    CHECK_STR(sim_quotas_namespace(&q, "team-2"), "a");
    CHECK_STR(sim_quotas_namespace(&q, "team-3"), "team-3");
    CHECK(sim_quotas_find(&q, "c") == NULL);
    CHECK(sim_quotas_mode(&q, "fifo", err, sizeof err) == 0 && q.mode == SIM_QUOTA_FIFO);
    static const struct { const char *spec, *needle; } bad[] = {
        {"a", "expected NAMESPACE="}, {"a=gpus:3", "is not gpu-milli:N"}, {"a=gpu-milli:-1", "is not gpu-milli:N"},
        {"a=gpu-milli:x", "is not gpu-milli:N"}, {"=gpu-milli:1", "expected NAMESPACE="}, {"a=", "no limit given"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sim_quotas z = {0};
        int rc = sim_quotas_parse(&z, bad[i].spec, err, sizeof err);
        CHECK_REFUSED(rc == 0, bad[i].spec, err, bad[i].needle);
    }
    CHECK_REFUSED(sim_quotas_mode(&q, "strict", err, sizeof err) == 0, "strict", err, "wait, fifo or refuse");
    CHECK_REFUSED(sim_quotas_map(&q, "team-1", err, sizeof err) == 0, "team-1", err, "TENANT=NAMESPACE");
}

/* A trace written inline: training workloads of whole A100-80GBs. */
typedef struct tbuild {
    char json[16384];
    size_t o;
    int n;
} tbuild;

static void add(tbuild *b, const char *id, const char *tenant, double at, double dur, int gpus) {
    if (b->n == 0) b->o = (size_t)snprintf(b->json, sizeof b->json, "{\"workloads\": [");
    b->o += (size_t)snprintf(b->json + b->o, sizeof b->json - b->o,
                             "%s{\"id\": \"%s\", \"kind\": \"training\", \"arrival\": %.1f, \"duration\": %.1f, "
                             "\"tenant\": \"%s\", \"gpuUtil\": 1, \"pod\": {\"resources\": {\"requests\": "
                             "{\"nvidia.com/gpu\": \"%d\"}}, \"annotations\": {\"tessera.io/gpu-models\": \"A100-80GB\"}}}",
                             b->n ? "," : "", id, at, dur, tenant, gpus);
    b->n++;
}

/* n workloads "<tenant><i>" of one GPU for 100 s, arriving at t0 + i * step. */
static void add_series(tbuild *b, const char *tenant, int n, double t0, double step) {
    for (int i = 0; i < n; i++) {
        char id[16];
        snprintf(id, sizeof id, "%s%d", tenant, i);
        add(b, id, tenant, t0 + i * step, 100, 1);
    }
}

static const char *done(tbuild *b) {
    snprintf(b->json + b->o, sizeof b->json - b->o, "]}");
    return b->json;
}

/* Replay trace json on one node of `gpus` A100s with the quotas (NULL: none). */
static int replay_with(const char *json, int gpus, const sim_quotas *q, sim_replay_result *res) {
    char err[600];
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, gpus, "whole");
    sim_trace *t = trace_of(json, err, sizeof err);
    if (!c || !t) {
        printf("    %s\n", err);
        sim_cluster_free(c);
        sim_trace_free(t);
        return -1;
    }
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = "binpack";
    o.frag = false;
    o.check = true;
    o.quotas = q;
    int rc = sim_replay(c, t, &o, res, err, sizeof err);
    if (rc) printf("    %s\n", err);
    sim_cluster_free(c);
    sim_trace_free(t);
    return rc;
}

static const sim_tenant_stats *tenant(const sim_replay_result *r, const char *name) {
    for (int i = 0; i < r->ntenants; i++)
        if (!strcmp(r->tenant[i].tenant, name)) return &r->tenant[i];
    return NULL;
}

TEST(sim_quota_on_one_team_trades_its_waits_for_the_others) {
    /* team a sends 4 one-GPU jobs at t = 0..3, team b 2 at t = 10; 2 GPUs; each job 100 s */
    tbuild b = {0};
    add_series(&b, "a", 4, 0, 1);
    add_series(&b, "b", 2, 10, 0);
    const char *json = done(&b);
    sim_quotas none = {0}, qa = {0};
    char err[300];
    /* a quota that never binds: the per-tenant report without a change */
    CHECK(sim_quotas_parse(&none, "b=gpu-milli:100000", err, sizeof err) == 0);
    CHECK(sim_quotas_parse(&qa, "a=gpu-milli:1000", err, sizeof err) == 0);
    sim_replay_result r0, r1;
    CHECK(replay_with(json, 2, &none, &r0) == 0);
    CHECK(replay_with(json, 2, &qa, &r1) == 0);
    const sim_tenant_stats *a0 = tenant(&r0, "a"), *b0 = tenant(&r0, "b"), *a1 = tenant(&r1, "a"), *b1 = tenant(&r1, "b");
    bool have = a0 && b0 && a1 && b1;
    double b_before = have ? b0->wait_mean : 0, b_after = have ? b1->wait_mean : 0;
    double a_before = have ? a0->wait_mean : 0, a_after = have ? a1->wait_mean : 0;
    int a_waited = have ? a1->quota_waited : -1, placed = r1.placed;
    int64_t peak = have ? a1->peak_milli : -1, hard = have ? a1->hard_milli : 0;
    sim_replay_result_free(&r0);
    sim_replay_result_free(&r1);
    CHECK(have);
    /* without: a's 4 jobs hold both GPUs until t = 200 and 201; with a held to one GPU,
     * b0 starts at once and b1 when a GPU frees */
    CHECK_NEAR(b_before, 190.5, 1e-6);   /* b0 at 200, b1 at 201 */
    CHECK_MSG(b_after < b_before - 50, "b's mean wait %.1f s with a's quota, %.1f s without", b_after, b_before);
    CHECK_MSG(a_after > a_before + 50, "a's mean wait %.1f s with its quota, %.1f s without", a_after, a_before);
    CHECK_INT(a_waited, 3);
    CHECK_INT(peak, 1000);
    CHECK_INT(hard, 1000);
    CHECK_INT(placed, 6);
}

TEST(sim_quota_refuse_mode_and_a_charge_larger_than_the_quota) {
    tbuild b = {0};
    add_series(&b, "a", 3, 0, 1);
    add(&b, "big", "a", 300, 100, 2);   /* 2000 milli: never fits a quota of 1000 */
    const char *json = done(&b);
    sim_quotas q = {0};
    char err[300];
    CHECK(sim_quotas_parse(&q, "a=gpu-milli:1000", err, sizeof err) == 0);
    sim_replay_result r;
    CHECK(replay_with(json, 4, &q, &r) == 0);
    int refused_wait = r.refused, placed_wait = r.placed;
    sim_replay_result_free(&r);
    CHECK(sim_quotas_mode(&q, "refuse", err, sizeof err) == 0);
    CHECK(replay_with(json, 4, &q, &r) == 0);
    int refused = r.refused, placed = r.placed;
    const sim_tenant_stats *a = tenant(&r, "a");
    int a_refused = a ? a->refused : -1;
    sim_replay_result_free(&r);
    CHECK_INT(refused_wait, 1);   /* the 2-GPU job, in every mode */
    CHECK_INT(placed_wait, 3);
    CHECK_INT(refused, 3);        /* a1, a2 (a0 holds the quota) and the 2-GPU job */
    CHECK_INT(placed, 1);
    CHECK_INT(a_refused, 3);
}

TEST(sim_quota_fifo_keeps_small_jobs_from_starving_a_large_one) {
    /* Quota 2 GPUs, 4 GPUs of capacity. A 2-GPU job arrives at t = 1 behind a 1-GPU job; then
     * 1-GPU jobs of 1000 s arrive every 500 s. Under wait each small job fits the quota left and
     * passes the large one for as long as they keep coming; under fifo none passes it. */
    tbuild b = {0};
    add(&b, "s0", "a", 0, 1000, 1);
    add(&b, "big", "a", 1, 1000, 2);
    for (int i = 1; i <= 12; i++) {
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        add(&b, id, "a", 500.0 * i, 1000, 1);
    }
    const char *json = done(&b);
    sim_quotas q = {0};
    char err[300];
    CHECK(sim_quotas_parse(&q, "a=gpu-milli:2000", err, sizeof err) == 0);
    sim_replay_result rw, rf;
    CHECK(replay_with(json, 4, &q, &rw) == 0);
    CHECK(sim_quotas_mode(&q, "fifo", err, sizeof err) == 0);
    CHECK(replay_with(json, 4, &q, &rf) == 0);
    double big_wait = rw.start[1] - 1, big_fifo = rf.start[1] - 1;
    int placed = rw.placed + rf.placed;
    sim_replay_result_free(&rw);
    sim_replay_result_free(&rf);
    CHECK_INT(placed, 28);
    /* wait: the large job starts only once the small ones stop coming (the last arrives at 6000) */
    CHECK_MSG(big_wait >= 6000, "under wait the large job waited %.0f s", big_wait);
    /* fifo: as soon as s0 is done and its quota free */
    CHECK_MSG(big_fifo <= 1000, "under fifo the large job waited %.0f s", big_fifo);
}

/* Plan trace json from one node of 2 A100s for one target, with quota spec (NULL: none). The GPUs
 * of the plan when it meets the target, 0 when no cluster tried does, -1 on an error (in err). */
static int plan_gpus(const char *json, const char *target, int max_scale, const char *quota, char *err, size_t errlen) {
    sim_cluster *c = one_group("NVIDIA-A100-SXM4-80GB", 1, 2, "whole");
    sim_trace *t = trace_of(json, err, errlen);
    sim_plan_opts po = {0};
    sim_quotas q = {0};
    int gpus = -1;
    po.ntargets = 1;
    po.max_scale = max_scale;
    po.quotas = quota ? &q : NULL;
    sim_plan_result p;
    if (c && t && sim_target_parse(target, &po.targets[0], err, errlen) == 0 &&
        (!quota || sim_quotas_parse(&q, quota, err, errlen) == 0) && sim_plan(c, t, "binpack", &po, &p, err, errlen) == 0) {
        gpus = p.met ? sim_cluster_gpus(p.cluster) : 0;
        sim_plan_result_free(&p);
    }
    sim_cluster_free(c);
    sim_trace_free(t);
    return gpus;
}

TEST(sim_quota_plan_carries_quotas_into_its_replays) {
    /* The plan's replays see the quota: with team a held to one GPU its waits cannot meet a
     * wait target however many nodes there are, so the plan fails; without, 4 GPUs do. */
    tbuild b = {0};
    add_series(&b, "a", 4, 0, 0);
    const char *json = done(&b);
    char err[600] = "";
    int without = plan_gpus(json, "wait.max.all<=10s", 4, NULL, err, sizeof err);
    int with = plan_gpus(json, "wait.max.all<=10s", 4, "a=gpu-milli:1000", err, sizeof err);
    CHECK_MSG(without == 4, "without a quota 4 jobs on 4 GPUs wait 0 s (plan: %d GPUs) %s", without, err);
    CHECK_MSG(with == 0, "with team a held to one GPU its jobs must wait whatever the cluster (plan: %d GPUs)", with);
}

TEST(sim_quota_plan_sizes_a_teams_quota_and_the_cluster_together) {
    /* b's jobs must start within 20 s. Without a quota a's four jobs take every GPU first, so the
     * cluster needs 6 GPUs; with a held to 2 GPUs' worth, 4 do. */
    tbuild b = {0};
    add_series(&b, "a", 4, 0, 0);
    add_series(&b, "b", 2, 10, 0);
    const char *json = done(&b);
    char err[600] = "";
    CHECK_INT(plan_gpus(json, "wait.max.tenant:b<=20s", 8, NULL, err, sizeof err), 6);
    CHECK_INT(plan_gpus(json, "wait.max.tenant:b<=20s", 8, "a=gpu-milli:2000", err, sizeof err), 4);
    /* a tenant the trace does not have is an error, not a target met by nobody waiting */
    CHECK_INT(plan_gpus(json, "wait.p95.tenant:nobody<=20s", 8, "a=gpu-milli:2000", err, sizeof err), -1);
    CHECK_CONTAINS(err, "no tenant \"nobody\"");
    sim_target tg;
    CHECK(sim_target_parse("wait.p99.tenant:b<=20s", &tg, err, sizeof err) < 0);
    CHECK(sim_target_parse("slowdown.mean.tenant:b<=2", &tg, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "wait.<p50|p95|max|mean>.tenant:<name>");
}
