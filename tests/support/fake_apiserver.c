/* fake_apiserver.c -- the in-memory Kubernetes API server of fake_apiserver.h, on libmicrohttpd.
 * One thread per connection, so a watch can block in its content callback until the next event; one mutex
 * guards all state, one condition variable wakes the watches. */
#include "tests/support/fake_apiserver.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define FA_MAX_BODY   (1u << 20) /* binding bodies are small; bigger is a client bug */
#define FA_MAX_RULES  32
#define FA_MAX_LOG    200000     /* request keys remembered for fake_api_requests */

/* Kinds. Nodes, pods and the resource.k8s.io/v1 kinds are listed and watched over HTTP (what tessera's client
 * watches); the others are reached by name (and created on their collection). */
enum { FA_NODES = 0, FA_PODS, FA_LEASES, FA_CONFIGMAPS, FA_SECRETS, FA_MWCS, FA_RSLICES, FA_RCLAIMS, FA_DCLASSES,
       FA_NAMESPACES, FA_NKINDS };
#define FA_WATCHED(k) ((k) == FA_NODES || (k) == FA_PODS || ((k) >= FA_RSLICES && (k) <= FA_DCLASSES))

typedef struct fa_kind_info {
    const char *plural;   /* the C API's kind and the URL's resource */
    const char *kind, *api_version;
    const char *root;     /* the API group's path */
    const char *resource; /* as Status messages name it: plural[.group] */
    const char *group;    /* Status details.group ("" for core) */
    bool namespaced;
} fa_kind_info;

static const fa_kind_info fa_kinds[FA_NKINDS] = {
    {"nodes", "Node", "v1", "/api/v1", "nodes", "", false},
    {"pods", "Pod", "v1", "/api/v1", "pods", "", true},
    {"leases", "Lease", "coordination.k8s.io/v1", "/apis/coordination.k8s.io/v1", "leases.coordination.k8s.io",
     "coordination.k8s.io", true},
    {"configmaps", "ConfigMap", "v1", "/api/v1", "configmaps", "", true},
    {"secrets", "Secret", "v1", "/api/v1", "secrets", "", true},
    {"mutatingwebhookconfigurations", "MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1",
     "/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations.admissionregistration.k8s.io",
     "admissionregistration.k8s.io", false},
    {"resourceslices", "ResourceSlice", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1", "resourceslices.resource.k8s.io",
     "resource.k8s.io", false},
    {"resourceclaims", "ResourceClaim", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1", "resourceclaims.resource.k8s.io",
     "resource.k8s.io", true},
    {"deviceclasses", "DeviceClass", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1", "deviceclasses.resource.k8s.io",
     "resource.k8s.io", false},
    /* last: /api/v1/namespaces/NS/<plural> is a namespaced kind's path, tried first; /api/v1/namespaces/NAME is this */
    {"namespaces", "Namespace", "v1", "/api/v1", "namespaces", "", false},
};

typedef struct fa_obj { char *key; cJSON *json; } fa_obj;
typedef struct fa_store { fa_obj *v; size_t n, cap; } fa_store;

/* One history entry. Object events carry the resourceVersion they created; live-only entries (bookmarks,
 * raw lines) go only to watches that were open when they were sent, never to later ones replaying history. */
typedef struct fa_event {
    uint64_t seq, rv;
    int kind;
    bool live_only;
    char *line; /* ends with '\n' */
} fa_event;

/* late: the request takes effect, its answer waits for fake_api_release_replies */
typedef struct fa_rule { char target[256]; int status, count, stall_ms; bool late; char msg[256], reason[64]; } fa_rule;

struct fake_api {
    pthread_mutex_t mu;
    char *tls_cert, *tls_key;   /* PEM: serve HTTPS (fake_api_start_tls); NULL: plain HTTP */
    pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on every event and watch control */
    struct MHD_Daemon *d;
    int port;
    bool stopping;
    uint64_t rv, compacted_rv, seq, uid_seq;
    uint64_t drop_gen, end_gen, expire_gen, release_gen;
    fa_store store[FA_NKINDS];
    fa_event *ev;
    size_t nev, capev;
    fa_rule rules[FA_MAX_RULES];
    int nrules;
    char **log;
    size_t nlog, caplog;
    char **bind_bodies;
    int nbind;
    size_t capbind;
    cJSON *events; /* array of the Events created (POST .../events), as stored */
    char *last_auth, *token;
    int watchers[FA_NKINDS];
};

/* Per-request state, from the first call of the access handler to the completion notice. */
typedef struct fa_req { char *body; size_t n; bool too_big; } fa_req;

typedef struct fa_watch {
    fake_api *f;
    int kind;
    int fd; /* the client's socket, to notice it hang up while we wait for events */
    uint64_t next_seq, start_seq;
    uint64_t drop_gen, end_gen, expire_gen;
    struct timespec deadline;
    char *out;
    size_t outlen, outoff;
    int end; /* 0 streaming, 1 end normally after out, 2 cut after out */
} fa_watch;

/* The kind whose collection (all namespaces) url names, when it is one that is listed and watched; else -1. */
static int fa_collection(const char *url) {
    for (int k = 0; k < FA_NKINDS; k++) {
        size_t rl = strlen(fa_kinds[k].root);
        if (FA_WATCHED(k) && !strncmp(url, fa_kinds[k].root, rl) && url[rl] == '/' && !strcmp(url + rl + 1, fa_kinds[k].plural))
            return k;
    }
    return -1;
}

static int fa_kind(const char *kind) {
    for (int k = 0; kind && k < FA_NKINDS; k++)
        if (strcmp(kind, fa_kinds[k].plural) == 0) return k;
    return -1;
}

static void *fa_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort(); /* test support: out of memory is not a case worth surviving */
    return p;
}

static char *fa_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(fa_xmalloc(n), s, n);
}

static void fa_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) abort();
    *p = q;
    *cap = c;
}

static const char *fa_meta_str(const cJSON *obj, const char *field) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void fa_key(int kind, const char *ns, const char *name, char *buf, size_t len) {
    if (fa_kinds[kind].namespaced) snprintf(buf, len, "%s/%s", ns && *ns ? ns : "default", name);
    else snprintf(buf, len, "%s", name);
}

/* Binary search: index of key, or where it would go (*found false). */
static size_t fa_find(const fa_store *s, const char *key, bool *found) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(s->v[mid].key, key);
        if (c == 0) { *found = true; return mid; }
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    *found = false;
    return lo;
}

/* Insert obj under key, or replace the object stored there (freed); the store owns obj afterwards. */
static void fa_store_set(fa_store *s, const char *key, cJSON *obj, bool *found) {
    size_t i = fa_find(s, key, found);
    if (*found) {
        cJSON_Delete(s->v[i].json);
        s->v[i].json = obj;
        return;
    }
    fa_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v);
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = (fa_obj){fa_strdup(key), obj};
    s->n++;
}

static void fa_now_plus(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

static bool fa_before(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Caller holds mu. Takes ownership of line. */
static void fa_push_event(fake_api *f, int kind, uint64_t rv, bool live_only, char *line) {
    fa_grow((void **)&f->ev, &f->capev, f->nev + 1, sizeof *f->ev);
    f->ev[f->nev++] = (fa_event){++f->seq, rv, kind, live_only, line};
    pthread_cond_broadcast(&f->cv);
}

static char *fa_event_line(const char *type, const cJSON *obj) {
    char *o = cJSON_PrintUnformatted(obj);
    if (!o) abort();
    size_t n = strlen(type) + strlen(o) + 32;
    char *line = fa_xmalloc(n);
    snprintf(line, n, "{\"type\":\"%s\",\"object\":%s}\n", type, o);
    free(o);
    return line;
}

static char *fa_status_json(int code, const char *reason, const char *msg) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "kind", "Status");
    cJSON_AddStringToObject(s, "apiVersion", "v1");
    cJSON_AddItemToObject(s, "metadata", cJSON_CreateObject());
    cJSON_AddStringToObject(s, "status", code < 300 ? "Success" : "Failure");
    if (code >= 300) {
        cJSON_AddStringToObject(s, "message", msg);
        cJSON_AddStringToObject(s, "reason", reason);
    }
    cJSON_AddNumberToObject(s, "code", code);
    char *out = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    if (!out) abort();
    return out;
}

