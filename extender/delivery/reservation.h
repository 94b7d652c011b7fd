/* reservation.h -- the reservation controller: makes every soft share's logical GPU real on the stock
 * NVIDIA device plugin. For each unit (node, GPU, and the MIG instance or replica on it) that carries
 * soft shares it keeps exactly one reservation pod (tessera-reserve, asking the plugin for that unit),
 * and once the pod publishes the UUID it was given, writes each share's delivery ConfigMap.
 *
 * Level-triggered: a worker thread compares what the API objects say (reservation pods, share pods and
 * their tessera.io/assignment, seen through the same watch events as ext_state) with what should be,
 * and acts: create a missing reservation, write a missing or stale ConfigMap, move the waiting shares
 * of a refused (or timed-out) reservation to another idle GPU of the node (patching their assignment
 * and their count of refusals), give up on them with an Event (deleting those a controller owns, so
 * they are re-created and re-scheduled; retrying bare ones with backoff), warn about (and delete if
 * owned) started shares whose reservation went away, and delete a reservation that had no tenant for
 * the grace period. A node whose GPUs cannot be read is left alone. Nothing lives only in memory: after
 * a restart the same pass rebuilds everything from the API (in-memory bits are only "Event already
 * emitted", "ConfigMap already written", retry backoffs, attempt names and tombstones of deleted
 * reservations, all of which may be lost safely).
 *
 * Invariants: never two live reservations (not Failed, not being deleted) for one unit (names are
 * deterministic per unit and attempt, the table is checked first, a duplicate is deleted); a share's
 * ConfigMap names exactly the UUID its reservation holds.
 *
 * It runs only once ext_state is synced and, with leader election, only on the holder of the Lease once it
 * may act (ext_leader_may_act: relisted after a takeover). The Lease is held at all times, whether or not
 * anything is being scheduled (leader.h, "Who campaigns"), so delivery, release after the grace, timeouts,
 * refusals, lost GPUs and orphans make progress in an idle cluster and resume after a replica is lost.
 * No HTTP call is made under the state lock or the controller's own lock; the verbs never wait for it.
 */
#ifndef EXT_RESERVATION_H
#define EXT_RESERVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "extender/base/events.h"
#include "kube/client.h"
#include "extender/base/leader.h"
#include "extender/mirror/state.h"

typedef struct ext_rsv_config {
    char ns[64];          /* the reservation namespace (default $POD_NAMESPACE, else "tessera") */
    char mps_ns[64];      /* where the reservations of MPS GPUs live, which run the GPU's MPS control daemon as
                           * root with host directories (default "tessera-node", Pod Security privileged) */
    char image[512];      /* tessera-reserve's image; "" = the extender's own, read from its Pod at start
                           * ($POD_NAMESPACE/$POD_NAME: the container named tessera-extender, in
                           * spec.initContainers (deploy/'s native sidecar) or spec.containers; never another
                           * container's). Unknown: said in the log, /readyz (warning reserve-image) and an
                           * Event on our Pod, and no reservation is created */
    int grace_ms;         /* a reservation without tenants is deleted after this long (default 30000) */
    int timeout_ms;       /* a reservation that has published no UUID this long after its creation (image
                           * pull failing, tessera-reserve crashing or refused its PATCH) is treated as
                           * refused (default 300000, --reservation-timeout) */
    int retry_ms;         /* a share given up and left pending (no controller) is tried again after this,
                           * doubling up to 10 minutes (default 30000) */
    int max_attempts;     /* reservations refused under one share before it is given up (default 3);
                           * a tessera.io/reserve-error gives up at once (the node's setup, not the GPU) */
    int tick_ms;          /* reconcile at least this often (default 1000) */
    int request_timeout_ms; /* one API call (default 5000) */
} ext_rsv_config;

void ext_rsv_config_defaults(ext_rsv_config *cfg);

typedef struct ext_rsv ext_rsv;

/* st, k (not owned) must outlive ext_rsv_free; ev and l may be NULL (no Events; no election). */
ext_rsv *ext_rsv_new(const ext_rsv_config *cfg, ext_state *st, kube_client *k, ext_events *ev, ext_leader *l, char *err,
                     size_t errlen);
/* The image of tessera's own container, for the webhook's tessera-cuda-shim init container: the one the
 * reservation pods run (cfg.image, or read from our own Pod at start). Until the started worker's first
 * try to read our Pod concludes, waits for it (at most 3 s). false with why while it is not known (the
 * first read failed or is still in flight, or it cannot be known: why says which). Any thread. */
bool ext_rsv_image(ext_rsv *r, char *buf, size_t len, char *why, size_t whylen);

/* Start the worker thread. */
int ext_rsv_start(ext_rsv *r, char *err, size_t errlen);
/* Stop the worker (an API call in flight finishes first); the tables still take events, so this comes
 * before the leader, the Events queue and the client are freed, and ext_rsv_free after the client (whose
 * watch threads call ext_rsv_on_event). NULL is fine. */
void ext_rsv_stop(ext_rsv *r);
/* ext_rsv_stop, then free. NULL is fine. */
void ext_rsv_free(ext_rsv *r);

/* The kube_client handler (user is the ext_rsv), called after ext_state_on_event with the same events:
 * keeps the tables of reservation pods and share pods and wakes the worker. */
void ext_rsv_on_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj);

/* /debug/state: adds "reservations": [{node, gpu, unit, name, namespace, mps, uuid, tenants: ["ns/name"],
 * state: pending|ready|refused|releasing, age_s, waiting}] (waiting: why a pending one has no UUID yet, its
 * container's "reason: message", e.g. ImagePullBackOff, with the last exit of a crash loop; "" when none;
 * the view of this replica's last pass), "shares": [{pod: "ns/name", node, compute_sharing: timeslice|mps,
 * uid (mps), configmap, uuids, state: waiting|delivered|failed|not-mutated, enforcement (the line of its
 * ConfigMap, or what it will be), problem ("" or why it is not enforced)}] and "reservation_controller":
 * {active, reserve_image, reserve_image_problem}. */
void ext_rsv_debug(ext_rsv *r, cJSON *out);

typedef enum ext_rsv_state { EXT_RSV_PENDING = 0, EXT_RSV_READY, EXT_RSV_REFUSED, EXT_RSV_RELEASING, EXT_RSV_NSTATES } ext_rsv_state;
typedef enum ext_rsv_op { EXT_RSV_OP_CREATE = 0, EXT_RSV_OP_DELETE, EXT_RSV_OP_MOVE, EXT_RSV_OP_CONFIGMAP, EXT_RSV_NOPS } ext_rsv_op;
const char *ext_rsv_state_name(ext_rsv_state s);
const char *ext_rsv_op_name(ext_rsv_op o);

typedef struct ext_rsv_stats {
    int reservations[EXT_RSV_NSTATES];      /* gauge: reservation pods by state */
    uint64_t ops[EXT_RSV_NOPS][2];          /* counters: [op][0] ok, [op][1] error */
    uint64_t passes;                        /* reconcile passes run */
} ext_rsv_stats;

void ext_rsv_get_stats(ext_rsv *r, ext_rsv_stats *out);

#endif
