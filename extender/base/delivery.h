/* delivery.h -- the names every part of soft-share delivery agrees on (the webhook, the reservation
 * controller, tessera-reserve, deploy/), and the pure functions that spell them: a reservation pod's
 * name and the device-plugin resource it asks for, a delivery ConfigMap's name and its data.
 * The plan of issue 11 fixes every string here; change one and every part must follow.
 */
#ifndef EXT_DELIVERY_H
#define EXT_DELIVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "model/node.h"

/* --soft-share-delivery: who makes a share's GPU real on the node. */
typedef enum ext_delivery_mode {
    EXT_DELIVERY_NONE = 0,        /* accounting only: the node side delivers shares another way */
    EXT_DELIVERY_RESERVATION      /* tessera: reservation pods + per-pod ConfigMaps */
} ext_delivery_mode;
/* "reservation" | "none" -> mode; -1 if neither. */
int ext_delivery_mode_parse(const char *s, ext_delivery_mode *out);
const char *ext_delivery_mode_name(ext_delivery_mode m);

/* The marker extended resource the webhook adds to annotation-only soft shares (ignoredByScheduler). */
#define EXT_DLV_MARKER_RESOURCE "tessera.io/share"

/* ------------------------------------------------------------------ share pods and their ConfigMap */
#define EXT_DLV_ANN_DELIVERY   "tessera.io/delivery"   /* pod annotation: the delivery ConfigMap's name */
#define EXT_DLV_CM_PREFIX      "tessera-gpu-"          /* + the admission request's uid, lowercased */
#define EXT_DLV_LABEL_PART_OF  "app.kubernetes.io/part-of"
#define EXT_DLV_PART_OF        "tessera"
#define EXT_DLV_LABEL_DELIVERY "tessera.io/delivery"   /* value "true" on delivery ConfigMaps */

/* ConfigMap data keys (environment variable names). */
#define EXT_DLV_ENV_VISIBLE      "NVIDIA_VISIBLE_DEVICES"
#define EXT_DLV_ENV_CAPS         "NVIDIA_DRIVER_CAPABILITIES"
#define EXT_DLV_ENV_UUID         "TESSERA_GPU_UUID"
#define EXT_DLV_ENV_MEMORY       "TESSERA_GPU_MEMORY_MIB"
#define EXT_DLV_ENV_COMPUTE      "TESSERA_GPU_COMPUTE_PERCENT"
#define EXT_DLV_ENV_HAMI_MEMORY  "CUDA_DEVICE_MEMORY_LIMIT"
#define EXT_DLV_ENV_HAMI_SM      "CUDA_DEVICE_SM_LIMIT"
#define EXT_DLV_ENV_XLA_FRACTION "XLA_PYTHON_CLIENT_MEM_FRACTION"
#define EXT_DLV_ENV_TF_GROWTH    "TF_FORCE_GPU_ALLOW_GROWTH"
#define EXT_DLV_CAPS_VALUE       "compute,utility"
/* What enforces the share, one line (ext_delivery_enforcement); the same text goes into the TesseraGPUDelivered
 * Event and /debug/state. Informs only: nothing reads it to enforce anything. */
#define EXT_DLV_ENV_ENFORCEMENT  "TESSERA_ENFORCEMENT"
/* MPS shares (tessera.io/compute-sharing: mps): the client side of the daemon their reservation runs. */
#define EXT_DLV_ENV_MPS_PIPE     "CUDA_MPS_PIPE_DIRECTORY"
#define EXT_DLV_ENV_MPS_LOG      "CUDA_MPS_LOG_DIRECTORY"
#define EXT_DLV_ENV_MPS_THREADS  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#define EXT_DLV_ENV_MPS_PINNED   "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"