/* ---- stored objects (callers hold mu) ------------------------------------------------------------------ */

static cJSON *fa_meta(cJSON *obj) {
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "metadata");
        meta = cJSON_AddObjectToObject(obj, "metadata");
    }
    return meta;
}

static void fa_set_str(cJSON *obj, const char *field, const char *value) {
    cJSON_DeleteItemFromObjectCaseSensitive(obj, field);
    if (value) cJSON_AddStringToObject(obj, field, value);
}

static void fa_new_uid(fake_api *f, char *buf, size_t len) {
    snprintf(buf, len, "fake-uid-%06" PRIu64, ++f->uid_seq);
}

/* Give obj a new resourceVersion, kind and apiVersion, store it under its key (the store owns it), and tell
 * watchers. Returns the resourceVersion. */
static uint64_t fa_commit(fake_api *f, int k, cJSON *obj) {
    char key[1024], rvs[32];
    uint64_t rv = ++f->rv;
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    fa_set_str(fa_meta(obj), "resourceVersion", rvs);
    if (!cJSON_GetObjectItemCaseSensitive(obj, "kind")) cJSON_AddStringToObject(obj, "kind", fa_kinds[k].kind);
    if (!cJSON_GetObjectItemCaseSensitive(obj, "apiVersion"))
        cJSON_AddStringToObject(obj, "apiVersion", fa_kinds[k].api_version);
    fa_key(k, fa_meta_str(obj, "namespace"), fa_meta_str(obj, "name"), key, sizeof key);
    bool found;
    fa_store_set(&f->store[k], key, obj, &found);
    fa_push_event(f, k, rv, false, fa_event_line(found ? "MODIFIED" : "ADDED", obj));
    return rv;
}

static bool fa_owned_by(const cJSON *obj, const char *uid) {
    const cJSON *refs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                         "ownerReferences"), *r;
    cJSON_ArrayForEach(r, refs) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(r, "uid");
        if (cJSON_IsString(u) && strcmp(u->valuestring, uid) == 0) return true;
    }
    return false;
}

/* Remove the i-th object of kind k, with a new resourceVersion and a DELETED event; returns it (the caller
 * frees it). A pod takes the ConfigMaps it owns along, as the garbage collector would (at once here). */
static cJSON *fa_remove_at(fake_api *f, int k, size_t i) {
    fa_store *s = &f->store[k];
    fa_obj o = s->v[i];
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
    free(o.key);
    uint64_t rv = ++f->rv;
    char rvs[32];
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    fa_set_str(fa_meta(o.json), "resourceVersion", rvs);
    fa_push_event(f, k, rv, false, fa_event_line("DELETED", o.json));
    const char *uid = fa_meta_str(o.json, "uid"), *ns = fa_meta_str(o.json, "namespace");
    if (k == FA_PODS && uid && ns) {
        fa_store *cms = &f->store[FA_CONFIGMAPS];
        for (size_t j = cms->n; j-- > 0;) {
            const char *cns = fa_meta_str(cms->v[j].json, "namespace");
            if (cns && strcmp(cns, ns) == 0 && fa_owned_by(cms->v[j].json, uid))
                cJSON_Delete(fa_remove_at(f, FA_CONFIGMAPS, j));
        }
    }
    return o.json;
}

/* RFC 7386 JSON merge patch: returns the patched target (target is consumed; patch is only read). */
static cJSON *fa_merge_patch(cJSON *target, const cJSON *patch) {
    if (!cJSON_IsObject(patch)) {
        cJSON_Delete(target);
        return cJSON_Duplicate(patch, 1);
    }
    if (!cJSON_IsObject(target)) {
        cJSON_Delete(target);
        target = cJSON_CreateObject();
    }
    for (const cJSON *p = patch->child; p; p = p->next) {
        cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
        if (cJSON_IsNull(p)) { cJSON_Delete(old); continue; }
        cJSON_AddItemToObject(target, p->string, fa_merge_patch(old, p));
    }
    return target;
}

/* ---- the C API: objects ------------------------------------------------------------------------------ */

long long fake_api_put(fake_api *f, const char *kind, const char *json_obj) {
    int k = fa_kind(kind);
    cJSON *obj = json_obj ? cJSON_Parse(json_obj) : NULL;
    const char *name = fa_meta_str(obj, "name");
    if (k < 0 || !cJSON_IsObject(obj) || !name || !*name) { cJSON_Delete(obj); return -1; }
    cJSON *meta = fa_meta(obj);
    if (fa_kinds[k].namespaced && !fa_meta_str(obj, "namespace")) fa_set_str(meta, "namespace", "default");
    pthread_mutex_lock(&f->mu);
    if (!fa_meta_str(obj, "uid")) {
        char uid[64];
        fa_new_uid(f, uid, sizeof uid);
        fa_set_str(meta, "uid", uid);
    }
    uint64_t rv = fa_commit(f, k, obj);
    pthread_mutex_unlock(&f->mu);
    return (long long)rv;
}

long long fake_api_patch(fake_api *f, const char *kind, const char *ns, const char *name, const char *merge_patch) {
    int k = fa_kind(kind);
    cJSON *patch = merge_patch ? cJSON_Parse(merge_patch) : NULL;
    if (k < 0 || !name || !cJSON_IsObject(patch)) { cJSON_Delete(patch); return -1; }
    char key[1024];
    fa_key(k, ns, name, key, sizeof key);
    pthread_mutex_lock(&f->mu);
    bool found;
    size_t i = fa_find(&f->store[k], key, &found);
    long long rv = -1;
    if (found) {
        cJSON *obj = fa_merge_patch(cJSON_Duplicate(f->store[k].v[i].json, 1), patch);
        /* the object stays where it is: identity fields are not the patch's to change */
        const cJSON *old = f->store[k].v[i].json;
        cJSON *meta = fa_meta(obj);
        fa_set_str(meta, "name", fa_meta_str(old, "name"));
        fa_set_str(meta, "namespace", fa_meta_str(old, "namespace"));
        fa_set_str(meta, "uid", fa_meta_str(old, "uid"));
        rv = (long long)fa_commit(f, k, obj);
    }
    pthread_mutex_unlock(&f->mu);
    cJSON_Delete(patch);
    return rv;
}

int fake_api_delete(fake_api *f, const char *kind, const char *ns, const char *name) {
    int k = fa_kind(kind);
    if (k < 0 || !name) return -1;
    char key[1024];
    fa_key(k, ns, name, key, sizeof key);
    pthread_mutex_lock(&f->mu);
    bool found;
    size_t i = fa_find(&f->store[k], key, &found);
    cJSON *gone = found ? fa_remove_at(f, k, i) : NULL;
    pthread_mutex_unlock(&f->mu);
    cJSON_Delete(gone);
    return found ? 0 : -1;
}

