/* leader.h -- leader election on a coordination.k8s.io/v1 Lease of tessera's own, with client-go's
 * semantics, so that of several tessera-extender replicas exactly one posts Bindings and runs the background work
 * (the reservation controller). No placement here.
 *
 *   acquire   when the Lease does not exist (POST), has no holder, or its record has not changed for
 *             leaseDurationSeconds as seen on OUR clock (a foreign clock is never trusted); a PUT carries the
 *             resourceVersion we read, so of two candidates racing for it one gets 409 Conflict and loses.
 *   renew     every retry period while leading; a 409 or another holder in the record means someone else won:
 *             step down at once.
 *   step down when no renewal has succeeded for renewDeadline (API outage, stalls). Leadership is judged by the
 *             START time of the last successful renewal, so a slow answer never extends it; a successor can take
 *             over only leaseDuration after it last saw the record's spec change, i.e. after we stopped binding.
 *   release   on shutdown (ext_leader_free) and when our reason to campaign lapses (below): holder "" and
 *             leaseDurationSeconds 1, as client-go's ReleaseOnCancel, so a successor takes over at once instead
 *             of waiting out the Lease.
 *
 * Who campaigns. Each tessera pod pairs a kube-scheduler with its extender on loopback, and kube-scheduler's own
 * Lease (--scheduler-lease, deploy: tessera/tessera-scheduler) already makes one of them active; only the active
 * one calls its extender. The one Lease serves two duties, and what each needs decides who campaigns:
 *   - binding needs ONE binder, the replica whose kube-scheduler is active (its binds are the ones that arrive),
 *     with a cache that holds every pod the previous binder bound (the relist below);
 *   - background work (the reservation controller: soft-share delivery, release after the grace, timeouts,
 *     refusals, lost GPUs, orphans; delivery/reservation.h) needs exactly one replica AT ALL TIMES, calls or not, that
 *     resumes when any one replica is lost, and that sees the binder's moves and binds at once: it must be the
 *     binder itself, since a share moved to another GPU by one process while another binds onto that GPU would
 *     over-commit it.
 * So an extender campaigns while
 *   (a) the kube-scheduler of its own pod holds kube-scheduler's Lease (holderIdentity "<pod host name>_<uuid>",
 *       as kube-scheduler writes it; the host name of a pod is its name, so $POD_NAME cut to 63 characters, or
 *       gethostname() for a pod whose host name is not its name), read every retry period by the holder and
 *       every quarter of it by a follower, whether or not anything is being scheduled; or
 *   (b) kube-scheduler's Lease has no valid holder (missing, released, or unchanged for its lease duration on
 *       our clock) or cannot be read: kube-scheduler is between leaders, and background work must not stop;
 *       but such a holder gives way when another replica receives calls and asks for the Lease: that replica
 *       writes a note (annotation tessera.io/wanted-by, spec untouched, once per retry period) and the holder,
 *       seeing it, stops campaigning. Without it, a missing or misnamed kube-scheduler Lease could settle ours on
 *       the idle replica for good; or
 *   (c) it received a scheduling call within leaseDuration (ext_leader_note_call), so the first bind after a
 *       change never waits for the next poll; once another pod's kube-scheduler took its Lease from ours,
 *       calls made before that do not count (its last calls must not hold the new one's extender off); or
 *   (d) there is no kube-scheduler Lease to follow (sched_name "", --scheduler-lease ""): one replica, or
 *       kube-scheduler without leader election; it then campaigns always.
 * A holder whose condition lapses (another replica's kube-scheduler holds its Lease and no call came for
 * leaseDuration) releases at once, so the right replica takes over without waiting out the Lease. A replica
 * that does not campaign still reads the Lease, so after a holder dies without releasing it takes over
 * leaseDuration after the holder's last renewal, not leaseDuration after it started looking; it reads both
 * Leases every quarter retry period and wakes just after a record would expire (next_wait_ms), so takeover
 * after a holder is killed takes about leaseDuration plus a quarter retry period (15-16 s as deployed; both
 * Leases expire together).
 * The first bind after a change waits up to the retry period for the acquisition.
 *
 * Acting also needs a current cache: after acquiring a Lease that someone else wrote since we last held it,
 * ext_leader_may_bind and ext_leader_may_act stay false until a fresh list of pods (kube_relist) has been
 * applied, which holds every pod the previous leader bound and every reservation it made.
 *
 * Thread-safe. One background thread talks to the API; the queries below only read its results.
 */
#ifndef EXT_LEADER_H
#define EXT_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"

typedef struct ext_leader_config {
    char ns[64];              /* the Lease's namespace (default: tessera's own, kube_own_namespace: $POD_NAMESPACE,
                                 else the service account's namespace file, else "tessera") */
    char name[128];           /* the Lease's name (default "tessera-extender") */
    char identity[192];       /* holderIdentity (default: $POD_NAME or the host name, "_", a random suffix) */
    int lease_ms;             /* leaseDuration (default 15000) */
    int renew_ms;             /* renewDeadline (default 10000) */
    int retry_ms;             /* retryPeriod (default 2000) */
    int bind_budget_ms;       /* the longest one Binding call may take (its timeout); 0: not checked. A bind
                                 starts only if it ends before anyone else could take the Lease, i.e. before
                                 the last renewal + leaseDuration */
    char sched_ns[64];        /* kube-scheduler's own Lease, followed as above: namespace ("" = ns) and name */
    char sched_name[128];     /* (default "tessera-scheduler", as deploy/); "" = none to follow: campaign always */
    char pod_host[64];        /* our pod's host name: kube-scheduler's identity starts "<pod_host>_" (default:
                                 $POD_NAME cut to 63, as the kubelet names a pod's host, else gethostname()) */
} ext_leader_config;

