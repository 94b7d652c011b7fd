/* state.h -- the extender's cache: every node's GPUs (model_node) and every pod that holds
 * GPU capacity on a node, whoever scheduled it, rebuilt only from API objects (list+watch)
 * or, in standalone mode, from a cluster file. Nothing placement-related is decided here:
 * a pod's GPUs come from its tessera.io/assignment annotation, or else from model_fit.
 *
 * Pod lifecycle in the cache (ext_pod.phase):
 *   PENDING  seen in the API without spec.nodeName, asks for a GPU: known request, holds nothing
 *   BINDING  our bind reserved GPUs on a node and the Binding POST is in flight
 *   ASSUMED  the POST succeeded; held until the watch shows the pod on the node, or it expires
 *   BOUND    the API says spec.nodeName (or standalone mode recorded our bind)
 * Succeeded/Failed pods and deleted pods release everything; terminating pods keep holding
 * until they are deleted. A pod that is on a node but whose GPUs no longer fit there (node
 * relabelled, foreign scheduler over-committing) stays in the cache with overcommitted set,
 * holding nothing, and is reported by metrics and /debug/state rather than dropped.
 *
 * Concurrency: one mutex. Event handlers and bind take it to change state; filter,
 * prioritize and preempt take it to read and never change state. Pointers returned by the
 * lookups below are valid only while the lock is held.
 */
#ifndef EXT_STATE_H
#define EXT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "kube/client.h"
#include "model/catalog.h"
#include "model/fit.h"
#include "model/node.h"
#include "model/request.h"
#include "extender/mirror/holdings.h"
#include "extender/mirror/objects.h"

typedef struct ext_state ext_state;

typedef struct ext_state_config {
    const model_catalog *cat;   /* NULL: the compiled-in catalog */
    bool standalone;            /* binds become BOUND at once; ready after the cluster is loaded */
    int assume_ttl_ms;          /* default 30000 */
    char reservation_ns[64];    /* where tessera's reservation pods live ("" = "tessera"): they are not
                                 * accounted (their tenants are), see pod_event */
    char mps_reservation_ns[64];/* where the reservations of MPS GPUs live ("" = "tessera-node"): the same */
    bool dra;                   /* the DRA kinds are watched: ready also waits for their first lists */
} ext_state_config;

ext_state *ext_state_new(const ext_state_config *cfg);
void ext_state_free(ext_state *st);

/* Standalone mode: nodes from a JSON array of Node objects or a NodeList. Replaces the
 * node set; marks the state ready. -1 with err on malformed input (nothing changed). */
int ext_state_load_cluster(ext_state *st, const char *json, size_t len, char *err, size_t errlen);

/* The kube_client handler: user is the ext_state. Takes the lock itself. */
void ext_state_on_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj);

/* The DRA object cache (dra.h); lock held. Never NULL after ext_state_new. */
struct ext_dra *ext_state_dra(const ext_state *st);

/* Both kinds (and with cfg.dra the DRA kinds) have completed their first list (always true in standalone
 * mode). */
bool ext_state_ready(ext_state *st);

void ext_state_lock(ext_state *st);
void ext_state_unlock(ext_state *st);

/* ------------------------------------------------- reads (lock held) */

const ext_node *ext_state_node(const ext_state *st, const char *name);   /* NULL if unknown */
const ext_pod *ext_state_pod(const ext_state *st, const char *uid);
int ext_state_node_count(const ext_state *st);
const ext_node *ext_state_node_at(const ext_state *st, int i);           /* any order, stable between writes */
size_t ext_state_pod_count(const ext_state *st);
const ext_pod *ext_state_pod_next(const ext_state *st, size_t *it);      /* iterate: it = 0 first */

/* The request of a pod about to be bound: from the cache (a watched pending pod), else from
 * the memo that filter/prioritize fill. 0 and *req, or -1 if the pod was never seen. */
int ext_state_pod_request(ext_state *st, const char *uid, model_request *req);

/* For /debug/state: a pod by UID or "namespace/name", from the cache or the memo. */
int ext_state_find_request(ext_state *st, const char *key, char *uid, size_t uidlen, model_request *req);

/* A copy of the node's model with every listed pod's GPUs released (the caller frees it):
 * what the node would look like after eviction. Unknown UIDs free nothing. */
model_node *ext_state_node_without(const ext_state *st, const ext_node *n, const char *const *uids, int nuids);

typedef struct ext_state_stats {
    int nodes, nodes_unusable, pods, pending, binding, assumed, bound, overcommitted;
    uint64_t expired, relists[2], sweeps[2], events[2];
} ext_state_stats;
void ext_state_get_stats(const ext_state *st, ext_state_stats *out);

/* The node's answer-cache slot (verbs.c owns the contents: one malloc'd block, freed with
 * the node). Lock held; a caller writes only nodes no other thread is looking at. */
struct ext_node_memo **ext_state_node_memo(ext_state *st, const ext_node *n);

/* ------------------------------------------------- the memo (its own lock) */

/* Remember the request of a pod seen in filter/prioritize, so bind can use it when the
 * watch has not (yet) delivered the pod, and always in standalone mode. Bounded (oldest
 * forgotten first); never influences filter or prioritize. */
void ext_state_note_request(ext_state *st, const char *uid, const char *ns, const char *name, const model_request *req);

/* ------------------------------------------------- bind (lock held) */

/* Hold assignment a for the pod on node while its Binding is posted: later filters see it.
 * -1 with err if the pod already holds GPUs or model_assign refuses. */
int ext_state_reserve(ext_state *st, const char *uid, const char *ns, const char *name, const char *node,
                      const model_request *req, const model_assignment *a, char *err, size_t errlen);

/* The reservation controller moved a bound pod's grants (reservation.h): apply the new assignment
 * annotation text now, before the PATCH that writes it, so no bind can take the GPU meanwhile. The
 * watch's MODIFIED with the same text then changes nothing. -1 with err (nothing changed) when the pod
 * is not bound on a known node or the assignment does not decode or fit there. */
int ext_state_reassign(ext_state *st, const char *uid, const char *ann, char *err, size_t errlen);

/* The POST's outcome. ok: the pod becomes ASSUMED (expires after the TTL unless the watch
 * confirms it) or, in standalone mode, BOUND. !ok: the reservation is undone, leaving the
 * pod as it was before (no trace). A watch event that arrived meanwhile wins. */
void ext_state_bind_done(ext_state *st, const char *uid, bool ok);

/* Release assumptions past their deadline (call about once a second). Returns how many. */
int ext_state_expire(ext_state *st, int64_t now_ms);

/* Monotonic clock in ms (the clock deadlines use). */
int64_t ext_now_ms(void);

/* The holdings counters (holdings.h) state.c keeps beside the cache; lock held. */
const ext_holdings_stats *ext_state_holdings_stats(const ext_state *st);

/* ------------------------------------------------- API objects (lock taken inside) */

/* Apply one Node or Pod object as the watch would (ADDED/MODIFIED/DELETED). Exposed for
 * tests and standalone tooling; the kube handler goes through ext_state_on_event. */
void ext_state_apply(ext_state *st, kube_kind kind, kube_event ev, const cJSON *obj);

#endif