char *fake_api_get(fake_api *f, const char *kind, const char *ns, const char *name) {
    int k = fa_kind(kind);
    if (k < 0 || !name) return NULL;
    char key[1024];
    fa_key(k, ns, name, key, sizeof key);
    pthread_mutex_lock(&f->mu);
    bool found;
    size_t i = fa_find(&f->store[k], key, &found);
    char *out = found ? cJSON_PrintUnformatted(f->store[k].v[i].json) : NULL;
    pthread_mutex_unlock(&f->mu);
    return out;
}

char *fake_api_list(fake_api *f, const char *kind) {
    int k = fa_kind(kind);
    cJSON *arr = cJSON_CreateArray();
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; k >= 0 && i < f->store[k].n; i++)
        cJSON_AddItemToArray(arr, cJSON_Duplicate(f->store[k].v[i].json, 1));
    pthread_mutex_unlock(&f->mu);
    char *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return out;
}

long long fake_api_rv(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    long long rv = (long long)f->rv;
    pthread_mutex_unlock(&f->mu);
    return rv;
}

/* ---- the C API: faults and records ------------------------------------------------------------------- */

void fake_api_inject(fake_api *f, const char *target, int status, int count) {
    pthread_mutex_lock(&f->mu);
    if (f->nrules < FA_MAX_RULES && target && count > 0) {
        fa_rule *r = &f->rules[f->nrules++];
        memset(r, 0, sizeof *r);
        snprintf(r->target, sizeof r->target, "%s", target);
        r->status = status;
        r->count = count;
        r->stall_ms = 0;
        r->msg[0] = r->reason[0] = 0;
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_api_inject_msg(fake_api *f, const char *target, int status, const char *reason, const char *message,
                         int count) {
    pthread_mutex_lock(&f->mu);
    if (f->nrules < FA_MAX_RULES && target && count > 0 && status >= 400 && status <= 599) {
        fa_rule *r = &f->rules[f->nrules++];
        memset(r, 0, sizeof *r);
        snprintf(r->target, sizeof r->target, "%s", target);
        r->status = status;
        r->count = count;
        r->stall_ms = 0;
        snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
        snprintf(r->msg, sizeof r->msg, "%s", message ? message : "");
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_api_inject_stall(fake_api *f, const char *target, int ms, int count) {
    pthread_mutex_lock(&f->mu);
    if (f->nrules < FA_MAX_RULES && target && count > 0 && ms > 0) {
        fa_rule *r = &f->rules[f->nrules++];
        memset(r, 0, sizeof *r);
        snprintf(r->target, sizeof r->target, "%s", target);
        r->status = 0;
        r->count = count;
        r->stall_ms = ms;
        r->msg[0] = r->reason[0] = 0;
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_api_inject_late_reply(fake_api *f, const char *target, int count) {
    pthread_mutex_lock(&f->mu);
    if (f->nrules < FA_MAX_RULES && target && count > 0) {
        fa_rule *r = &f->rules[f->nrules++];
        memset(r, 0, sizeof *r);
        snprintf(r->target, sizeof r->target, "%s", target);
        r->count = count;
        r->late = true;
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_api_release_replies(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    f->release_gen++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void fake_api_clear_injections(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    f->nrules = 0;
    pthread_mutex_unlock(&f->mu);
}

static void fa_bump(fake_api *f, uint64_t *gen) {
    pthread_mutex_lock(&f->mu);
    (*gen)++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void fake_api_drop_watches(fake_api *f) { fa_bump(f, &f->drop_gen); }
void fake_api_end_watches(fake_api *f) { fa_bump(f, &f->end_gen); }
void fake_api_expire_watches(fake_api *f) { fa_bump(f, &f->expire_gen); }

void fake_api_compact(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    f->compacted_rv = f->rv;
    /* live-only entries (bookmarks, raw lines) are in flight to open watches, not history: keep them. Open
     * watches hold sequence numbers, not indexes, so shrinking the array cannot confuse them. */
    size_t keep = 0;
    for (size_t i = 0; i < f->nev; i++) {
        if (f->ev[i].live_only) f->ev[keep++] = f->ev[i];
        else free(f->ev[i].line);
    }
    f->nev = keep;
    pthread_mutex_unlock(&f->mu);
}

void fake_api_bookmark(fake_api *f, const char *kind) {
    int k = fa_kind(kind);
    if (k < 0) return;
    pthread_mutex_lock(&f->mu);
    char line[256];
    snprintf(line, sizeof line,
             "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"v1\","
             "\"metadata\":{\"resourceVersion\":\"%" PRIu64 "\"}}}\n",
             fa_kinds[k].kind, f->rv);
    fa_push_event(f, k, f->rv, true, fa_strdup(line));
    pthread_mutex_unlock(&f->mu);
}

void fake_api_watch_raw(fake_api *f, const char *kind, const char *line) {
    int k = fa_kind(kind);
    if (k < 0 || !line) return;
    size_t n = strlen(line);
    char *l = fa_xmalloc(n + 2);
    memcpy(l, line, n);
    l[n] = '\n';
    l[n + 1] = 0;
    pthread_mutex_lock(&f->mu);
    fa_push_event(f, k, f->rv, true, l);
    pthread_mutex_unlock(&f->mu);
}

int fake_api_watchers(fake_api *f, const char *kind) {
    int k = fa_kind(kind);
    pthread_mutex_lock(&f->mu);
    int n = k >= 0 ? f->watchers[k] : 0;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static bool fa_matches(const char *target, const char *key) {
    const char *path = strchr(key, ' ');
    size_t tn = strlen(target);
    return strncmp(key, target, tn) == 0 || (path && strncmp(path + 1, target, tn) == 0);
}

int fake_api_requests(fake_api *f, const char *target) {
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nlog; i++) n += fa_matches(target ? target : "", f->log[i]);
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fake_api_bindings(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    int n = f->nbind;
    pthread_mutex_unlock(&f->mu);
    return n;
}

void fake_api_forget_records(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nlog; i++) free(f->log[i]);
    f->nlog = 0;
    for (int i = 0; i < f->nbind; i++) free(f->bind_bodies[i]);
    f->nbind = 0;
    pthread_mutex_unlock(&f->mu);
}

char *fake_api_binding_body(fake_api *f, int i) {
    pthread_mutex_lock(&f->mu);
    char *out = i >= 0 && i < f->nbind ? fa_strdup(f->bind_bodies[i]) : NULL;
    pthread_mutex_unlock(&f->mu);
    return out;
}

char *fake_api_events(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    char *out = f->events ? cJSON_PrintUnformatted(f->events) : fa_strdup("[]");
    pthread_mutex_unlock(&f->mu);
    return out;
}

int fake_api_event_count(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    int n = f->events ? cJSON_GetArraySize(f->events) : 0;
    pthread_mutex_unlock(&f->mu);
    return n;
}

char *fake_api_last_auth(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    char *out = fa_strdup(f->last_auth ? f->last_auth : "");
    pthread_mutex_unlock(&f->mu);
    return out;
}

void fake_api_require_token(fake_api *f, const char *token) {
    pthread_mutex_lock(&f->mu);
    free(f->token);
    f->token = token && *token ? fa_strdup(token) : NULL;
    pthread_mutex_unlock(&f->mu);
}

/* ---- HTTP ---------------------------------------------------------------------------------------------- */

static enum MHD_Result fa_send(struct MHD_Connection *c, unsigned code, const char *body) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result fa_send_status(struct MHD_Connection *c, unsigned code, const char *reason, const char *msg) {
    char *body = fa_status_json((int)code, reason, msg);
    enum MHD_Result ret = fa_send(c, code, body);
    free(body);
    return ret;
}

/* The watch stream: blocks (its connection has its own thread) until there is something to send. */
static ssize_t fa_watch_read(void *cls, uint64_t pos, char *buf, size_t max) {
    fa_watch *w = cls;
    fake_api *f = w->f;
    for (;;) {
        if (w->outoff < w->outlen) {
            size_t n = w->outlen - w->outoff;
            if (n > max) n = max;
            memcpy(buf, w->out + w->outoff, n);
            w->outoff += n;
            return (ssize_t)n;
        }
        free(w->out);
        w->out = NULL;
        w->outlen = w->outoff = 0;
        if (w->end == 1) return MHD_CONTENT_READER_END_OF_STREAM;
        if (w->end == 2) return MHD_CONTENT_READER_END_WITH_ERROR;

        pthread_mutex_lock(&f->mu);
        for (;;) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (f->stopping || f->drop_gen != w->drop_gen) { w->end = 2; break; }
            if (f->expire_gen != w->expire_gen) {
                w->out = fa_status_json(410, "Expired", "too old resource version (watch expired)");
                size_t n = strlen(w->out) + 40;
                char *line = fa_xmalloc(n);
                snprintf(line, n, "{\"type\":\"ERROR\",\"object\":%s}\n", w->out);
                free(w->out);
                w->out = line;
                w->outlen = strlen(line);
                w->end = 1;
                break;
            }
            /* next entry with seq >= next_seq: the array is sorted by seq */
            size_t lo = 0, hi = f->nev;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (f->ev[mid].seq < w->next_seq) lo = mid + 1; else hi = mid;
            }
            for (; lo < f->nev; lo++) {
                fa_event *e = &f->ev[lo];
                w->next_seq = e->seq + 1;
                if (e->kind != w->kind || (e->live_only && e->seq < w->start_seq)) continue;
                w->out = fa_strdup(e->line);
                w->outlen = strlen(e->line);
                break;
            }
            if (w->out) break;
            /* a normal end comes after what is already queued, as when the real server's timeout fires */
            if (f->end_gen != w->end_gen || !fa_before(&now, &w->deadline)) { w->end = 1; break; }
            if (w->fd >= 0) {
                /* without this a watch the client abandoned would linger (and count) until its timeout */
                struct pollfd pfd = {.fd = w->fd, .events = POLLRDHUP};
                if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))) { w->end = 2; break; }
            }
            struct timespec t;
            fa_now_plus(&t, 50);
            pthread_cond_timedwait(&f->cv, &f->mu, fa_before(&t, &w->deadline) ? &t : &w->deadline);
        }
        pthread_mutex_unlock(&f->mu);
    }
}

static void fa_watch_free(void *cls) {
    fa_watch *w = cls;
    pthread_mutex_lock(&w->f->mu);
    w->f->watchers[w->kind]--;
    pthread_mutex_unlock(&w->f->mu);
    free(w->out);
    free(w);
}

/* Caller holds mu. */
static enum MHD_Result fa_watch_start(fake_api *f, struct MHD_Connection *c, int kind, bool gone_event,
                                      bool garbage) {
    const char *rvs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "resourceVersion");
    const char *tos = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeoutSeconds");
    char *end = NULL;
    uint64_t rv = rvs && *rvs ? strtoull(rvs, &end, 10) : f->rv;
    if (rvs && *rvs && (!end || *end)) return fa_send_status(c, 400, "BadRequest", "invalid resourceVersion");
    long to = tos ? strtol(tos, NULL, 10) : 60;
    if (to <= 0 || to > 3600) to = 60;

    fa_watch *w = fa_xmalloc(sizeof *w);
    memset(w, 0, sizeof *w);
    w->f = f;
    w->kind = kind;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    w->fd = ci ? ci->connect_fd : -1;
    w->drop_gen = f->drop_gen;
    w->end_gen = f->end_gen;
    w->expire_gen = f->expire_gen;
    w->start_seq = f->seq + 1;
    fa_now_plus(&w->deadline, to * 1000);
    /* replay from the first event after rv; history starts right after compacted_rv */
    w->next_seq = f->seq + 1;
    for (size_t i = 0; i < f->nev; i++)
        if (!f->ev[i].live_only && f->ev[i].rv > rv) { w->next_seq = f->ev[i].seq; break; }
    if (gone_event || rv < f->compacted_rv) {
        char *st = fa_status_json(410, "Expired", "too old resource version");
        size_t n = strlen(st) + 40;
        w->out = fa_xmalloc(n);
        snprintf(w->out, n, "{\"type\":\"ERROR\",\"object\":%s}\n", st);
        free(st);
        w->outlen = strlen(w->out);
        w->end = 1;
    } else if (garbage) {
        w->out = fa_strdup("{\"type\":\"ADDED\",\"object\":{not json\n");
        w->outlen = strlen(w->out);
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, fa_watch_read, w,
                                                              fa_watch_free);
    if (!r) { free(w->out); free(w); return MHD_NO; }
    f->watchers[kind]++;
    MHD_add_response_header(r, "Content-Type", "application/json");
    pthread_mutex_unlock(&f->mu); /* MHD may call the reader right away, which takes mu */
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    pthread_mutex_lock(&f->mu);
    return ret;
}

/* Caller holds mu. */
static enum MHD_Result fa_list(fake_api *f, struct MHD_Connection *c, int kind) {
    const char *lim = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    const char *cont = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "continue");
    long limit = lim ? strtol(lim, NULL, 10) : 0;
    uint64_t rv = f->rv;
    const char *after = NULL;
    if (cont && *cont) {
        /* token "<rv>|<last key>": pages share the first page's resourceVersion, as with etcd snapshots */
        char *bar = NULL;
        rv = strtoull(cont, &bar, 10);
        if (!bar || *bar != '|') return fa_send_status(c, 400, "BadRequest", "invalid continue token");
        after = bar + 1;
        if (rv < f->compacted_rv)
            return fa_send_status(c, 410, "Expired",
                                  "The provided continue parameter is too old to display a consistent list result.");
    }
    const fa_store *s = &f->store[kind];
    size_t i = 0;
    if (after) {
        bool found;
        i = fa_find(s, after, &found);
        if (found) i++;
    }
    cJSON *root = cJSON_CreateObject(), *items = cJSON_CreateArray();
    char lk[64];
    snprintf(lk, sizeof lk, "%sList", fa_kinds[kind].kind);
    cJSON_AddStringToObject(root, "kind", lk);
    cJSON_AddStringToObject(root, "apiVersion", fa_kinds[kind].api_version);
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    char rvs[32];
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    cJSON_AddStringToObject(meta, "resourceVersion", rvs);
    long taken = 0;
    for (; i < s->n && (limit <= 0 || taken < limit); i++, taken++) {
        cJSON *it = cJSON_Duplicate(s->v[i].json, 1);
        /* list items carry neither kind nor apiVersion, like the real API's */
        cJSON_DeleteItemFromObjectCaseSensitive(it, "kind");
        cJSON_DeleteItemFromObjectCaseSensitive(it, "apiVersion");
        cJSON_AddItemToArray(items, it);
    }
    if (i < s->n && taken > 0) {
        char tok[600];
        snprintf(tok, sizeof tok, "%" PRIu64 "|%s", rv, s->v[i - 1].key);
        cJSON_AddStringToObject(meta, "continue", tok);
    }
    cJSON_AddItemToObject(root, "items", items);
    char *body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!body) abort();
    enum MHD_Result ret = fa_send(c, MHD_HTTP_OK, body);
    free(body);
    return ret;
}

/* Caller holds mu. */
static enum MHD_Result fa_bind(fake_api *f, struct MHD_Connection *c, const char *ns, const char *name,
                               const fa_req *rq) {
    char msg[2048], key[1024];
    cJSON *b = rq->body ? cJSON_ParseWithLength(rq->body, rq->n) : NULL;
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(b, "target");
    const cJSON *node = cJSON_GetObjectItemCaseSensitive(target, "name");
    const cJSON *kindv = cJSON_GetObjectItemCaseSensitive(b, "kind");
    if (!cJSON_IsObject(b) || !cJSON_IsString(node) || !*node->valuestring || !cJSON_IsString(kindv) ||
        strcmp(kindv->valuestring, "Binding") != 0) {
        cJSON_Delete(b);
        return fa_send_status(c, 400, "BadRequest", "malformed Binding body");
    }
    fa_key(FA_PODS, ns, name, key, sizeof key);
    bool found;
    size_t i = fa_find(&f->store[FA_PODS], key, &found);
    if (!found) {
        cJSON_Delete(b);
        snprintf(msg, sizeof msg, "pods \"%s\" not found", name);
        return fa_send_status(c, 404, "NotFound", msg);
    }
    cJSON *pod = f->store[FA_PODS].v[i].json;
    const char *want = fa_meta_str(b, "uid"), *have = fa_meta_str(pod, "uid");
    if (want && *want && (!have || strcmp(want, have) != 0)) {
        snprintf(msg, sizeof msg,
                 "Operation cannot be fulfilled on pods/binding \"%s\": Precondition failed: UID in precondition: "
                 "%s, UID in object meta: %s", name, want, have ? have : "");
        cJSON_Delete(b);
        return fa_send_status(c, 409, "Conflict", msg);
    }
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(spec, "nodeName");
    if (cJSON_IsString(cur) && *cur->valuestring) {
        snprintf(msg, sizeof msg, "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is already "
                 "assigned to node \"%.200s\"", name, name, cur->valuestring);
        cJSON_Delete(b);
        return fa_send_status(c, 409, "Conflict", msg);
    }
    if (!cJSON_IsObject(spec)) {
        cJSON_DeleteItemFromObjectCaseSensitive(pod, "spec");
        spec = cJSON_AddObjectToObject(pod, "spec");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
    cJSON_AddStringToObject(spec, "nodeName", node->valuestring);
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "metadata"),
                                                        "annotations");
    if (cJSON_IsObject(ann) && ann->child) {
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
        cJSON *pa = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        if (!cJSON_IsObject(pa)) {
            cJSON_DeleteItemFromObjectCaseSensitive(meta, "annotations");
            pa = cJSON_AddObjectToObject(meta, "annotations");
        }
        for (const cJSON *a = ann->child; a; a = a->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(pa, a->string);
            cJSON_AddItemToObject(pa, a->string, cJSON_Duplicate(a, 1));
        }
    }
    cJSON_Delete(b);
    uint64_t rv = ++f->rv;
    char rvs[32];
    snprintf(rvs, sizeof rvs, "%" PRIu64, rv);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rvs);
    fa_push_event(f, FA_PODS, rv, false, fa_event_line("MODIFIED", pod));
    return fa_send_status(c, 201, "", "");
}

