/* progress.c -- placeholder until the progress bar lands. */
#include "sim/progress.h"

void sim_progress_start(sim_progress *p, const char *label, long total) { p->label = label; p->total = total; atomic_store(&p->done, 0); p->tty = false; }
void sim_progress_add(sim_progress *p, long n) { atomic_fetch_add(&p->done, n); }
void sim_progress_end(sim_progress *p) { (void)p; }
