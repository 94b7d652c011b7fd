/* events.c -- a bounded queue of pending Events and the one thread that posts them (events.h).
 *
 * The queue is a ring of pointers under a mutex; the bind path holds the mutex only to push a
 * pointer. The worker pops one event at a time, builds its JSON and POSTs it without the lock,
 * so a slow API server delays later Events, never a bind.
 */
#include "extender/base/events.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extender/base/health.h"
#include "kube/log.h"
#include "extender/base/text.h"

#define EV_MSG_MAX 1024   /* message buffer; the apiserver allows more, but describe output stays readable */

static _Atomic uint64_t g_posted, g_failed, g_dropped;

typedef struct ev_item {
    time_t at;                 /* when the decision was made (the Event's timestamps) */
    char *type, *reason, *ns, *name, *uid, *text;
} ev_item;

struct ext_events {
    kube_client *kube;
    ext_events_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* signalled on push and on stop */
    ev_item **ring;
    int head, count;
    bool stopping;
    int64_t drain_deadline_ms; /* mono_ms() clock */
    pthread_t thread;
    uint64_t last_name_ns;     /* worker only: keeps generated names unique */
};

void ext_events_config_defaults(ext_events_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->queue_max = 1024;
    cfg->post_timeout_ms = 2000;
    cfg->drain_ms = 1000;
    const char *pod = getenv("POD_NAME");
    if (pod && *pod) snprintf(cfg->instance, sizeof cfg->instance, "%s", pod);
    else if (gethostname(cfg->instance, sizeof cfg->instance - 1) != 0 || !cfg->instance[0])
        snprintf(cfg->instance, sizeof cfg->instance, "tessera-extender");
    cfg->instance[sizeof cfg->instance - 1] = 0;
}

void ext_events_get_stats(ext_events_stats *out) {
    out->posted = atomic_load(&g_posted);
    out->failed = atomic_load(&g_failed);
    out->dropped = atomic_load(&g_dropped);
}


/* The drain deadline's clock (monotonic: a wall-clock step must not cut the drain short). */
static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* First one and every EXT_EVENTS_LOG_EVERY-th at warn, the rest at debug: a broken events
 * endpoint costs one log line per hundred binds, not one per bind. */
static void count_and_log(_Atomic uint64_t *ctr, const char *what, const ev_item *it, const char *why) {
    uint64_t n = atomic_fetch_add(ctr, 1) + 1;
    kube_log(n == 1 || n % EXT_EVENTS_LOG_EVERY == 0 ? KUBE_LOG_WARN : KUBE_LOG_DEBUG,
             "event=k8s-event-%s total=%llu pod=%s/%s reason=%s why=\"%s\"", what, (unsigned long long)n,
             it ? it->ns : "", it ? it->name : "", it ? it->reason : "", why);
}

