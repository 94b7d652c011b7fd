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
    sim_fgd_opts o = {pols, 6, seeds, 10, lists, 1, NULL, 0, 0, false};
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
    printf("fgd-paper grid: 60 runs (6 policies x seeds 42..51, openb default), %ld arrivals, %ld cores\n", tasks,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("  wall time: median %.2f s, min %.2f s, max %.2f s over %d repetitions (target <= 60 s)\n",
           t[RUNS / 2], t[0], t[RUNS - 1], RUNS);
    return 0;
}
