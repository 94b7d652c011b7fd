/* health.c -- the dependency registry of health.h: one mutex over a fixed table (a dozen entries), the
 * warn-once / rate-limited / recovered-at-info logging, and the words for a failed API call.
 */
#include "extender/base/health.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kube/client.h"
#include "kube/log.h"

typedef struct dep_entry {
    ext_dep_status s;
    int64_t last_fail_ms;      /* the latest failed attempt */
    int64_t last_log_ms;       /* the latest warn line about this failure */
    uint64_t unlogged;         /* failed attempts since that line */
} dep_entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dep_entry g_dep[EXT_DEP_N];
static int g_forget_ms[EXT_DEP_N] = {[EXT_DEP_BIND] = EXT_HEALTH_BIND_FORGET_MS};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *ext_dep_name(ext_dep d) {
    static const char *n[EXT_DEP_N] = {"api-nodes", "api-pods", "bind", "lease", "token-file", "ca-file", "listen",
                                       "events", "reservations", "webhook-secret", "webhook-config", "webhook-listen",
                                       "api-resourceslices", "api-resourceclaims", "api-deviceclasses",
                                       "reserve-image"};
    return d >= 0 && d < EXT_DEP_N ? n[d] : "?";
}

const char *ext_dep_reason_name(ext_dep_reason r) {
    static const char *n[EXT_REASON_N] = {"unreachable", "timeout", "unauthorized", "forbidden", "not_found",
                                          "throttled", "server_error", "rejected", "bad_response", "file", "tls",
                                          "listen"};
    return r >= 0 && r < EXT_REASON_N ? n[r] : "?";
}

bool ext_dep_blocks_ready(ext_dep d) {
    /* Without these tessera answers from a stale cache (the DRA kinds: GPUs held through claims would go
     * unaccounted), or cannot bind at all. Events are best-effort; the reservation controller and the webhook
     * affect soft shares only, and kube-scheduler's calls do not go through them. */
    return d <= EXT_DEP_LISTEN || d == EXT_DEP_API_SLICES || d == EXT_DEP_API_CLAIMS || d == EXT_DEP_API_CLASSES ||
           d == EXT_DEP_WEBHOOK_LISTEN;   /* pod creation of tessera's pods fails on a replica without it */
}

/* Failed attempts in a row before d is failing. Most dependencies retry within seconds, where one failure is
 * often a blip; these retry only every 10 s to 10 min (the webhook's Secret and caBundle) or not at all (a
 * listener), or find a fact that will not change (the reservation image: our Pod has no tessera-extender
 * container), so their first failure is already the persistent one. */
static int fail_after(ext_dep d) {
    return d == EXT_DEP_WEBHOOK_SECRET || d == EXT_DEP_WEBHOOK_CONFIG || d == EXT_DEP_WEBHOOK_LISTEN ||
           d == EXT_DEP_RESERVE_IMAGE || d == EXT_DEP_LISTEN ? 1 : EXT_HEALTH_FAIL_AFTER;
}

ext_dep_reason ext_health_reason_of(int code) { return (ext_dep_reason)kube_reason_of(code); }

void ext_health_kube_report(void *user, kube_dep dep, kube_kind kind, bool ok, int code, kube_reason reason,
                            const char *msg) {
    /* the DRA kinds' dependencies block readiness as nodes and pods do (ext_dep_blocks_ready) */
    static const ext_dep kinds[KUBE_NKINDS] = {[KUBE_NODE] = EXT_DEP_API_NODES, [KUBE_POD] = EXT_DEP_API_PODS,
                                               [KUBE_RESOURCESLICE] = EXT_DEP_API_SLICES,
                                               [KUBE_RESOURCECLAIM] = EXT_DEP_API_CLAIMS,
                                               [KUBE_DEVICECLASS] = EXT_DEP_API_CLASSES};
    ext_dep d;
    switch (dep) {
    case KUBE_DEP_KIND:
        if (kind < 0 || kind >= KUBE_NKINDS) return;
        d = kinds[kind];
        break;
    case KUBE_DEP_BIND: d = EXT_DEP_BIND; break;
    case KUBE_DEP_TOKEN_FILE: d = EXT_DEP_TOKEN_FILE; break;
    case KUBE_DEP_CA_FILE: d = EXT_DEP_CA_FILE; break;
    default: return;
    }
    if (ok) ext_health_ok(d);
    else ext_health_fail(d, code, (ext_dep_reason)reason, msg);
}

void ext_health_register(ext_dep d) {
    if (d < 0 || d >= EXT_DEP_N) return;
    pthread_mutex_lock(&g_mu);
    g_dep[d].s.registered = true;
    pthread_mutex_unlock(&g_mu);
}

void ext_health_ok(ext_dep d) {
    if (d < 0 || d >= EXT_DEP_N) return;
    pthread_mutex_lock(&g_mu);
    dep_entry *e = &g_dep[d];
    e->s.registered = true;
    if (e->s.failing)
        kube_log(KUBE_LOG_INFO, "event=dependency-recovered dependency=%s after_s=%lld failures=%d", ext_dep_name(d),
                 (long long)((mono_ms() - e->s.since_ms) / 1000), e->s.consecutive);
    e->s.failing = false;
    e->s.consecutive = 0;
    pthread_mutex_unlock(&g_mu);
}

/* Forget d's failure (lock held). */
static void idle_locked(ext_dep d, const char *why) {
    dep_entry *e = &g_dep[d];
    if (e->s.failing)
        kube_log(KUBE_LOG_INFO, "event=dependency-idle dependency=%s why=\"%s; its failure is no longer known\" "
                 "failures=%d", ext_dep_name(d), why, e->s.consecutive);
    e->s.failing = false;
    e->s.consecutive = 0;
}

