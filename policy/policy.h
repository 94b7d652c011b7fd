/* policy.h -- scoring policies shared by the extender and the simulator, and the
 * fragmentation measure they and the reports use. Pure functions of (request, node
 * state, context) over model/; no I/O, no allocation while scoring. The only state is
 * per-thread memoisation of model_mig_free_starts (slow, and asked the same question
 * for every GPU with the same layout); it assumes a product struct does not change
 * while nodes use it. Scoring different nodes on different threads is safe.
 *
 * How a caller places one request (the extender and the simulator do the same):
 *
 *   policy_ctx ctx; policy_ctx_init(&ctx, seed); ctx.workload = w;   once per run
 *   ctx.decision = <per decision>;              e.g. the arrival number, or a hash of the pod UID
 *   for every node i: policy_score(p, r, node[i], &ctx, &res[i], NULL, 0);
 *   int win = policy_select(p, &ctx, res, n);   normalise (bestfit, random) + tie-break
 *   policy_materialize(node[win], r, &res[win].choice, &a, err, len); then model_assign.
 *
 * policy_score returns a raw value per node; policies whose final score depends on all
 * nodes (bestfit: min-max normalisation; random: one feasible node gets 100) finish the
 * job in policy_normalize, which policy_select calls. The extender's 0..10 scores come
 * from policy_scores_0_10, in one place.
 *
 * Tie-break (written down once, used by every policy): highest final score; among equal
 * scores the node with the smallest rank, rank = a 64-bit hash of (seed, node name) --
 * a random permutation of the nodes drawn from the seed and fixed for the whole run,
 * as the FGD authors' patched kube-scheduler does with its seeded name prefixes; then
 * the lowest array index. With tiebreak = POLICY_TIE_RANDOM the ranks are re-drawn for
 * every decision (hash of seed, decision, name) instead: a fresh uniform pick among ties.
 */
#ifndef POLICY_POLICY_H
#define POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/fit.h"
#include "model/node.h"
#include "model/request.h"

/* ---------------------------------------------------------------- target workload */

/* A task type m of the FGD paper, generalised: CPU c_m, per-GPU demand d_m (permille of
 * one GPU's compute), GPU count k_m, allowed models S_m (in req.models), popularity p_m.
 * How much room one GPU needs for one unit of the type depends on the GPU's mode; see
 * "per-GPU capacity" in frag.c. */
typedef struct policy_task_type {
    model_req_kind kind;
    int64_t cpu_milli;      /* c_m */
    int demand_permille;    /* d_m: 1000 for whole GPUs, 0 for CPU-only and MIG/replica types */
    int gpus;               /* k_m: GPUs (MIG: instances, replicas: replicas) */
    long count;             /* tasks seen with this shape */
    double p;               /* p_m; the kept types sum to 1 after policy_workload_finish */
    model_request req;      /* the shape itself (models, MIG profile, memory, isolation) */
} policy_task_type;

typedef struct policy_workload policy_workload;

policy_workload *policy_workload_new(void);
void policy_workload_free(policy_workload *w);

/* Count `count` tasks shaped like r. Requests with the same shape (kind, count, per-GPU
 * compute/memory, MIG profile, isolation, no_mps, model list, host CPU -- not host memory,
 * which the FGD measure ignores) are one type. -1 with err on bad input or after finish. */
int policy_workload_add(policy_workload *w, const model_request *r, long count, char *err, size_t errlen);

/* Sort the types by count, most common first (equal counts keep the order in which the
 * shapes were first added, as a stable sort of a trace's counts does), keep the top ones
 * until they cover at least coverage_pct of all tasks (95 in the paper; at most 256
 * types), renormalise to sum to 1. Once only: -1 with err if nothing was added, if
 * already finished, or coverage is outside (0, 100]. */
int policy_workload_finish(policy_workload *w, double coverage_pct, char *err, size_t errlen);

int policy_workload_count(const policy_workload *w);           /* kept types after finish */
const policy_task_type *policy_workload_type(const policy_workload *w, int i);
double policy_workload_coverage(const policy_workload *w);    /* share of tasks the kept types cover, 0..1 */

/* A number that differs between any two finished workloads alive in the process (and
 * between a workload and a later one at the same address): what a cache of scores keys
 * on. 0 for NULL or unfinished. */
