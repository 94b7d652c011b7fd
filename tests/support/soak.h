/* soak.h -- a churn run with faults against the fake API server: two extender instances (API client, cache,
 * verbs, leader election on one Lease) follow the same fake API while a driver adds, removes and relabels
 * nodes, creates pods of every request form, schedules them through the verbs as kube-scheduler does (filter,
 * prioritize, bind to the leader) and deletes them, and injects faults: watches dropped or expired (410 Gone),
 * compaction, 429 with Retry-After, 500s, hang-ups, slow answers, the server going down and up, and leader
 * changes. Meanwhile every node of both caches is checked (model_node_check) a few times a second, and the
 * process's RSS and open descriptors are sampled. At the end, with the faults stopped, each cache must equal a
 * cache built from a fresh list of the same objects, node by node.
 *
 * Used by tests/unit/test_soak.c (seconds, in `make test`) and tests/bench/bench_soak.c (minutes).
 */
#ifndef TESTS_SOAK_H
#define TESTS_SOAK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct soak_config {
    int seconds;            /* churn time (default 15) */
    int warmup_s;           /* RSS/fd "after warm-up" sample (default seconds / 5) */
    int nodes;              /* nodes at the start (default 10); churn keeps it within [nodes/2, 2*nodes] */
    int pods;               /* live pods the churn aims at (default 40) */
    int slow_min_ms;        /* injected slow answers last slow_min_ms..slow_max_ms (default 100..400) */
    int slow_max_ms;
    int fault_every_ms;     /* one fault about this often (default 300) */
    int leader_every_s;     /* a leader change this often (default: seconds / 3, at least one per run) */
    int assume_ttl_ms;      /* the caches' assumption TTL (ext_state_config; default 30000): a bind the watch
                             * never confirms (the pod was deleted meanwhile) is held this long */
    unsigned seed;          /* 0: 1 */
    bool verbose;           /* a progress line every 10 s on stderr */
} soak_config;

typedef enum soak_op {
    SOAK_NODE_ADD = 0, SOAK_NODE_REMOVE, SOAK_NODE_RELABEL, SOAK_POD_CREATE, SOAK_POD_DELETE,
    SOAK_FILTER, SOAK_PRIORITIZE, SOAK_BIND_OK, SOAK_BIND_REFUSED, SOAK_BIND_API_ERROR, SOAK_OP_N
} soak_op;

typedef enum soak_fault {
    SOAK_F_WATCH_DROP = 0, SOAK_F_WATCH_GONE, SOAK_F_COMPACT, SOAK_F_429, SOAK_F_500, SOAK_F_HANGUP, SOAK_F_SLOW,
    SOAK_F_DOWN, SOAK_F_LEADER, SOAK_FAULT_N
} soak_fault;

typedef struct soak_report {
    double seconds;                    /* wall time of the churn */
    double settle_s;                   /* time until both caches matched a fresh list */
    uint64_t ops[SOAK_OP_N];
    uint64_t faults[SOAK_FAULT_N];
    uint64_t checks;                   /* node checks done (both caches) */
    uint64_t overcommits;              /* checks that failed (must be 0) */
    char first_overcommit[512];
    int live_pods, live_nodes;         /* at the end, in the API */
    int diff_nodes;                    /* nodes whose cache differs from the fresh list (both instances; must be 0) */
    char diff[1024];                   /* the first differences */
    long rss_kb[3];                    /* start, after warm-up, end */
    int fds[3];
    long rss_max_kb;                   /* highest sample after warm-up */
    int fds_max;
} soak_report;

const char *soak_op_name(soak_op o);
const char *soak_fault_name(soak_fault f);

/* 0 when the run went through (then look at overcommits and diff_nodes, which stays non-zero when the caches
 * did not come to equal a fresh list within the assumption TTL + 30 s), -1 with err when it could not start. */
int soak_run(const soak_config *cfg, soak_report *out, char *err, size_t errlen);

/* The figures, several lines. */
void soak_print(const soak_report *r, FILE *f);

#endif