/* ------------------------------------------------------------------ what the webhook adds to a share pod
 * (round 4, issue 27; deploy/README.md "What the container gets"). The interposer libtessera-cuda.so is
 * copied by the first init container into a per-pod emptyDir and named in /etc/ld.so.preload, which glibc
 * honours for every dynamically linked process, whatever the image's ENV or a shell does. The application
 * containers mount that emptyDir READ-ONLY (a process of the pod must not replace the library or the preload
 * list for the pod's other processes); what they write, the pod's memory ledger, is a second emptyDir mounted
 * read-write over its state/ directory, and the share's limits come from the delivery ConfigMap mounted
 * read-only over its config/ directory (a process can drop an environment variable, not a mounted file).
 * tessera-reserve --install-shim makes both directories: the runtime cannot create a mount point inside a
 * read-only mount. */
#define EXT_DLV_SHIM_VOLUME      "tessera-cuda"                 /* emptyDir {}: the library, ld.so.preload */
#define EXT_DLV_SHIM_CONTAINER   "tessera-cuda-shim"            /* first init container, tessera's own image */
#define EXT_DLV_SHIM_DIR         "/opt/tessera"                 /* the emptyDir: read-write in the shim container
                                                                 * only, read-only in every other */
#define EXT_DLV_SHIM_PRELOAD     "/etc/ld.so.preload"           /* subPath ld.so.preload of the emptyDir */
#define EXT_DLV_SHIM_PRELOAD_SUB "ld.so.preload"
#define EXT_DLV_SHIM_STATE_VOLUME "tessera-cuda-state"          /* emptyDir {}: the pod's memory ledger */
#define EXT_DLV_SHIM_STATE_DIR   "/opt/tessera/state"           /* read-write, every container but the shim's */
#define EXT_DLV_SHIM_CONFIG_VOLUME "tessera-cuda-config"        /* configMap: the pod's delivery ConfigMap */
#define EXT_DLV_SHIM_CONFIG_DIR  "/opt/tessera/config"          /* read-only, every container but the shim's */
#define EXT_DLV_SHIM_INSTALL     "--install-shim"               /* tessera-reserve --install-shim /opt/tessera */
#define EXT_DLV_SHIM_UID         65532                          /* the image's nonroot user */
/* MPS shares also get the node's MPS directory (the daemon's pipe and log directories, per GPU UUID, beneath
 * it) and its shared memory, as hostPath volumes: what every MPS client needs of its daemon. */
#define EXT_DLV_MPS_ROOT         "/run/tessera/mps"
#define EXT_DLV_MPS_SHM          "/run/tessera/mps/shm"         /* at /dev/shm, in the daemon and its clients */
#define EXT_DLV_MPS_VOLUME       "tessera-mps"
#define EXT_DLV_MPS_SHM_VOLUME   "tessera-mps-shm"
#define EXT_DLV_DEV_SHM          "/dev/shm"

/* "tessera-gpu-<uid lowercased>" into buf (the webhook names the ConfigMap after its admission request);
 * characters a name cannot hold become '-', cut to 253. */
void ext_delivery_cm_name(const char *admission_uid, char *buf, size_t len);

/* What one share is given on one reserved unit. */
typedef struct ext_delivery_unit {
    const char *uuid;          /* the reservation's tessera.io/gpu-uuid */
    int memory_mib;            /* charged by the grant */
    int compute_permille;      /* charged by the grant */
    int device_memory_mib;     /* what the container sees: the GPU's memory, or the MIG instance's */
    bool mig;                  /* the unit is a MIG instance (or a replica of one): the hardware fences it */
    bool replica;              /* the unit is a time-slice replica (of a GPU, or of a MIG instance) */
    const char *mps_pipe;      /* an MPS reservation's tessera.io/mps-pipe-directory and -log-directory (NULL or */
    const char *mps_log;       /* not under /run/tessera/mps: ext_delivery_mps_dir's) */
} ext_delivery_unit;

/* How a share is served, besides its units: what the ConfigMap and the enforcement line say. */
typedef struct ext_delivery_share {
    bool mps;                  /* tessera.io/compute-sharing: mps: a client of its reservation's MPS daemon */
    bool shim;                 /* the pod carries the tessera-cuda-shim init container and the preload mount
                                * (the webhook adds them; a pod admitted without them has neither) */
    bool mps_mounts;           /* mps: the pod mounts the MPS directory and its shared memory */
} ext_delivery_share;

