/* health.h -- is each thing tessera depends on working, and if not, why: one process-wide registry that
 * the API client (list/watch per kind, bind, token and CA files), the leader election (Lease), Events,
 * the reservation controller, the webhook's certificate and listeners report into, so that no failure
 * that stops tessera from doing its job is silent.
 *
 * A dependency is FAILING after EXT_HEALTH_FAIL_AFTER consecutive failed attempts with no success in
 * between: one failed attempt is often a blip that the next retry cures (a dropped connection, a
 * leader change of the API server), two in a row are not (every caller retries within seconds:
 * list/watch after 0.2..30 s of backoff, the Lease every retry period, 2 s by default). The webhook's
 * Secret and caBundle (retried every 10 s to 10 min) and the listeners (not retried) fail at the
 * first failure. Then:
 *   - one line at warn: "event=dependency-failing dependency=lease reason=not_found code=404 err=..."
 *     with the API's status and message; again at warn when the message changes, otherwise at most
 *     once per EXT_HEALTH_RELOG_MS ("event=dependency-still-failing ... failures=N for_s=S"); attempts
 *     in between at debug; "event=dependency-recovered" at info on the first success;
 *   - /readyz answers 503 naming it, when it blocks readiness (ext_dep_blocks_ready): tessera cannot
 *     answer correctly without it (a stale cache, no binds); the others are listed as warnings;
 *   - /metrics: tessera_dependency_ok{dependency} (0 while failing) and every failed attempt in
 *     tessera_dependency_failures_total{dependency,reason};
 *   - the verbs put the message in their error text (kube-scheduler shows it in FailedScheduling).
 * Thread-safe; cheap enough to call on every request.
 */
#ifndef EXT_HEALTH_H
#define EXT_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"

#define EXT_HEALTH_FAIL_AFTER 2        /* consecutive failed attempts before a dependency is failing */
#define EXT_HEALTH_RELOG_MS   60000    /* a failing dependency is logged at warn again after this long */

typedef enum ext_dep {
    EXT_DEP_API_NODES = 0,   /* list+watch of Nodes */
    EXT_DEP_API_PODS,        /* list+watch of Pods */
    EXT_DEP_BIND,            /* POST pods/<name>/binding */
    EXT_DEP_LEASE,           /* the leader election's Lease */
    EXT_DEP_TOKEN_FILE,      /* the service account token (re-read for every request) */
    EXT_DEP_CA_FILE,         /* the API server's CA bundle */
    EXT_DEP_LISTEN,          /* the verbs' listener (--listen) */
    EXT_DEP_EVENTS,          /* core/v1 Events (best-effort: never blocks readiness) */
    EXT_DEP_RESERVATIONS,    /* reservation pods and the shares' delivery ConfigMaps */
    EXT_DEP_WEBHOOK_SECRET,  /* the webhook's TLS Secret */
    EXT_DEP_WEBHOOK_CONFIG,  /* the caBundle of the MutatingWebhookConfiguration */
    EXT_DEP_WEBHOOK_LISTEN,  /* the webhook's TLS listener (--webhook-listen) */
    EXT_DEP_API_SLICES,      /* list+watch of ResourceSlices (--dra; a 404 is "not served", not a failure;
                              * blocks readiness like nodes and pods: claims' GPUs would go unaccounted) */
    EXT_DEP_API_CLAIMS,      /* list+watch of ResourceClaims */
    EXT_DEP_API_CLASSES,     /* list+watch of DeviceClasses */
    EXT_DEP_RESERVE_IMAGE,   /* the image reservation pods run: --reserve-image, else the image of our own
                              * tessera-extender container, read from our Pod (a warning: only soft shares need it) */
    EXT_DEP_N
} ext_dep;

