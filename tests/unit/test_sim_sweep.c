/* test_sim_sweep.c -- tessera-sim sweep and merge on a small grid of the built-in openb
 * default list: the shard split runs every cell exactly once, merging the shards gives
 * byte for byte what a local run gives, and that equals fgd-paper's own grid; merge
 * refuses an incomplete set and files of another grid. */
#include "harness.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/fgd_paper.h"
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