/* The enforcement line of a share on units u[0..n) into buf, e.g.
 *   "memory=libtessera-cuda compute=time-slicing (not capped)"
 *   "memory=mps-pinned-limit+libtessera-cuda compute=mps-active-threads"
 *   "memory=mig-instance+libtessera-cuda compute=mig-instance"
 * and, for what does not hold, why ("memory=not enforced (...)"). Never a '%' sign (Event text). */
void ext_delivery_enforcement(const ext_delivery_unit *u, int n, const ext_delivery_share *s, char *buf, size_t len);

/* The ConfigMap's data object (caller deletes) for a share given units u[0..n) (n >= 1; a multi-GPU
 * fraction has one per GPU), served as s says (NULL: a time-sliced share with the shim): UUIDs
 * comma-joined, amounts per GPU (the smallest, should they differ).
 *   NVIDIA_VISIBLE_DEVICES / TESSERA_GPU_UUID  the UUID(s)
 *   NVIDIA_DRIVER_CAPABILITIES                 compute,utility
 *   TESSERA_GPU_MEMORY_MIB                     MiB, decimal (libtessera-cuda's limit)
 *   TESSERA_GPU_COMPUTE_PERCENT                permille / 10, rounded up
 *   TESSERA_ENFORCEMENT                        ext_delivery_enforcement's line
 *   CUDA_DEVICE_MEMORY_LIMIT                   "<MiB>m" (HAMi-core, for images that preload it)
 *   CUDA_DEVICE_SM_LIMIT                       the same percent (HAMi-core)
 *   XLA_PYTHON_CLIENT_MEM_FRACTION             memory / device memory, rounded DOWN to 2 decimals
 *                                              (at least 0.01), e.g. "0.25"
 *   TF_FORCE_GPU_ALLOW_GROWTH                  "true"
 * and with s->mps (one unit only: an MPS client talks to one daemon):
 *   CUDA_MPS_PIPE_DIRECTORY                    the unit's mps_pipe, else /run/tessera/mps/<UUID>/pipe
 *   CUDA_MPS_LOG_DIRECTORY                     the unit's mps_log, else /run/tessera/mps/<UUID>/log
 *   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE          the compute percent, rounded up, at least 1
 *   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT           "0=<MiB>M": device ordinal 0 (the one device the client
 *                                              sees), NVIDIA's "<ordinal>=<limit>" list
 * NULL on bad input (n < 1, a unit without uuid, an MPS share on more than one unit) or out of memory. */
cJSON *ext_delivery_data(const ext_delivery_unit *u, int n, const ext_delivery_share *s);
/* The MPS pipe (log: false) or log directory of the daemon of GPU uuid, as clients and tessera-reserve --mps
 * name it: /run/tessera/mps/<UUID>/pipe | log. */
void ext_delivery_mps_dir(const char *uuid, bool log, char *buf, size_t len);
/* A directory a share pod can reach: absolute, under /run/tessera/mps/ (what the webhook mounts), no "..". */
bool ext_delivery_mps_dir_ok(const char *path);

/* ------------------------------------------------------------------ reservation pods */
#define EXT_RSV_DEFAULT_NS       "tessera"
#define EXT_RSV_LABEL_APP        "app.kubernetes.io/name"
#define EXT_RSV_APP              "tessera-reserve"
#define EXT_RSV_LABEL            "tessera.io/reservation"          /* value "true" */
#define EXT_RSV_ANN_NODE         "tessera.io/reservation-node"
#define EXT_RSV_ANN_GPU          "tessera.io/reservation-gpu"      /* model_gpu.index, decimal */
#define EXT_RSV_ANN_UNIT         "tessera.io/reservation-unit"     /* gpu | mig:<profile>@<start> | mig:<profile>@<start>/r<r> | replica:<r> */
#define EXT_RSV_ANN_UUID         "tessera.io/gpu-uuid"             /* written by tessera-reserve */
#define EXT_RSV_ANN_ERROR        "tessera.io/reserve-error"        /* written by tessera-reserve */
/* On a share pod, written by tessera with each move: how many reservations were refused under it, so
 * the bound on attempts holds across moves and restarts. */
