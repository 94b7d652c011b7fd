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
 * At admission the webhook declares the most the pod could hold on the GPUs the cluster has
 * (model_charge_request_gpus over model_charge_gpus_add of its nodes), or, before it knows them,
 * on any GPU of the catalog (model_charge_request); a node that would charge a pod more than
 * it declared (a larger GPU that joined later) is not one the pod may use
 * (model_charge_node_within), so a pod never holds more than its namespace was charged.
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

#include <stdbool.h>
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

/* The kinds of GPU a cluster offers a request: each product at each memory (model_charge_grant's
 * cap) among the GPUs it could be placed on. Zero it, then add each node. */
#define MODEL_CHARGE_MAX_KINDS 64
typedef struct model_charge_gpus {
    int n;
    bool overflow;           /* more kinds than fit: not a list to size anything by */
    struct {
        const model_gpu_product *product;   /* valid as long as the node it came from */
        int cap;
    } kind[MODEL_CHARGE_MAX_KINDS];
} model_charge_gpus;

/* Adds the GPUs of node n that r could be placed on (model_fit_gpu_allowed: its
 * tessera.io/gpu-models, the node's product label, its path to DRA or the device plugin). */
void model_charge_gpus_add(model_charge_gpus *g, const model_node *n, const model_request *r);

/* What a pod asking r declares on those GPUs: model_charge_request's rule (the most per grant,
 * in any mode a node could offer, times the count) over g's kinds instead of the catalog's
 * products. 1 and *out; 0 (out zeroed) when no GPU of g could hold r, or g overflowed. */
int model_charge_request_gpus(const model_request *r, const model_charge_gpus *g, model_charge *out);

/* Whether node n may hold a pod that declared a charge (r->charge_declared: the accounting
 * resources in its requests): every GPU of n that r could be placed on charges it at most what it
 * declared, in each unit it declared (the same rule, over n's GPUs). false, with why naming the
 * unit and both numbers, when some would charge more: the pod was sized before such a GPU joined.
 * true for a pod that declared nothing (created before tessera's webhook, or by another way). */
bool model_charge_node_within(const model_node *n, const model_request *r, char *why, size_t whylen);

#endif
