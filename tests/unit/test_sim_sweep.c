/* test_sim_sweep.c -- tessera-sim sweep and merge on a small grid of the built-in openb
 * default list: the shard split runs every cell exactly once, merging the shards gives
 * byte for byte what a local run gives, and that equals fgd-paper's own grid; merge
 * refuses an incomplete set and files of another grid. */
#include "harness.h"
#include "sim_helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/fgd_paper.h"
#include "sim/gen.h"
#include "sim/quota.h"
#include "sim/replay.h"
#include "sim/sweep.h"

static char *read_all(const char *dir, const char *name) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static bool same_file(const char *a, const char *b, const char *name) {
    char *x = read_all(a, name), *y = read_all(b, name);
    bool same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

static int count_cells(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/cells", dir);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "cell-", 5) && strstr(e->d_name, ".json") && !strstr(e->d_name, ".tmp")) n++;
    if (d) closedir(d);
    return n;
}

static void rm_rf(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static sim_sweep_grid small_grid(void) {
    sim_sweep_grid g;
    memset(&g, 0, sizeof g);
    g.lists[g.nlists++] = "default";
    g.policies[g.npolicies++] = "fgd";
    g.policies[g.npolicies++] = "fgd-pack@online";
    g.policies[g.npolicies++] = "bestfit";
    g.seeds[g.nseeds++] = 42;
    g.seeds[g.nseeds++] = 43;
    g.tune = 0.3;   /* 30 % of the capacity arrives: fast, still placements and a shape */
    g.half_life = 2000;
    g.replay_seeds[g.nreplay++] = 5;   /* and one timed replay per policy, on the demo cluster as bundled */
    g.replay_scales[g.nscales++] = 1;
    return g;
}

static const char *const outputs[] = {"analysis_allo_discrete.csv", "analysis_frag_discrete.csv",
                                      "analysis_frag_ratio_discrete.csv", "summary.csv", "summary.json", "table.md",
                                      "alloc_default.svg", "unalloc_default.svg", "replay.csv", "replay.md"};

TEST(sim_sweep_shards_merge_equal_local_run) {
    char a[] = "/tmp/tessera-sweep-a-XXXXXX", b[] = "/tmp/tessera-sweep-b-XXXXXX", c[] = "/tmp/tessera-sweep-c-XXXXXX";
    CHECK(mkdtemp(a) && mkdtemp(b) && mkdtemp(c));
    sim_sweep_grid g = small_grid();
    char err[1024];
    int n = sim_sweep_cells(&g);
    CHECK_INT(n, 9);   /* 1 list x 3 policies x 2 seeds, and 3 policies x 1 trace */
    bool ok = sim_sweep_run(&g, NULL, 1, 0, 2, a, err, sizeof err) == 0 && sim_sweep_merge(a, a, NULL, err, sizeof err) == 0;
    /* 4 shards of 9 cells: shard i runs cells i, i+4, i+8 -> 3, 2, 2, 2 new files */
    static const int expect_new[] = {3, 2, 2, 2};
    bool split_ok = true;
    for (int i = 0; i < 4 && ok; i++) {
        int before = count_cells(b);
        ok = sim_sweep_run(&g, NULL, 4, i, 1, b, err, sizeof err) == 0;
        split_ok = split_ok && count_cells(b) - before == expect_new[i];
    }
    /* a shard run twice (a retried Job pod) rewrites its own cells, adds none */
    if (ok) ok = sim_sweep_run(&g, NULL, 4, 1, 1, b, err, sizeof err) == 0;
    split_ok = split_ok && count_cells(b) == n;
    if (ok) ok = sim_sweep_merge(b, b, NULL, err, sizeof err) == 0;
    /* fgd-paper's own grid over the same axes: the same CSVs */
    sim_fgd_opts o = {.policies = g.policies, .npolicies = g.npolicies, .seeds = g.seeds, .nseeds = g.nseeds,
                      .lists = g.lists, .nlists = g.nlists, .threads = 2, .tune = g.tune, .half_life = g.half_life};
    sim_fgd_result r;
    if (ok) ok = sim_fgd_run_grid(&o, &r, err, sizeof err) == 0;
    if (ok) {
        ok = sim_fgd_write(&r, &o, c, err, sizeof err) == 0;
        sim_fgd_result_free(&r);
    }
    bool same = true, same_grid = true;
    for (size_t i = 0; ok && i < sizeof outputs / sizeof *outputs; i++) {
        same = same && same_file(a, b, outputs[i]);
        if (i < 3) same_grid = same_grid && same_file(a, c, outputs[i]);
    }
    char *table = ok ? read_all(a, "table.md") : NULL;
    char *replay = ok ? read_all(a, "replay.md") : NULL;
    bool table_ok = table && strstr(table, "| default |") && strstr(table, "fgd-pack@online") && replay &&
                    strstr(replay, "| fgd-pack@online |") && strstr(replay, "300 workloads");
    free(table);
    free(replay);
    rm_rf(a);
    rm_rf(b);
    rm_rf(c);
    CHECK_MSG(ok, "%s", err);
    CHECK_MSG(split_ok, "the shards did not run every cell exactly once");
    CHECK_MSG(same, "merged shards differ from the local run");
    CHECK_MSG(same_grid, "the sweep's CSVs differ from fgd-paper's for the same grid");
    CHECK(table_ok);
}

TEST(sim_sweep_merge_refuses_missing_and_foreign_cells) {
    char a[] = "/tmp/tessera-sweep-m-XXXXXX";
    CHECK(mkdtemp(a));
    sim_sweep_grid g = small_grid();
    g.npolicies = 1;   /* fgd only: 2 cells */
    g.nreplay = 0;
    char err[1024], path[700];
    bool ran = sim_sweep_run(&g, NULL, 2, 0, 1, a, err, sizeof err) == 0;   /* only cell 0 */
    int missing = ran ? sim_sweep_merge(a, a, NULL, err, sizeof err) : 0;
    bool says_missing = strstr(err, "1 of 2 cells missing") != NULL;
    /* cell 1 from another grid (other seeds) */
    sim_sweep_grid h = g;
    h.seeds[1] = 99;
    char b[] = "/tmp/tessera-sweep-n-XXXXXX";
    bool ran2 = mkdtemp(b) && sim_sweep_run(&h, NULL, 2, 1, 1, b, err, sizeof err) == 0;
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp %s/cells/cell-00001.json %s/cells/", b, a);
    bool copied = ran2 && system(cmd) == 0;
    int foreign = copied ? sim_sweep_merge(a, a, NULL, err, sizeof err) : 0;
    bool says_foreign = strstr(err, "another grid") != NULL;
    snprintf(path, sizeof path, "%s/nothing-here", a);
    int empty = sim_sweep_merge(path, a, NULL, err, sizeof err);
    rm_rf(a);
    rm_rf(b);
    CHECK(ran && ran2 && copied);
    CHECK_INT(missing, -1);
    CHECK(says_missing);
    CHECK_INT(foreign, -1);
    CHECK(says_foreign);
    CHECK_INT(empty, -1);
}

/* The replay axes: scales {1, 2} x sharing {as-is, whole} x fgd x trace seed 5, after one
 * openb cell. */
static sim_sweep_grid axes_grid(void) {
    sim_sweep_grid g = small_grid();
    g.npolicies = 1;   /* fgd */
    g.nseeds = 1;
    g.nscales = 0;
    g.replay_scales[g.nscales++] = 1;
    g.replay_scales[g.nscales++] = 2;
    g.replay_sharing[g.nsharing++] = "as-is";
    g.replay_sharing[g.nsharing++] = "whole";
    return g;
}

/* The "all" row of replay.csv for (scale, sharing): workloads, GPUs, mean allocated %. */
static bool replay_row(const char *csv, int scale, const char *sharing, int *workloads, int *gpus, double *alloc) {
    char want[64];
    snprintf(want, sizeof want, "%d,%s,fgd,5,", scale, sharing);
    for (const char *line = csv; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        char row[1024];
        snprintf(row, sizeof row, "%.*s", (int)(n < sizeof row ? n : sizeof row - 1), line);
        if (strncmp(row, want, strlen(want)) || !strstr(row, ",all,")) continue;
        int unsch;
        double gpuh, frag;
        return sscanf(row + strlen(want), "%d,%d,%d,%lf,%lf,%lf", workloads, gpus, &unsch, &gpuh, alloc, &frag) == 6;
    }
    return false;
}

static bool cell_is(const char *dir, int k, const char *want) {
    char name[64];
    snprintf(name, sizeof name, "cells/cell-%05d.json", k);
    char *text = read_all(dir, name);
    bool ok = text && strstr(text, want);
    free(text);
    return ok;
}

/* What a scale-1 replay cell of trace seed 5 replays: the demo cluster as bundled and gen's
 * mixed trace (NULL when either fails; *c may then be set, free it). */
static sim_trace *replay_cell_inputs(sim_cluster **c, char *err, size_t errlen) {
    *c = sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len, NULL, err,
                               errlen);
    sim_gen_opts go;
    sim_gen_defaults(&go);
    go.seed = 5;
    go.workloads = 300;
    go.hours = 8;
    return *c ? sim_gen(&go, err, errlen) : NULL;
}

TEST(sim_sweep_replay_scales_and_sharing_are_axes) {
    char a[] = "/tmp/tessera-sweep-x-XXXXXX", b[] = "/tmp/tessera-sweep-y-XXXXXX";
    CHECK(mkdtemp(a) && mkdtemp(b));
    sim_sweep_grid g = axes_grid();
    char err[1024] = "";
    CHECK_INT(sim_sweep_cells(&g), 5);   /* 1 openb cell, then 2 scales x 2 sharing x 1 policy x 1 trace */
    bool ok = sim_sweep_run(&g, NULL, 1, 0, 2, a, err, sizeof err) == 0 && sim_sweep_merge(a, a, NULL, err, sizeof err) == 0;
    /* 3 shards of 5 cells: {0, 3}, {1, 4}, {2} */
    static const int expect_new[] = {2, 2, 1};
    bool split_ok = true;
    for (int i = 0; i < 3 && ok; i++) {
        int before = count_cells(b);
        ok = sim_sweep_run(&g, NULL, 3, i, 1, b, err, sizeof err) == 0;
        split_ok = split_ok && count_cells(b) - before == expect_new[i];
    }
    split_ok = split_ok && count_cells(b) == 5;
    if (ok) ok = sim_sweep_merge(b, b, NULL, err, sizeof err) == 0;
    bool same = ok;
    for (size_t i = 0; ok && i < sizeof outputs / sizeof *outputs; i++) same = same && same_file(a, b, outputs[i]);
    /* sweep.h's order: scales outermost, then sharing, policy, trace seed */
    bool order = cell_is(a, 1, "\"scale\": 1, \"sharing\": \"as-is\"") && cell_is(a, 2, "\"scale\": 1, \"sharing\": \"whole\"") &&
                 cell_is(a, 3, "\"scale\": 2, \"sharing\": \"as-is\"") && cell_is(a, 4, "\"scale\": 2, \"sharing\": \"whole\"") &&
                 cell_is(a, 0, "\"grid\": \"lists=default policies=fgd seeds=42 tune=0.3 half-life=2000 warmup=100 "
                               "replay-scale=1,2 replay-seeds=5 replay-sharing=as-is,whole\"");
    char *csv = ok ? read_all(a, "replay.csv") : NULL, *md = ok ? read_all(a, "replay.md") : NULL;
    int w[4] = {0}, gpus[4] = {0};
    double alloc[4] = {0};
    bool rows = csv && replay_row(csv, 1, "as-is", &w[0], &gpus[0], &alloc[0]) &&
                replay_row(csv, 1, "whole", &w[1], &gpus[1], &alloc[1]) &&
                replay_row(csv, 2, "as-is", &w[2], &gpus[2], &alloc[2]) &&
                replay_row(csv, 2, "whole", &w[3], &gpus[3], &alloc[3]);
    bool titles = md && strstr(md, "300 workloads over 8 h, on the demo cluster x 1 (40 GPUs), sharing as in the cluster file") &&
                  strstr(md, "600 workloads over 8 h, on the demo cluster x 2 (80 GPUs), whole on every shared group");
    free(csv);
    free(md);
    rm_rf(a);
    rm_rf(b);
    CHECK_MSG(ok, "%s", err);
    CHECK_MSG(split_ok, "the shards did not run every cell exactly once");
    CHECK_MSG(same, "merged shards differ from the local run");
    CHECK_MSG(order, "cells are not in (scale, sharing, policy, trace seed) order, or the key lacks the axes");
    CHECK(rows);
    CHECK(titles);
    /* the scale multiplies the workloads and the nodes; sharing leaves the hardware alone */
    CHECK_INT(w[0], 300);
    CHECK_INT(w[2], 600);
    CHECK_INT(gpus[0], 40);
    CHECK_INT(gpus[1], 40);
    CHECK_INT(gpus[2], 80);
    /* the whole cell is the replay on the demo cluster with every group's GPUs whole, and
     * that places the trace differently from the cluster as bundled */
    double direct = -1;
    sim_cluster *c;
    sim_trace *t = replay_cell_inputs(&c, err, sizeof err);
    sim_replay_opts ro;
    sim_replay_defaults(&ro);
    ro.policy = "fgd";
    sim_replay_result res;
    for (int i = 0; c && i < c->ngroups; i++) sim_sharing_parse("whole", &c->groups[i].sharing, err, sizeof err);
    if (t && sim_replay(c, t, &ro, &res, err, sizeof err) == 0) {
        direct = res.alloc_mean_pct;
        sim_replay_result_free(&res);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
    CHECK_MSG(fabs(direct - alloc[1]) < 0.0006, "whole cell %.3f, replay on whole GPUs %.3f", alloc[1], direct);
    CHECK(fabs(alloc[0] - alloc[1]) > 0.1);
    CHECK(fabs(alloc[2] - alloc[3]) > 0.1);
}

/* Bad replay axes are refused before any cell runs, naming the bad item; the default axes
 * keep the key a grid had before they existed. */
TEST(sim_sweep_refuses_bad_replay_axes) {
    char err[1024], key[4096];
    sim_sweep_grid g = axes_grid();
    CHECK(sim_sweep_check(&g, err, sizeof err) == 0);
    g.replay_sharing[1] = "timeslice:x";
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "timeslice:x");
    g.replay_sharing[1] = "mig:1g.5gb";   /* parses; no group of the demo cluster can take it */
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "\"mig:1g.5gb\": no shared group of the demo cluster");
    char dir[] = "/tmp/tessera-sweep-z-XXXXXX";
    CHECK(mkdtemp(dir));
    int rc = sim_sweep_run(&g, NULL, 1, 0, 1, dir, err, sizeof err);
    int written = count_cells(dir);
    rm_rf(dir);
    CHECK_INT(rc, -1);
    CHECK_INT(written, 0);
    g = axes_grid();
    g.replay_scales[1] = 0;
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    g.replay_scales[1] = SIM_SWEEP_MAX_SCALE + 1;
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "1001");
    /* the command line: exit status 2 and nothing run, as for the other flag errors */
    static const char *const bad[][2] = {
        {"--replay-scales", "0"}, {"--replay-scales", "1001"}, {"--replay-scales", "abc"}, {"--replay-scales", "1,"},
        {"--replay-scale", "0"}, {"--replay-sharing", "timeslice"}, {"--replay-sharing", "mig:1g.5gb"},
        {"--replay-scales", "2,2"}, {"--replay-sharing", "whole,timeslice:4,whole"},
        {"--replay-scales", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,"
                            "34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63,64,65"}};
    char many[65 * 6 + 1] = "";
    for (int i = 0; i < 65; i++) strcat(many, i ? ",whole" : "whole");
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY);   /* the errors are expected: keep them off the log */
    dup2(devnull, 2);
    int status[sizeof bad / sizeof *bad + 2];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *argv[] = {"sweep", "--seeds", "42", "--policies", "fgd", "--replay-seeds", "5", (char *)bad[i][0],
                        (char *)bad[i][1], "--emit-job", "--shards", "2", NULL};
        status[i] = sim_cmd_sweep(12, argv);
    }
    char *too_many[] = {"sweep", "--replay-seeds", "5", "--replay-sharing", many, "--emit-job", "--shards", "2", NULL};
    status[sizeof bad / sizeof *bad] = sim_cmd_sweep(8, too_many);
    char *no_seeds[] = {"sweep", "--replay-scales", "1,2", "--emit-job", "--shards", "2", NULL};
    status[sizeof bad / sizeof *bad + 1] = sim_cmd_sweep(6, no_seeds);
    dup2(saved, 2);
    close(saved);
    close(devnull);
    for (size_t i = 0; i < sizeof status / sizeof *status; i++) CHECK_MSG(status[i] == 2, "case %zu: status %d", i, status[i]);
    /* a grid whose key would not fit the cell files' SIM_SWEEP_KEY_MAX bytes is refused, not cut */
    g = axes_grid();
    static char names[SIM_SWEEP_MAX][96];
    for (int i = 0; i < SIM_SWEEP_MAX; i++) {
        snprintf(names[i], sizeof names[i], "a-pod-list-with-a-rather-long-name-number-%02d-of-a-grid-too-large-to-name", i);
        g.lists[i] = names[i];
    }
    g.nlists = SIM_SWEEP_MAX;
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "too large to name");
    g = small_grid();
    g.nscales = 0;   /* the default scale, 10, and sharing as-is: the key of before the axes */
    sim_sweep_grid_key(&g, key, sizeof key);
    CHECK_CONTAINS(key, "warmup=100 replay-scale=10 replay-seeds=5");
    CHECK(strstr(key, "replay-sharing") == NULL);
}

