/* wait.h -- waiting in a test for something to happen, and bounding how long it took.
 *
 * WAIT_FOR(cond) polls cond every 5 ms until it holds; its deadline only ends a hang (a defect), so it is far
 * beyond what any machine needs: a loaded machine (`make test-stress`, CI beside other jobs, the sanitizers)
 * runs many times slower than a quiet one, and a deadline that a slow run can reach decides nothing but the
 * machine's load. Expands to a bool: whether cond held.
 *
 * A test that bounds how long something took does so only where the bound is the product's promise (a grace
 * period, a renew deadline): "not before" holds on any machine as it stands; "not much after" gets its slack
 * times test_load_factor(), so a busy machine stretches the slack and an idle one keeps it tight. A test that sets
 * the product's durations itself (a 1 s Lease) may instead scale them all by test_load_scale().
 */
#ifndef TEST_WAIT_H
#define TEST_WAIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TEST_PATIENCE_MS 60000

static inline __attribute__((unused)) int64_t test_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline __attribute__((unused)) void test_nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* How many times slower than an idle machine this one may be running now: the tasks wanting a CPU per CPU, by the
 * 1-minute load average or by the ones runnable at this instant (which sees a load that started a moment ago),
 * whichever is larger; at least 1. Read it after the interval it is to excuse. */
static inline __attribute__((unused)) double test_load_factor(void) {
    double avg = 0;
    int running = 0, total = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %*f %*f %d/%d", &avg, &running, &total) != 3) avg = 0, running = 0;
        fclose(f);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double busy = avg > running - 1 ? avg : running - 1;   /* the reader itself is one of the running */
    double factor = cpus > 0 ? busy / (double)cpus : 1;
    return factor > 1 ? factor : 1;
}

/* slack_ms stretched by the machine's load (test_load_factor). */
static inline __attribute__((unused)) int64_t test_slack_ms(int64_t slack_ms) {
    return (int64_t)((double)slack_ms * test_load_factor());
}

/* test_load_factor as a whole number from 1 to 10, read once (per process, so per test under `tessera-tests -j`):
 * for a test that scales all its own durations (a Lease, a write interval, and the windows it acts or looks
 * within) by one factor, so that a loaded machine's delays stay as small beside them as an idle machine's. */
static inline __attribute__((unused)) int test_load_scale(void) {
    static int scale;
    if (!scale) {
        double f = test_load_factor();
        scale = f >= 10 ? 10 : (int)f + (f > (int)f);
    }
    return scale;
}

/* Process pid has exited: gone, or a zombie its parent (maybe not this process) has not reaped yet. */
static inline __attribute__((unused)) bool test_pid_gone(long pid) {
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

#define WAIT_FOR(cond)                                                                  \
    ({                                                                                  \
        int64_t wait_end_ = test_now_ms() + TEST_PATIENCE_MS;                           \
        bool wait_ok_;                                                                  \
        while (!(wait_ok_ = (cond)) && test_now_ms() < wait_end_) test_nap_ms(5);       \
        wait_ok_;                                                                       \
    })

#endif
