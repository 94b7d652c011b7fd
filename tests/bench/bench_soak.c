/* bench_soak.c -- the long soak (tests/support/soak.h): SOAK_SECONDS (default 600) of node and pod churn
 * through two extender instances with leader election against the fake API server, with faults including
 * slow answers of 1-5 s. Prints duration, operations and faults by kind, the final state's difference from a
 * fresh relist, and RSS and open descriptors at the start, after warm-up and at the end; exits 1 when
 * anything was over-committed or the caches differ. Not a test.
 *
 *   make build/bench/bench_soak && SOAK_SECONDS=600 build/bench/bench_soak
 *   SOAK_NODES (default 24), SOAK_PODS (default 120), SOAK_SEED (default 1)
 */
#include <stdio.h>
#include <stdlib.h>

#include "kube/log.h"
#include "tests/support/soak.h"

static int env_int(const char *k, int dflt) {
    const char *v = getenv(k);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

int main(void) {
    kube_log_set_level(KUBE_LOG_OFF);
    soak_config c = {.seconds = env_int("SOAK_SECONDS", 600), .nodes = env_int("SOAK_NODES", 24),
                     .pods = env_int("SOAK_PODS", 120), .slow_min_ms = 1000, .slow_max_ms = 5000,
                     .fault_every_ms = 1000, .seed = (unsigned)env_int("SOAK_SEED", 1), .verbose = true};
    c.warmup_s = c.seconds / 10 > 5 ? c.seconds / 10 : 5;
    c.leader_every_s = c.seconds / 10 > 10 ? c.seconds / 10 : 10;
    printf("bench_soak: %d s, %d nodes, %d pods, slow answers %d-%d ms, a fault about every %d ms, a leader change every %d s\n",
           c.seconds, c.nodes, c.pods, c.slow_min_ms, c.slow_max_ms, c.fault_every_ms, c.leader_every_s);
    fflush(stdout);
    soak_report r;
    char err[256] = "";
    if (soak_run(&c, &r, err, sizeof err) != 0) {
        fprintf(stderr, "bench_soak: %s\n", err);
        return 2;
    }
    soak_print(&r, stdout);
    return r.overcommits || r.diff_nodes ? 1 : 0;
}
