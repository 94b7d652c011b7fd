/* verbs.h -- kube-scheduler's extender verbs (filter, prioritize, bind, preempt) and the
 * /debug/state view, from request body to reply body, on the wire format of
 * k8s/extender-api.md: PascalCase keys, null for unset fields, a bare array for
 * prioritize. No HTTP here (http.c), and no placement logic: feasibility and reasons come
 * from model_fit, scores and choices from policy/.
 *
 * Status codes: a well-formed request gets 200 even when the answer is "no" (the reason is
 * in FailedNodes or Error, where kube-scheduler shows it to people -- through a format string, so
 * no reason or Error carries a '%': text.h); a body that is not
 * the verb's args (malformed or truncated JSON, wrong types, missing fields) gets 400 with
 * {"Error": "..."} -- for filter the whole ExtenderFilterResult with Error set -- and
 * changes nothing. Before the first sync, filter and bind answer 200 with Error set,
 * prioritize and preempt 503.
 */
#ifndef EXT_VERBS_H
#define EXT_VERBS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "extender/base/events.h"
#include "extender/base/leader.h"
#include "extender/mirror/state.h"
#include "policy/policy.h"

#define EXT_DRA_BIND_WAIT_MS 1000

/* Posts the Binding (kube_bind in cluster mode). 0 on success (HTTP 201), -1 with err. */
typedef int (*ext_bind_fn)(void *user, const char *ns, const char *name, const char *uid, const char *node,
                           const cJSON *annotations, char *err, size_t errlen);

typedef enum ext_bind_outcome {
    EXT_BIND_OK = 0,
    EXT_BIND_ALREADY,        /* the pod already sits on that node (a retried bind) */
    EXT_BIND_NO_ROOM,        /* the pod no longer fits the node */
    EXT_BIND_UNKNOWN_POD,
    EXT_BIND_UNKNOWN_NODE,
    EXT_BIND_API_ERROR,      /* the apiserver refused or could not be reached */
    EXT_BIND_NOT_READY,
    EXT_BIND_BAD_REQUEST,
    EXT_BIND_NOT_LEADER,     /* another replica holds the Lease (leader.h); nothing was posted */
    EXT_BIND_DRA_UNSEEN,     /* a claim's allocation was in neither the cache nor the API: nothing was posted */
    EXT_BIND_NOUTCOMES
} ext_bind_outcome;

const char *ext_bind_outcome_name(ext_bind_outcome o);

/* The answer cache: filter's verdict and prioritize's policy result per node, kept for the
 * last request shape asked about that node and valid while the node's version (state.h)
 * is unchanged. kube-scheduler asks about pod after pod of one shape (a Deployment's
 * replicas, a Job's workers) while only the node that took the last one changed, so most
 * nodes are answered without model_fit or the policy. Shapes get ids from a small table. */
#define EXT_SHAPES 16
/* Pods already counted by the online estimate: a pod kube-scheduler retries is prioritized
 * again, but arrived once. The last EXT_ONLINE_SEEN UIDs are remembered. */
#define EXT_ONLINE_SEEN 4096

typedef struct ext_verbs {
    ext_state *st;
    const policy *pol;
    policy_ctx ctx;              /* per call a copy gets decision = hash of the pod UID */
    policy_online *online;       /* --online-workload: ctx.workload is its current estimate (under
                                  * the state lock: prioritize observes each new GPU pod) */
    uint64_t online_seen[EXT_ONLINE_SEEN];   /* UID hashes already observed (ring; 0 = empty) */
    int online_next;
    ext_bind_fn bind;            /* NULL: standalone, binds are recorded in memory only */
    void *bind_user;
    kube_client *kube;              /* reads the API when the watch is behind (a DRA pod's claims at bind); NULL:
                                  * standalone, nothing to read */
    int dra_bind_wait_ms;        /* how long bind waits on the watch for a claim's allocation before it reads
                                  * the API (default EXT_DRA_BIND_WAIT_MS) */
    ext_leader *leader;          /* NULL: no leader election, this replica binds */
    ext_events *events;          /* NULL: no Events about binds (standalone, most tests) */
    bool fraction_no_mps;        /* soft shares are delivered by reservations, which cannot serve an
                                  * MPS replica: fractions never map onto MPS (model_request.no_mps) */
    struct ext_rsv *rsv;         /* the reservation controller, for /debug/state and /metrics; NULL: none */
    _Atomic uint64_t bind_outcomes[EXT_BIND_NOUTCOMES];
    /* answer cache (under the state lock) */
    model_request shapes[EXT_SHAPES];
    uint32_t shape_ids[EXT_SHAPES];   /* 0: slot unused */
    int shape_next;                   /* the slot to recycle next */
    _Atomic uint64_t cache_hits, cache_misses;   /* node answers reused / computed */
} ext_verbs;

typedef struct ext_reply {
    int status;                  /* HTTP status */
    char *body;                  /* malloc'd JSON (or text for metrics) */
    size_t len;
} ext_reply;

void ext_reply_free(ext_reply *r);
/* {"Error": msg} with the given status. */
void ext_reply_error(ext_reply *r, int status, const char *msg);

void ext_verbs_init(ext_verbs *v, ext_state *st, const policy *pol, ext_bind_fn bind, void *bind_user);

void ext_verb_filter(ext_verbs *v, const char *body, size_t len, ext_reply *out);
void ext_verb_prioritize(ext_verbs *v, const char *body, size_t len, ext_reply *out);
void ext_verb_bind(ext_verbs *v, const char *body, size_t len, ext_reply *out);
void ext_verb_preempt(ext_verbs *v, const char *body, size_t len, ext_reply *out);

/* JSON of the whole cache; with pod ("namespace/name" or a UID) instead: for each node,
 * whether the pod fits, why not, and the policy's score and reasoning. 404 if the pod is
 * unknown. */
void ext_debug_state(ext_verbs *v, const char *pod, ext_reply *out);

#endif
