/* webhook.h -- tessera's mutating admission webhook, from AdmissionReview body to reply
 * body (no HTTP here: http.c serves it at POST /webhook/mutate).
 *
 * A soft share (a pod of one of tessera's schedulers whose normalised request is a
 * fraction: model_request_from_pod gives MODEL_REQ_FRACTION) gets, with delivery
 * "reservation", the annotation tessera.io/delivery = its delivery ConfigMap's name
 * (tessera-gpu-<request uid, lowercased>, or the name the annotation already holds) and
 * envFrom that ConfigMap on every container and init container; with either delivery the
 * marker resource tessera.io/share: "1" in requests and limits of the first app container
 * (so kube-scheduler calls the extender for it: managedResources, ignoredByScheduler) and
 * spec.runtimeClassName when configured and unset. Only what is missing is added, and
 * nothing depends on time or chance: a replayed review gets the same patch, a review of the
 * mutated pod an empty one. Under delivery "reservation" a soft share also gets what enforces it
 * (delivery.h, round 4):
 *   - volume tessera-cuda (emptyDir) and, FIRST in spec.initContainers, the init container
 *     tessera-cuda-shim (tessera's own image, from image_fn or image; `tessera-reserve --install-shim
 *     /opt/tessera`, restricted-clean securityContext, cpu 10m / memory 16Mi), which installs
 *     libtessera-cuda.so and ld.so.preload into the volume;
 *   - on every other container and init container: tessera-cuda at /opt/tessera (read-write: the per-pod
 *     accounting lives there) and its ld.so.preload at /etc/ld.so.preload (subPath, read-only);
 *   - an MPS share (tessera.io/compute-sharing: mps) also the hostPath volumes tessera-mps
 *     (/run/tessera/mps, at the same path) and tessera-mps-shm (/run/tessera/mps/shm, at /dev/shm) on
 *     those containers.
 * A shim container that is not first or differs from what tessera would add (copied from another pod,
 * an older image) is removed and added again first. A pod of tessera's schedulers that asks for no GPU resource but names
 * ResourceClaims (spec.resourceClaims: DRA) gets the marker alone, for the same reason.
 * Every GPU pod of tessera's schedulers (soft shares, whole GPUs, replicas, MIG) also gets the
 * accounting resources tessera.io/gpu-milli and tessera.io/gpu-memory-mib, at exactly
 * model_charge_request's values, in requests and limits of its first app container (a differing
 * value there is replaced), for ResourceQuota and Kueue to count (README, Quotas).
 *
 * Answers (AdmissionReview admission.k8s.io/v1, the request's uid echoed):
 *   200 allowed, with patchType JSONPatch and patch (base64) when something was added;
 *   200 allowed, unchanged: not a Pod, not CREATE, another scheduler, no GPU asked;
 *   200 allowed, with warnings: an MPS share whose namespace could not be read (its Pod Security level
 *       unknown: the API server's own Pod Security admission still refuses hostPath where it is enforced);
 *   200 allowed:false with status {code 400, message}: a pod of tessera's schedulers whose GPU
 *       request is invalid or fits no GPU of the catalog; under reservation delivery also a fraction with
 *       tessera.io/isolation: mps, a container that sets in env a variable the ConfigMap delivers and the
 *       enforcement reads (NVIDIA_VISIBLE_DEVICES, TESSERA_GPU_*, TESSERA_ENFORCEMENT, CUDA_MPS_*,
 *       CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_SM_LIMIT: env beats envFrom), a volume or mount path of the
 *       pod's that tessera's would collide with, a soft share while tessera's own image is not known yet,
 *       and an MPS share in a namespace whose pod-security.kubernetes.io/enforce is baseline or
 *       restricted (they forbid hostPath);
 *   400 {"Error": ...}: not an AdmissionReview v1 (malformed JSON, no request or uid, wrong
 *       types, larger than max_body).
 */
#ifndef EXT_WEBHOOK_H
#define EXT_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "extender/base/delivery.h"
#include "extender/verbs.h"

#define EXT_WEBHOOK_MAX_SCHEDULERS 8
#define EXT_WEBHOOK_DEFAULT_SCHEDULER "tessera-scheduler"
#define EXT_WEBHOOK_PATH "/webhook/mutate"

/* tessera's own image into buf: true, or false with why (not known yet). */
typedef bool (*ext_webhook_image_fn)(void *user, char *buf, size_t len, char *why, size_t whylen);
/* The pod-security.kubernetes.io/enforce label of namespace ns into level ("" when it has none): 0, or -1
 * with why when the namespace cannot be read. */
typedef int (*ext_webhook_ns_level_fn)(void *user, const char *ns, char *level, size_t len, char *why, size_t whylen);

typedef struct ext_webhook_config {
    int nschedulers;                                  /* 0: {"tessera-scheduler"} */
    char schedulers[EXT_WEBHOOK_MAX_SCHEDULERS][64];
    char runtime_class[64];                           /* "" = leave runtimeClassName alone */
    ext_delivery_mode delivery;                       /* --soft-share-delivery (delivery.h) */
    size_t max_body;                                  /* bytes; 0 = 8 MiB */
    const struct model_catalog *catalog;              /* sizes the accounting resources; NULL: compiled-in */
    /* The image of the tessera-cuda-shim init container: image_fn's answer (the reservation controller's, in
     * a cluster: --reserve-image or our own Pod's), else image ("" = unknown: soft shares are refused with
     * why, since a share without its interposer would run unenforced). */
    ext_webhook_image_fn image_fn;
    void *image_user;
    char image[512];
    /* The namespace of an MPS share (NULL: not checked). */
    ext_webhook_ns_level_fn ns_level_fn;
    void *ns_level_user;
} ext_webhook_config;

/* Zeroes cfg: default scheduler, no runtime class, delivery none, 8 MiB. */
void ext_webhook_config_defaults(ext_webhook_config *cfg);
/* --scheduler-name: 0, or -1 with err (too many, too long, empty). The first call replaces
 * the default. */
int ext_webhook_config_add_scheduler(ext_webhook_config *cfg, const char *name, char *err, size_t errlen);
void ext_webhook_mutate(const ext_webhook_config *cfg, const char *body, size_t len, ext_reply *out);

#endif
