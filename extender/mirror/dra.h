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

#include "extender/mirror/kube.h"
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
void ext_dra_event(ext_dra *d, ext_kube_kind kind, ext_kube_event ev, const cJSON *obj, ext_dra_touch_fn touch,
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
 * UNJUDGED ("claim ns/name is not in tessera's cache yet"). */
model_dra_verdict ext_dra_pod_request(const ext_dra *d, const cJSON *pod, model_request *out, char *why,
                                      size_t whylen);

/* Whether the pod names any ResourceClaim (directly or through a template). */
bool ext_dra_pod_has_claims(const cJSON *pod);

/* The devices allocated to the claims of namespace ns reserved for pod uid (status.reservedFor, which
 * DynamicResources writes before the bind), for the Binding's annotation: "claim:pool/device,..." ("" when
 * none is known yet). */
void ext_dra_allocation_for(const ext_dra *d, const char *ns, const char *pod_uid, char *buf, size_t len);

/* For /debug/state: slices, pools, claims and what each holds. */
cJSON *ext_dra_debug(const ext_dra *d);

#endif