uint64_t policy_workload_version(const policy_workload *w);

/* ---------------------------------------------------------------- online target workload
 *
 * FGD's target workload is the whole trace, known in advance. The online estimate
 * knows only what has arrived: each arriving request adds weight 1 to its shape, and
 * every weight halves after half_life more arrivals (an exponentially decaying count;
 * the estimate follows a drifting workload, about 1.44 x half_life arrivals of memory).
 * The finished workload the policies read (95 % coverage, as the paper) is a snapshot,
 * rebuilt from the weights:
 *   - during the warm-up (the first `warmup` arrivals) after every arrival, since each
 *     early arrival moves the estimate a lot;
 *   - after it, at every multiple of max(1, half_life / 20) arrivals (5 % of the memory),
 *     and then only if the new popularities differ from the current ones by at least
 *     POLICY_ONLINE_MIN_CHANGE in total variation distance (half the sum of |p - p'|
 *     over shapes): every rebuild makes the cached node scores stale (the simulator's
 *     incremental selector, the extender's score cache), and a steady workload's
 *     estimate only jitters.
 * Before the first arrival there is no estimate (policy_online_current returns NULL).
 * Arrivals, not seconds: the simulator's openb experiment has no clock, and in the
 * extender a pod is an arrival the first time it is scored. */

#define POLICY_ONLINE_HALF_LIFE 1000   /* arrivals (defaults of the extender and tessera-sim) */
#define POLICY_ONLINE_WARMUP 100
#define POLICY_ONLINE_MIN_CHANGE 0.02

typedef struct policy_online policy_online;

/* half_life > 0 arrivals, warmup >= 0. NULL with err on bad arguments or no memory. */
policy_online *policy_online_new(double half_life, long warmup, char *err, size_t errlen);
void policy_online_free(policy_online *o);

/* One arrival of r. 1 when the snapshot was rebuilt (policy_online_current changed), 0
 * when not, -1 with err on a bad request or no memory (the estimate is unchanged). */
int policy_online_observe(policy_online *o, const model_request *r, char *err, size_t errlen);

/* The current snapshot (finished; owned by o, valid until the next rebuild), or NULL
 * before the first arrival. */
const policy_workload *policy_online_current(const policy_online *o);
long policy_online_arrivals(const policy_online *o);

/* ---------------------------------------------------------------- fragmentation */

/* Free capacity of one GPU in milli-GPU (0..1000), the R_{n,g} of the paper:
 *   whole mode:        free compute permille (model_gpu_free_compute);
 *   time-slice / MPS:  1000 * free replicas / replicas;
 *   MIG:               free compute slices (idle instances, and on a dynamic GPU the
 *                      unpartitioned slices too) as permille of the GPU's slices; an
 *                      instance with R replicas (layered sharing) counts slices x free/R,
 *                      so a free replica of a 1g is a smaller unit than a free 1g. */
int policy_gpu_free(const model_gpu *g);

/* F_n(M): the node's fragmentation against the workload, in milli-GPU. per_type, if not
 * NULL, receives F_n(m) for each kept type (policy_workload_count entries). -1.0 on bad
 * input (NULL, workload not finished). */
double policy_frag_node(const model_node *n, const policy_workload *w, double *per_type);

typedef struct policy_frag_report {
    double frag_milli;      /* F(M) = sum over nodes of F_n(M) */
    double free_milli;      /* sum of R over every GPU */
    double capacity_milli;  /* 1000 per GPU */
    double amount_pct;      /* 100 * F / capacity: "frag amount" */
    double ratio_pct;       /* 100 * F / free: "frag ratio" (0 when nothing is free) */
    int gpus;
} policy_frag_report;

int policy_frag_cluster(model_node *const *nodes, int n, const policy_workload *w, policy_frag_report *out);

/* ---------------------------------------------------------------- context */

typedef enum policy_tiebreak {
    POLICY_TIE_RANK = 0,    /* fixed per-run permutation (default; what the FGD authors ran) */
    POLICY_TIE_RANDOM       /* uniform among ties, re-drawn per decision */
} policy_tiebreak;