/* Split "ROOT/namespaces/NS/PLURAL[/NAME[/SUB]]" (namespaced kinds) or "ROOT/PLURAL[/NAME[/SUB]]" (cluster-scoped):
 * the kind, or -1. name and sub are "" when absent. */
static int fa_path(const char *url, char *ns, size_t nslen, char *name, size_t namelen, char *sub, size_t sublen) {
    for (int k = 0; k < FA_NKINDS; k++) {
        const fa_kind_info *ki = &fa_kinds[k];
        size_t rl = strlen(ki->root), pl = strlen(ki->plural);
        if (strncmp(url, ki->root, rl) != 0) continue;
        const char *p = url + rl;
        ns[0] = name[0] = sub[0] = 0;
        if (ki->namespaced) {
            if (strncmp(p, "/namespaces/", 12) != 0) continue;
            const char *a = p + 12, *sl = strchr(a, '/');
            if (!sl || sl == a || (size_t)(sl - a) >= nslen) continue;
            snprintf(ns, nslen, "%.*s", (int)(sl - a), a);
            p = sl;
        }
        if (p[0] != '/' || strncmp(p + 1, ki->plural, pl) != 0 || (p[1 + pl] && p[1 + pl] != '/')) continue;
        p += 1 + pl;
        if (!*p) return k;
        const char *n = p + 1, *e = strchr(n, '/');
        size_t nl = e ? (size_t)(e - n) : strlen(n);
        if (nl == 0 || nl >= namelen) return -1;
        snprintf(name, namelen, "%.*s", (int)nl, n);
        if (e && (!e[1] || strchr(e + 1, '/') || strlen(e + 1) >= sublen)) return -1;
        if (e) snprintf(sub, sublen, "%s", e + 1);
        return k;
    }
    return -1;
}