void ext_health_idle(ext_dep d) {
    if (d < 0 || d >= EXT_DEP_N) return;
    pthread_mutex_lock(&g_mu);
    idle_locked(d, "no longer used");
    pthread_mutex_unlock(&g_mu);
}

void ext_health_set_forget_ms(ext_dep d, int ms) {
    if (d < 0 || d >= EXT_DEP_N) return;
    pthread_mutex_lock(&g_mu);
    g_forget_ms[d] = ms > 0 ? ms : 0;
    pthread_mutex_unlock(&g_mu);
}

/* Whether d is failing now, forgetting a failure nothing has retried for its forget time (lock held). */
static bool failing_locked(ext_dep d, int64_t now) {
    dep_entry *e = &g_dep[d];
    if (e->s.failing && g_forget_ms[d] > 0 && now - e->last_fail_ms >= g_forget_ms[d])
        idle_locked(d, "not tried again since");
    return e->s.failing;
}

void ext_health_fail(ext_dep d, int code, ext_dep_reason reason, const char *msg) {
    if (d < 0 || d >= EXT_DEP_N) return;
    if (reason < 0 || reason >= EXT_REASON_N) reason = EXT_REASON_UNREACHABLE;
    msg = msg && *msg ? msg : "no message";
    int64_t now = mono_ms();
    pthread_mutex_lock(&g_mu);
    dep_entry *e = &g_dep[d];
    e->s.registered = true;
    e->s.failures[reason]++;
    e->last_fail_ms = now;
    if (e->s.consecutive++ == 0) e->s.since_ms = now;
    bool changed = e->s.code != code || strcmp(e->s.msg, msg) != 0;
    e->s.code = code;
    e->s.reason = reason;
    snprintf(e->s.msg, sizeof e->s.msg, "%s", msg);
    const char *name = ext_dep_name(d), *rname = ext_dep_reason_name(reason);
    if (!e->s.failing && e->s.consecutive >= fail_after(d)) {
        e->s.failing = true;
        e->last_log_ms = now;
        e->unlogged = 0;
        kube_log(KUBE_LOG_WARN, "event=dependency-failing dependency=%s reason=%s code=%d blocks_ready=%s err=\"%s\"",
                 name, rname, code, ext_dep_blocks_ready(d) ? "yes" : "no", msg);
    } else if (e->s.failing && (changed || now - e->last_log_ms >= EXT_HEALTH_RELOG_MS)) {
        kube_log(KUBE_LOG_WARN, "event=dependency-still-failing dependency=%s reason=%s code=%d failures=%llu for_s=%lld "
                 "err=\"%s\"", name, rname, code, (unsigned long long)e->unlogged + 1,
                 (long long)((now - e->s.since_ms) / 1000), msg);
        e->last_log_ms = now;
        e->unlogged = 0;
    } else {
        e->unlogged++;
        kube_log(KUBE_LOG_DEBUG, "event=dependency-error dependency=%s reason=%s code=%d err=\"%s\"", name, rname, code, msg);
    }
    pthread_mutex_unlock(&g_mu);
}

bool ext_health_failing(ext_dep d, char *msg, size_t len) {
    if (msg && len) msg[0] = 0;
    if (d < 0 || d >= EXT_DEP_N) return false;
    pthread_mutex_lock(&g_mu);
    bool f = failing_locked(d, mono_ms());
    if (f && msg && len) snprintf(msg, len, "%s", g_dep[d].s.msg);
    pthread_mutex_unlock(&g_mu);
    return f;
}

/* "name: msg; name: msg" of the failing dependencies whose blocking matches. Lock held. */
static int list_failing(char *buf, size_t len, bool blocking) {
    size_t off = 0;
    int n = 0;
    int64_t now = mono_ms();
    if (buf && len) buf[0] = 0;
    for (int d = 0; d < EXT_DEP_N; d++) {
        if (!failing_locked((ext_dep)d, now) || ext_dep_blocks_ready((ext_dep)d) != blocking) continue;
        n++;
        if (!buf || off >= len) continue;
        int w = snprintf(buf + off, len - off, "%s%s: %s", off ? "; " : "", ext_dep_name((ext_dep)d), g_dep[d].s.msg);
        if (w > 0) off += (size_t)w;
    }
    return n;
}

bool ext_health_ready(char *why, size_t len) {
    pthread_mutex_lock(&g_mu);
    int n = list_failing(why, len, true);
    pthread_mutex_unlock(&g_mu);
    return n == 0;
}

void ext_health_warnings(char *buf, size_t len) {
    pthread_mutex_lock(&g_mu);
    list_failing(buf, len, false);
    pthread_mutex_unlock(&g_mu);
}

void ext_health_snapshot(ext_dep_status out[EXT_DEP_N]) {
    pthread_mutex_lock(&g_mu);
    int64_t now = mono_ms();
    for (int d = 0; d < EXT_DEP_N; d++) {
        failing_locked((ext_dep)d, now);
        out[d] = g_dep[d].s;
    }
    pthread_mutex_unlock(&g_mu);
}

void ext_health_reset(void) {
    pthread_mutex_lock(&g_mu);
    memset(g_dep, 0, sizeof g_dep);
    memset(g_forget_ms, 0, sizeof g_forget_ms);
    g_forget_ms[EXT_DEP_BIND] = EXT_HEALTH_BIND_FORGET_MS;
    pthread_mutex_unlock(&g_mu);
}
