/* request.h -- what a pod asks of GPUs, normalised from its resources and annotations.
 *
 * Forms accepted (see README "Request forms"):
 *   nvidia.com/gpu: N                whole GPUs (only unshared GPUs unless tessera.io/isolation
 *                                    allows a replica or, under MIG single, a slice)
 *   nvidia.com/gpu.shared: N         N time-slice/MPS replicas
 *   nvidia.com/mig-<profile>: N      N MIG instances of that profile ("1g.10gb.me" = "+me"); on
 *                                    a node whose instances are time-sliced, replicas of them only
 *                                    with tessera.io/isolation timeslice, mps or any
 *   nvidia.com/mig-<profile>.shared: N  N replicas of time-sliced instances (renameByDefault)
 *   nvidia.com/gpumem: MiB           HAMi: memory per GPU (with nvidia.com/gpu: N = N GPUs); a plain
 *                                    number (or k, m, exponent) is MiB as HAMi reads it, a byte suffix
 *                                    (Ki..Ei, M..E) bytes that must be whole MiB ("20Gi" = 20480)
 *   nvidia.com/gpumem-percentage: P  HAMi: percent of each GPU's memory
 *   nvidia.com/gpucores: P           HAMi: percent of each GPU's compute
 *   annotations tessera.io/gpu-fraction, gpu-fraction (KAI): share of one GPU in (0, 1]
 *   annotation gpu-memory (KAI): MiB of one GPU
 *   annotation tessera.io/gpu-models: comma list of allowed products
 *   annotation tessera.io/isolation: mig | mps | timeslice | any
 *   annotation tessera.io/compute-sharing: mps | timeslice   how a soft share (a fraction on an unshared
 *                                    GPU) shares compute: time-sliced with the GPU's other shares
 *                                    (default), or as an MPS client capped at its charged SM share;
 *                                    fractions only, never with tessera.io/isolation
 *   spec.securityContext.runAsUser, each container's overriding (init containers too): the uid
 *                                    the pod's CUDA processes run as, required by an MPS share
 *   annotation tessera.io/topology: nvlink | numa | any   how aligned the GPUs of a request of 2 or
 *                                    more must be (topo.h); any (default) prefers, never requires
 * A request that breaks a rule gets an error naming the field and the rule.
 */
#ifndef MODEL_REQUEST_H
#define MODEL_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "link.h"

#define MODEL_UID_LEN 64
#define MODEL_MAX_MODELS 8
#define MODEL_MAX_GPUS 16            /* per node (node.h), so also the most one request can get */
#define MODEL_DRA_MAX_CONSTRAINTS 2  /* constraints of one claim tessera judges (more: not judged; each costs
                                      * every request 101 bytes, and pods keep theirs) */
#define MODEL_DRA_ATTR_LEN 100       /* a fully qualified attribute name: domain (63) "/" identifier (32) */

/* One of a claim's spec.devices.constraints, over all the devices the request counts (model/dra.h says
 * when tessera judges one): every device must have the attribute, and all share one value (matchAttribute)
 * or all have different values (distinctAttribute), as the scheduler's allocator rules it. */
typedef struct model_dra_constraint {
    char attr[MODEL_DRA_ATTR_LEN];   /* fully qualified: "resource.kubernetes.io/pcieRoot", "gpu.nvidia.com/productName" */
    bool distinct;                   /* distinctAttribute; else matchAttribute */
} model_dra_constraint;

typedef enum model_req_kind {
    MODEL_REQ_NONE = 0,   /* asks for no GPU (CPU-only; still placed by the simulator) */
    MODEL_REQ_WHOLE,      /* count whole GPUs */
    MODEL_REQ_SHARED,     /* count time-slice/MPS replicas */
    MODEL_REQ_FRACTION,   /* count GPUs, each giving memory and/or compute */
    MODEL_REQ_MIG         /* count MIG instances of mig_profile */
} model_req_kind;

typedef enum model_isolation {
    MODEL_ISO_DEFAULT = 0, /* whole: unshared GPUs; shared: any replica; fraction: soft share */
    MODEL_ISO_ANY,         /* anything that gives the requested amount */
    MODEL_ISO_MIG,         /* only MIG instances (a fraction maps to the smallest profile that holds it) */
    MODEL_ISO_MPS,         /* only MPS replicas */
    MODEL_ISO_TIMESLICE    /* only time-slice replicas */
} model_isolation;

/* How a soft share shares its GPU's compute (tessera.io/compute-sharing). A GPU's soft shares all
 * use one mode, and its MPS shares one uid (node.h). */
typedef enum model_compute_sharing {
    MODEL_COMPUTE_TIMESLICE = 0, /* CUDA time-slicing with the GPU's other shares (default) */
    MODEL_COMPUTE_MPS            /* a client of the MPS control daemon tessera's reservation runs for the GPU,
                                  * its SMs capped at its charge (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) */
} model_compute_sharing;