typedef struct policy_ctx {
    uint64_t seed;
    uint64_t decision;                 /* changes per scheduling decision: random policy, random tie-break */
    const policy_workload *workload;   /* target workload (fgd, mig-aware); finished */
    bool fgd_exact;                    /* fgd: exact float score instead of int(100 * sigmoid(delta/1000)) */
    policy_tiebreak tiebreak;
    double w_memory, w_compute, w_replica;  /* binpack/spread dimension weights */
    double w_topology;                 /* weight of the topology packing term (registry below); 1 by
                                        * default, 0 turns it off (the alignment tier stays) */
} policy_ctx;

/* seed, everything else default: quantised fgd, rank tie-break, weights 1/1/1. */
void policy_ctx_init(policy_ctx *ctx, uint64_t seed);

/* The tie-break rank of a node for this run (smaller wins). */
uint64_t policy_node_rank(const policy_ctx *ctx, const char *node_name);

/* ---------------------------------------------------------------- policies */

/* Where the request would go on the node: GPU indices (ascending), and for MIG the
 * profile/start slot and whether the instance is created, for replicas the replica. */
typedef struct policy_choice {
    int ngpus;
    int8_t gpu[MODEL_MAX_GPUS];
    int8_t mig_profile, mig_start;   /* -1 unless MIG */
    bool mig_create;
    int16_t replica;                 /* -1 unless time-slice/MPS */
} policy_choice;

typedef struct policy_result {
    bool feasible;
    double raw;             /* the policy's own value: fgd/mig-aware the fragmentation decrease
                             * (milli-GPU), bestfit int(100*(1-leftover)), random a draw in [0,100) */
    double score;           /* higher is better; 0..100 once normalised (binpack, spread, fgd-pack and
                             * mig-aware add the topology terms: see the registry) */
    uint64_t rank;          /* tie-break key, see the top of this file */
    policy_choice choice;
} policy_result;

typedef struct policy policy;

/* Registry: "binpack", "spread", "bestfit", "dotprod", "gpupacking", "gpuclustering",
 * "random", "fgd", "mig-aware", "fgd-pack". NULL for an unknown name.
 *
 *   binpack / spread  node: 100 * (mean GPU use after placement) / 100 * (1 - that); use of
 *                     a GPU = weighted mean of compute, memory and (time-slice/MPS)
 *                     replica shares (ctx weights); CPU-only requests: host CPU share.
 *                     GPU: the fullest / the emptiest that fits.
 *   bestfit, dotprod, gpupacking, gpuclustering, random, fgd: sim/fgd-method.md sections
 *                     2-3, integer scores as the FGD simulator computes them; sharing tasks
 *                     go to the tightest GPU (fgd: the largest fragmentation decrease,
 *                     random: a random GPU); whole GPUs: the lowest-indexed idle ones.
 *                     Host CPU terms are 0 on nodes that do not track host resources.
 *   fgd               needs ctx->workload; ctx->fgd_exact picks the float score.
 *   mig-aware         MIG requests: an idle instance of the profile first (score 50..100),
 *                     else the GPU and slot with the largest fragmentation decrease
 *                     (0..50; ties: the slot leaving the workload's profiles more legal
 *                     starts). Other requests: fgd with the exact score. Without a workload
 *                     (or, for MIG requests, without MIG types in it) it measures against
 *                     every profile of the node's MIG product, equally likely, or the
 *                     request's own shape
 *   fgd-pack          needs ctx->workload (score.c, "fgd-pack", has the why): fgd's
 *                     quantised score of (fragmentation decrease - 0.1 x growth of the
 *                     node's stranded GPUs: per GPU task type of the workload, popularity-
 *                     weighted, the idle GPUs its free CPU cannot feed at that type's CPU
 *                     per GPU). Ties: the node rank, as fgd. GPU on a node: the largest
 *                     exact fragmentation decrease, then the tightest.
 *
 * Topology (model/topo.h; README "Topology"). A required alignment (tessera.io/topology on a
 * request on 2+ GPUs) is a fit rule every policy obeys: model_fit lists only aligned sets, and
 * the whole-GPU fast path takes the lowest-indexed aligned set, as model_fit's first.
 * binpack, spread, fgd-pack and mig-aware also weigh the topology of nodes that have one:
 *   GPU set           requests on 2+ GPUs: the most aligned set, then the one that leaves the
 *                     largest aligned sets of idle GPUs whole (model_topo_best_set's order:
 *                     largest nvlink set, largest pcie set, largest numa set, then aligned pairs),
 *                     then the policy's own GPU preference; requests on one GPU (and shares):
 *                     the policy's preference, then the GPU that keeps aligned sets whole
 *                     (pcie8 with GPU 2 taken: a 1-GPU pod takes 3, keeping the pair (0,1)).
 *   alignment tier    requests on 2+ GPUs: score + 100 x (3 nvlink, 2 pcie, 1 numa, 0 none or
 *                     unknown) for the set chosen. A node offering a better-aligned set always
 *                     wins, whatever the other terms say. A node of unknown topology ranks with
 *                     one whose best set crosses sockets: it may well have an aligned set (and
 *                     the device plugin then picks one), so it is not put below a node known to
 *                     be bad, and tessera cannot vouch for it, so it is not put above one known
 *                     to be aligned. The score is then 0..400 rather than 0..100.
 *   packing term      every request: score - 10 x ctx->w_topology x (aligned pairs of idle GPUs
 *                     the placement breaks) / (aligned pairs the node has with every GPU idle),
 *                     pairs counted at the nvlink, pcie and numa levels together (an NVLink pair
 *                     counts three times). The share of the node's aligned capacity the
 *                     placement uses up: small pods go where they break the least (an already
 *                     broken pair, a partly used switch), within 10 points of what the policy
 *                     itself prefers (binpack: 12.5 points per GPU of an 8-GPU node).
 * On nodes without topology none of this applies: scores and choices are as before.
 * Measured (test_policy_topo_random.c, "alignment_and_packing_measured": 24 DGX / PCIe-pairs /
 * NUMA-only nodes, 1-GPU pods, shares, 2- and 4-GPU pods arriving and leaving, 4 seeds): the
 * share of multi-GPU pods placed on their server's best alignment is 63 % with topology against
 * 48 % blind for binpack, 52 against 35 for spread, 65 against 47 for fgd-pack and mig-aware.
 * The packing term's own part is small: w_topology 1 against 0 adds 1.1 (binpack) to 2.3 (spread)
 * points and refuses up to 3 % fewer multi-GPU pods; tripled, spread gains 2 points more, the
 * others about nothing (so the default stays 1). */
