/* bench_fgd_paper.c -- wall time of the FGD paper's grid: 6 policies x seeds 42..51 on
 * the built-in openb default list (60 runs of ~10,800 arrivals on 1,213 nodes), one run
 * per thread on every core; median of RUNS repetitions. Target: <= 60 s on 2 cores.
 *
 *   make build/bench/bench_fgd_paper && build/bench/bench_fgd_paper
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/fgd_paper.h"

#ifndef RUNS
#define RUNS 5
#endif

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    static const char *const pols[] = {"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"};
    static const char *const lists[] = {"default"};
    uint64_t seeds[10];
    for (int i = 0; i < 10; i++) seeds[i] = 42 + (uint64_t)i;
    sim_fgd_opts o = {.policies = pols, .npolicies = 6, .seeds = seeds, .nseeds = 10, .lists = lists, .nlists = 1};
    double t[RUNS];
    long tasks = 0;
    for (int k = 0; k < RUNS; k++) {
        sim_fgd_result r;
        char err[256];
        if (sim_fgd_run_grid(&o, &r, err, sizeof err) < 0) {
            fprintf(stderr, "bench_fgd_paper: %s\n", err);
            return 1;
        }
        t[k] = r.seconds;
        tasks = 0;
        for (int i = 0; i < r.nruns; i++) tasks += r.runs[i].tasks;
        sim_fgd_result_free(&r);
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    /* what the incremental selector saves: one run per policy, seed 42, one thread,
     * every node scored per pod (policy_place) against policy_inc_place */
    double inc_s[6], full_s[6];
    for (int p = 0; p < 6; p++) {
        sim_fgd_opts one = {.policies = pols + p, .npolicies = 1, .seeds = seeds, .nseeds = 1, .lists = lists,
                            .nlists = 1, .threads = 1};
        for (int full = 0; full < 2; full++) {
            sim_fgd_result r;
            char err[256];
            one.full_scoring = full;
            if (sim_fgd_run_grid(&one, &r, err, sizeof err) < 0) {
                fprintf(stderr, "bench_fgd_paper: %s\n", err);
                return 1;
            }
            (full ? full_s : inc_s)[p] = r.seconds;
            sim_fgd_result_free(&r);
        }
    }
    printf("fgd-paper grid: 60 runs (6 policies x seeds 42..51, openb default), %ld arrivals, %ld cores\n", tasks,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("  wall time: median %.2f s, min %.2f s, max %.2f s over %d repetitions (target <= 60 s)\n",
           t[RUNS / 2], t[0], t[RUNS - 1], RUNS);
    printf("  one run (seed 42, one thread), policy_inc_place vs policy_place (every node scored):\n");
    for (int p = 0; p < 6; p++)
        printf("    %-14s %6.2f s vs %6.2f s (x%.1f)\n", pols[p], inc_s[p], full_s[p], full_s[p] / inc_s[p]);
    return 0;
}
