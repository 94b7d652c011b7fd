/* fit.h -- where a request can go on a node, and applying or undoing that.
 *
 * model_fit lists every feasible assignment in a fixed order (GPU index ascending,
 * then MIG start slot ascending, then lowest free replica), so the same state always
 * gives the same list. model_assign re-checks an assignment against the node's current
 * state before applying it: a stale or forged assignment is refused, never applied,
 * so no sequence of calls can over-commit a GPU.
 */
#ifndef MODEL_FIT_H
#define MODEL_FIT_H

#include "dra.h"
#include "node.h"
#include "request.h"

/* Feasible assignments of r on n. Writes at most max of them to out (out may be NULL
 * when max is 0) and returns how many there are in all (capped at MODEL_FIT_MAX). When
 * none, why (if not NULL) says what stood in the way in words a person understands -- and
 * with no '%' sign ("30 percent SMs"): kube-scheduler records a filter reason in its
 * FailedScheduling Event as a Go format string. */
#define MODEL_FIT_MAX 100000
int model_fit(const model_node *n, const model_request *r, model_assignment *out, int max, char *why,
              size_t whylen);

/* model_fit restricted to the GPUs whose bit is set in gpus (bit g: n->gpus[g]): the assignments
 * of model_fit's list that use only those GPUs, in the same order. What a policy's chosen GPU set
 * becomes (policy_materialize), however far down the full list it sits. */
int model_fit_on(const model_node *n, const model_request *r, uint32_t gpus, model_assignment *out, int max, char *why,
                 size_t whylen);

/* Whether any assignment of r on n exists: model_fit's answer to "> 0", stopping at the
 * first assignment instead of counting them all (the extender's filter asks this of every
 * node for every pod). why as for model_fit, written only when nothing fits. */
bool model_fit_any(const model_node *n, const model_request *r, char *why, size_t whylen);

/* Whether the node's product matches the request's allowed models, and the GPU modes
 * the request may use there. Exposed for policies that reason about candidate GPUs. */
bool model_fit_product_allowed(const model_node *n, const model_request *r);
/* The same for one GPU, with its path (model_gpu_reachable) too. */
bool model_fit_gpu_allowed(const model_node *n, const model_gpu *g, const model_request *r);

/* Memory (MiB) a fraction takes on a GPU of this capacity: memory_mib if given, else
 * memory_permille of the capacity, else -- a fraction that names only compute -- memory
 * in the same proportion as compute, so that no share is memory-less (rounded up).
 * Inline: the policies' fast path asks it per GPU and must agree with model_fit. */
static inline int model_fraction_memory(const model_request *r, int capacity) {
    if (r->memory_mib > 0) return r->memory_mib;
    if (r->memory_permille > 0) return (int)(((long long)r->memory_permille * capacity + 999) / 1000);
    if (r->compute_permille > 0) return (int)(((long long)r->compute_permille * capacity + 999) / 1000);
    return 0;
}

/* Compute (permille of the GPU's SMs) a fraction is charged on a GPU: compute_permille; but an MPS share
 * that names only memory is charged compute in the memory's proportion, since MPS caps a client's SMs at
 * its charge (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and a share charged no compute would run on 1 percent of
 * them: memory_permille, or memory_mib over capacity rounded up. capacity is model_mps_capacity's, the
 * same memory model/charge.c divides by, so the quota a pod declares at admission (over the catalog's
 * memory) is never less than what its bind holds. A time-sliced share naming only memory is charged no
 * compute: it competes for time, not for SMs. */
static inline int model_fraction_compute(const model_request *r, int capacity) {
    if (r->compute_permille > 0 || r->compute_sharing != MODEL_COMPUTE_MPS) return r->compute_permille;
    if (r->memory_permille > 0) return r->memory_permille;
    if (capacity <= 0 || r->memory_mib <= 0) return 0;
    long long c = ((long long)r->memory_mib * 1000 + capacity - 1) / capacity;
    return c < 1 ? 1 : c > 1000 ? 1000 : (int)c;
}
/* The memory an MPS share's compute charge is proportioned to: the GPU's, or its catalog entry's when
 * larger (model/charge.h's cap). */
static inline int model_mps_capacity(const model_gpu_product *p, int gpu_memory_mib) {
    return p && p->memory_mib > gpu_memory_mib ? p->memory_mib : gpu_memory_mib;
}

