/* dra.h -- the extender's cache of Dynamic Resource Allocation objects (ResourceSlices, ResourceClaims,
 * DeviceClasses of resource.k8s.io/v1), kept beside the state's nodes and pods (state.h owns one and calls it
 * under its lock). It answers three questions by indexing the objects and asking model/dra.h, which holds
 * the rules (the simulator uses the same ones) and decides about placement:
 *   - which GPU devices a node publishes (model_dra_merge_slices: newest generation of each pool; incomplete
 *     pools said so),
 *   - which devices allocated claims hold on a node (a claim holds its devices once, however many pods share
 *     it through reservedFor, from allocation until it is deallocated or deleted; admin access holds nothing),
 *   - what a pod's claims ask for (its direct claims, and those made from its templates, found through
 *     status.resourceClaimStatuses).
 */
#ifndef EXT_DRA_H
#define EXT_DRA_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#include "kube/client.h"
#include "model/catalog.h"
#include "model/dra.h"
#include "model/node.h"

/* The annotation bind puts on a DRA pod's Binding: the devices its claims were allocated. */
#define EXT_ANN_DRA_ALLOCATION "tessera.io/dra-allocation"

typedef struct ext_dra ext_dra;

ext_dra *ext_dra_new(void);
void ext_dra_free(ext_dra *d);

/* Called for each node whose DRA view changed (devices, or the claims that hold them). */
typedef void (*ext_dra_touch_fn)(void *user, const char *node);

/* One event of a DRA kind (RELIST/SYNCED included: what a relist does not mention is dropped at SYNCED). */
void ext_dra_event(ext_dra *d, kube_kind kind, kube_event ev, const cJSON *obj, ext_dra_touch_fn touch,
                   void *user);

/* Whether the first list of every DRA kind has been delivered (or answered 404). */
bool ext_dra_synced(const ext_dra *d);

/* Whether some ResourceSlice names the node: only then can ext_dra_merge or ext_dra_apply_claims change its model
 * (a claim holds devices only on a node whose slices publish them). */
bool ext_dra_node_has_slices(const ext_dra *d, const char *node);

/* Merge the node's published GPUs into m (model_dra_merge_slices), noting incomplete pools in m->dra_note. */
void ext_dra_merge(const ext_dra *d, model_node *m, const model_catalog *cat);

/* Hold, on m, the devices allocated claims hold there (model_dra_account_claim): one allocation per claim,
 * uid "claim:<claim uid>".
 * A device tessera cannot place (unknown, or already held) is logged and reported in m->dra_note. Returns
 * the number of claims applied. */
int ext_dra_apply_claims(const ext_dra *d, model_node *m);

/* What the pod's claims ask for (model_dra_request over every claim the pod names). A claim not seen yet is
 * UNJUDGED ("claim ns/name is not in tessera's cache yet"). claim (may be NULL) gets the name of the claim whose
 * constraints out carries (out->dra_nconstraints > 0; model_dra_request judges them for one claim only), for
 * the reasons that name it; "" otherwise. */
model_dra_verdict ext_dra_pod_request(const ext_dra *d, const cJSON *pod, model_request *out, char *why,
                                      size_t whylen, char *claim, size_t claimlen);

/* Every claim in the cache whose request tessera judges, as the request (model_dra_request), to fn: the GPU work
 * claims carry, for the target workload built from the cache (workload.h). The claims kube-scheduler makes for
 * pods' extended resources are left out: their pods ask nvidia.com/gpu and are counted as pods. Returns how
 * many. */
typedef void (*ext_dra_request_fn)(void *user, const model_request *r);
int ext_dra_each_request(const ext_dra *d, ext_dra_request_fn fn, void *user);

/* ---- extended resources backed by DRA (Kubernetes 1.34+: DeviceClass spec.extendedResourceName). On a node
 * whose device plugin does not advertise nvidia.com/gpu (model_dra_extended_on), kube-scheduler serves a pod's
 * nvidia.com/gpu: N from the class that names it, through a claim it makes for the pod in PreBind (annotated
 * EXT_DRA_EXTENDED_ANNOTATION, owned by the pod, named in its status.extendedResourceClaimStatus). That claim
 * holds the devices like any claim; the pod holds nothing itself. */
