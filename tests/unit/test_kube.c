/* test_kube.c -- the Kubernetes API client (kube/client.c) against the fake API server on loopback:
 * list, watch, relist on 410, backoff and recovery after errors, binding, tokens, shutdown.
 * Waits poll with a deadline (never a fixed sleep), so a loaded machine makes them slower, not flaky. */
#include "harness.h"

#include "kube/client.h"
#include "tests/support/fake_apiserver.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS TEST_PATIENCE_MS /* only a broken client ever waits this long */

/* ---- recorder: what the handler saw, and the cache it implies ---------------------------------------- */

typedef struct rec_event {
    int kind, ev;
    char key[160], node[64];
    long long rv;
    size_t ann_len; /* length of the largest annotation value (long-line test) */
} rec_event;

typedef struct mirror_obj { char key[160]; long long rv; bool seen; } mirror_obj;

typedef struct recorder {
    pthread_mutex_t mu;
    rec_event *log;
    size_t n, cap;
    mirror_obj *m[2];
    size_t mn[2], mcap[2];
    bool in_relist[2];
    int relists[2], syncs[2];
    bool bad_order; /* ADDED/MODIFIED/DELETED outside the rules, or SYNCED without RELIST */
} recorder;

static void obj_key(int kind, const cJSON *obj, char *key, size_t len) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    const char *n = cJSON_IsString(name) ? name->valuestring : "?";
    if (kind == KUBE_POD) snprintf(key, len, "%s/%s", cJSON_IsString(ns) ? ns->valuestring : "?", n);
    else snprintf(key, len, "%s", n);
}

static long long obj_rv(const cJSON *obj) {
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                      "resourceVersion");
    return cJSON_IsString(rv) ? atoll(rv->valuestring) : -1;
}

static mirror_obj *mirror_find(recorder *r, int kind, const char *key) {
    for (size_t i = 0; i < r->mn[kind]; i++)
        if (strcmp(r->m[kind][i].key, key) == 0) return &r->m[kind][i];
    return NULL;
}

static void rec_handler(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    recorder *r = user;
    pthread_mutex_lock(&r->mu);
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->log = realloc(r->log, r->cap * sizeof *r->log);
        if (!r->log) abort();
    }
    rec_event *e = &r->log[r->n++];
    memset(e, 0, sizeof *e);
    e->kind = (int)kind;
    e->ev = (int)ev;
    if (obj) {
        obj_key((int)kind, obj, e->key, sizeof e->key);
        e->rv = obj_rv(obj);
        const cJSON *nn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "nodeName");
        if (cJSON_IsString(nn)) snprintf(e->node, sizeof e->node, "%s", nn->valuestring);
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"),
                                                           "annotations");
        for (const cJSON *a = ann ? ann->child : NULL; a; a = a->next)
            if (cJSON_IsString(a) && strlen(a->valuestring) > e->ann_len) e->ann_len = strlen(a->valuestring);
    }
    /* the cache a caller would keep: RELIST starts a fresh "seen" set, SYNCED drops the unseen */
    int k = (int)kind;
    mirror_obj *mo = obj ? mirror_find(r, k, e->key) : NULL;
    switch (ev) {
    case KUBE_RELIST:
        r->relists[k]++;
        r->in_relist[k] = true;
        for (size_t i = 0; i < r->mn[k]; i++) r->m[k][i].seen = false;
        break;
    case KUBE_ADDED:
    case KUBE_MODIFIED:
        if (!obj) { r->bad_order = true; break; }
        if (!mo) {
            if (r->mn[k] == r->mcap[k]) {
                r->mcap[k] = r->mcap[k] ? 2 * r->mcap[k] : 64;
                r->m[k] = realloc(r->m[k], r->mcap[k] * sizeof *r->m[k]);
                if (!r->m[k]) abort();
            }
            mo = &r->m[k][r->mn[k]++];
            snprintf(mo->key, sizeof mo->key, "%s", e->key);
        }
        mo->rv = e->rv;
        mo->seen = true;
        break;
    case KUBE_DELETED:
        if (!obj) { r->bad_order = true; break; }
        if (mo) *mo = r->m[k][--r->mn[k]];
        break;
    case KUBE_SYNCED:
        if (!r->in_relist[k]) r->bad_order = true;
        for (size_t i = 0; i < r->mn[k];) {
            if (!r->m[k][i].seen) r->m[k][i] = r->m[k][--r->mn[k]];
            else i++;
        }
        r->in_relist[k] = false;
        r->syncs[k]++;
        break;
    }
    pthread_mutex_unlock(&r->mu);
}

/* ---- environment ------------------------------------------------------------------------------------- */