/* The API client's reasons (kube/client.h, same numbers), and the extender's own. */
typedef enum ext_dep_reason {
    EXT_REASON_UNREACHABLE = KUBE_REASON_UNREACHABLE,
    EXT_REASON_TIMEOUT = KUBE_REASON_TIMEOUT,
    EXT_REASON_UNAUTHORIZED = KUBE_REASON_UNAUTHORIZED,
    EXT_REASON_FORBIDDEN = KUBE_REASON_FORBIDDEN,
    EXT_REASON_NOT_FOUND = KUBE_REASON_NOT_FOUND,
    EXT_REASON_THROTTLED = KUBE_REASON_THROTTLED,
    EXT_REASON_SERVER_ERROR = KUBE_REASON_SERVER_ERROR,
    EXT_REASON_REJECTED = KUBE_REASON_REJECTED,
    EXT_REASON_BAD_RESPONSE = KUBE_REASON_BAD_RESPONSE,
    EXT_REASON_FILE = KUBE_REASON_FILE,
    EXT_REASON_TLS = KUBE_REASON_TLS,
    EXT_REASON_LISTEN = KUBE_REASON_N,   /* cannot listen on the address */
    EXT_REASON_N
} ext_dep_reason;

const char *ext_dep_name(ext_dep d);               /* "api-nodes", "lease", ... (the metric label) */
const char *ext_dep_reason_name(ext_dep_reason r); /* "not_found", "forbidden", ... (the metric label) */
bool ext_dep_blocks_ready(ext_dep d);

/* kube_reason_of (kube/client.h) for the calls the extender makes itself (Events, Leases, reservations). */
ext_dep_reason ext_health_reason_of(int code);

/* Where deploy/rbac.yaml grants the API client's list+watch of nodes and pods and pods/binding
 * (kube_config.rbac). */
#define EXT_KUBE_RBAC "tessera-extender ClusterRole"

/* The API client's reporter (kube_config.report; user unused): its list+watch kinds, binds, token file and CA
 * file are the dependencies api-nodes ... api-deviceclasses, bind, token-file and ca-file. */
void ext_health_kube_report(void *user, kube_dep dep, kube_kind kind, bool ok, int code, kube_reason reason,
                            const char *msg);

/* This process uses the dependency: /metrics shows it (ok until it fails). */
void ext_health_register(ext_dep d);
/* An attempt worked: clears a failure (logged at info if it was failing). Registers d. */
void ext_health_ok(ext_dep d);
/* An attempt failed: code is the HTTP status or KUBE_* (0 when there is none), msg says what
 * failed in words an operator can act on (kube_api_msg). Registers d. */
void ext_health_fail(ext_dep d, int code, ext_dep_reason reason, const char *msg);

/* d is not in use for now (the leader election of a replica whose kube-scheduler is idle stops calling the
 * API): its failure, if any, is forgotten (logged at info), since nothing will try it again to clear it. */
void ext_health_idle(ext_dep d);

/* A failure of d with no further attempt for ms (> 0) is forgotten (logged at info as idle). Default: bind,
 * EXT_HEALTH_BIND_FORGET_MS; the others never (their callers retry on their own). Only a bind clears a bind
 * failure, and kube-scheduler may have nothing left to bind -- and with /readyz at 503 the webhook's Service
 * has no endpoints, so no new pod arrives either: a remembered bind failure must not lock that up. */
#define EXT_HEALTH_BIND_FORGET_MS 60000
void ext_health_set_forget_ms(ext_dep d, int ms);

/* Whether d is failing; msg (may be NULL) gets its message. */
bool ext_health_failing(ext_dep d, char *msg, size_t len);

/* No dependency that blocks readiness is failing. Otherwise false, and why lists them
 * ("lease: cannot create Lease ...; api-pods: ..."). why may be NULL. */
bool ext_health_ready(char *why, size_t len);
/* The failing dependencies that do not block readiness, as above ("" when none). */
void ext_health_warnings(char *buf, size_t len);

typedef struct ext_dep_status {
    bool registered, failing;
    int consecutive;                     /* failed attempts since the last success */
    int code;                            /* of the latest failure */
    ext_dep_reason reason;
    char msg[512];
    int64_t since_ms;                    /* monotonic: the first of the consecutive failures */
    uint64_t failures[EXT_REASON_N];     /* every failed attempt, by reason */
} ext_dep_status;

void ext_health_snapshot(ext_dep_status out[EXT_DEP_N]);

/* Forget everything (tests: several extenders live in one test process; main.c never calls it, so a running
 * tessera keeps one registry for its whole life). */
void ext_health_reset(void);

#endif