/* A Status naming the object (details), as the apiserver answers about one; fmt (given the resource and the
 * name) makes the message of a failure, NULL for a success. */
static enum MHD_Result fa_send_obj_status(struct MHD_Connection *c, unsigned code, const char *reason, int k,
                                          const char *name, const char *uid, const char *fmt) {
    char msg[1400] = "";
    if (fmt) snprintf(msg, sizeof msg, fmt, fa_kinds[k].resource, name);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "kind", "Status");
    cJSON_AddStringToObject(s, "apiVersion", "v1");
    cJSON_AddItemToObject(s, "metadata", cJSON_CreateObject());
    cJSON_AddStringToObject(s, "status", code < 300 ? "Success" : "Failure");
    if (code >= 300) {
        cJSON_AddStringToObject(s, "message", msg);
        cJSON_AddStringToObject(s, "reason", reason);
    }
    cJSON *d = cJSON_AddObjectToObject(s, "details");
    cJSON_AddStringToObject(d, "name", name);
    if (fa_kinds[k].group[0]) cJSON_AddStringToObject(d, "group", fa_kinds[k].group);
    cJSON_AddStringToObject(d, "kind", fa_kinds[k].plural);
    if (uid) cJSON_AddStringToObject(d, "uid", uid);
    cJSON_AddNumberToObject(s, "code", code);
    char *body = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    if (!body) abort();
    enum MHD_Result ret = fa_send(c, code, body);
    free(body);
    return ret;
}

#define FA_MSG_NOT_FOUND "%s \"%s\" not found"
#define FA_MSG_EXISTS    "%s \"%s\" already exists"
#define FA_MSG_CONFLICT  "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please apply " \
                         "your changes to the latest version and try again"
#define FA_MSG_UID       "Operation cannot be fulfilled on %s \"%s\": Precondition failed: UID in precondition " \
                         "differs from the object's"

static enum MHD_Result fa_send_obj(struct MHD_Connection *c, unsigned code, const cJSON *obj) {
    char *body = cJSON_PrintUnformatted(obj);
    if (!body) abort();
    enum MHD_Result ret = fa_send(c, code, body);
    free(body);
    return ret;
}

/* The request's Content-Type is a JSON merge patch (parameters such as "; charset=utf-8" allowed). */
static bool fa_is_merge_patch(struct MHD_Connection *c) {
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *want = "application/merge-patch+json";
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 && (!ct[n] || ct[n] == ';' || ct[n] == ' ');
}

/* metadata.namespace, when the body sets it, must be the URL's. */
static bool fa_ns_differs(int k, const cJSON *obj, const char *ns) {
    const char *ons = fa_meta_str(obj, "namespace");
    return fa_kinds[k].namespaced && ons && *ons && strcmp(ons, ns) != 0;
}

#define FA_MSG_NS "the namespace of the provided object does not match the namespace sent on the request"