#define EXT_DRA_GPU_RESOURCE "nvidia.com/gpu"

/* The DeviceClass whose spec.extendedResourceName is resource; NULL when none. */
const char *ext_dra_class_for_resource(const ext_dra *d, const char *resource);

/* A device-plugin request (nvidia.com/gpu: N) as DRA serves it: model_dra_extended_request with the class that
 * maps nvidia.com/gpu. false when no class maps it, or its selectors are beyond what tessera judges, or as
 * model_dra_extended_request says. */
bool ext_dra_extended_request(const ext_dra *d, const model_request *pod_req, model_request *out);

/* Whether the pod's GPUs are already the claim's kube-scheduler made for its extended resources
 * (status.extendedResourceClaimStatus): the cache accounts that claim, not the pod. */
bool ext_dra_pod_extended(const cJSON *pod);

/* Whether the pod names any ResourceClaim (directly or through a template). */
bool ext_dra_pod_has_claims(const cJSON *pod);

/* ---- bind's record: exactly the devices DynamicResources allocated to the pod's claims. It writes them in
 * PreBind, immediately before it calls the extender's bind, so the watch may not have shown them yet: bind
 * asks the cache (ext_dra_bind_record), waits on the watch for a while, then reads the API
 * (ext_dra_record_from_api); it never records part of them. */

/* The annotation kube-scheduler puts on the claim it makes for a pod's extended resources (DeviceClass
 * spec.extendedResourceName; the claim's name is in the pod's status.extendedResourceClaimStatus). */
#define EXT_DRA_EXTENDED_ANNOTATION "resource.kubernetes.io/extended-resource-claim"
#define EXT_DRA_MAX_POD_CLAIMS 128   /* claims of one pod the record follows (the API allows 128) */
#define EXT_DRA_NOTES 4096           /* pods remembered between filter and bind */

/* The names of the claims whose devices a pod's bind records: spec.resourceClaims (through
 * status.resourceClaimStatuses for templates) and status.extendedResourceClaimStatus.resourceClaimName.
 * Their count (names borrowed from pod), or -1 with missing saying what is not there yet. */
int ext_dra_pod_claim_names(const cJSON *pod, const char **names, int max, char *missing, size_t mlen);

/* Remember which claims the pod names (filter and prioritize call it): bind has only the pod's UID. */
void ext_dra_note_pod(ext_dra *d, const cJSON *pod);
/* Whether a pod with claims was noted (its bind records them even when they asked for nothing new, a shared
 * claim allocated before). */
bool ext_dra_noted(const ext_dra *d, const char *pod_uid);

/* The record "<claim>:<pool>/<device>,..." of the pod's claims from the cache (*text malloc'd; "" when the
 * claims hold no device) -- with want_extended also the claim kube-scheduler made for its extended resources
 * (annotated, reserved for the pod). 1 complete; 0 when an allocation is not seen yet (missing says which);
 * -1 when the pod was not noted (missing says so) or out of memory. */
int ext_dra_bind_record(const ext_dra *d, const char *ns, const char *pod_uid, bool want_extended, char **text,
                        char *missing, size_t mlen);

/* The same from the API: GET the pod (its claims' names, the extended-resource claim's from its status), then
 * each claim. 1 with *text, or -1 with missing saying what was not there (a claim not allocated in the API
 * either, the pod replaced, an API error). No lock needed: it reads no cache. */
int ext_dra_record_from_api(kube_client *k, const char *ns, const char *name, const char *pod_uid, bool want_extended,
                            int timeout_ms, char **text, char *missing, size_t mlen);

/* For /debug/state: slices, pools, claims and what each holds. */
cJSON *ext_dra_debug(const ext_dra *d);

#endif
