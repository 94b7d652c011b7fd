/* test_soak.c -- the short soak (tests/support/soak.h): about 12 s of node and pod churn through the verbs of
 * two extender instances with leader election, against a fake API server that drops and expires watches,
 * compacts, throttles (429 + Retry-After), fails (500, hang-ups), answers slowly and goes away. Nothing is
 * ever over-committed, both caches end equal to a fresh relist, and descriptors and RSS stay flat.
 * SOAK_SECONDS overrides the length; bench_soak is the long run.
 */
#include <stdlib.h>

#include "../support/soak.h"
#include "ext_helpers.h"

TEST(soak_short_churn_with_faults_ends_equal_to_a_fresh_relist) {
    soak_config c = {.seconds = 12, .nodes = 8, .pods = 30, .slow_min_ms = 100, .slow_max_ms = 500,
                     .fault_every_ms = 250, .leader_every_s = 4, .seed = 13,
                     .assume_ttl_ms = 5000};   /* > the longest injected stall or outage */
    const char *sd = getenv("SOAK_SEED");
    if (sd && atoi(sd) > 0) c.seed = (unsigned)atoi(sd);
    const char *e = getenv("SOAK_SECONDS");
    if (e && atoi(e) > 0) c.seconds = atoi(e);
    soak_report r;
    char err[256] = "";
    int rc = soak_run(&c, &r, err, sizeof err);
    CHECK_MSG(rc == 0, "soak: %s", err);
    soak_print(&r, stderr);
    CHECK_MSG(r.overcommits == 0, "over-committed: %s", r.first_overcommit);
    CHECK(r.checks > 100);
    CHECK_MSG(r.diff_nodes == 0, "caches differ from a fresh relist:\n%s", r.diff);
    /* the run did what it claims */
    CHECK(r.ops[SOAK_BIND_OK] > 20);
    CHECK(r.ops[SOAK_POD_DELETE] > 5);
    CHECK(r.ops[SOAK_NODE_ADD] > (uint64_t)c.nodes);
    CHECK(r.ops[SOAK_NODE_REMOVE] > 0);
    CHECK(r.ops[SOAK_NODE_RELABEL] > 0);
    CHECK(r.faults[SOAK_F_LEADER] >= 2);
    uint64_t nf = 0;
    for (int i = 0; i < SOAK_FAULT_N; i++) nf += r.faults[i];
    CHECK(nf > 20);
    /* flat: connections come and go with the faults (a cut watch is a socket on each side, both in this
     * process), so the count moves by a few; a leak would grow with the hundreds of faults injected */
    int base = r.fds[0] > r.fds[1] ? r.fds[0] : r.fds[1];
    CHECK_MSG(r.fds[2] <= base + 16, "open fds grew from %d at start and %d after warm-up to %d at the end", r.fds[0],
              r.fds[1], r.fds[2]);
#ifndef __SANITIZE_ADDRESS__   /* AddressSanitizer's quarantine holds freed memory: RSS says nothing there */
    CHECK_MSG(r.rss_kb[2] <= r.rss_kb[1] + r.rss_kb[1] / 2 + 16384, "RSS grew from %ld KiB after warm-up to %ld KiB",
              r.rss_kb[1], r.rss_kb[2]);
#endif
}