const policy *policy_find(const char *name);
int policy_count(void);
const policy *policy_at(int i);
const char *policy_name(const policy *p);
const char *policy_summary(const policy *p);   /* one line: what it prefers */
/* Whether the policy's per-node results depend on ctx->decision (random's draws), so a
 * result computed for one decision must not be reused for another. */
bool policy_draws_per_decision(const policy *p);

/* Score one node. 0 and out filled (out->feasible says whether the request fits there);
 * -1 on bad input (NULL, workload missing for fgd, unfinished workload), with the reason
 * in why. why (may be NULL) gets the breakdown a person reads: "why this node". */
int policy_score(const policy *p, const model_request *r, const model_node *n, const policy_ctx *ctx,
                 policy_result *out, char *why, size_t whylen);

/* Turn raw scores into final 0..100 scores where the policy needs all nodes (bestfit's
 * min-max, random's one-winner); for the others the score is already final. */
void policy_normalize(const policy *p, const policy_ctx *ctx, policy_result *res, int n);

/* Normalise, then the index of the winner under the tie-break rule, or -1 when no node
 * is feasible. */
int policy_select(const policy *p, const policy_ctx *ctx, policy_result *res, int n);

/* The extender's scores 0..10 after policy_select-style normalisation: infeasible 0; the
 * node policy_select would pick gets 10, every other feasible node at most 9 (min-max
 * over the final scores), so kube-scheduler and the simulator agree on the top node. */
void policy_scores_0_10(const policy *p, const policy_ctx *ctx, policy_result *res, int n, int *out);

/* The model_fit assignment that realises a choice on the node's current state. -1 with
 * err when the state moved on and no assignment matches. */
int policy_materialize(const model_node *n, const model_request *r, const policy_choice *c, model_assignment *out,
                       char *err, size_t errlen);

/* Score every node, select, materialise the winner: what a simulator step needs.
 * scratch holds n results. Returns the winner's index (out filled) or -1 (none fits,
 * or bad input; why says which). */
int policy_place(const policy *p, const policy_ctx *ctx, const model_request *r, model_node *const *nodes, int n,
                 policy_result *scratch, model_assignment *out, char *why, size_t whylen);

#endif
