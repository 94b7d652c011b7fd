/* node.h -- one node's GPUs and who holds what on them.
 *
 * A node is built from the Node object the stock NVIDIA GPU operator publishes (GFD
 * labels plus status.allocatable, optionally refined by the tessera.io/gpus annotation),
 * or by hand through model_node_new/model_node_add_gpu (simulator, tests).
 * Each GPU is in exactly one mode: whole, time-slicing or MPS with N replicas, or MIG
 * with a set of instances. A MIG instance may itself carry R replicas ("layered
 * sharing": the device plugin time-slices the instance); R = 1 is a plain instance.
 * Fractional memory/compute accounting sits on top. The usage
 * fields are changed only by fit.h's model_assign/model_release, which keep the
 * invariant that nothing is ever over-committed (model_node_check verifies it).
 */
#ifndef MODEL_NODE_H
#define MODEL_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "catalog.h"
#include "mig.h"
#include "request.h"
#include "link.h"

#define MODEL_MAX_REPLICAS 128     /* time-slice/MPS replicas per GPU */
#define MODEL_MIG_MAX_REPLICAS 32  /* replicas per MIG instance (a bit mask per instance) */
#define MODEL_REASON_LEN 256
_Static_assert(MODEL_LINK_MAX_GPUS == MODEL_MAX_GPUS, "a node's link matrix covers its GPUs");

/* The node agent's topology matrix by GPU UUID (tessera.io/gpus "topo"), kept for a node whose GPUs DRA alone
 * publishes: model_node_from_json reads it, model_dra_merge_slices (model/dra.h) applies it. */
typedef struct model_dra_links {
    int n;
    char uuid[MODEL_MAX_GPUS][48];
    uint8_t link[MODEL_MAX_GPUS][MODEL_MAX_GPUS];      /* model_link */
    uint8_t nvlinks[MODEL_MAX_GPUS][MODEL_MAX_GPUS];
} model_dra_links;

typedef enum model_gpu_mode {
    MODEL_GPU_WHOLE = 0,   /* unshared: one pod whole, or soft fractions */
    MODEL_GPU_TIMESLICE,   /* device-plugin time-slicing, `replicas` replicas */
    MODEL_GPU_MPS,         /* device-plugin MPS, `replicas` clients */
    MODEL_GPU_MIG          /* MIG enabled: instances only */
} model_gpu_mode;

typedef enum model_mig_strategy { MODEL_MIG_NONE = 0, MODEL_MIG_SINGLE, MODEL_MIG_MIXED } model_mig_strategy;

typedef struct model_mig_instance {
    int8_t profile;        /* index into the GPU's product->profiles */
    int8_t start;          /* first memory slice */
    bool on_demand;        /* created by an assignment (dynamic MIG); destroyed on release */
    uint8_t replicas;      /* 1: a plain instance; R >= 2: R time-slice/MPS replicas (gpu->mig_sharing) */
    int32_t holder;        /* index into node->allocs, -1 when idle; always -1 when replicas > 1 */
    uint32_t rep_used;     /* usage, replicas > 1 only: bit r: replica r taken */
    int32_t mem_used;      /* usage, replicas > 1 only: MiB the replicas' grants charge ... */
    int16_t comp_used;     /* ... and permille of the GPU's SMs; at most the instance's */
} model_mig_instance;

/* Field order is for the scoring loops, which visit every GPU of thousands of nodes per
 * decision: what they read sits in the first 64 bytes (one cache line per whole-mode
 * GPU, the struct is cache-line aligned), the MIG instances next, identity last. */