/* --replay-quotas: every replay cell carries the grid's quotas times its scale; the cell file
 * has each tenant's waits and quota use, equal to a direct replay with those quotas; the key
 * names them (merge refuses cells of another quota), replay.csv gains a refused column. */
TEST(sim_sweep_replay_cells_carry_quotas) {
    char a[] = "/tmp/tessera-sweep-q-XXXXXX";
    CHECK(mkdtemp(a));
    sim_sweep_grid g = axes_grid();
    g.nsharing = 0;
    g.replay_quotas = "team-1=gpu-milli:1000";
    g.replay_quota_mode = "fifo";
    char err[1024] = "";
    bool ok = sim_sweep_run(&g, NULL, 1, 0, 2, a, err, sizeof err) == 0 && sim_sweep_merge(a, a, NULL, err, sizeof err) == 0;
    bool key = cell_is(a, 0, "replay-scale=1,2 replay-seeds=5 replay-quotas=team-1=gpu-milli:1000 replay-quota-mode=fifo\"");
    bool scaled = cell_is(a, 1, "\"tenant\": \"team-1\", \"namespace\": \"team-1\", \"quotaGpuMilli\": 1000,") &&
                  cell_is(a, 2, "\"tenant\": \"team-1\", \"namespace\": \"team-1\", \"quotaGpuMilli\": 2000,");
    char *csv = ok ? read_all(a, "replay.csv") : NULL;
    bool column = csv && strstr(csv, ",unschedulable,refused,gpu_hours,");
    free(csv);
    /* the scale-1 cell against a direct replay with the same quota */
    sim_cluster *c;
    sim_trace *t = replay_cell_inputs(&c, err, sizeof err);
    sim_quotas q = {0};
    sim_quotas_parse(&q, "team-1=gpu-milli:1000", err, sizeof err);
    sim_quotas_mode(&q, "fifo", err, sizeof err);
    sim_replay_opts ro;
    sim_replay_defaults(&ro);
    ro.policy = "fgd";
    ro.quotas = &q;
    sim_replay_result res;
    int waited = -1;
    if (t && sim_replay(c, t, &ro, &res, err, sizeof err) == 0) {
        for (int i = 0; i < res.ntenants; i++)
            if (!strcmp(res.tenant[i].tenant, "team-1")) waited = res.tenant[i].quota_waited;
        sim_replay_result_free(&res);
    }
    sim_trace_free(t);
    sim_cluster_free(c);
    char want[64];
    snprintf(want, sizeof want, "\"quotaWaited\": %d,", waited);
    bool same = waited > 0 && cell_is(a, 1, want);
    rm_rf(a);
    CHECK_MSG(ok, "%s", err);
    CHECK_MSG(key, "the grid key does not name the quotas");
    CHECK_MSG(scaled, "the cells' quotas are not the grid's times their scale");
    CHECK_MSG(column, "replay.csv has no refused column");
    CHECK_MSG(same, "team-1 waited for quota %d times in the direct replay; the cell says otherwise", waited);
    /* a bad spec is refused before anything runs */
    g.replay_quotas = "team-1=gpus:3";
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "--replay-quotas");
    g.replay_quotas = "team-1=gpu-milli:1000";
    g.replay_quota_mode = "strict";
    CHECK(sim_sweep_check(&g, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "wait, fifo or refuse");
}