typedef struct env {
    fake_api *f;
    kube_client *k;
    recorder r;
    kube_config cfg;
} env;

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Fake server and a configured (not started) client with test timings. */
static bool env_init(env *e, const char *token_file) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->r.mu, NULL);
    char err[256];
    e->f = fake_api_start(0, err, sizeof err);
    if (!e->f) { test_fail(__FILE__, __LINE__, "%s", err); return false; }
    kube_config_defaults(&e->cfg);
    fake_api_url(e->f, e->cfg.api_url, sizeof e->cfg.api_url);
    if (token_file) snprintf(e->cfg.token_file, sizeof e->cfg.token_file, "%s", token_file);
    e->cfg.backoff_max_ms = 50;
    e->cfg.watch_timeout_s = 60; /* tests that want watches to end say so */
    e->cfg.request_timeout_ms = TEST_PATIENCE_MS;   /* no test here times a request out: a loaded machine is slow */
    return true;
}

static bool env_start(env *e) {
    char err[256];
    e->k = kube_new(&e->cfg, err, sizeof err);
    if (!e->k || kube_start(e->k, rec_handler, &e->r, err, sizeof err) != 0) {
        test_fail(__FILE__, __LINE__, "client: %s", err);
        return false;
    }
    return true;
}

static void env_free(env *e) {
    kube_free(e->k); /* first: its threads call into the recorder */
    fake_api_free(e->f);
    free(e->r.log);
    free(e->r.m[0]);
    free(e->r.m[1]);
    pthread_mutex_destroy(&e->r.mu);
}

static void put_node(env *e, const char *name) {
    char j[256];
    snprintf(j, sizeof j, "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\"}},"
             "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}}", name);
    fake_api_put(e->f, "nodes", j);
}

static long long put_pod(env *e, const char *ns, const char *name, const char *node) {
    char j[512];
    snprintf(j, sizeof j, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"annotations\":{\"keep\":\"me\"}},"
             "\"spec\":{\"schedulerName\":\"tessera-scheduler\",%s%s%s\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
             "{\"nvidia.com/gpu\":\"1\"}}}]}}", name, ns, node ? "\"nodeName\":\"" : "", node ? node : "",
             node ? "\"," : "");
    return fake_api_put(e->f, "pods", j);
}

typedef bool (*pred_fn)(env *e, const void *arg);

static bool wait_for(env *e, pred_fn p, const void *arg) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!p(e, arg)) {
        if (ms_since(&t0) > WAIT_MS) return false;
        sleep_ms(5);
    }
    return true;
}

static kube_stats stats(env *e) {
    kube_stats s;
    kube_get_stats(e->k, &s);
    return s;
}

/* Both kinds synced at least *(int *)arg times. */
static bool p_synced(env *e, const void *arg) {
    int n = arg ? *(const int *)arg : 1;
    pthread_mutex_lock(&e->r.mu);
    bool ok = e->r.syncs[0] >= n && e->r.syncs[1] >= n;
    pthread_mutex_unlock(&e->r.mu);
    return ok;
}

static bool p_watching(env *e, const void *arg) {
    return fake_api_watchers(e->f, "nodes") >= 1 && fake_api_watchers(e->f, "pods") >= 1;
}

/* The recorder's cache equals the server's objects (keys and resourceVersions), for both kinds, and no
 * relist is half done. */
static bool p_mirror(env *e, const void *arg) {
    static const char *const kinds[2] = {"nodes", "pods"};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) {
        char *s = fake_api_list(e->f, kinds[k]);
        cJSON *arr = cJSON_Parse(s);
        free(s);
        pthread_mutex_lock(&e->r.mu);
        ok = !e->r.in_relist[k] && (size_t)cJSON_GetArraySize(arr) == e->r.mn[k];
        const cJSON *o;
        cJSON_ArrayForEach(o, arr) {
            char key[160];
            obj_key(k, o, key, sizeof key);
            mirror_obj *m = mirror_find(&e->r, k, key);
            if (!m || m->rv != obj_rv(o)) { ok = false; break; }
        }
        pthread_mutex_unlock(&e->r.mu);
        cJSON_Delete(arr);
    }
    return ok;
}

typedef struct stat_at_least { int which; int kind; uint64_t n; } stat_at_least;
enum { ST_LISTS, ST_RESTARTS, ST_GONE, ST_ERRORS };

static bool p_stat(env *e, const void *arg) {
    const stat_at_least *a = arg;
    kube_stats s = stats(e);
    const uint64_t *v = a->which == ST_LISTS ? s.lists : a->which == ST_RESTARTS ? s.watch_restarts
                      : a->which == ST_GONE  ? s.gone  : s.errors;
    return v[a->kind] >= a->n;
}