typedef struct model_gpu {
    model_gpu_mode mode;
    int32_t exclusive_holder;           /* alloc index holding the whole GPU, -1 if none */
    int memory_mib;                     /* capacity; the node's label wins over the catalog */
    int memory_used_mib;                /* usage (this and the fields marked so): changed only by */
    int compute_used_permille;          /* usage: 0..1000        model_assign / model_release */
    int nholders;                       /* usage: grants on this GPU (any kind) */
    const model_gpu_product *product;   /* never NULL (unknown models get node->local_product) */
    int replicas;                       /* timeslice/MPS: N >= 2; otherwise 1 */
    int replicas_used;                  /* usage */
    int ninst;                          /* usage (dynamic MIG creates and destroys instances) */
    bool mig_dynamic;                   /* MIG: instances may be created/destroyed on demand */
    /* model_gpu_reachable reads these two for every GPU a policy scores: in the first cache line (in the
     * padding after mig_dynamic), fgd's cold path costs no extra line per GPU (it did, 2 % -> 12 %). */
    bool dra;                           /* published in a ResourceSlice (model/dra.h): claims can get it */
    bool dra_only;                      /* ... and only there: the device plugin does not hand it out */
    uint8_t mps_clients;                /* usage, WHOLE mode: soft shares that are MPS clients (grant.mps); the
                                         * GPU's soft shares are then all MPS clients, of uid mps_uid. In the
                                         * last byte of the first cache line: the policies' soft-share walk reads it */
    int mps_memory_limit_mib;           /* MPS: memory_mib / replicas (device plugin's pinned limit) */
    int mps_thread_permille;            /* MPS: 10 * (100 / replicas), the active thread share */
    model_mig_instance inst[MODEL_MIG_MAX_INSTANCES];
    uint64_t replica_used[2];           /* usage: bit r: replica r taken */
    model_gpu_mode mig_sharing;         /* MIG: WHOLE, or how shared instances are shared (TIMESLICE, MPS) */
    uint8_t mig_replicas[MODEL_MAX_PROFILES]; /* MIG: replicas per instance of each profile (0/1: unshared) */

    int index;                          /* device index on the node */
    int numa_node;                      /* -1 unknown */
    uint32_t nvlink_peers;              /* bit i: NVLink to the GPU with index i */
    char uuid[48];                      /* "" when only labels are known */
    int32_t mps_uid;                    /* usage: the uid of the MPS clients while mps_clients > 0 (an MPS server
                                         * serves one uid at a time); in the struct's tail padding */
} __attribute__((aligned(64))) model_gpu;

/* What one GPU gives one pod. */
typedef struct model_grant {
    int8_t gpu;             /* index into node->gpus */
    int8_t mig_inst;        /* MIG: index into gpu->inst at assignment time; -1 otherwise */
    int8_t mig_profile;     /* MIG: profile index; -1 otherwise */
    int8_t mig_start;       /* MIG: start slot; -1 otherwise */
    bool mig_create;        /* MIG: create the instance (dynamic MIG) */
    bool exclusive;         /* the whole GPU */
    int16_t replica;        /* timeslice/MPS replica index (of the GPU, or with mig_profile >= 0 of
                             * the shared MIG instance at mig_start); -1 otherwise */
    int32_t memory_mib;     /* memory charged */
    int16_t compute_permille; /* compute charged */
    bool mps;               /* a soft share served as an MPS client (tessera.io/compute-sharing: mps), its
                             * SMs capped at compute_permille; the assignment's mps_uid is its uid */
} model_grant;

typedef struct model_assignment {
    int ngrants;
    model_grant grant[MODEL_MAX_GPUS];
    int64_t cpu_milli;      /* host CPU charged (only when the node tracks host resources) */
    int64_t memory_mib;     /* host memory charged */
    int64_t mps_uid;        /* the uid the pod's MPS grants run as (request's run_as_uid); read only when a
                             * grant has mps */
} model_assignment;

typedef struct model_alloc {
    char uid[MODEL_UID_LEN];   /* pod UID; "" marks a free slot */
    model_assignment a;
} model_alloc;

