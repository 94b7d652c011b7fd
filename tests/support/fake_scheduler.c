/* fake_scheduler.c -- one replica's kube-scheduler (fake_scheduler.h): a thread that keeps its Lease and, while
 * leading, schedules pending pods through its extender. */
#include "tests/support/fake_scheduler.h"

#include "tests/support/http_client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FS_POLL_MS 50

/* The fake API server has no compare-and-swap through its C API; one lock over every fake scheduler of the
 * process makes "read the Lease, decide, write it" atomic among them, as resourceVersion preconditions do. */
static pthread_mutex_t g_lease_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct retry { char uid[128]; int64_t at; } retry;

struct fake_scheduler {
    fake_api *f;
    const deployed *d;
    char identity[192];
    int port;
    pthread_t thr;
    atomic_bool stop, leading;
    atomic_int calls, bound;
    bool release;
    /* client-go's observedRecord: the Lease's resourceVersion and when it changed, on our clock */
    long long seen_rv;
    int64_t seen_at;
    retry retries[64];
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void put_lease(fake_scheduler *s, const char *holder, int secs) {
    char json[768], now[40];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%S.000000Z", gmtime(&t));
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"holderIdentity\":\"%s\","
             "\"leaseDurationSeconds\":%d,\"acquireTime\":\"%s\",\"renewTime\":\"%s\",\"leaseTransitions\":0}}",
             s->d->lease_name, s->d->lease_ns, holder, secs, now, now);
    fake_api_put(s->f, "leases", json);
}

/* One round of tryAcquireOrRenew. */
static void lease_round(fake_scheduler *s) {
    pthread_mutex_lock(&g_lease_mu);
    char *txt = fake_api_get(s->f, "leases", s->d->lease_ns, s->d->lease_name);
    cJSON *l = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    const char *holder = str(get(l, "spec"), "holderIdentity");
    const char *rvs = str(get(l, "metadata"), "resourceVersion");
    long long rv = rvs ? atoll(rvs) : 0;
    int64_t now = now_ms();
    if (rv != s->seen_rv) { s->seen_rv = rv; s->seen_at = now; }
    const cJSON *secs = get(get(l, "spec"), "leaseDurationSeconds");
    int64_t dur = cJSON_IsNumber(secs) ? (int64_t)secs->valuedouble * 1000 : s->d->lease_ms;
    bool mine = holder && !strcmp(holder, s->identity);
    bool free_ = !l || !holder || !holder[0] || now >= s->seen_at + dur;
    if (mine || free_) {
        put_lease(s, s->identity, (s->d->lease_ms + 999) / 1000);
        txt = fake_api_get(s->f, "leases", s->d->lease_ns, s->d->lease_name);
        cJSON *l2 = txt ? cJSON_Parse(txt) : NULL;
        free(txt);
        const char *rv2 = str(get(l2, "metadata"), "resourceVersion");
        s->seen_rv = rv2 ? atoll(rv2) : 0;
        s->seen_at = now;
        cJSON_Delete(l2);
    }
    atomic_store(&s->leading, mine || free_);   /* we (re)wrote it just now, or someone else holds it */
    pthread_mutex_unlock(&g_lease_mu);
    cJSON_Delete(l);
}

/* POST to the extender's verb; the reply as JSON (NULL on any failure). */
static cJSON *verb(fake_scheduler *s, const char *name, const char *payload) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s/%s", s->port, s->d->url_path, name);
    atomic_fetch_add(&s->calls, 1);
    long code;
    char *answer = http_call(url, payload, 10, &code);   /* httpTimeout: 10s */
    cJSON *o = code == 200 && answer ? cJSON_Parse(answer) : NULL;
    free(answer);
    return o;
}

static retry *retry_of(fake_scheduler *s, const char *uid) {
    retry *free_slot = NULL;
    for (int i = 0; i < 64; i++) {
        if (!strcmp(s->retries[i].uid, uid)) return &s->retries[i];
        if (!free_slot && !s->retries[i].uid[0]) free_slot = &s->retries[i];
    }
    if (!free_slot) free_slot = &s->retries[0];
    snprintf(free_slot->uid, sizeof free_slot->uid, "%s", uid);
    free_slot->at = 0;
    return free_slot;
}

/* What Go's fmt makes of text used as a format string with no arguments, as kube-scheduler's
 * Eventf(pod, nil, Warning, "FailedScheduling", "Scheduling", msg) does with msg (schedule_one.go): "%%" is '%',
 * any other '%' with its flags, width and precision and the verb after them becomes "%!<verb>(MISSING)"
 * ("25% memory" -> "25%!m(MISSING)emory"), a '%' at the end "%!(NOVERB)". Caller frees. */
