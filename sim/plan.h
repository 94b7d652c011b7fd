/* plan.h -- `tessera-sim plan`: the smallest cluster that meets service targets.
 *
 * Targets are "<metric><op><value>", op one of <= < >= > ==:
 *   wait.<p50|p95|p99|max|mean>.<kind|all>   seconds from arrival to start ("30s", "5m", "2h", "30")
 *   wait.<p50|p95|max|mean>.tenant:<name>    the same for one tenant of the trace (with quotas, sim/quota.h,
 *                                            its quota wait included)
 *   slowdown.<mean|p95>.<kind|all>            running time / dedicated duration (1 = none)
 *   unschedulable                             workloads that fit nowhere
 *   alloc.mean                                mean allocated GPU % while workloads arrive
 *   unaligned                                 multi-GPU pods on a set worse than their node offers
 *   comm.gpu_hours                            GPU-hours the multi-GPU communication slowdown added
 * e.g. --target "wait.p95.inference<=30s" --target "unschedulable==0".
 *
 * Search, per policy: start from the given counts; if they miss the targets, double every
 * group until they are met (or give up at max_scale times the given counts). Then, group
 * by group, binary-search the smallest count that still meets them with the other groups
 * as they are; repeat the pass until nothing shrinks. With sharing options, each group
 * first tries every option (at its own smallest count) and keeps the one needing the
 * fewest GPUs. Fewer nodes never make waits shorter in this model, so every group's
 * count minus one misses a target (the search evaluated it).
 *
 * With sharing options the plan also compares them one by one, apples to apples: every
 * shared group (sharing other than "whole") that can be set up that way takes the option,
 * the others keep theirs, and the same search finds the smallest cluster. That is how
 * the report can say whether layered sharing (mig:<layout>+timeslice:N) needs fewer GPUs
 * than MIG alone or time-slicing alone for the same targets.
 *
 * A sharing option may instead be "soft:timeslice", "soft:mps" or "soft:mps:tenant": tessera's
 * soft shares on unshared GPUs, time-sliced or MPS (sim_trace_compute_sharing rewrites the
 * trace's soft shares so; mps:tenant gives each tenant its own uid). It is compared the same
 * way, with every shared group set to whole, but takes no part in the per-group search (it
 * changes the workloads, not a group): that is how the report can say whether MPS shares need
 * fewer GPUs than time-sliced ones for the same targets.
 */
#ifndef SIM_PLAN_H
#define SIM_PLAN_H

#include <stdbool.h>

#include "sim/cluster.h"
#include "sim/replay.h"
#include "sim/trace.h"

typedef enum sim_op { SIM_OP_LE = 0, SIM_OP_LT, SIM_OP_GE, SIM_OP_GT, SIM_OP_EQ } sim_op;

typedef struct sim_target {
    char text[96];           /* as given */
    char metric[48];
    sim_op op;
    double value;
} sim_target;

/* -1 with err naming what is wrong ("wait.p95.inferenc: unknown kind ..."). */
#define SIM_TARGET_TENANT "tenant:"
int sim_target_parse(const char *s, sim_target *out, char *err, size_t errlen);
double sim_target_measure(const sim_target *t, const sim_replay_result *r);
bool sim_target_met(const sim_target *t, const sim_replay_result *r);

#define SIM_PLAN_MAX_TARGETS 16
#define SIM_PLAN_MAX_SHARING 8

typedef struct sim_plan_opts {
    int ntargets;
    sim_target targets[SIM_PLAN_MAX_TARGETS];
    int nsharing;                        /* 0: keep each group's sharing */
    sim_sharing sharing[SIM_PLAN_MAX_SHARING];
    sim_compute soft[SIM_PLAN_MAX_SHARING];   /* != SIM_COMPUTE_TRACE: option k is "soft:<mode>" (sharing[k] whole) */
    uint64_t seed;
    bool soft_share_delivery_none;       /* sim_replay_opts' */
    int max_scale;                       /* upper bound: counts x this (0: 64) */
    const struct sim_quotas *quotas;     /* sim_replay_opts' (sim/quota.h); NULL: none */
    const struct sim_comm_model *comm;   /* sim_replay_opts' (sim/slowdown.h); NULL: the defaults */
} sim_plan_opts;

typedef struct sim_plan_result {
    char policy[32];
    bool met;                            /* false: even the largest cluster tried misses a target */
    sim_cluster *cluster;                /* the plan (or the largest tried when !met) */
    sim_replay_result replay;            /* the replay at that cluster */
    double measured[SIM_PLAN_MAX_TARGETS];   /* each target's metric at the plan */
    char target[SIM_PLAN_MAX_TARGETS][96];   /* the targets as given */
    int ntargets;
    int evaluations;                     /* replays run */
    int nopt;                            /* the sharing options compared (o->nsharing) */
    char opt[SIM_PLAN_MAX_SHARING][64];  /* each as given */
    int opt_gpus[SIM_PLAN_MAX_SHARING];  /* GPUs of the smallest cluster with the shared groups so;
                                          * -1 targets never met, -2 no shared group takes it */
} sim_plan_result;

/* Of the compared options, the layered one needing the fewest GPUs and the best plain-MIG
 * and time-slicing-only options (indices into opt, -1 when absent or never met). */
void sim_plan_layering(const sim_plan_result *p, int *layered, int *mig_only, int *ts_only);

/* Of the compared options, soft:timeslice and the soft:mps option needing the fewest GPUs (the first
 * soft:mps one when none met the targets); indices into opt, -1 when absent. */
void sim_plan_soft(const sim_plan_result *p, int *timeslice, int *mps);

/* "soft:timeslice", "soft:mps", "soft:mps:tenant" into *out (1), 0 when s is no soft option, -1 with err
 * for a "soft:" spelling that is not one. */
int sim_plan_soft_parse(const char *s, sim_compute *out, char *err, size_t errlen);

/* Plan for one policy. 0 and out filled (free with sim_plan_result_free), -1 with err. */
int sim_plan(const sim_cluster *base, const sim_trace *t, const char *policy, const sim_plan_opts *o,
             sim_plan_result *out, char *err, size_t errlen);
void sim_plan_result_free(sim_plan_result *p);

/* The option comparison alone (sim_plan runs it when o has sharing options): fills
 * out->nopt, opt, opt_gpus. -1 with err on a replay error. */
int sim_plan_compare_options(const sim_cluster *base, const sim_trace *t, const char *policy, const sim_plan_opts *o,
                             sim_plan_result *out, char *err, size_t errlen);

/* Whether the targets hold for cluster c (one replay). -1 on error. */
int sim_plan_check(const sim_cluster *c, const sim_trace *t, const char *policy, const sim_plan_opts *o,
                   sim_replay_result *res, char *err, size_t errlen);

#endif