/* Hot fields first (what every policy reads per node), then what only node building, reasons and
 * bookkeeping read, then the GPUs and the rarely used local product last, so that a kept node can
 * be allocated with room for its own GPUs only (gpus_cap; model_node_compact): 5,000 nodes of 8
 * GPUs would otherwise carry 17 MiB of GPU slots and product facts nobody uses. Allocated 64-byte
 * aligned (node.c); never copy a node by value or with sizeof(model_node): model_node_clone. */
typedef struct model_node {
    char *name;
    model_mig_strategy mig_strategy;
    model_gpu_mode sharing;             /* WHOLE (none), TIMESLICE or MPS: one method per node */
    int replicas;                       /* per GPU, from nvidia.com/gpu.replicas */
    bool shared_renamed;                /* replicas advertised as nvidia.com/gpu.shared */
    model_gpu_mode mig_sharing;         /* WHOLE, or how shared MIG instances are shared (layered) */
    bool mig_renamed;                   /* MIG replicas advertised as <name>.shared (renameByDefault) */
    bool track_host;                    /* check cpu/memory (simulator); the extender leaves it to kube-scheduler */
    int64_t cpu_milli, cpu_used_milli;
    int64_t memory_mib, memory_used_mib;
    int ngpus;
    model_topo *topo;                   /* how the GPUs link (topo.h); NULL: unknown. Own allocation (512 B):
                                         * only nodes with a known topology pay for it; deep-copied */
    char reason[MODEL_REASON_LEN];      /* non-empty: the node takes no GPU pods, and why */

    int nallocs, allocs_cap;            /* allocs[0..nallocs) with free slots marked by uid "" */
    model_alloc *allocs;
    int nlive;                          /* allocations in use */
    char product_label[MODEL_NAME_LEN]; /* nvidia.com/gpu.product as labelled */
    bool has_dra;                       /* some GPU is published through DRA (model/dra.h): which GPUs a
                                         * request may use depends on its path (model_gpu_reachable) */
    char dra_note[MODEL_REASON_LEN];    /* where the device-plugin and DRA views disagree ("" = nowhere);
                                         * unlike reason, the node still takes pods */
    int gpu_count_label;                /* nvidia.com/gpu.count when it counts physical GPUs (0: unknown):
                                         * the device plugin and DRA together must not show more */
    bool plugin_idle;                   /* reason is only "labels show GPUs, the device plugin advertises
                                         * none" (or GFD has not labelled them): what a node whose GPUs DRA
                                         * publishes looks like; model_node_add_dra clears it */
    char *dra_attrs;                    /* the attributes of the devices DRA publishes for these GPUs, for claims'
                                         * constraints (model/dra.h: model_dra_node_attr); malloc'd, NULL: none */
    size_t dra_attrs_len;
    struct model_dra_links *dra_links;  /* plugin_idle: the node agent's topology matrix by GPU UUID, for the GPUs
                                         * DRA will publish (model/dra.h); malloc'd, NULL: none */
    int gpus_cap;                       /* room allocated in gpus: MODEL_MAX_GPUS, or ngpus once compacted */

    model_gpu gpus[MODEL_MAX_GPUS];     /* [0, ngpus) valid; only [0, gpus_cap) is allocated */
    model_gpu_product local_product;    /* facts for a model the catalog does not know; allocated only
                                         * with gpus_cap == MODEL_MAX_GPUS (compacting keeps it when used) */
} model_node;

/* Build by hand. model_node_add_gpu returns the GPU or NULL (too many GPUs, bad
 * replicas); memory_mib 0 takes the product's. */
model_node *model_node_new(const char *name);
model_gpu *model_node_add_gpu(model_node *n, const model_gpu_product *p, model_gpu_mode mode, int replicas,
                              int memory_mib);
/* Add an idle, pre-existing MIG instance to a MIG-mode GPU (what mig-parted created).
 * -1 with err if the GPU is not in MIG mode or the placement breaks the layout rules. */
