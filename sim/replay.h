/* replay.h -- `tessera-sim replay`: an event-driven replay of a trace on a cluster under
 * one policy, with departures, a pending queue and the sharing slowdown model.
 *
 * Events: arrivals (trace order), departures (when a running workload's remaining work
 * reaches zero). Placement is policy_place's decision (through policy/incremental.h, the
 * same result without re-scoring every node). A workload that does not fit waits; the
 * queue is ordered by priority (higher first), then arrival, then trace order, and is
 * retried when capacity frees: waiting workloads are grouped by request shape, and a
 * departure from node k wakes only the shapes that now fit on node k (no other node
 * changed), so a departure costs one node score per waiting shape, not a queue scan.
 * A shape that fits on no node of the empty cluster is unschedulable: its workloads are
 * counted and never queued.
 *
 * Quotas (opts.quotas, sim/quota.h): a workload is charged its pod's quota units from its
 * arrival; one whose namespace has no room waits for quota (or is refused) before it joins
 * the queue above. Its wait counts from arrival.
 *
 * Running time: a workload's work is its duration on a dedicated GPU; it progresses at
 * the rate slowdown.h gives for its GPUs and co-tenants, re-computed whenever a tenant
 * arrives on or leaves one of its GPUs.
 *
 * Multi-GPU pods (grants on k >= 2 distinct GPUs of the node, no MIG grant): their set's
 * alignment (model_topo_align: nvlink, pcie, numa, none; unknown on a node without
 * topology) is fixed when they start and divides their rate by slowdown.h's communication
 * factor. The set is "unaligned" when its class is below the best any k GPUs of that node
 * could have (an 8-GPU pod on pcie8-nvlink-pairs is "none" and still aligned: the server
 * has nothing better); unknown is never counted unaligned.
 *
 * Replays of different policies may run on different threads at once: the cluster and
 * trace are only read.
 */
#ifndef SIM_REPLAY_H
#define SIM_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "model/topo.h"
#include "sim/cluster.h"
#include "sim/trace.h"

typedef struct sim_replay_opts {
    const char *policy;      /* registry name (policy_find) */
    uint64_t seed;
    int samples;             /* points of the allocation/fragmentation time series (0: 100) */
    bool frag;               /* measure fragmentation at each sample (policy_frag_cluster) */
    bool check;              /* model_node_check every touched node (tests; slow) */
    bool soft_share_delivery_none;  /* as tessera-extender --soft-share-delivery=none: fractions may map
                                     * onto MPS replicas; false (the default, as the extender's):
                                     * model_request_for_reservation_delivery applies */
    struct sim_progress *progress;  /* if not NULL, ticked once per arrival (sim/progress.h) */
    const struct sim_quotas *quotas;   /* per-namespace quotas (sim/quota.h); NULL or none: no limit */
    bool tenants;            /* per-tenant stats (result.tenant) even without quotas (plan's tenant targets) */
    const struct sim_comm_model *comm;  /* multi-GPU communication model (slowdown.h); NULL: sim_comm_defaults */
} sim_replay_opts;

void sim_replay_defaults(sim_replay_opts *o);   /* fgd, seed 42, 100 samples, frag on */

typedef struct sim_kind_stats {
    int n;                   /* workloads of the kind that ran */
    double wait_p50, wait_p95, wait_p99, wait_max, wait_mean;   /* s from arrival to start */
    double slow_mean, slow_p95;  /* running time / duration (1 = no slowdown) */
} sim_kind_stats;

/* Per trace tenant, with quotas (sim/quota.h): its namespace, that namespace's quota and use
 * (what its workloads are charged, model/charge.h, from arrival to departure). */
typedef struct sim_tenant_stats {
    char tenant[64], ns[64];
    int64_t hard_milli, hard_mib;        /* the namespace's quota; -1: none on that unit */
    int n, placed, refused;              /* workloads; ran; refused (over quota, or larger than it) */
    int quota_waited;                    /* workloads that waited for quota */
    double wait_p50, wait_p95, wait_max, wait_mean;   /* s from arrival to start, of those that ran */
    double quota_wait_mean, quota_wait_max;           /* s waiting for quota, of those that waited */
    int64_t peak_milli, peak_mib;        /* the namespace's use: peak ... */
    double mean_milli, mean_mib;         /* ... and time-weighted mean until the last event */
} sim_tenant_stats;

/* Multi-GPU pods that ran, by the alignment of their GPU set (model_align order: unknown,
 * none, numa, pcie, nvlink). */
typedef struct sim_topo_stats {
    int multi;                       /* pods on >= 2 distinct GPUs (no MIG grant) that ran */
    int by_align[MODEL_ALIGN_NVLINK + 1];
    int unaligned;                   /* below the best k GPUs of their node could be */
    double extra_gpu_hours;          /* GPU-hours the communication slowdown added: k x run x (1 - 1/factor) */
    double unaligned_gpu_hours;      /* ... of it, by the unaligned pods (the rest: their node had nothing better) */
    double run_mean_s;               /* mean running time (start to end) of the multi-GPU pods */
    double jct_mean_s;               /* mean completion time (arrival to end) of the multi-GPU pods */
    double factor_mean;              /* mean communication factor (1: as on NVLink, or unknown) */
} sim_topo_stats;

typedef struct sim_replay_result {
    char policy[32];
    int workloads, placed, unschedulable, gpus;
    int unschedulable_kind[SIM_NKINDS];
    double makespan_s;       /* time of the last departure */
    double gpu_hours;        /* allocated GPU-hours (integral of allocated GPUs over time) */
    double alloc_mean_pct;   /* time-weighted mean of allocated GPU % until the last arrival */
    double frag_mean_pct;    /* mean fragmentation amount % over the samples (-1 if not measured) */
    sim_kind_stats kind[SIM_NKINDS], all;
    int nsamples;
    double *t, *alloc_pct, *frag_pct;   /* time series (s, %, %) */
    double *start, *end;     /* per workload, in trace order; -1 if it never ran */
    double wall_s;           /* wall-clock seconds the replay took */
    long placements_tried;
    int refused;             /* refused by a quota (sim/quota.h) */
    int ntenants;            /* with quotas: one entry per trace tenant; 0 without */
    sim_tenant_stats *tenant;
    sim_topo_stats topo;
} sim_replay_result;

/* Replay. 0 and out filled (free with sim_replay_result_free), or -1 with err (unknown
 * policy, cluster that cannot be built, invariant broken). */
int sim_replay(const sim_cluster *c, const sim_trace *t, const sim_replay_opts *o, sim_replay_result *out,
               char *err, size_t errlen);
void sim_replay_result_free(sim_replay_result *r);

/* Percentile p (0..100) of sorted values, nearest rank; 0 when n is 0. */
double sim_percentile(const double *sorted, int n, double p);

#endif
