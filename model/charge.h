/* charge.h -- what a GPU pod holds, in the integer units a namespace's quota counts.
 *
 * Two extended resources (README "Quotas"):
 *   tessera.io/gpu-milli       GPU compute, a whole GPU = 1000
 *   tessera.io/gpu-memory-mib  GPU memory held, MiB
 * tessera's admission webhook writes a pod's charge into its requests and limits, so that
 * Kubernetes' ResourceQuota (requests.tessera.io/...) and Kueue count it; the extender
 * reports what its binds hold in the same units. One rule per grant, model_charge_grant,
 * is the truth: the admission charge (model_charge_request) is the largest that rule can
 * give the request on any GPU of the catalog, so what a pod declares is never less than
 * what its bind holds on a GPU the catalog knows.
 *
 * Per grant (g = the GPU, cap = max(g's memory, its catalog entry's)):
 *   whole GPU                     1000, the GPU's memory
 *   MIG instance                  ceil(1000 x compute slices / the GPU's compute slices), its memory
 *   replica (time-slice or MPS)   max(ceil(1000 / replicas), compute charged, memory share), memory charged
 *   replica of a MIG instance     as a replica, with the instance's milli in place of 1000
 *   soft share                    max(compute charged, memory share), memory charged
 * where memory share = floor(1000 x memory charged / cap): a share holding a quarter of
 * a GPU's memory keeps a quarter of the GPU from everyone else whatever compute it names.
 */
#ifndef MODEL_CHARGE_H
#define MODEL_CHARGE_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "node.h"
#include "request.h"

#define MODEL_CHARGE_MILLI "tessera.io/gpu-milli"
#define MODEL_CHARGE_MEMORY "tessera.io/gpu-memory-mib"

typedef struct model_charge {
    int64_t gpu_milli;       /* 1000 per whole GPU */
    int64_t memory_mib;      /* GPU memory */
} model_charge;

/* The charge of one grant on node n (gr->gpu indexes n->gpus). */
model_charge model_charge_grant(const model_node *n, const model_grant *gr);

/* The sum over an assignment's grants: what a bound pod holds. */
model_charge model_charge_assignment(const model_node *n, const model_assignment *a);

/* What a pod asking r declares at admission, before any node is known: for each grant,
 * the largest model_charge_grant could give it on a GPU of cat (NULL: the compiled-in
 * catalog) that the request allows (tessera.io/gpu-models; names the catalog does not
 * know leave every product possible), in any mode some node could offer it (whole,
 * time-slice or MPS with 2 or more replicas, MIG with any layout, layered), times the
 * count. Milli and memory are maximised separately. A request for no GPU charges 0.
 * 0, or -1 with err when the request can be placed on no GPU of the catalog. */
int model_charge_request(const model_request *r, const model_catalog *cat, model_charge *out, char *err,
                         size_t errlen);

#endif