int model_gpu_add_mig_instance(model_gpu *g, int profile, int start, char *err, size_t errlen);
/* Layered sharing: every instance of `profile` on a MIG-mode GPU carries `replicas`
 * replicas, shared `how` (MODEL_GPU_TIMESLICE or MODEL_GPU_MPS; one method per GPU), as
 * the device plugin's sharing config does per resource name. Applies to the instances
 * there (which must be idle) and to those added later; replicas 1 makes them plain again.
 * Instances created on demand (dynamic MIG) are always plain. -1 with err on bad input. */
int model_gpu_share_mig_profile(model_gpu *g, int profile, model_gpu_mode how, int replicas, char *err,
                                size_t errlen);
/* Whether some instance of the GPU (or of any GPU of the node) carries replicas. */
bool model_gpu_mig_layered(const model_gpu *g);
bool model_node_mig_layered(const model_node *n);
void model_node_free(model_node *n);
/* A deep copy with room for MODEL_MAX_GPUS GPUs (it may get more: DRA merges add some). */
model_node *model_node_clone(const model_node *n);
/* A deep copy with room for its GPUs only (and without local_product unless a GPU uses it), for a
 * model that is kept and gets no more GPUs (the extender's cache): model_node_add_gpu and
 * model_node_add_dra refuse it; merge into a clone instead. NULL when out of memory. */
model_node *model_node_compact(const model_node *n);
/* Give back the allocation table once nothing is allocated (it grows with the pods a node holds at once
 * and would otherwise stay at its largest on every node a pod ever visited). */
void model_node_trim(model_node *n);

/* Build from a Node object. Returns NULL (with err) only if the object is not a Node
 * with a name; a node whose labels cannot be trusted is returned with reason set and
 * takes no GPU pods. A node with no GPUs has ngpus == 0 and an empty reason. */
model_node *model_node_from_json(const cJSON *node, const model_catalog *cat, char *err, size_t errlen);
model_node *model_node_from_json_text(const char *json, size_t len, const model_catalog *cat, char *err,
                                      size_t errlen);

/* Free capacity, for reports and policies. */
int model_gpu_free_memory(const model_gpu *g);
int model_gpu_free_compute(const model_gpu *g);   /* permille */
int model_gpu_free_replicas(const model_gpu *g);
bool model_gpu_idle(const model_gpu *g);          /* no grant at all */
/* Whether a product can serve MPS shares with per-client limits: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
 * the pinned memory limit per client came with Volta, so compute capability 7.0 or later, as the
 * catalog (or, for a model it does not know, GFD's nvidia.com/gpu.compute.major/minor labels) says;
 * unknown is no. */
static inline bool model_product_mps_capable(const model_gpu_product *p) {
    return p && p->mps_capable && p->cc_major >= 7;
}
static inline bool model_gpu_mps_capable(const model_gpu *g) { return model_product_mps_capable(g->product); }
/* Time-sliced soft shares on a WHOLE-mode GPU: holders other than a whole-GPU holder and its MPS
 * clients (the soft-share mode follows from the holders). */
static inline int model_gpu_timeslice_shares(const model_gpu *g) {
    return g->exclusive_holder >= 0 ? 0 : g->nholders - g->mps_clients;
}

/* Check every accounting invariant (usage == sum of live grants, nothing over
 * capacity, MIG layout valid, holders consistent, MPS soft shares only on unshared GPUs of
 * compute capability 7.0 or later, at most mps_max_clients of them, never next to time-sliced
 * soft shares, all of one uid). false + why on a violation. */
bool model_node_check(const model_node *n, char *why, size_t whylen);

const char *model_gpu_mode_name(model_gpu_mode m);

/* Whether a request may use this GPU at all: a claim (via_dra) only a GPU DRA publishes, a device-plugin
 * request only one the device plugin hands out. Every GPU qualifies on a node without DRA. */
static inline bool model_gpu_reachable(const model_gpu *g, const model_request *r) {
    return r->via_dra ? g->dra && g->memory_mib >= r->dra_min_memory_mib : !g->dra_only;
}

#endif