/* Mark an assignment's soft shares (grants that are neither whole GPUs, replicas nor MIG instances)
 * with the request's compute sharing, and the assignment with its uid: what model_fit writes into
 * its own assignments, for an assignment read back from elsewhere (the tessera.io/assignment
 * annotation), which names GPUs and amounts but not how the pod shares compute -- the pod says
 * that (model_request_from_pod), and the GPU's soft-share mode follows from its holders. */
void model_assignment_set_sharing(model_assignment *a, const model_request *r);

/* Memory (MiB) of a MIG instance of profile pr on a GPU of product p with gpu_memory_mib:
 * the catalog's observed size, else its share of memory slices. What fit charges a MIG
 * grant, and what model/charge.h declares for one at admission. */
static inline int model_mig_profile_memory(const model_gpu_product *p, const model_mig_profile *pr,
                                           int gpu_memory_mib) {
    if (pr->memory_mib > 0) return pr->memory_mib;
    int slices = p->mig_memory_slices > 0 ? p->mig_memory_slices : 8;
    return (int)((long long)gpu_memory_mib * pr->memory_slices / slices);
}

/* Apply an assignment for pod uid. 0 on success; -1 with err if the uid already holds
 * something on this node or any grant no longer fits. */
int model_assign(model_node *n, const char *uid, const model_assignment *a, char *err, size_t errlen);

/* Release everything pod uid holds on the node. 0 if it held something, -1 if not. */
int model_release(model_node *n, const char *uid);

/* The allocation of pod uid, or NULL. */
const model_alloc *model_node_find(const model_node *n, const char *uid);

/* The same assignment with every grant on GPU from_gpu (index into n->gpus) moved to GPU to_gpu:
 * what a share becomes when the GPU it was bound to cannot be had (its reservation was refused)
 * and another one of the node takes it. MIG grants keep their profile and start slot (an idle
 * instance there, or one created on demand); a whole-GPU grant charges the new GPU's memory.
 * Pure: n is not changed. 0 with *out, or -1 with err when from has no grant on from_gpu, already
 * has one on to_gpu, to_gpu is not the same product in the same mode as from_gpu (the request's
 * constraints held for from_gpu, so they hold for its twin), or the moved grants do not fit on
 * to_gpu as n stands now. */
int model_regrant(const model_node *n, const model_assignment *from, int from_gpu, int to_gpu, model_assignment *out,
                  char *err, size_t errlen);
/* Where the tenants of GPU from_gpu go together when that GPU cannot be had: the idle GPU
 * (no grant at all) of the highest rank, then the lowest index, to which every tenant's
 * grants move (model_regrant) and fit together once their old grants are released. rank[g]
 * is the caller's preference per GPU (0: not a candidate; the reservation controller ranks a
 * GPU whose reservation it already holds above a free one). Pure: n is not changed. The GPU
 * chosen, with out[i] tenant i's moved assignment; -1 with err (the last refusal's reason,
 * or that no other idle GPU is there). */
int model_regrant_group(const model_node *n, int ntenants, const char *const *uids, const model_assignment *from,
                        int from_gpu, const int8_t *rank, model_assignment *out, char *err, size_t errlen);

/* "GPU 2 exclusive; GPU 3 mig 3g.40gb@4" */
void model_assignment_format(const model_node *n, const model_assignment *a, char *buf, size_t len);

/* ---- claims (Dynamic Resource Allocation): fit's rules on the devices model/dra.h reads ---- */

/* Account an allocated claim (its results) on node m: every result of NVIDIA's driver that is not admin access
 * (which holds nothing) and whose device is on m takes that device's grant (model_dra_grant); the grants are
 * assigned to uid, once however many pods share the claim. A device published nowhere is skipped, the rest still
 * held (err names it; dropping the claim whole would show its other devices free). 1 assigned (err "" or the
 * first device skipped), 0 nothing of it on m, -1 with err (only unpublished devices, a grant or the assignment
 * refused); m is unchanged unless 1. */
int model_dra_account_claim(model_node *m, const char *uid, const model_dra_result *res, int nres,
                            model_dra_device_fn find, void *user, char *err, size_t errlen);

/* Whether n publishes enough devices for a judged claim request r (via_dra) if none were taken: the only
 * grounds on which tessera's filter refuses a node for a claim, because DynamicResources refuses it too.
 * Usage is not looked at (a claim tessera has not seen deallocated yet must not cost a node). why says what
 * is missing. */
bool model_dra_could_fit(const model_node *n, const model_request *r, char *why, size_t whylen);

#endif