/* A body's preconditions against the stored object: metadata.resourceVersion and metadata.uid, when set, must
 * be the stored ones (409 Conflict otherwise, as optimistic concurrency demands). 0 when they hold. */
static unsigned fa_precondition(const cJSON *body, const cJSON *stored, const char **fmt) {
    const char *rv = fa_meta_str(body, "resourceVersion"), *uid = fa_meta_str(body, "uid");
    const char *srv = fa_meta_str(stored, "resourceVersion"), *suid = fa_meta_str(stored, "uid");
    if (rv && *rv && (!srv || strcmp(rv, srv) != 0)) { *fmt = FA_MSG_CONFLICT; return 409; }
    if (uid && *uid && (!suid || strcmp(uid, suid) != 0)) { *fmt = FA_MSG_UID; return 409; }
    return 0;
}

/* Identity fields that only the server sets: name, namespace, uid, creationTimestamp, kind, apiVersion. */
static void fa_keep_identity(int k, cJSON *obj, const cJSON *from) {
    cJSON *meta = fa_meta(obj);
    const char *fields[] = {"name", "namespace", "uid", "creationTimestamp"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) fa_set_str(meta, fields[i], fa_meta_str(from, fields[i]));
    fa_set_str(obj, "kind", fa_kinds[k].kind);
    fa_set_str(obj, "apiVersion", fa_kinds[k].api_version);
}

/* Caller holds mu. POST on a collection: 201 + the object as stored (generateName gets 5 characters, uid,
 * creationTimestamp and resourceVersion are set; a pod's status is the server's: phase Pending). */
static enum MHD_Result fa_create(fake_api *f, struct MHD_Connection *c, int k, const char *ns, const fa_req *rq) {
    cJSON *obj = rq->body ? cJSON_ParseWithLength(rq->body, rq->n) : NULL;
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return fa_send_status(c, 400, "BadRequest", "the request body is not a JSON object");
    }
    if (fa_ns_differs(k, obj, ns)) {
        cJSON_Delete(obj);
        return fa_send_status(c, 400, "BadRequest", FA_MSG_NS);
    }
    char name[600];
    const char *nm = fa_meta_str(obj, "name"), *gen = fa_meta_str(obj, "generateName");
    if (nm && *nm) snprintf(name, sizeof name, "%s", nm);
    else if (gen && *gen) {
        /* the apiserver appends 5 random characters of this alphabet; a counter keeps runs reproducible */
        static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
        uint64_t x = ++f->uid_seq * 2654435761u;
        char suffix[6];
        for (int i = 0; i < 5; i++, x /= 27) suffix[i] = alpha[x % 27];
        suffix[5] = 0;
        snprintf(name, sizeof name, "%.500s%s", gen, suffix);
    } else {
        cJSON_Delete(obj);
        char msg[200];
        snprintf(msg, sizeof msg, "%s \"\" is invalid: metadata.name: Required value: name or generateName is "
                 "required", fa_kinds[k].kind);
        return fa_send_status(c, 422, "Invalid", msg);
    }
    char key[1024];
    bool found;
    fa_key(k, ns, name, key, sizeof key);
    fa_find(&f->store[k], key, &found);
    if (found) {
        cJSON_Delete(obj);
        return fa_send_obj_status(c, 409, "AlreadyExists", k, name, NULL, FA_MSG_EXISTS);
    }
    char uid[64], ts[32];
    fa_new_uid(f, uid, sizeof uid);
    time_t now = time(NULL);
    struct tm tm;
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    cJSON *meta = fa_meta(obj);
    fa_set_str(meta, "name", name);
    fa_set_str(meta, "namespace", fa_kinds[k].namespaced ? ns : NULL);
    fa_set_str(meta, "uid", uid);
    fa_set_str(meta, "creationTimestamp", ts);
    fa_set_str(obj, "kind", fa_kinds[k].kind);
    fa_set_str(obj, "apiVersion", fa_kinds[k].api_version);
    if (k == FA_PODS) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(obj, "status"), "phase", "Pending");
    }
    fa_commit(f, k, obj);
    return fa_send_obj(c, 201, obj);
}

/* Caller holds mu. PUT: replace the object (404 if absent, 409 on a failed precondition). */
static enum MHD_Result fa_update(fake_api *f, struct MHD_Connection *c, int k, const char *ns, const char *name,
                                 size_t i, const fa_req *rq) {
    cJSON *obj = rq->body ? cJSON_ParseWithLength(rq->body, rq->n) : NULL;
    const char *oname = fa_meta_str(obj, "name"), *fmt = NULL;
    if (!cJSON_IsObject(obj) || !oname || strcmp(oname, name) != 0) {
        char msg[1400];
        snprintf(msg, sizeof msg, "the name of the object (%.600s) does not match the name on the URL (%.600s)",
                 oname ? oname : "", name);
        cJSON_Delete(obj);
        return fa_send_status(c, 400, "BadRequest", cJSON_IsObject(obj) ? msg : "the request body is not a JSON object");
    }
    if (fa_ns_differs(k, obj, ns)) {
        cJSON_Delete(obj);
        return fa_send_status(c, 400, "BadRequest", FA_MSG_NS);
    }
    const cJSON *old = f->store[k].v[i].json;
    unsigned code = fa_precondition(obj, old, &fmt);
    if (code) {
        cJSON_Delete(obj);
        return fa_send_obj_status(c, code, "Conflict", k, name, NULL, fmt);
    }
    fa_keep_identity(k, obj, old);
    fa_commit(f, k, obj);
    return fa_send_obj(c, 200, obj);
}

/* Caller holds mu. PATCH with a JSON merge patch (415 for other patch types). A pod's status belongs to its
 * status subresource (kept), and its spec may not change (422), as with the real pod strategy. */