static bool p_event(env *e, const void *arg) {
    const rec_event *want = arg;
    pthread_mutex_lock(&e->r.mu);
    bool ok = false;
    for (size_t i = 0; i < e->r.n && !ok; i++)
        ok = e->r.log[i].kind == want->kind && e->r.log[i].ev == want->ev && strcmp(e->r.log[i].key, want->key) == 0 &&
             (!want->node[0] || strcmp(e->r.log[i].node, want->node) == 0);
    pthread_mutex_unlock(&e->r.mu);
    return ok;
}

#define WAIT(pred, arg) CHECK_MSG(wait_for(e, pred, arg), "timed out waiting for %s", #pred)

/* Runs body between env setup and teardown, so a failing CHECK in body still frees everything. */
#define KUBE_TEST(name, token)                                                                           \
    static void name##_body(env *e);                                                                     \
    TEST(name) {                                                                                         \
        env e_;                                                                                          \
        if (env_init(&e_, token)) name##_body(&e_);                                                      \
        env_free(&e_);                                                                                   \
    }                                                                                                    \
    static void name##_body(env *e)

/* ---- list and watch ---------------------------------------------------------------------------------- */

KUBE_TEST(kube_initial_list_relist_added_synced, NULL) {
    put_node(e, "gpu-b");
    put_node(e, "gpu-a");
    put_pod(e, "ml", "p2", "gpu-a");
    put_pod(e, "ml", "p1", NULL);
    put_pod(e, "default", "p3", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    pthread_mutex_lock(&e->r.mu);
    /* per kind: RELIST, one ADDED per object (server order), SYNCED */
    const char *want[2][5] = {{"R", "gpu-a", "gpu-b", "S", NULL}, {"R", "default/p3", "ml/p1", "ml/p2", "S"}};
    bool ok = true;
    for (int k = 0; k < 2; k++) {
        int j = 0;
        for (size_t i = 0; i < e->r.n; i++) {
            const rec_event *ev = &e->r.log[i];
            if (ev->kind != k) continue;
            const char *w = j < 5 ? want[k][j] : NULL;
            if (!w) { ok = false; break; }
            if (ev->ev == KUBE_RELIST) ok = ok && strcmp(w, "R") == 0;
            else if (ev->ev == KUBE_SYNCED) ok = ok && strcmp(w, "S") == 0;
            else ok = ok && ev->ev == KUBE_ADDED && strcmp(w, ev->key) == 0 && ev->rv > 0;
            j++;
        }
        ok = ok && (j == 5 || !want[k][j]);
    }
    bool bad = e->r.bad_order;
    pthread_mutex_unlock(&e->r.mu);
    CHECK_MSG(ok, "unexpected initial event sequence");
    CHECK(!bad);
    kube_stats s = stats(e);
    CHECK_INT(s.lists[KUBE_NODE], 1);
    CHECK_INT(s.lists[KUBE_POD], 1);
    CHECK(s.synced[KUBE_NODE] && s.synced[KUBE_POD]);
    CHECK_INT(s.errors[0] + s.errors[1] + s.gone[0] + s.gone[1], 0);
    CHECK(p_mirror(e, NULL));
}

KUBE_TEST(kube_watch_delivers_added_modified_deleted_in_order, NULL) {
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    put_pod(e, "ml", "w", NULL);
    put_pod(e, "ml", "w", "n1");
    CHECK_INT(fake_api_delete(e->f, "pods", "ml", "w"), 0);
    put_node(e, "n2");
    rec_event del = {.kind = KUBE_POD, .ev = KUBE_DELETED, .key = "ml/w"};
    rec_event add = {.kind = KUBE_NODE, .ev = KUBE_ADDED, .key = "n2"};
    WAIT(p_event, &del);
    WAIT(p_event, &add);
    pthread_mutex_lock(&e->r.mu);
    int seq[3], n = 0;
    long long last_rv = 0;
    bool rv_up = true, node_ok = true;
    for (size_t i = 0; i < e->r.n; i++) {
        if (strcmp(e->r.log[i].key, "ml/w") != 0) continue;
        if (n < 3) seq[n] = e->r.log[i].ev;
        if (n == 1) node_ok = strcmp(e->r.log[i].node, "n1") == 0;
        n++;
        rv_up = rv_up && e->r.log[i].rv > last_rv;
        last_rv = e->r.log[i].rv;
    }
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(n, 3);
    CHECK_INT(seq[0], KUBE_ADDED);
    CHECK_INT(seq[1], KUBE_MODIFIED);
    CHECK_INT(seq[2], KUBE_DELETED);
    CHECK(rv_up);
    CHECK(node_ok);
    CHECK(p_mirror(e, NULL));
    CHECK_INT(stats(e).lists[KUBE_POD], 1); /* events came through the watch, not a relist */
}

KUBE_TEST(kube_pagination_over_500_pods, NULL) {
    for (int i = 0; i < 1234; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%04d", i);
        put_pod(e, i % 2 ? "team-a" : "team-b", name, NULL);
    }
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    CHECK_INT(fake_api_requests(e->f, "LIST /api/v1/pods"), 3); /* 500 + 500 + 234 */
    pthread_mutex_lock(&e->r.mu);
    int added = 0, relists = 0;
    for (size_t i = 0; i < e->r.n; i++) {
        if (e->r.log[i].kind != KUBE_POD) continue;
        added += e->r.log[i].ev == KUBE_ADDED;
        relists += e->r.log[i].ev == KUBE_RELIST;
    }
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(added, 1234);
    CHECK_INT(relists, 1);
    CHECK(p_mirror(e, NULL));
    /* the watch starts from the list's version: a change right after the list arrives exactly once */
    WAIT(p_watching, NULL);
    put_pod(e, "team-a", "late", NULL);
    WAIT(p_mirror, NULL);
}

KUBE_TEST(kube_expired_watch_relists_current_objects, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    put_pod(e, "ml", "b", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    fake_api_expire_watches(e->f);
    /* changes racing with the relist must end up in the cache either way */
    CHECK_INT(fake_api_delete(e->f, "pods", "ml", "a"), 0);
    put_pod(e, "ml", "c", "n1");
    put_node(e, "n2");
    int two = 2;
    WAIT(p_synced, &two);
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK(s.gone[KUBE_POD] >= 1);
    CHECK(s.gone[KUBE_NODE] >= 1);
    CHECK(s.lists[KUBE_POD] >= 2);
    CHECK_INT(s.errors[KUBE_POD], 0); /* 410 is routine, not an error */
    pthread_mutex_lock(&e->r.mu);
    bool bad = e->r.bad_order;
    pthread_mutex_unlock(&e->r.mu);
    CHECK(!bad);
}

KUBE_TEST(kube_compacted_resource_version_gets_410_then_relists, NULL) {
    e->cfg.watch_timeout_s = 1; /* watches end and reopen from their last version every second */
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    /* a pod change moves the global version past what the node watch has seen; compaction makes that old */
    put_pod(e, "ml", "x", NULL);
    fake_api_compact(e->f);
    stat_at_least gone = {ST_GONE, KUBE_NODE, 1}, relisted = {ST_LISTS, KUBE_NODE, 2};
    WAIT(p_stat, &gone);
    WAIT(p_stat, &relisted);
    WAIT(p_mirror, NULL);
    CHECK(stats(e).watch_restarts[KUBE_NODE] >= 1);
}

KUBE_TEST(kube_watch_http_410_and_gone_event_relist, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    /* the reopened watches are refused: nodes with an HTTP 410, pods with 200 + an ERROR 410 event */
    fake_api_inject(e->f, "WATCH /api/v1/nodes", 410, 1);
    fake_api_inject(e->f, "WATCH /api/v1/pods", FAKE_API_GONE_EVENT, 1);
    fake_api_end_watches(e->f);
    stat_at_least gn = {ST_GONE, KUBE_NODE, 1}, gp = {ST_GONE, KUBE_POD, 1};
    stat_at_least ln = {ST_LISTS, KUBE_NODE, 2}, lp = {ST_LISTS, KUBE_POD, 2};
    WAIT(p_stat, &gn);
    WAIT(p_stat, &gp);
    WAIT(p_stat, &ln);
    WAIT(p_stat, &lp);
    put_pod(e, "ml", "b", NULL);
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK_INT(s.errors[KUBE_NODE] + s.errors[KUBE_POD], 0);
}

KUBE_TEST(kube_bookmark_keeps_watch_version_fresh, NULL) {
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    put_pod(e, "ml", "x", NULL);
    /* the bookmark moves the node watch's version to now, so compaction and reopening do not cost a relist */
    fake_api_bookmark(e->f, "nodes");
    fake_api_compact(e->f);
    fake_api_end_watches(e->f);
    stat_at_least restarted = {ST_RESTARTS, KUBE_NODE, 1};
    WAIT(p_stat, &restarted);
    WAIT(p_watching, NULL);
    put_node(e, "n2");
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK_INT(s.gone[KUBE_NODE], 0);
    CHECK_INT(s.lists[KUBE_NODE], 1);
    CHECK_INT(s.errors[KUBE_NODE], 0);
}

KUBE_TEST(kube_watch_end_reopens_from_last_version, NULL) {
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    put_pod(e, "ml", "a", NULL);
    fake_api_end_watches(e->f);
    stat_at_least rn = {ST_RESTARTS, KUBE_NODE, 1}, rp = {ST_RESTARTS, KUBE_POD, 1};
    WAIT(p_stat, &rn);
    WAIT(p_stat, &rp);
    put_pod(e, "ml", "b", NULL);
    WAIT(p_mirror, NULL);
    CHECK_INT(fake_api_requests(e->f, "LIST "), 2); /* no relist: a normal end resumes from the version */
    CHECK_INT(stats(e).errors[KUBE_POD], 0);
    pthread_mutex_lock(&e->r.mu);
    int adds_a = 0;
    for (size_t i = 0; i < e->r.n; i++) adds_a += strcmp(e->r.log[i].key, "ml/a") == 0;
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(adds_a, 1); /* and no event is replayed */
}

/* ---- errors, backoff, recovery ----------------------------------------------------------------------- */

KUBE_TEST(kube_list_errors_back_off_then_succeed, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    fake_api_inject(e->f, "LIST /api/v1/pods", 500, 2);
    fake_api_inject(e->f, "LIST /api/v1/nodes", FAKE_API_GARBAGE, 1);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    kube_stats s = stats(e);
    CHECK_INT(s.errors[KUBE_POD], 2);
    CHECK_INT(s.errors[KUBE_NODE], 1);
    CHECK_INT(fake_api_requests(e->f, "LIST /api/v1/pods"), 3);
    CHECK_INT(s.lists[KUBE_POD], 1);
    pthread_mutex_lock(&e->r.mu);
    int relists = e->r.relists[KUBE_POD];
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(relists, 1); /* failed lists announce nothing */
    CHECK(p_mirror(e, NULL));
}

KUBE_TEST(kube_list_410_on_continue_restarts_the_list, NULL) {
    for (int i = 0; i < 700; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%04d", i);
        put_pod(e, "ml", name, NULL);
    }
    /* the first page is served, then the continue token has expired: the list starts over, announced again */
    fake_api_inject(e->f, "LIST /api/v1/pods", 0, 1);
    fake_api_inject(e->f, "LIST /api/v1/pods", 410, 1);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK_INT(s.gone[KUBE_POD], 1);
    CHECK_INT(s.errors[KUBE_POD], 0);
    CHECK_INT(s.lists[KUBE_POD], 1);
    CHECK_INT(fake_api_requests(e->f, "LIST /api/v1/pods"), 4);
    pthread_mutex_lock(&e->r.mu);
    int relists = e->r.relists[KUBE_POD], syncs = e->r.syncs[KUBE_POD];
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(relists, 2);
    CHECK_INT(syncs, 1);
}

typedef struct req_at_least { const char *target; int n; } req_at_least;

static bool p_requests(env *e, const void *arg) {
    const req_at_least *a = arg;
    return fake_api_requests(e->f, a->target) >= a->n;
}

/* Live-only lines reach only watches already open: wait until the n-th pod watch request has been made. */
#define WAIT_POD_WATCH(n) do { req_at_least r_ = {"WATCH /api/v1/pods", (n)}; WAIT(p_requests, &r_); } while (0)

KUBE_TEST(kube_watch_error_status_and_malformed_events_relist, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT_POD_WATCH(1);
    fake_api_watch_raw(e->f, "pods", "{\"type\":\"ADDED\",\"object\":{\"metadata\":");
    stat_at_least err1 = {ST_ERRORS, KUBE_POD, 1}, list2 = {ST_LISTS, KUBE_POD, 2};
    WAIT(p_stat, &err1);
    WAIT(p_stat, &list2);
    /* an ERROR event other than 410 */
    WAIT_POD_WATCH(2);
    fake_api_watch_raw(e->f, "pods", "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500}}");
    stat_at_least err2 = {ST_ERRORS, KUBE_POD, 2}, list3 = {ST_LISTS, KUBE_POD, 3};
    WAIT(p_stat, &err2);
    WAIT(p_stat, &list3);
    /* a watch answered with HTTP 500 */
    WAIT_POD_WATCH(3);
    fake_api_inject(e->f, "WATCH /api/v1/pods", 500, 1);
    fake_api_end_watches(e->f);
    stat_at_least err3 = {ST_ERRORS, KUBE_POD, 3}, list4 = {ST_LISTS, KUBE_POD, 4};
    WAIT(p_stat, &err3);
    WAIT(p_stat, &list4);
    put_pod(e, "ml", "b", NULL);
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK_INT(s.errors[KUBE_POD], 3);
    CHECK_INT(s.errors[KUBE_NODE], 0);
    CHECK_INT(s.gone[KUBE_POD], 0);
}

KUBE_TEST(kube_watch_long_lines_and_oversized_line, NULL) {
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    /* a 3 MiB event arrives in many chunks and must be reassembled */
    size_t big = 3u << 20;
    char *j = malloc(big + 512);
    CHECK(j);
    int n = snprintf(j, 512, "{\"metadata\":{\"name\":\"big\",\"namespace\":\"ml\",\"annotations\":{\"blob\":\"");
    memset(j + n, 'x', big);
    snprintf(j + n + big, 512, "\"}},\"spec\":{}}");
    long long rv = fake_api_put(e->f, "pods", j);
    free(j);
    CHECK(rv > 0);
    rec_event add = {.kind = KUBE_POD, .ev = KUBE_ADDED, .key = "ml/big"};
    WAIT(p_event, &add);
    pthread_mutex_lock(&e->r.mu);
    size_t got = 0;
    for (size_t i = 0; i < e->r.n; i++)
        if (strcmp(e->r.log[i].key, "ml/big") == 0) got = e->r.log[i].ann_len;
    pthread_mutex_unlock(&e->r.mu);
    CHECK_INT(got, big);
    CHECK_INT(stats(e).errors[KUBE_POD], 0);
    /* a line over the 16 MiB limit is an error, not an unbounded buffer */
    size_t huge = (16u << 20) + 100;
    char *h = malloc(huge + 1);
    CHECK(h);
    memset(h, 'y', huge);
    h[huge] = 0;
    WAIT_POD_WATCH(1);
    fake_api_watch_raw(e->f, "pods", h);
    free(h);
    stat_at_least err = {ST_ERRORS, KUBE_POD, 1}, relisted = {ST_LISTS, KUBE_POD, 2};
    WAIT(p_stat, &err);
    WAIT(p_stat, &relisted);
    WAIT(p_mirror, NULL);
}

KUBE_TEST(kube_dropped_watch_reconnects_without_losing_events, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    put_pod(e, "ml", "b", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    fake_api_drop_watches(e->f);
    /* while the client backs off and relists */
    CHECK_INT(fake_api_delete(e->f, "pods", "ml", "a"), 0);
    put_pod(e, "ml", "b", "n1");
    put_pod(e, "ml", "c", NULL);
    put_node(e, "n2");
    WAIT(p_mirror, NULL);
    stat_at_least ep = {ST_ERRORS, KUBE_POD, 1}, en = {ST_ERRORS, KUBE_NODE, 1};
    WAIT(p_stat, &ep);
    WAIT(p_stat, &en);
    /* and the new watch works */
    WAIT(p_watching, NULL);
    put_pod(e, "ml", "d", NULL);
    WAIT(p_mirror, NULL);
}

KUBE_TEST(kube_api_server_down_then_back_recovers, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "a", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    fake_api_down(e->f);
    stat_at_least ep = {ST_ERRORS, KUBE_POD, 3};
    WAIT(p_stat, &ep); /* connection refused, repeatedly */
    put_pod(e, "ml", "b", NULL);
    CHECK_INT(fake_api_delete(e->f, "pods", "ml", "a"), 0);
    put_node(e, "n2");
    char err[256];
    CHECK_MSG(fake_api_up(e->f, err, sizeof err) == 0, "%s", err);
    WAIT(p_mirror, NULL);
    kube_stats s = stats(e);
    CHECK(s.synced[KUBE_POD] && s.synced[KUBE_NODE]);
    CHECK(s.lists[KUBE_POD] >= 2);
    pthread_mutex_lock(&e->r.mu);
    bool bad = e->r.bad_order;
    pthread_mutex_unlock(&e->r.mu);
    CHECK(!bad);
}

/* ---- binding ----------------------------------------------------------------------------------------- */

static char *pod_uid(env *e, const char *ns, const char *name) {
    char *s = fake_api_get(e->f, "pods", ns, name);
    cJSON *p = cJSON_Parse(s);
    free(s);
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metadata"), "uid");
    char *out = cJSON_IsString(u) ? strdup(u->valuestring) : NULL;
    cJSON_Delete(p);
    return out;
}

KUBE_TEST(kube_bind_sets_node_and_annotations, NULL) {
    put_node(e, "n1");
    put_pod(e, "ml", "p", NULL);
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    char *uid = pod_uid(e, "ml", "p");
    CHECK(uid);
    cJSON *ann = cJSON_CreateObject();
    cJSON_AddStringToObject(ann, "tessera.io/assignment", "{\"gpus\":[\"GPU-1\"],\"memMiB\":10240}");
    char err[256] = "x";
    int rc = kube_bind(e->k, "ml", "p", uid, "n1", ann, err, sizeof err);
    cJSON_Delete(ann);
    free(uid);
    CHECK_INT(rc, 201);
    CHECK_STR(err, "");
    char *s = fake_api_get(e->f, "pods", "ml", "p");
    cJSON *pod = cJSON_Parse(s);
    free(s);
    const cJSON *nn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "nodeName");
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
    bool node_ok = cJSON_IsString(nn) && strcmp(nn->valuestring, "n1") == 0;
    const cJSON *a1 = cJSON_GetObjectItemCaseSensitive(an, "tessera.io/assignment");
    const cJSON *a2 = cJSON_GetObjectItemCaseSensitive(an, "keep");
    bool ann_ok = cJSON_IsString(a1) && strstr(a1->valuestring, "GPU-1") && cJSON_IsString(a2);
    cJSON_Delete(pod);
    CHECK(node_ok);
    CHECK(ann_ok);
    CHECK_INT(fake_api_bindings(e->f), 1);
    char *body = fake_api_binding_body(e->f, 0);
    cJSON *b = cJSON_Parse(body);
    free(body);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(b, "kind");
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "target"), "kind");
    bool body_ok = cJSON_IsString(kind) && strcmp(kind->valuestring, "Binding") == 0 && cJSON_IsString(tk) &&
                   strcmp(tk->valuestring, "Node") == 0;
    cJSON_Delete(b);
    CHECK(body_ok);
    /* the watch confirms the bind */
    rec_event mod = {.kind = KUBE_POD, .ev = KUBE_MODIFIED, .key = "ml/p", .node = "n1"};
    WAIT(p_event, &mod);
}

