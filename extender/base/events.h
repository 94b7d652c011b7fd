/* events.h -- core/v1 Events that explain tessera's bind decisions, so `kubectl describe pod`
 * shows what the extender granted (or why the bind failed) next to kube-scheduler's own events.
 *
 * Events are best-effort and must never slow down or fail a bind: the bind path only copies a
 * few strings into a bounded queue (dropping, and counting, when it is full) and returns; ONE
 * worker thread posts them with kube_request and a short timeout. A failed post is retried
 * once when the API server could not be reached or answered 429/5xx (a timeout is not retried:
 * a stalled API server would otherwise hold the queue twice as long), then counted and dropped.
 * Failures are logged at warn for the first one and every EXT_EVENTS_LOG_EVERY-th after, at
 * debug otherwise, so a broken events endpoint cannot flood the log.
 *
 * The verbs' bind (verbs.c) emits Normal TesseraAssigned, naming the node and what model/
 * granted, or Warning TesseraBindFailed with the API server's error, after each Binding POST.
 *
 * Lifecycle: ext_events_start after the API client exists; ext_events_stop after the HTTP
 * server has stopped (no more binds enqueue) and before kube_free (the worker uses it).
 * Stop refuses new events, posts what is queued until the drain deadline, drops the rest
 * (counted), and joins the worker. A post already in flight is not interrupted, so stop takes
 * at most max(drain_ms, post_timeout_ms).
 */
#ifndef EXT_EVENTS_H
#define EXT_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"

#define EXT_EVENTS_COMPONENT "tessera-extender"  /* source.component and reportingComponent */
#define EXT_EVENTS_LOG_EVERY 100                 /* failures between two warn lines */

typedef struct ext_events_config {
    int queue_max;         /* events waiting to be posted; more are dropped (default 1024) */
    int post_timeout_ms;   /* one POST of an Event (default 2000) */
    int drain_ms;          /* at stop, how long queued events may still be posted (default 1000) */
    char instance[128];    /* reportingInstance (the API limits it to 128); default $POD_NAME, else
                            * the host name */
} ext_events_config;

void ext_events_config_defaults(ext_events_config *cfg);

typedef struct ext_events ext_events;

/* Start the worker that posts through k (which must outlive ext_events_stop). NULL with err. */
ext_events *ext_events_start(kube_client *k, const ext_events_config *cfg, char *err, size_t errlen);

/* Stop accepting, drain until the deadline, join the worker, free. NULL is fine. */
void ext_events_stop(ext_events *e);

/* Queue one Event about pod ns/name (uid) -- type "Normal" or "Warning", reason CamelCase,
 * message one line (cut to fit) with each '%' written as "percent" (text.h), like the reasons
 * kube-scheduler shows next to it. Never blocks on the network. false when dropped (queue full,
 * stopping, out of memory, or e is NULL). */
bool ext_events_emit(ext_events *e, const char *type, const char *reason, const char *ns, const char *name,
                     const char *uid, const char *message);

/* Process-wide counters (every ext_events instance adds to them), for /metrics. */
typedef struct ext_events_stats {
    uint64_t posted;    /* the API server answered 2xx */
    uint64_t failed;    /* the post (and its one retry) failed or timed out */
    uint64_t dropped;   /* never posted: queue full, stopping, or left at the drain deadline */
} ext_events_stats;

void ext_events_get_stats(ext_events_stats *out);

#endif
