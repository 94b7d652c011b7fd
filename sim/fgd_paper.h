/* fgd_paper.h -- `tessera-sim fgd-paper`: the FGD paper's experiment (sim/fgd-method.md
 * section 8) over policies x seeds x pod lists, on all cores, CSVs in the layout of the
 * authors' expected_results, plus an SVG chart. (`tessera-sim convert` is in convert.c.)
 *
 * One run (pod list L, policy P, seed s), as the authors' simulator does it:
 *   1. the pods of L sorted by name, shuffled with s;
 *   2. inflated to tune (1.3) x the cluster's GPU capacity: copies drawn uniformly with
 *      replacement appended until the next one would overshoot (a list above that is
 *      thinned instead, dropping random pods);
 *   3. each pod placed in turn with policy_inc_place (same decisions as policy_place),
 *      tie-break by the seed's fixed node ranking, decision = arrival number; nothing
 *      departs; a pod that fits nowhere fails for good but its GPU request still counts
 *      as arrived;
 *   4. after every pod: arrived and allocated GPU milli, fragmentation amount and ratio
 *      against the target workload of L (top 95 % of shapes of the un-inflated list);
 *   5. bucketed by x = round(100 * arrived / capacity), 0..130: the mean of each
 *      measure over the events in the bucket (an empty bucket repeats the previous one).
 * Shuffles and draws use a splitmix64 stream from s (not Go's math/rand: compare
 * distributions over seeds, not single runs).
 */
#ifndef SIM_FGD_PAPER_H
#define SIM_FGD_PAPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

int sim_cmd_fgd_paper(int argc, char **argv);   /* argv[0] = "fgd-paper"; exit status */
int sim_cmd_convert(int argc, char **argv);     /* argv[0] = "convert"; in convert.c */

#define SIM_FGD_BUCKETS 131   /* arrived 0..130 % */

typedef struct sim_fgd_opts {
    const char *const *policies;    /* registry names (policy.h) */
    int npolicies;
    const uint64_t *seeds;
    int nseeds;
    const char *const *lists;       /* pod list short names: "default", "cpu050", ... */
    int nlists;
    const char *data_dir;           /* NULL: built-in node list and default pod list */
    int threads;                    /* 0: every online core */
    double tune;                    /* 0: 1.3 */
    bool progress;                  /* progress bar (still only on a terminal, after 1 s) */
    double half_life;               /* NAME@online policies: estimate half-life in arrivals (0: default) */
    long warmup;                    /* ... and warm-up in arrivals (0: default, < 0: none) */
    bool full_scoring;              /* policy_place (every node scored per pod) instead of
                                     * policy_inc_place: same results, for benchmarks */
} sim_fgd_opts;

typedef struct sim_fgd_run {
    int list, policy;               /* indices into the opts arrays */
    uint64_t seed;
    int tasks, failed;              /* arrivals after inflation; those that fit nowhere */
    double alloc[SIM_FGD_BUCKETS];  /* mean allocated GPU % of capacity per bucket */
    double frag[SIM_FGD_BUCKETS];   /* mean fragmentation amount % of capacity */
    double ratio[SIM_FGD_BUCKETS];  /* mean fragmentation ratio % of free GPU */
} sim_fgd_run;

typedef struct sim_fgd_result {
    int nruns;                      /* lists x policies x seeds, in that nesting order */
    sim_fgd_run *runs;
    int total_gpus;
    double seconds;                 /* wall time of the grid */
} sim_fgd_result;

/* Run the grid. 0, or -1 with err (unknown policy, unreadable pod list, ...). */
int sim_fgd_run_grid(const sim_fgd_opts *o, sim_fgd_result *out, char *err, size_t errlen);
void sim_fgd_result_free(sim_fgd_result *r);

/* Median over seeds of the unallocated GPU % (100 - alloc) at bucket x for one list and
 * policy; NAN if no such run. */
double sim_fgd_median_unalloc(const sim_fgd_result *r, int list, int pol, int x);

/* A policy of the grid by name: a registry name, or NAME@online (*online set: the
 * target workload is estimated from the arrivals so far, policy_online_*). NULL if unknown. */
const policy *sim_fgd_policy_find(const char *name, bool *online);

/* The authors' sc_policy label ("06-FGD"; other policies "NN-name"). */
void sim_fgd_policy_label(const char *name, char *buf, size_t len);

/* analysis_allo_discrete.csv, analysis_frag_discrete.csv, analysis_frag_ratio_discrete.csv
 * alloc_<list>.svg (median allocation per policy against arrived %, with the ideal line)
 * and unalloc_<list>.svg (the paper's Fig. 9(a): unallocated %, arrived 75..120 %) into
 * dir, created if missing. 0, or -1 with err. */
int sim_fgd_write(const sim_fgd_result *r, const sim_fgd_opts *o, const char *dir, char *err, size_t errlen);

#endif