static char *go_sprintf_no_args(const char *fmt) {
    size_t cap = strlen(fmt) * 6 + 16, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *p = fmt; *p;) {
        if (*p != '%') { out[o++] = *p++; continue; }
        p++;
        if (*p == '%') { out[o++] = '%'; p++; continue; }
        while (*p && strchr("+-# 0", *p)) p++;
        while (*p >= '0' && *p <= '9') p++;
        if (*p == '.') for (p++; *p >= '0' && *p <= '9'; p++) {}
        if (!*p) { o += (size_t)snprintf(out + o, cap - o, "%%!(NOVERB)"); break; }
        o += (size_t)snprintf(out + o, cap - o, "%%!%c(MISSING)", *p);
        p++;
    }
    out[o] = 0;
    return out;
}

/* kube-scheduler's FailedScheduling Event for a pod no node passed: "0/N nodes are available: <count> <reason>,
 * ...", rendered through the format-string rule above, POSTed to the API server like its event recorder does. */
static void failed_scheduling(fake_scheduler *s, const cJSON *pod, const cJSON *fr, int nnodes) {
    char msg[4096];
    size_t off = (size_t)snprintf(msg, sizeof msg, "0/%d nodes are available:", nnodes);
    const cJSON *r;
    const char *err = cJSON_IsString(get(fr, "Error")) ? get(fr, "Error")->valuestring : "";
    if (err[0]) off += (size_t)snprintf(msg + off, sizeof msg - off, " %s", err);
    static const char *const maps[2] = {"FailedNodes", "FailedAndUnresolvableNodes"};   /* node name -> reason */
    for (int k = 0; k < 2; k++)
        cJSON_ArrayForEach(r, get(fr, maps[k]))
            if (cJSON_IsString(r) && off < sizeof msg) off += (size_t)snprintf(msg + off, sizeof msg - off, " 1 %s,", r->valuestring);
    if (off < sizeof msg && msg[off - 1] == ',') msg[off - 1] = '.';
    char *text = go_sprintf_no_args(msg);
    const cJSON *meta = get(pod, "metadata");
    const char *ns = str(meta, "namespace") ? str(meta, "namespace") : "default";
    cJSON *ev = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(ev, "metadata"), *io = cJSON_AddObjectToObject(ev, "involvedObject");
    cJSON_AddStringToObject(m, "generateName", "failed-scheduling-");
    cJSON_AddStringToObject(m, "namespace", ns);
    cJSON_AddStringToObject(io, "kind", "Pod");
    cJSON_AddStringToObject(io, "namespace", ns);
    cJSON_AddStringToObject(io, "name", str(meta, "name") ? str(meta, "name") : "");
    cJSON_AddStringToObject(io, "uid", str(meta, "uid") ? str(meta, "uid") : "");
    cJSON_AddStringToObject(ev, "type", "Warning");
    cJSON_AddStringToObject(ev, "reason", "FailedScheduling");
    cJSON_AddStringToObject(ev, "action", "Scheduling");
    cJSON_AddStringToObject(ev, "message", text ? text : "");
    char *body = cJSON_PrintUnformatted(ev), url[512], base[128];
    fake_api_url(s->f, base, sizeof base);
    snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/events", base, ns);
    long code;
    free(http_call(url, body, 5, &code));
    free(body);
    free(text);
    cJSON_Delete(ev);
}

