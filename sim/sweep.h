/* sweep.h -- `tessera-sim sweep` and `tessera-sim merge`: the openb experiment of
 * fgd_paper.h over a declared grid (pod lists x policies x seeds, one tune and one
 * online half-life/warm-up), cut into independent cells that run on the local cores or as
 * a Kubernetes Indexed Job, one result file per cell, joined by merge into the same
 * CSVs, charts and summary a local run writes.
 *
 * Cell k of the grid is (list, policy, seed) in fgd-paper's nesting order (lists, then
 * policies, then seeds); after those come the replay cells, (scale, sharing, policy, trace
 * seed) nested in that order (scales outermost, trace seeds innermost): a timed replay
 * (sim/replay.h, arrivals and departures) of the generated mixed trace (`gen`'s defaults,
 * 300 x scale workloads over 8 hours) on the bundled demo cluster with every group's node
 * count times scale and the sharing option applied by sim_cluster_apply_sharing (every
 * shared group that can be set up that way takes it, as `plan` compares options; "as-is"
 * keeps the cluster file's). With one scale and one sharing the replay cells are numbered
 * as before these axes existed: (policy, trace seed). With --shards N, index i runs the
 * cells k with k % N == i. A cell's numbers do not depend on which cells share a process,
 * so any split merges into the same files. --replay-quotas gives every replay cell the same
 * namespace quotas (sim/quota.h) of gen's tenants team-1..team-8; the cell file then carries
 * each tenant's waits and quota use, and the merged replay.csv a refused column.
 */
#ifndef SIM_SWEEP_H
#define SIM_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int sim_cmd_sweep(int argc, char **argv);   /* argv[0] = "sweep"; exit status */
int sim_cmd_merge(int argc, char **argv);   /* argv[0] = "merge" */

#define SIM_SWEEP_MAX 64          /* items per axis */
#define SIM_SWEEP_KEY_MAX 4096    /* bytes of a grid's key (sim_sweep_grid_key), its NUL included */

typedef struct sim_sweep_grid {
    const char *lists[SIM_SWEEP_MAX];
    int nlists;
    const char *policies[SIM_SWEEP_MAX];   /* registry names or NAME@online */
    int npolicies;
    uint64_t seeds[SIM_SWEEP_MAX];
    int nseeds;
    double tune;                           /* 0: 1.3 */
    double half_life;                      /* 0: POLICY_ONLINE_HALF_LIFE */
    long warmup;                           /* 0: POLICY_ONLINE_WARMUP, < 0: none */
    uint64_t replay_seeds[SIM_SWEEP_MAX];  /* gen seeds of the replay cells (none: no replays) */
    int nreplay;
    int replay_scales[SIM_SWEEP_MAX];      /* 1..SIM_SWEEP_MAX_SCALE (none: 10 alone) */
    int nscales;
    const char *replay_sharing[SIM_SWEEP_MAX];   /* "as-is" or a sharing option (none: "as-is" alone) */
    int nsharing;
    const char *replay_quotas;             /* sim/quota.h spec for every replay cell, per scale 1 (a cell's
                                            * quotas are these times its scale, as its cluster and trace
                                            * are); NULL or "": none */
    const char *replay_quota_mode;         /* wait (NULL), fifo or refuse */
} sim_sweep_grid;

#define SIM_SWEEP_MAX_SCALE 1000
#define SIM_SWEEP_AS_IS "as-is"   /* the replay sharing that keeps the cluster file's */

int sim_sweep_cells(const sim_sweep_grid *g);   /* openb cells + replay cells */

/* Whether the grid can run: known policies, scales in range, sharing options that parse
 * and that at least one group of the demo cluster can take. 0, or -1 with err naming the
 * bad item. sim_sweep_run checks this too. */
int sim_sweep_check(const sim_sweep_grid *g, char *err, size_t errlen);

/* One line that names the grid: every cell file carries it, and merge refuses files of
 * different grids. */
void sim_sweep_grid_key(const sim_sweep_grid *g, char *buf, size_t len);

/* Run cells k (k % shards == index) on `threads` threads (0: every core), writing
 * DIR/cells/cell-NNNNN.json each. data_dir as fgd-paper's --data. 0, or -1 with err. */
int sim_sweep_run(const sim_sweep_grid *g, const char *data_dir, int shards, int index, int threads,
                  const char *dir, char *err, size_t errlen);

/* Read every cell file of DIR/cells, check that each cell of one grid is there exactly
 * once, and write into out_dir the fgd-paper CSVs and charts plus summary.csv,
 * summary.json and table.md (and, with replay cells, replay.csv and replay.md); the tables
 * go to f too (may be NULL). 0, or -1 with err. */
int sim_sweep_merge(const char *dir, const char *out_dir, FILE *f, char *err, size_t errlen);

#endif