static enum MHD_Result fa_patch(fake_api *f, struct MHD_Connection *c, int k, const char *name, size_t i,
                                const fa_req *rq) {
    cJSON *patch = rq->body ? cJSON_ParseWithLength(rq->body, rq->n) : NULL;
    const char *fmt = NULL;
    if (!cJSON_IsObject(patch)) {
        cJSON_Delete(patch);
        return fa_send_status(c, 400, "BadRequest", "error decoding patch: the body is not a JSON object");
    }
    const cJSON *old = f->store[k].v[i].json;
    unsigned code = fa_precondition(patch, old, &fmt);
    const char *pname = fa_meta_str(patch, "name");
    if (code) {
        cJSON_Delete(patch);
        return fa_send_obj_status(c, code, "Conflict", k, name, NULL, fmt);
    }
    if (pname && strcmp(pname, name) != 0) {
        char msg[1400];
        snprintf(msg, sizeof msg, "the name of the object (%.600s) does not match the name on the URL (%.600s)",
                 pname, name);
        cJSON_Delete(patch);
        return fa_send_status(c, 400, "BadRequest", msg);
    }
    cJSON *obj = fa_merge_patch(cJSON_Duplicate(old, 1), patch);
    cJSON_Delete(patch);
    fa_keep_identity(k, obj, old);
    if (k == FA_NODES) { /* a Node's status belongs to its status subresource (the kubelet's), as a pod's */
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(old, "status");
        if (st) cJSON_AddItemToObject(obj, "status", cJSON_Duplicate(st, 1));
    }
    if (k == FA_PODS) {
        const cJSON *spec_new = cJSON_GetObjectItemCaseSensitive(obj, "spec");
        const cJSON *spec_old = cJSON_GetObjectItemCaseSensitive(old, "spec");
        /* cJSON_Compare calls two absent specs different */
        if ((spec_new || spec_old) && !cJSON_Compare(spec_new, spec_old, 1)) {
            cJSON_Delete(obj);
            char msg[800];
            snprintf(msg, sizeof msg, "Pod \"%.600s\" is invalid: spec: Forbidden: pod updates may not change "
                     "fields other than those the fake API server allows (none)", name);
            return fa_send_status(c, 422, "Invalid", msg);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(old, "status");
        if (st) cJSON_AddItemToObject(obj, "status", cJSON_Duplicate(st, 1));
    }
    fa_commit(f, k, obj);
    return fa_send_obj(c, 200, obj);
}

/* Caller holds mu. One object's verbs: GET/PUT/PATCH/DELETE by name, POST on the collection. Pods take no PUT
 * (the fake does not model which pod fields an update may change). */
static enum MHD_Result fa_object(fake_api *f, struct MHD_Connection *c, const char *method, int k, const char *ns,
                                 const char *name, const fa_req *rq) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST"), put = !strcmp(method, "PUT");
    bool patch = !strcmp(method, "PATCH"), del = !strcmp(method, "DELETE");
    if (!name[0]) {
        if (post) return fa_create(f, c, k, ns, rq);
        return fa_send_status(c, 405, "MethodNotAllowed", "method not allowed");
    }
    if (!get && !(put && k != FA_PODS) && !patch && !del)
        return fa_send_status(c, 405, "MethodNotAllowed", "method not allowed");
    if (patch && !fa_is_merge_patch(c))
        return fa_send_status(c, 415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted media types include: "
                              "application/merge-patch+json (the fake API server applies only JSON merge patches)");
    char key[1024];
    bool found;
    fa_key(k, ns, name, key, sizeof key);
    size_t i = fa_find(&f->store[k], key, &found);
    if (!found) return fa_send_obj_status(c, 404, "NotFound", k, name, NULL, FA_MSG_NOT_FOUND);
    if (get) return fa_send_obj(c, 200, f->store[k].v[i].json);
    if (put) return fa_update(f, c, k, ns, name, i, rq);
    if (patch) return fa_patch(f, c, k, name, i, rq);
    /* DELETE: the pod registry answers with the object; other kinds with a Status naming it */
    cJSON *gone = fa_remove_at(f, k, i);
    enum MHD_Result ret = k == FA_PODS ? fa_send_obj(c, 200, gone)
                                       : fa_send_obj_status(c, 200, "", k, name, fa_meta_str(gone, "uid"), NULL);
    cJSON_Delete(gone);
    return ret;
}

/* "/api/v1/namespaces/NS/events": the namespace, or false. */
static bool fa_events_path(const char *url, char *ns, size_t nslen) {
    const char *p = "/api/v1/namespaces/";
    if (strncmp(url, p, strlen(p)) != 0) return false;
    const char *a = url + strlen(p), *sl = strchr(a, '/');
    if (!sl || sl == a || (size_t)(sl - a) >= nslen || strcmp(sl, "/events") != 0) return false;
    snprintf(ns, nslen, "%.*s", (int)(sl - a), a);
    return true;
}

/* Caller holds mu. Create a core/v1 Event: 400 unless it is an object with involvedObject, 400 when
 * metadata.namespace is set and differs from the path's, 409 when the name is taken. Stored with
 * uid, resourceVersion and the namespace filled in (generateName gets a suffix); 201 + the object. */
static enum MHD_Result fa_event_create(fake_api *f, struct MHD_Connection *c, const char *ns, const fa_req *rq) {
    cJSON *b = rq->body ? cJSON_ParseWithLength(rq->body, rq->n) : NULL;
    if (!cJSON_IsObject(b) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(b, "involvedObject"))) {
        cJSON_Delete(b);
        return fa_send_status(c, 400, "BadRequest", "malformed Event body");
    }
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(b, "metadata");
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(b, "metadata");
        meta = cJSON_AddObjectToObject(b, "metadata");
    }
    const char *mns = fa_meta_str(b, "namespace");
    if (mns && *mns && strcmp(mns, ns) != 0) {
        cJSON_Delete(b);
        return fa_send_status(c, 400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
    }
    char name[600];
    const char *nm = fa_meta_str(b, "name"), *gen = fa_meta_str(b, "generateName");
    if (nm && *nm) snprintf(name, sizeof name, "%s", nm);
    else if (gen && *gen) snprintf(name, sizeof name, "%s%05" PRIu64, gen, ++f->uid_seq);
    else {
        cJSON_Delete(b);
        return fa_send_status(c, 400, "BadRequest", "name or generateName is required");
    }
    if (!f->events) f->events = cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, f->events) {
        const char *en = fa_meta_str(e, "name"), *ens = fa_meta_str(e, "namespace");
        if (en && ens && !strcmp(en, name) && !strcmp(ens, ns)) {
            char msg[800];
            snprintf(msg, sizeof msg, "events \"%s\" already exists", name);
            cJSON_Delete(b);
            return fa_send_status(c, 409, "AlreadyExists", msg);
        }
    }
    char rvs[32], uid[64];
    snprintf(rvs, sizeof rvs, "%" PRIu64, ++f->rv);
    snprintf(uid, sizeof uid, "event-uid-%" PRIu64, ++f->uid_seq);
    const char *fields[4][2] = {{"name", name}, {"namespace", ns}, {"resourceVersion", rvs}, {"uid", uid}};
    for (int i = 0; i < 4; i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(meta, fields[i][0]);
        cJSON_AddStringToObject(meta, fields[i][0], fields[i][1]);
    }
    char *body = cJSON_PrintUnformatted(b);
    cJSON_AddItemToArray(f->events, b);
    enum MHD_Result ret = fa_send(c, 201, body ? body : "{}");
    free(body);
    return ret;
}