/* Filter, prioritize, bind one pod; false when it must be retried. */
static bool schedule_one(fake_scheduler *s, const cJSON *pod, const cJSON *nodes) {
    cJSON *args = cJSON_CreateObject();
    cJSON_AddItemToObject(args, "Pod", cJSON_Duplicate(pod, 1));
    cJSON_AddNullToObject(args, "Nodes");
    cJSON *names = cJSON_AddArrayToObject(args, "NodeNames");
    const cJSON *n;
    cJSON_ArrayForEach(n, nodes) cJSON_AddItemToArray(names, cJSON_CreateString(str(get(n, "metadata"), "name")));
    char *payload = cJSON_PrintUnformatted(args);
    cJSON *fr = verb(s, s->d->filter_verb, payload);
    free(payload);
    const cJSON *passed = get(fr, "NodeNames");
    bool ok = false;
    if (fr && cJSON_GetArraySize(passed) == 0) failed_scheduling(s, pod, fr, cJSON_GetArraySize(nodes));
    if (cJSON_GetArraySize(passed) > 0 && !(str(fr, "Error") && str(fr, "Error")[0])) {
        const char *best = cJSON_GetArrayItem(passed, 0)->valuestring;
        cJSON *pr = NULL;
        if (cJSON_GetArraySize(passed) > 1 && s->d->prioritize_verb[0]) {
            cJSON_ReplaceItemInObjectCaseSensitive(args, "NodeNames", cJSON_Duplicate(passed, 1));
            payload = cJSON_PrintUnformatted(args);
            pr = verb(s, s->d->prioritize_verb, payload);
            free(payload);
            double top = -1;
            const cJSON *e;
            cJSON_ArrayForEach(e, pr) {
                const cJSON *sc = get(e, "Score");
                if (str(e, "Host") && cJSON_IsNumber(sc) && sc->valuedouble > top) { top = sc->valuedouble; best = str(e, "Host"); }
            }
        }
        const cJSON *meta = get(pod, "metadata");
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "PodName", str(meta, "name"));
        cJSON_AddStringToObject(b, "PodNamespace", str(meta, "namespace") ? str(meta, "namespace") : "default");
        cJSON_AddStringToObject(b, "PodUID", str(meta, "uid"));
        cJSON_AddStringToObject(b, "Node", best);
        payload = cJSON_PrintUnformatted(b);
        cJSON_Delete(b);
        cJSON *br = verb(s, s->d->bind_verb, payload);
        free(payload);
        ok = br && !(str(br, "Error") && str(br, "Error")[0]);
        if (ok) atomic_fetch_add(&s->bound, 1);
        cJSON_Delete(br);
        cJSON_Delete(pr);
    }
    cJSON_Delete(fr);
    cJSON_Delete(args);
    return ok;
}

static void schedule_pending(fake_scheduler *s) {
    char *pt = fake_api_list(s->f, "pods"), *nt = fake_api_list(s->f, "nodes");
    cJSON *pods = pt ? cJSON_Parse(pt) : NULL, *nodes = nt ? cJSON_Parse(nt) : NULL;
    free(pt);
    free(nt);
    const cJSON *p;
    int64_t now = now_ms();
    cJSON_ArrayForEach(p, pods) {
        const cJSON *meta = get(p, "metadata"), *spec = get(p, "spec");
        const char *sn = str(spec, "schedulerName"), *uid = str(meta, "uid");
        if (!sn || strcmp(sn, s->d->scheduler_name) || str(spec, "nodeName") || get(meta, "deletionTimestamp") || !uid)
            continue;
        if (!deployed_interested(s->d, p)) continue;   /* kube-scheduler alone would place it: not modelled */
        retry *r = retry_of(s, uid);
        if (now < r->at) continue;
        if (!atomic_load(&s->leading) || atomic_load(&s->stop)) break;
        if (!schedule_one(s, p, nodes)) r->at = now + 1000;
    }
    cJSON_Delete(pods);
    cJSON_Delete(nodes);
}

static void *run(void *arg) {
    fake_scheduler *s = arg;
    int64_t next_lease = 0;
    while (!atomic_load(&s->stop)) {
        if (now_ms() >= next_lease) {
            lease_round(s);
            next_lease = now_ms() + s->d->retry_ms;
        }
        if (atomic_load(&s->leading)) schedule_pending(s);
        struct timespec nap = {0, FS_POLL_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
    if (s->release && atomic_load(&s->leading)) {   /* ReleaseOnCancel */
        pthread_mutex_lock(&g_lease_mu);
        put_lease(s, "", 1);
        pthread_mutex_unlock(&g_lease_mu);
    }
    return NULL;
}

fake_scheduler *fake_scheduler_start(fake_api *f, const deployed *d, const char *pod_name, int extender_port) {
    fake_scheduler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->f = f;
    s->d = d;
    s->port = extender_port;
    static atomic_uint seq;
    snprintf(s->identity, sizeof s->identity, "%.63s_%08x-4b1d-4c3e-9f00-%012x", pod_name, atomic_fetch_add(&seq, 1) + 1,
             (unsigned)(uintptr_t)s & 0xffffffu);
    atomic_init(&s->stop, false);
    atomic_init(&s->leading, false);
    if (pthread_create(&s->thr, NULL, run, s) != 0) { free(s); return NULL; }
    return s;
}

void fake_scheduler_stop(fake_scheduler *s, bool release) {
    if (!s) return;
    s->release = release;
    atomic_store(&s->stop, true);
    pthread_join(s->thr, NULL);
    free(s);
}

bool fake_scheduler_leading(fake_scheduler *s) { return atomic_load(&s->leading); }
int fake_scheduler_calls(fake_scheduler *s) { return atomic_load(&s->calls); }
int fake_scheduler_bound(fake_scheduler *s) { return atomic_load(&s->bound); }