KUBE_TEST(kube_bind_failures_carry_the_api_message, NULL) {
    put_pod(e, "ml", "p", NULL);
    put_pod(e, "ml", "bound", "n0");
    CHECK(env_start(e));
    char err[512];
    int rc = kube_bind(e->k, "ml", "p", "not-the-uid", "n1", NULL, err, sizeof err);
    CHECK_INT(rc, 409);
    CHECK_CONTAINS(err, "UID in precondition");
    rc = kube_bind(e->k, "ml", "gone", NULL, "n1", NULL, err, sizeof err);
    CHECK_INT(rc, 404);
    CHECK_CONTAINS(err, "pods \"gone\" not found");
    char *uid = pod_uid(e, "ml", "bound");
    rc = kube_bind(e->k, "ml", "bound", uid, "n1", NULL, err, sizeof err);
    free(uid);
    CHECK_INT(rc, 409);
    CHECK_CONTAINS(err, "already assigned");
    fake_api_inject(e->f, "POST /api/v1/namespaces/", 500, 1);
    uid = pod_uid(e, "ml", "p");
    rc = kube_bind(e->k, "ml", "p", uid, "n1", NULL, err, sizeof err);
    CHECK_INT(rc, 500);
    CHECK_CONTAINS(err, "injected 500");
    /* names are escaped into the URL, not spliced */
    rc = kube_bind(e->k, "ml", "a b?c", NULL, "n1", NULL, err, sizeof err);
    CHECK_INT(rc, 404);
    CHECK_CONTAINS(err, "a b?c");
    /* nothing was bound by the failures; a retry with the right uid works */
    rc = kube_bind(e->k, "ml", "p", uid, "n1", NULL, err, sizeof err);
    free(uid);
    CHECK_INT(rc, 201);
    CHECK_INT(fake_api_bindings(e->f), 6);
    /* requests that cannot be made */
    cJSON *bad = cJSON_CreateObject();
    cJSON_AddNumberToObject(bad, "tessera.io/assignment", 3);
    rc = kube_bind(e->k, "ml", "p", NULL, "n1", bad, err, sizeof err);
    cJSON_Delete(bad);
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(err, "not a string");
    CHECK_INT(kube_bind(e->k, "ml", "", NULL, "n1", NULL, err, sizeof err), -1);
    CHECK_INT(fake_api_bindings(e->f), 6);
}

