/* progress.c -- the progress bar on stderr (see progress.h). Any thread may tick; the
 * one whose tick crosses a 100 ms boundary redraws, so drawing needs no lock beyond
 * one compare-and-swap, and a run shorter than a second never draws at all. */
#include "sim/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void sim_progress_start(sim_progress *p, const char *label, long total) {
    p->label = label;
    p->total = total;
    atomic_store(&p->done, 0);
    atomic_store(&p->last_drawn, 0);
    p->started = mono_s();
    p->tty = total > 0 && isatty(STDERR_FILENO);
}

static void draw(sim_progress *p, long done, double elapsed) {
    enum { WIDTH = 30 };
    double frac = p->total > 0 ? (double)done / (double)p->total : 0;
    if (frac > 1) frac = 1;
    int fill = (int)(frac * WIDTH);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = 0;
    double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    fprintf(stderr, "\r%s [%s] %3.0f%%  %.0f s, about %.0f s left ", p->label ? p->label : "", bar, 100 * frac,
            elapsed, eta);
    fflush(stderr);
}

void sim_progress_add(sim_progress *p, long n) {
    long done = atomic_fetch_add(&p->done, n) + n;
    if (!p->tty) return;
    double elapsed = mono_s() - p->started;
    if (elapsed < 1.0) return;
    long ms = (long)(elapsed * 1000), last = atomic_load(&p->last_drawn);
    if (ms - last < 100 || !atomic_compare_exchange_strong(&p->last_drawn, &last, ms)) return;
    draw(p, done, elapsed);
}

void sim_progress_end(sim_progress *p) {
    if (p->tty && atomic_load(&p->last_drawn) > 0) {
        fprintf(stderr, "\r%*s\r", 79, "");
        fflush(stderr);
    }
}
