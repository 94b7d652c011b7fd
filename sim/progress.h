/* progress.h -- a progress bar on stderr for long runs: shown only when stderr is a
 * terminal and the run has lasted more than a second; thread-safe ticks.
 *
 *   sim_progress p; sim_progress_start(&p, "fgd-paper", total_steps);
 *   ... sim_progress_add(&p, 1) from any thread ...
 *   sim_progress_end(&p);        clears the line
 */
#ifndef SIM_PROGRESS_H
#define SIM_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>

typedef struct sim_progress {
    const char *label;
    long total;
    atomic_long done;
    double started;          /* monotonic seconds */
    atomic_long last_drawn;  /* ms since start of the last redraw */
    bool tty;
} sim_progress;

void sim_progress_start(sim_progress *p, const char *label, long total);
void sim_progress_add(sim_progress *p, long n);
void sim_progress_end(sim_progress *p);

#endif