KUBE_TEST(kube_bind_while_server_down_returns_minus_one, NULL) {
    put_pod(e, "ml", "p", NULL);
    e->k = NULL;
    char err[256];
    e->k = kube_new(&e->cfg, err, sizeof err); /* bind needs no started threads */
    CHECK(e->k);
    fake_api_down(e->f);
    int rc = kube_bind(e->k, "ml", "p", NULL, "n1", NULL, err, sizeof err);
    CHECK_INT(rc, -1);
    CHECK(err[0] != 0);
    CHECK(fake_api_up(e->f, err, sizeof err) == 0);
    CHECK_INT(kube_bind(e->k, "ml", "p", NULL, "n1", NULL, err, sizeof err), 201);
}

/* ---- credentials, configuration, shutdown ------------------------------------------------------------ */

static bool write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(s, f) >= 0;
    return fclose(f) == 0 && ok;
}

static char tok_path[64];

static void token_body(env *e) {
    fake_api_require_token(e->f, "tok-1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    char *a = fake_api_last_auth(e->f);
    CHECK_STR(a, "Bearer tok-1");
    free(a);
    /* rotation: the next connection reads the new token */
    CHECK(write_file(tok_path, "tok-2\n"));
    fake_api_require_token(e->f, "tok-2");
    WAIT(p_watching, NULL);
    fake_api_drop_watches(e->f);
    int two = 2;
    WAIT(p_synced, &two);
    WAIT(p_mirror, NULL);
    a = fake_api_last_auth(e->f);
    CHECK_STR(a, "Bearer tok-2");
    free(a);
    char err[256];
    put_pod(e, "ml", "p", NULL);
    CHECK_INT(kube_bind(e->k, "ml", "p", NULL, "n1", NULL, err, sizeof err), 201);
    /* a wrong token is a 401 with the API's message */
    fake_api_require_token(e->f, "tok-3");
    CHECK_INT(kube_bind(e->k, "ml", "p", NULL, "n1", NULL, err, sizeof err), 401);
    CHECK_CONTAINS(err, "Unauthorized");
}

TEST(kube_token_file_is_sent_and_reread) {
    snprintf(tok_path, sizeof tok_path, "/tmp/tessera-kube-token-XXXXXX");
    int fd = mkstemp(tok_path);
    CHECK(fd >= 0);
    close(fd);
    env e;
    if (write_file(tok_path, "  tok-1\n") && env_init(&e, tok_path)) token_body(&e);
    else test_fail(__FILE__, __LINE__, "setup failed");
    env_free(&e);
    unlink(tok_path);
}

KUBE_TEST(kube_missing_token_file_is_an_error_not_anonymous, "/nonexistent/tessera/token") {
    CHECK(env_start(e));
    stat_at_least err = {ST_ERRORS, KUBE_POD, 1};
    WAIT(p_stat, &err);
    CHECK_INT(fake_api_requests(e->f, ""), 0);
    char msg[256];
    CHECK_INT(kube_bind(e->k, "ml", "p", NULL, "n1", NULL, msg, sizeof msg), -1);
    CHECK_CONTAINS(msg, "token");
}

KUBE_TEST(kube_free_returns_quickly_with_open_watch, NULL) {
    e->cfg.watch_timeout_s = 300;
    put_node(e, "n1");
    CHECK(env_start(e));
    WAIT(p_synced, NULL);
    WAIT(p_watching, NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kube_free(e->k);
    e->k = NULL;
    double ms = ms_since(&t0);
    CHECK_MSG(ms < 2000, "kube_free took %.0f ms", ms);
}

KUBE_TEST(kube_free_returns_quickly_during_backoff, NULL) {
    e->cfg.backoff_max_ms = 30000;
    fake_api_down(e->f);
    CHECK(env_start(e));
    /* four failures: now sleeping 1.6 s (+-20 percent), long enough beside what freeing takes on a loaded machine
     * to tell an interrupted sleep from one waited out */
    stat_at_least err = {ST_ERRORS, KUBE_POD, 4};
    WAIT(p_stat, &err);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kube_free(e->k);
    e->k = NULL;
    double ms = ms_since(&t0);
    CHECK_MSG(ms < 1000, "kube_free took %.0f ms: it waited out the back-off", ms);
}

TEST(kube_config_defaults_and_validation) {
    kube_config c;
    kube_config_defaults(&c);
    CHECK_INT(c.request_timeout_ms, 10000);
    CHECK_INT(c.watch_timeout_s, 300);
    CHECK_INT(c.backoff_max_ms, 30000);
    CHECK_STR(c.api_url, "");
    char err[256];
    CHECK(kube_new(&c, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "http");
    snprintf(c.api_url, sizeof c.api_url, "ftp://127.0.0.1:1");
    CHECK(kube_new(&c, err, sizeof err) == NULL);
    snprintf(c.api_url, sizeof c.api_url, "http://127.0.0.1:1/");
    kube_client *k = kube_new(&c, err, sizeof err);
    CHECK(k);
    kube_free(k); /* never started */
    char *host = getenv("KUBERNETES_SERVICE_HOST");
    char *saved = host ? strdup(host) : NULL;
    unsetenv("KUBERNETES_SERVICE_HOST");
    int rc = kube_config_in_cluster(&c, err, sizeof err);
    if (saved) { setenv("KUBERNETES_SERVICE_HOST", saved, 1); free(saved); }
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(err, "KUBERNETES_SERVICE_HOST");
}