#define MODEL_UID_UNKNOWN (-1)

typedef struct model_request {
    model_req_kind kind;
    int count;               /* GPUs, replicas or instances; >= 1 unless kind is NONE */
    int32_t memory_mib;      /* per GPU; 0 = not given */
    int16_t memory_permille; /* per GPU, share of the GPU's memory; 0 = not given */
    int16_t compute_permille;/* per GPU, share of the GPU's SMs; 0 = not given */
    char mig_profile[32];    /* MODEL_REQ_MIG: canonical name with '+' ("1g.10gb+me") */
    bool mig_replica;        /* MODEL_REQ_MIG asked by the .shared name: replicas of shared instances only */
    model_isolation isolation;
    uint8_t topology;        /* tessera.io/topology, a model_align (topo.h): the least alignment the
                              * GPU set must have (NUMA or NVLINK); MODEL_ALIGN_UNKNOWN (0) = any,
                              * nothing required. Matters only for requests on 2 or more GPUs */
    uint8_t compute_sharing; /* a model_compute_sharing; MODEL_COMPUTE_MPS only on a FRACTION with the
                              * default isolation (model_request_from_pod refuses the rest) */
    int nmodels;             /* tessera.io/gpu-models; 0 = any product */
    char models[MODEL_MAX_MODELS][64];
    int64_t cpu_milli;       /* host CPU, effective request */
    int64_t memory_bytes;    /* host memory, effective request */
    int64_t run_as_uid;      /* the uid every container (init containers too) runs as, from runAsUser;
                              * MODEL_UID_UNKNOWN when some container's is not set or they differ.
                              * Known for every MPS share (an MPS server serves one uid at a time) */
    int32_t priority;        /* spec.priority */
    bool no_mps;             /* a fraction whose delivery cannot hand it a device-plugin MPS replica
                              * (tessera's reservations: such a client needs the plugin's daemon mounts):
                              * fit never maps it onto one. tessera's own MPS shares (compute_sharing)
                              * are not replicas and stay allowed. Set by
                              * model_request_for_reservation_delivery, not by the pod. */
    bool via_dra;            /* asked through a ResourceClaim (model/dra.h): only GPUs DRA publishes qualify,
                              * and whole GPUs are whole devices. Set by model_dra_request, not by pods. */
    int32_t dra_min_memory_mib;  /* via_dra: a device's memory capacity must be at least this (CEL selector) */
    int dra_nconstraints;        /* via_dra: the claim's constraints on its devices' attributes (fit.h honours */
    model_dra_constraint dra_constraint[MODEL_DRA_MAX_CONSTRAINTS];   /* them, model_dra_could_fit too) */
} model_request;

/* Normalise a Pod object (as the API returns it). Effective request per resource =
 * max(largest init container, sum of app containers); a limit without a request
 * counts as the request, as Kubernetes defaults it. Returns 0, or -1 with a message
 * naming the field and the rule broken. */
int model_request_from_pod(const cJSON *pod, model_request *out, char *err, size_t errlen);

/* Same, from JSON text. */
int model_request_from_pod_json(const char *json, size_t len, model_request *out, char *err, size_t errlen);

/* Whether the pod asks for any GPU resource tessera manages (for the extender to
 * ignore pods that only ask for CPU). */
bool model_request_wants_gpu(const model_request *r);

/* Whether two requests ask for the same thing: every field compared, strings as strings
 * (bytes past the NUL may differ between two copies of one request). */
bool model_request_same(const model_request *a, const model_request *b);

/* A soft share delivered by a reservation (tessera-extender's --soft-share-delivery=reservation,
 * its default in a cluster; tessera-sim's default too): the reservation pod asks the device
 * plugin for a whole GPU, a MIG instance or a time-slice replica, never an MPS client, so a
 * fraction must not map onto a device-plugin MPS replica (sets no_mps; an MPS share,
 * compute_sharing, runs under the reservation's own daemon instead). Other kinds are unchanged. */
void model_request_for_reservation_delivery(model_request *r);

/* Human-readable one-line summary, e.g. "1 x fraction (8192 MiB, 30 percent SMs)": never a '%' sign, as no
 * reason model/ writes has one (kube-scheduler uses a filter reason as a format string). */
void model_request_format(const model_request *r, char *buf, size_t len);

const char *model_isolation_name(model_isolation iso);
/* The alignment a request requires of its GPU set: r->topology for requests spanning two GPUs or
 * more (whole GPUs, or MIG instances, replicas or fractions on distinct GPUs), else
 * MODEL_ALIGN_UNKNOWN (nothing to require of one GPU). */
static inline int model_request_required_align(const model_request *r) {
    return r->topology && r->count >= 2 && r->kind != MODEL_REQ_NONE ? r->topology : 0;
}

#endif