static enum MHD_Result fa_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    fake_api *f = cls;
    fa_req *rq = *con_cls;
    if (!rq) {
        rq = fa_xmalloc(sizeof *rq);
        memset(rq, 0, sizeof *rq);
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        if (rq->n + *upload_size > FA_MAX_BODY) rq->too_big = true;
        else {
            char *nb = realloc(rq->body, rq->n + *upload_size + 1);
            if (!nb) abort();
            rq->body = nb;
            memcpy(rq->body + rq->n, upload, *upload_size);
            rq->n += *upload_size;
            rq->body[rq->n] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }

    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    const char *watchq = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");
    bool watch = watchq && (strcmp(watchq, "1") == 0 || strcmp(watchq, "true") == 0);
    int kind = fa_collection(url);
    char key[1200];
    snprintf(key, sizeof key, "%s %s", get && kind >= 0 ? (watch ? "WATCH" : "LIST") : method, url);

    pthread_mutex_lock(&f->mu);
    if (f->nlog < FA_MAX_LOG) {
        fa_grow((void **)&f->log, &f->caplog, f->nlog + 1, sizeof *f->log);
        f->log[f->nlog++] = fa_strdup(key);
    }
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    free(f->last_auth);
    f->last_auth = fa_strdup(auth ? auth : "");
    char ns[256], name[512], sub[64];
    int okind = fa_path(url, ns, sizeof ns, name, sizeof name, sub, sizeof sub);
    bool binding = okind == FA_PODS && name[0] && strcmp(sub, "binding") == 0;
    if (post && binding) {
        fa_grow((void **)&f->bind_bodies, &f->capbind, (size_t)f->nbind + 1, sizeof *f->bind_bodies);
        f->bind_bodies[f->nbind++] = fa_strdup(rq->body ? rq->body : "");
    }

    enum MHD_Result ret;
    char want[600];
    if (f->token) snprintf(want, sizeof want, "Bearer %s", f->token);
    int inject = 0, stall_ms = 0;
    bool late = false;
    char inj_msg[256] = "", inj_reason[64] = "";
    for (int i = 0; i < f->nrules; i++) {
        if (f->rules[i].count > 0 && fa_matches(f->rules[i].target, key)) {
            inject = f->rules[i].status;
            stall_ms = f->rules[i].stall_ms;
            late = f->rules[i].late;
            snprintf(inj_msg, sizeof inj_msg, "%s", f->rules[i].msg);
            snprintf(inj_reason, sizeof inj_reason, "%s", f->rules[i].reason);
            f->rules[i].count--;
            break;
        }
    }
    /* a stall holds this request (its own thread) without the lock, then answers normally */
    for (struct timespec t0 = {0}, now; stall_ms > 0;) {
        if (!t0.tv_sec) clock_gettime(CLOCK_MONOTONIC, &t0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (f->stopping || (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >= stall_ms) break;
        struct timespec nap = {0, 10 * 1000000L};
        pthread_mutex_unlock(&f->mu);
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&f->mu);
    }
    if (f->token && (!auth || strcmp(auth, want) != 0)) {
        ret = fa_send_status(c, 401, "Unauthorized", "Unauthorized");
    } else if (inject == FAKE_API_HANGUP) {
        ret = MHD_NO;
    } else if (inject == FAKE_API_GONE_EVENT && watch && kind >= 0) {
        ret = fa_watch_start(f, c, kind, true, false);
    } else if (inject == FAKE_API_GARBAGE) {
        ret = watch && kind >= 0 ? fa_watch_start(f, c, kind, false, true) : fa_send(c, 200, "{\"items\": [ garbage");
    } else if (inject == 429) {
        /* as the apiserver's priority-and-fairness filter throttles (k8s.io/apiserver/pkg/server/filters,
         * tooManyRequests): 429, Retry-After, and a plain-text body rather than a Status */
        const char *txt = "Too many requests, please try again later.\n";
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(txt), (void *)txt, MHD_RESPMEM_PERSISTENT);
        if (r) {
            MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
            MHD_add_response_header(r, "Retry-After", "1");
        }
        ret = r ? MHD_queue_response(c, 429, r) : MHD_NO;
        if (r) MHD_destroy_response(r);
    } else if (inject) {
        char msg[256];
        int code = inject == FAKE_API_GONE_EVENT ? 410 : inject;
        if (inj_msg[0]) snprintf(msg, sizeof msg, "%s", inj_msg);
        else snprintf(msg, sizeof msg, "injected %d", code);
        ret = fa_send_status(c, (unsigned)code, inj_reason[0] ? inj_reason : code == 410 ? "Expired" : "InternalError", msg);
    } else if (rq->too_big) {
        ret = fa_send_status(c, 413, "RequestEntityTooLarge", "request body too large");
    } else if (get && kind >= 0) {
        ret = watch ? fa_watch_start(f, c, kind, false, false) : fa_list(f, c, kind);
    } else if (post && binding) {
        ret = fa_bind(f, c, ns, name, rq);
    } else if (post && fa_events_path(url, ns, sizeof ns)) {
        ret = fa_event_create(f, c, ns, rq);
    } else if (!sub[0] && (okind > FA_NODES || (okind == FA_NODES && name[0]))) {
        /* nodes only by name (the node agent's GET and PATCH): the fake creates nodes through fake_api_put */
        ret = fa_object(f, c, method, okind, ns, name, rq);
    } else if (kind >= 0 || binding) {
        ret = fa_send_status(c, 405, "MethodNotAllowed", "method not allowed");
    } else {
        ret = fa_send_status(c, 404, "NotFound", "the server could not find the requested resource");
    }
    /* A late reply: the request took effect (watches already have its events), the answer is queued, and MHD
     * sends it only once this handler returns: after fake_api_release_replies (at most a minute). */
    struct timespec late_end;
    fa_now_plus(&late_end, 60000);
    for (uint64_t gen = f->release_gen; late && gen == f->release_gen && !f->stopping;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!fa_before(&now, &late_end)) break;
        pthread_cond_timedwait(&f->cv, &f->mu, &late_end);
    }
    pthread_mutex_unlock(&f->mu);
    return ret;
}

static void fa_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    fa_req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

static int fa_listen(fake_api *f, int port, char *err, size_t errlen) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    struct MHD_Daemon *d =
        f->tls_cert ? MHD_start_daemon(flags | MHD_USE_TLS, (uint16_t)port, NULL, NULL, fa_handle, f,
                                       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
                                       MHD_OPTION_NOTIFY_COMPLETED, fa_completed, f,
                                       MHD_OPTION_HTTPS_MEM_CERT, f->tls_cert, MHD_OPTION_HTTPS_MEM_KEY, f->tls_key,
                                       MHD_OPTION_END)
                    : MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, fa_handle, f,
                                       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
                                       MHD_OPTION_NOTIFY_COMPLETED, fa_completed, f,
                                       MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "fake apiserver: cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    pthread_mutex_lock(&f->mu);
    f->d = d;
    f->port = info ? info->port : port;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

fake_api *fake_api_start(int port, char *err, size_t errlen) { return fake_api_start_tls(port, NULL, NULL, err, errlen); }

fake_api *fake_api_start_tls(int port, const char *cert_pem, const char *key_pem, char *err, size_t errlen) {
    fake_api *f = fa_xmalloc(sizeof *f);
    memset(f, 0, sizeof *f);
    if (cert_pem && key_pem) {
        f->tls_cert = strdup(cert_pem);
        f->tls_key = strdup(key_pem);
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    f->rv = 100; /* not 0: "0" means "any version" to the real apiserver */
    if (fa_listen(f, port, err, errlen) != 0) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        free(f->tls_cert);
        free(f->tls_key);
        free(f);
        return NULL;
    }
    return f;
}

int fake_api_port(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    int p = f->port;
    pthread_mutex_unlock(&f->mu);
    return p;
}

void fake_api_url(fake_api *f, char *buf, size_t len) {
    /* HTTPS by name: the test certificate is for "localhost" */
    if (f->tls_cert) snprintf(buf, len, "https://localhost:%d", fake_api_port(f));
    else snprintf(buf, len, "http://127.0.0.1:%d", fake_api_port(f));
}

void fake_api_down(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    struct MHD_Daemon *d = f->d;
    f->d = NULL;
    f->stopping = true; /* watches blocked in fa_watch_read end, so MHD can join their threads */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (d) MHD_stop_daemon(d);
    pthread_mutex_lock(&f->mu);
    f->stopping = false;
    pthread_mutex_unlock(&f->mu);
}

int fake_api_up(fake_api *f, char *err, size_t errlen) {
    pthread_mutex_lock(&f->mu);
    bool up = f->d != NULL;
    int port = f->port;
    pthread_mutex_unlock(&f->mu);
    return up ? 0 : fa_listen(f, port, err, errlen);
}

void fake_api_free(fake_api *f) {
    if (!f) return;
    fake_api_down(f);
    free(f->tls_cert);
    free(f->tls_key);
    for (int k = 0; k < FA_NKINDS; k++) {
        for (size_t i = 0; i < f->store[k].n; i++) {
            free(f->store[k].v[i].key);
            cJSON_Delete(f->store[k].v[i].json);
        }
        free(f->store[k].v);
    }
    for (size_t i = 0; i < f->nev; i++) free(f->ev[i].line);
    free(f->ev);
    for (size_t i = 0; i < f->nlog; i++) free(f->log[i]);
    free(f->log);
    for (int i = 0; i < f->nbind; i++) free(f->bind_bodies[i]);
    free(f->bind_bodies);
    cJSON_Delete(f->events);
    free(f->last_auth);
    free(f->token);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}