#define EXT_RSV_ANN_REFUSALS     "tessera.io/reservation-refusals"
#define EXT_RSV_PRIORITY_CLASS   "tessera-reservation"
#define EXT_RSV_SERVICE_ACCOUNT  "tessera-reserve"
#define EXT_RSV_CONTAINER        "reserve"
#define EXT_RSV_COMMAND          "/usr/local/bin/tessera-reserve"
#define EXT_RSV_SELF_CONTAINER   "tessera-extender"   /* the extender's container: its image is tessera-reserve's */
/* The reservation of a GPU whose shares are MPS clients runs the GPU's MPS control daemon (tessera-reserve
 * --mps). It needs root and host directories, which the tessera namespace (Pod Security restricted) forbids:
 * it lives in a namespace of its own, Pod Security privileged (deploy/namespace.yaml). */
#define EXT_RSV_DEFAULT_MPS_NS   "tessera-node"
#define EXT_RSV_ANN_MPS          "tessera.io/reservation-mps"      /* value "true" on an MPS reservation */
#define EXT_RSV_MPS_FLAG         "--mps"
/* Written by tessera-reserve --mps with the UUID: the daemon's directories as the share pods see them. */
#define EXT_RSV_ANN_MPS_PIPE     "tessera.io/mps-pipe-directory"
#define EXT_RSV_ANN_MPS_LOG      "tessera.io/mps-log-directory"

/* Events on share pods. */
#define EXT_DLV_EV_PENDING     "TesseraGPUPending"
#define EXT_DLV_EV_DELIVERED   "TesseraGPUDelivered"
#define EXT_DLV_EV_REFUSED     "TesseraGPURefused"
#define EXT_DLV_EV_UNAVAILABLE "TesseraGPUUnavailable"
#define EXT_DLV_EV_NOT_MUTATED "TesseraGPUNotMutated"
#define EXT_DLV_EV_LOST        "TesseraGPULost"              /* a started share's reservation went away */
#define EXT_DLV_EV_CONFLICT    "TesseraGPUDeliveryConflict"  /* its ConfigMap name belongs to another pod */
#define EXT_DLV_EV_ENFORCEMENT "TesseraGPUEnforcementFailed" /* its tessera-cuda-shim init container fails */

/* The unit a grant names on its GPU: "gpu", "mig:<profile>@<start>" (catalog spelling),
 * "mig:<profile>@<start>/r<r>" (a replica of a time-sliced instance) or "replica:<r>".
 * g is n->gpus[gr->gpu]. */
void ext_rsv_unit_of(const model_gpu *g, const model_grant *gr, char *buf, size_t len);

/* tessera-rsv-<node cut to 30, lowercased, other than [a-z0-9-] -> '-'>-<8 hex FNV-1a of node>-g<gpu>
 * [-m<profile's letters and digits>-<start>[-r<replica>] | -r<replica>]-<attempt>. unit as ext_rsv_unit_of writes it.
 * -1 if unit is malformed. */
int ext_rsv_pod_name(const char *node, int gpu_index, const char *unit, int attempt, char *buf, size_t len);
/* The attempt number at the end of a reservation pod name, or -1. */
int ext_rsv_name_attempt(const char *name);

/* The device-plugin resource a reservation of unit (on GPU g of node n) asks for: nvidia.com/gpu for a
 * whole-mode GPU, MIG single and a time-slice replica on a node that does not rename; nvidia.com/gpu.shared
 * for a replica on a renamed node; nvidia.com/mig-<profile, '+' written '.'> under MIG mixed. -1 with err
 * when the unit cannot be delivered by a reservation (an MPS replica needs the plugin's daemon mounts). */
int ext_rsv_resource(const model_node *n, const model_gpu *g, const model_grant *gr, char *buf, size_t len, char *err,
                     size_t errlen);

#endif