static void item_free(ev_item *it) {
    if (!it) return;
    free(it->type);
    free(it->reason);
    free(it->ns);
    free(it->name);
    free(it->uid);
    free(it->text);
    free(it);
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

/* Push, or drop and count. Takes ownership of it. */
static bool push(ext_events *e, ev_item *it) {
    if (!e || !it || !it->type || !it->reason || !it->ns || !it->name || !it->uid || !it->text) {
        count_and_log(&g_dropped, "dropped", it && it->ns && it->name && it->reason ? it : NULL,
                      e ? "out of memory" : "events are off");
        item_free(it);
        return false;
    }
    pthread_mutex_lock(&e->mu);
    bool ok = !e->stopping && e->count < e->cfg.queue_max;
    if (ok) {
        e->ring[(e->head + e->count) % e->cfg.queue_max] = it;
        e->count++;
        pthread_cond_signal(&e->cv);
    }
    bool stopping = e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (!ok) {
        count_and_log(&g_dropped, "dropped", it, stopping ? "stopping" : "queue full");
        item_free(it);
    }
    return ok;
}

bool ext_events_emit(ext_events *e, const char *type, const char *reason, const char *ns, const char *name,
                     const char *uid, const char *message) {
    if (!e) return false;   /* standalone: nothing to tell, nothing to count */
    ev_item *it = calloc(1, sizeof *it);
    if (it) {
        it->at = time(NULL);
        it->type = dup_or_empty(type);
        it->reason = dup_or_empty(reason);
        it->ns = dup_or_empty(ns);
        it->name = dup_or_empty(name);
        it->uid = dup_or_empty(uid);
        it->text = dup_or_empty(message);
    }
    return push(e, it);
}

/* kubectl describe shows one row per Event: no line breaks or tabs. */
static void one_line(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t') *s = ' ';
}

/* ---- posting --------------------------------------------------------------------------------- */

static void rfc3339(time_t t, char *out, size_t len) {
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The core/v1 Event. Its name is "<pod>.<hex nanoseconds>" as kubectl and client-go name theirs,
 * unique per process; the pod part is cut so the name stays a valid DNS subdomain (<= 253). No
 * eventTime: that would ask for events.k8s.io-style validation, and describe reads the
 * first/lastTimestamp pair anyway. */
static char *event_json(ext_events *e, const ev_item *it, const char *msg) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    if (ns <= e->last_name_ns) ns = e->last_name_ns + 1;
    e->last_name_ns = ns;
    char name[256], ts[32];
    snprintf(name, sizeof name, "%.*s.%llx", 253 - 17, it->name, (unsigned long long)ns);
    rfc3339(it->at, ts, sizeof ts);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "v1");
    cJSON_AddStringToObject(o, "kind", "Event");
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", it->ns);
    cJSON *ref = cJSON_AddObjectToObject(o, "involvedObject");
    cJSON_AddStringToObject(ref, "apiVersion", "v1");
    cJSON_AddStringToObject(ref, "kind", "Pod");
    cJSON_AddStringToObject(ref, "namespace", it->ns);
    cJSON_AddStringToObject(ref, "name", it->name);
    cJSON_AddStringToObject(ref, "uid", it->uid);
    cJSON_AddStringToObject(o, "reason", it->reason);
    cJSON_AddStringToObject(o, "message", msg);
    cJSON_AddStringToObject(o, "type", it->type);
    cJSON *src = cJSON_AddObjectToObject(o, "source");
    cJSON_AddStringToObject(src, "component", EXT_EVENTS_COMPONENT);
    cJSON_AddStringToObject(o, "reportingComponent", EXT_EVENTS_COMPONENT);
    cJSON_AddStringToObject(o, "reportingInstance", e->cfg.instance);
    cJSON_AddStringToObject(o, "firstTimestamp", ts);
    cJSON_AddStringToObject(o, "lastTimestamp", ts);
    cJSON_AddNumberToObject(o, "count", 1);
    cJSON_AddStringToObject(o, "action", "Binding");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* Post one event: at most two attempts, the second only after an unreachable API server or a
 * 429/5xx; none after a timeout. timeout_ms bounds each attempt. */
static void post(ext_events *e, const ev_item *it, int timeout_ms, bool may_retry) {
    char msg[EV_MSG_MAX], path[600], err[512];
    /* '%' as a word (text.h): kube-scheduler's Events about the same pod are printf-safe, and so are ours */
    if (ext_text_printf_safe(msg, sizeof msg, it->text) >= sizeof msg)
        memcpy(msg + sizeof msg - 4, "...", 4);   /* say it was cut */
    one_line(msg);
    char *body = event_json(e, it, msg);
    int n = snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", it->ns);
    if (!body || n < 0 || (size_t)n >= sizeof path) {
        count_and_log(&g_failed, "failed", it, body ? "namespace too long" : "out of memory");
        free(body);
        return;
    }
    int code = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        code = kube_request(e->kube, "POST", path, body, timeout_ms, NULL, err, sizeof err);
        bool transient = code == KUBE_UNREACHABLE || code == 429 || code >= 500;
        if ((code >= 200 && code <= 299) || !transient || !may_retry) break;
    }
    free(body);
    if (code >= 200 && code <= 299) {
        atomic_fetch_add(&g_posted, 1);
        ext_health_ok(EXT_DEP_EVENTS);
        return;
    }
    char why[600];
    if (code > 0) snprintf(why, sizeof why, "API server answered %d: %s", code, err);
    else snprintf(why, sizeof why, "%s", err[0] ? err : "no answer");
    char hmsg[700];
    kube_api_msg(hmsg, sizeof hmsg, code, "create", "events", NULL, it->ns, "", "tessera-extender ClusterRole", err);
    ext_health_fail(EXT_DEP_EVENTS, code, ext_health_reason_of(code), hmsg);
    count_and_log(&g_failed, "failed", it, why);
}

static void *worker(void *arg) {
    ext_events *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->count && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
        if (!e->count) break;   /* stopping, and nothing left */
        int timeout = e->cfg.post_timeout_ms;
        bool retry = true;
        if (e->stopping) {      /* draining: whatever is left at the deadline is dropped */
            int64_t left = e->drain_deadline_ms - mono_ms();
            if (left <= 0) break;
            if (left < timeout) timeout = (int)left;
            retry = false;
        }
        ev_item *it = e->ring[e->head];
        e->head = (e->head + 1) % e->cfg.queue_max;
        e->count--;
        pthread_mutex_unlock(&e->mu);
        post(e, it, timeout, retry);
        item_free(it);
        pthread_mutex_lock(&e->mu);
    }
    while (e->count) {          /* past the drain deadline */
        ev_item *it = e->ring[e->head];
        e->head = (e->head + 1) % e->cfg.queue_max;
        e->count--;
        count_and_log(&g_dropped, "dropped", it, "drain deadline passed at shutdown");
        item_free(it);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

ext_events *ext_events_start(kube_client *k, const ext_events_config *cfg, char *err, size_t errlen) {
    ext_events_config d;
    if (!cfg) {
        ext_events_config_defaults(&d);
        cfg = &d;
    }
    if (!k || cfg->queue_max < 1 || cfg->post_timeout_ms < 1 || cfg->drain_ms < 0) {
        snprintf(err, errlen, "events: an API client, queue_max >= 1, post_timeout_ms >= 1 and drain_ms >= 0 are required");
        return NULL;
    }
    ext_events *e = calloc(1, sizeof *e);
    if (e) e->ring = calloc((size_t)cfg->queue_max, sizeof *e->ring);
    if (!e || !e->ring) {
        if (e) free(e);
        snprintf(err, errlen, "events: out of memory");
        return NULL;
    }
    e->kube = k;
    e->cfg = *cfg;
    e->cfg.instance[sizeof e->cfg.instance - 1] = 0;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);   /* never waited on with a timeout */
    if (pthread_create(&e->thread, NULL, worker, e) != 0) {
        snprintf(err, errlen, "events: cannot start the worker thread");
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        free(e->ring);
        free(e);
        return NULL;
    }
    return e;
}

void ext_events_stop(ext_events *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    e->drain_deadline_ms = mono_ms() + e->cfg.drain_ms;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->ring);
    free(e);
}