/* Defaults as above, identity included. */
void ext_leader_config_defaults(ext_leader_config *cfg);
/* client-go's rules: lease > renew > 1.2 x retry > 0, non-empty names; bind budget < lease. -1 with err. */
int ext_leader_config_check(const ext_leader_config *cfg, char *err, size_t errlen);
/* --scheduler-lease: "NS/NAME", "NAME" (in cfg->ns) or "" (none: campaign always) into cfg. -1 with err. */
int ext_leader_parse_scheduler_lease(ext_leader_config *cfg, const char *s, char *err, size_t errlen);

typedef struct ext_leader ext_leader;

/* The client k (not owned) carries the Lease calls and, when started, the relist after an acquisition. */
ext_leader *ext_leader_new(const ext_leader_config *cfg, kube_client *k, char *err, size_t errlen);
int ext_leader_start(ext_leader *l, char *err, size_t errlen);
/* Stop binding at once (ext_leader_may_bind turns false); the Lease is kept until ext_leader_free, so binds in
 * flight can finish under it. */
void ext_leader_stop(ext_leader *l);
/* Stop the thread and release the Lease if held. NULL is fine. */
void ext_leader_free(ext_leader *l);

/* A scheduling call arrived (filter, prioritize, preempt, bind): campaign for the next leaseDuration. */
void ext_leader_note_call(ext_leader *l);

/* We hold the Lease and our last renewal began less than renewDeadline ago. NULL l: true (no election). */
bool ext_leader_is_leader(ext_leader *l);

/* May this replica do the background work now: leader, not stopping, and the cache relisted since the
 * acquisition (as ext_leader_may_bind, without waiting and without the bind budget). NULL l: true. */
bool ext_leader_may_act(ext_leader *l);

/* A background write (the reservation controller's create, patch, update or delete) is bracketed by these:
 * act_begin is true only when ext_leader_may_act is, and counts the write as in flight; a release (handing the
 * Lease to the replica whose kube-scheduler became active) starts no new one and waits for those in flight (each
 * bounded by its request timeout, the wait by renewDeadline), so the successor never acts beside them. When the
 * Lease is lost rather than released, the renew deadline fences writes as it fences binds: a write must end
 * within leaseDuration - renewDeadline (5 s as deployed), which the controller's request timeout keeps.
 * NULL l: true / nothing. */
bool ext_leader_act_begin(ext_leader *l);
void ext_leader_act_end(ext_leader *l);

/* What we last saw of kube-scheduler's Lease: "mine" (our kube-scheduler holds it), "other" (another one
 * does), "none" (no valid holder, or not found), "unknown" (cannot be read), "" (none followed). */
const char *ext_leader_scheduler_state(ext_leader *l);

/* May this replica post a Binding now: leader, not stopping, the bind budget fits before the Lease could pass
 * to someone else, and the cache relisted since the acquisition. Waits up to wait_ms (< 0: the retry period)
 * for that; false with why = "not the tessera leader (leader is X); kube-scheduler will retry", or, while the
 * Lease calls fail, "not the tessera leader: cannot create Lease NS/NAME: <the API's message>; ..." (also
 * reported to health.h as the lease dependency), or the reason it is not ready yet. NULL l: true. */
bool ext_leader_may_bind(ext_leader *l, int wait_ms, char *why, size_t whylen);

/* The holder we last saw ("" if none or unknown). */
void ext_leader_holder(ext_leader *l, char *buf, size_t len);
const char *ext_leader_identity(const ext_leader *l);

typedef enum ext_lease_error {
    EXT_LEASE_ERR_CONFLICT = 0, /* 409: someone else wrote the Lease first */
    EXT_LEASE_ERR_TIMEOUT,      /* no answer within the request timeout (a stalled API server) */
    EXT_LEASE_ERR_UNREACHABLE,  /* no connection */
    EXT_LEASE_ERR_SERVER,       /* 5xx */
    EXT_LEASE_ERR_DENIED,       /* 401/403: RBAC or token */
    EXT_LEASE_ERR_OTHER,        /* any other status, or a body that is not a Lease */
    EXT_LEASE_ERR_N
} ext_lease_error;

const char *ext_lease_error_name(ext_lease_error e);

typedef struct ext_leader_stats {
    bool leader;                       /* ext_leader_is_leader */
    uint64_t transitions;              /* times this replica became leader */
    uint64_t errors[EXT_LEASE_ERR_N];  /* failed Lease calls by reason */
} ext_leader_stats;

void ext_leader_get_stats(ext_leader *l, ext_leader_stats *out);

#endif
