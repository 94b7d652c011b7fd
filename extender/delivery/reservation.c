/* reservation.c -- the reservation controller (reservation.h): tables of reservation pods and share
 * pods fed by the watch, and a worker that reconciles them against each other and the node models.
 * Every pass: snapshot the tables, read the node models under the state lock, decide, then call the
 * API with no lock held. What a pass learns about its own writes (a pod it created, an assignment it
 * patched) goes into the tables at once, so the next pass never repeats a write the watch has not
 * shown yet.
 * A refused reservation is deleted and its waiting shares moved, except one that still holds the device its started
 * shares run on (an MPS daemon dead for good under them: holds_started): it is kept until they end, so the device
 * stays held, and they get a TesseraGPUEnforcementFailed Warning.
 */
#include "extender/delivery/reservation.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extender/base/annotation.h"
#include "extender/base/delivery.h"
#include "extender/base/health.h"
#include "kube/log.h"
#include "extender/base/map.h"
#include "model/fit.h"
#include "model/json.h"
#include "model/request.h"

#define NAME_LEN 254
#define UNIT_LEN 96

/* A reservation pod as the API shows it. The tail (tenantless_ms, first_ms) is the worker's memory. */
typedef struct rpod {
    char name[NAME_LEN], uid[MODEL_UID_LEN], node[NAME_LEN], unit[UNIT_LEN];
    char ns[64];              /* the reservation namespace, or the MPS one */
    char key[64 + NAME_LEN + 2];   /* "ns/name": the table's key (names are unique per namespace only) */
    bool mps;                 /* tessera.io/reservation-mps: runs the GPU's MPS control daemon */
    char mps_pipe[512], mps_log[512];  /* what tessera-reserve --mps published with the UUID ("" when not) */
    int gpu;                  /* model_gpu.index from the annotation; -1 when missing */
    int attempt;              /* from the name; -1 when it does not end in one */
    char phase[32], reason[128], message[256];
    char uuid[512], rerr[256];
    char wreason[64], wmessage[1024];  /* its container's state.waiting (ImagePullBackOff...): why no UUID yet; a
                                        * crash loop's back-off message (~140 characters) and its last exit */
    bool deleting;
    uint32_t gen;
    uint64_t rv;              /* metadata.resourceVersion of what the table holds (0 unknown) */
    int64_t created_wall_ms;  /* metadata.creationTimestamp (ms since the epoch), 0 if unknown */
    int64_t first_ms;         /* when this controller first saw it (age) */
    int64_t tenantless_ms;    /* since when it has had no tenant; 0: it has tenants */
    bool stuck;               /* pass only: no UUID within --reservation-timeout: treated as refused */
    bool claimed;             /* pass only: shares were moved onto it in this pass: not released */
} rpod;

/* A share pod: bound, running or waiting, a fraction with our assignment. The tail is the worker's
 * memory of what it already told the pod or wrote for it; losing it (a restart) repeats at most an Event. */
typedef struct spod {
    char uid[MODEL_UID_LEN], ns[64], name[NAME_LEN], node[NAME_LEN];
    char *ann;                /* tessera.io/assignment text */
    char delivery[NAME_LEN];  /* tessera.io/delivery: the ConfigMap's name; "" if not mutated */
    bool owned;               /* an ownerReference with controller: true */
    bool started;             /* a container (init or app) ran: it cannot be moved any more */
    bool mps;                 /* tessera.io/compute-sharing: mps */
    int64_t run_as_uid;       /* an MPS share's uid (MODEL_UID_UNKNOWN otherwise) */
    bool shim, mps_mounts;    /* what the webhook gave it (ext_delivery_share) */
    char shim_fail[768];      /* why its tessera-cuda-shim init container does not succeed; "" when it does */
    int refusals;             /* EXT_RSV_ANN_REFUSALS: reservations refused under it so far (survives restarts) */
    uint32_t gen;
    uint64_t rv;              /* metadata.resourceVersion of what the table holds (0 unknown) */
    char ev_pending_for[NAME_LEN + 96], ev_refused_for[NAME_LEN];
    char cm_written[1024];    /* the UUIDs of the ConfigMap last ensured */
    char enforcement[600];    /* the enforcement line of that ConfigMap ("" before) */
    char ev_enforce_for[160]; /* the shim failure already told (its reason family) */
    char ev_mps_for[NAME_LEN];/* the reservation whose MPS daemon's failure was told (mps_daemon_failed) */
    bool ev_delivered, ev_nomut, ev_unavail, ev_lost, ev_foreign;
    int64_t retry_ms;         /* given up and left pending: try again from then (0: not given up) */
    int retry_backoff_ms;
} spod;

/* Per unit: the last attempt made (names are never reused). Refusals are counted per share instead
 * (spod.refusals, on the pod), so they survive moves and restarts. */
typedef struct unit_mem {
    char key[NAME_LEN + UNIT_LEN + 16];
    int last_attempt;
    uint32_t seen_pass;
} unit_mem;

/* A pod of the tables that was deleted (by this controller, or as the watch showed), kept a while so that no
 * late copy of it (a stale event, the reply to our own earlier write) puts it back. */
typedef struct tomb {
    int64_t ms;
    char uid[MODEL_UID_LEN];
} tomb;
#define TOMB_MS 600000

/* A share as /debug/state shows it: the last pass's view. */
typedef struct sview {
    char pod[NAME_LEN + 70], node[NAME_LEN], configmap[NAME_LEN], uuids[1024], enforcement[600], problem[900];
    bool mps;
    int64_t uid;
    const char *state;        /* waiting | delivered | failed | not-mutated */
} sview;

/* What /debug/state and the gauge show: the last pass's view. */
typedef struct view {
    char node[NAME_LEN], unit[UNIT_LEN], name[NAME_LEN], ns[64], uuid[512], waiting[1100];
    bool mps;
    int gpu;
    ext_rsv_state state;
    int64_t first_ms;
    char *tenants;            /* JSON array text */
} view;

struct ext_rsv {
    ext_rsv_config cfg;
    ext_state *st;
    kube_client *k;
    ext_events *ev;
    ext_leader *leader;

    pthread_mutex_t mu;       /* the tables, dirty/stop, the view */
    pthread_cond_t cv;
    ext_map *rpods;           /* name -> rpod */
    ext_map *spods;           /* uid -> spod */
    ext_map *units;           /* key -> unit_mem (worker only) */
    ext_map *tombs;           /* uid -> tomb: pods of the tables that were deleted; no late copy revives one */
    uint32_t gen;
    bool synced, dirty, stop, started;
    pthread_t thr;
    view *views;
    int nviews;
    sview *sviews;
    int nsviews;

    int64_t image_next_ms;    /* next try to read our own image */
    int image_backoff_ms;
    char image_why[768];      /* why it is unknown, as last reported ("" when known or not yet judged) */
    bool image_pending;       /* the worker runs and has not yet tried to read our own image (under mu) */
    pthread_cond_t image_cv;  /* broadcast when image_pending ends */
    int backoff_ms;
    uint32_t pass;
    _Atomic uint64_t ops[EXT_RSV_NOPS][2];
    _Atomic uint64_t passes;
};

static const char *const state_names[] = {"pending", "ready", "refused", "releasing"};
static const char *const op_names[] = {"create", "delete", "move", "configmap"};
const char *ext_rsv_state_name(ext_rsv_state s) { return s >= 0 && s < EXT_RSV_NSTATES ? state_names[s] : "?"; }
const char *ext_rsv_op_name(ext_rsv_op o) { return o >= 0 && o < EXT_RSV_NOPS ? op_names[o] : "?"; }

void ext_rsv_config_defaults(ext_rsv_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const char *ns = getenv("POD_NAMESPACE");
    snprintf(cfg->ns, sizeof cfg->ns, "%s", ns && ns[0] ? ns : EXT_RSV_DEFAULT_NS);
    snprintf(cfg->mps_ns, sizeof cfg->mps_ns, "%s", EXT_RSV_DEFAULT_MPS_NS);
    cfg->grace_ms = 30000;
    cfg->timeout_ms = 300000;
    cfg->retry_ms = 30000;
    cfg->max_attempts = 3;
    cfg->tick_ms = 1000;
    cfg->request_timeout_ms = 5000;
}

/* ------------------------------------------------------------------ JSON helpers */

/* The string at o.a, or at o.a.b when b is given. */
static const char *jstr(const cJSON *o, const char *a, const char *b) {
    return b ? model_json_str(model_json_get(o, a), b) : model_json_str(o, a);
}
static void cpy(char *dst, size_t len, const char *src) { snprintf(dst, len, "%s", src ? src : ""); }

static void op_count(ext_rsv *r, ext_rsv_op op, bool ok) { atomic_fetch_add(&r->ops[op][ok ? 0 : 1], 1); }

/* ------------------------------------------------------------------ tables (events) */

static void spod_free(spod *s) {
    if (!s) return;
    free(s->ann);
    free(s);
}

/* Reservations live in two namespaces: tessera's own (restricted) and the MPS one (privileged). A pod with
 * the label elsewhere is nobody's reservation: whoever can create pods there could otherwise make tessera
 * take it for one. */
static bool is_reservation(ext_rsv *r, const cJSON *meta) {
    const char *ns = jstr(meta, "namespace", NULL), *l = jstr(meta, "labels", EXT_RSV_LABEL);
    return ns && l && (!strcmp(ns, r->cfg.ns) || !strcmp(ns, r->cfg.mps_ns)) && !strcmp(l, "true");
}

/* RFC 3339 "2026-11-25T16:30:33Z" -> ms since the epoch; 0 when it is not one. */
static int64_t rfc3339_ms(const char *t) {
    struct tm tm = {0};
    if (!t || sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t s = timegm(&tm);
    return s < 0 ? 0 : (int64_t)s * 1000;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* metadata.resourceVersion as a number, 0 when it is not one. The API server's are etcd revisions; the table
 * compares them only to keep an API answer (a create's or a patch's) that arrives after the watch showed a later
 * state of the same object from overwriting it: the watch would not tell that state again. */
static uint64_t rv_of(const cJSON *meta) {
    const char *v = jstr(meta, "resourceVersion", NULL);
    char *end = NULL;
    unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
    return end && !*end ? (uint64_t)n : 0;
}

/* An older state than the table holds: a stale answer, ignored. */
static bool stale(uint64_t have, const cJSON *meta) {
    uint64_t rv = rv_of(meta);
    return have && rv && rv < have;
}

static void rpod_key(const cJSON *meta, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s", jstr(meta, "namespace", NULL), jstr(meta, "name", NULL));
}

/* Caller holds mu. */
static void tomb_add(ext_rsv *r, const char *uid) {
    if (!uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN || ext_map_get(r->tombs, uid)) return;
    tomb *t = calloc(1, sizeof *t);
    if (!t) return;
    t->ms = ext_now_ms();
    cpy(t->uid, sizeof t->uid, uid);
    if (ext_map_put(r->tombs, t->uid, t) != 0) free(t);
}

static void rpod_update(ext_rsv *r, const cJSON *obj) {
    const cJSON *meta = model_json_get(obj, "metadata");
    const char *name = jstr(meta, "name", NULL), *uid = jstr(meta, "uid", NULL);
    if (!name || strlen(name) >= NAME_LEN) return;   /* is_reservation: the namespace is one of ours */
    char key[sizeof ((rpod *)0)->key];
    rpod_key(meta, key, sizeof key);
    rpod *p = ext_map_get(r->rpods, key);
    if (p && stale(p->rv, meta)) { p->gen = r->gen; return; }
    /* Deleted: an event that was on its way, a stale relist or a late reply must not make it live again. */
    bool gone = uid && ext_map_get(r->tombs, uid) != NULL;
    if (!p && gone) return;
    if (!p) {
        if (!(p = calloc(1, sizeof *p))) return;
        cpy(p->name, sizeof p->name, name);
        cpy(p->key, sizeof p->key, key);
        if (ext_map_put(r->rpods, p->key, p) != 0) { free(p); return; }
        p->first_ms = ext_now_ms();
    }
    const cJSON *ann = model_json_get(meta, "annotations");
    cpy(p->uid, sizeof p->uid, jstr(meta, "uid", NULL));
    cpy(p->ns, sizeof p->ns, jstr(meta, "namespace", NULL));
    const char *mps = jstr(ann, EXT_RSV_ANN_MPS, NULL);
    p->mps = mps && !strcmp(mps, "true");
    cpy(p->mps_pipe, sizeof p->mps_pipe, jstr(ann, EXT_RSV_ANN_MPS_PIPE, NULL));
    cpy(p->mps_log, sizeof p->mps_log, jstr(ann, EXT_RSV_ANN_MPS_LOG, NULL));
    cpy(p->node, sizeof p->node, jstr(ann, EXT_RSV_ANN_NODE, NULL));
    cpy(p->unit, sizeof p->unit, jstr(ann, EXT_RSV_ANN_UNIT, NULL));
    const char *g = jstr(ann, EXT_RSV_ANN_GPU, NULL);
    char *end = NULL;
    long gi = g ? strtol(g, &end, 10) : -1;
    p->gpu = g && end != g && !*end && gi >= 0 && gi < 1000 ? (int)gi : -1;
    p->attempt = ext_rsv_name_attempt(name);
    cpy(p->phase, sizeof p->phase, jstr(obj, "status", "phase"));
    cpy(p->reason, sizeof p->reason, jstr(obj, "status", "reason"));
    cpy(p->message, sizeof p->message, jstr(obj, "status", "message"));
    cpy(p->uuid, sizeof p->uuid, jstr(ann, EXT_RSV_ANN_UUID, NULL));
    cpy(p->rerr, sizeof p->rerr, jstr(ann, EXT_RSV_ANN_ERROR, NULL));
    p->wreason[0] = p->wmessage[0] = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, model_json_get(model_json_get(obj, "status"), "containerStatuses")) {
        const cJSON *w = model_json_get(model_json_get(cs, "state"), "waiting");
        if (w && jstr(w, "reason", NULL)) {
            cpy(p->wreason, sizeof p->wreason, jstr(w, "reason", NULL));
            /* a crash loop says only "back-off ...": the last exit says why (StartError: exec ... no such file) */
            const cJSON *t = model_json_get(model_json_get(cs, "lastState"), "terminated");
            const char *tr = jstr(t, "reason", NULL), *tm = jstr(t, "message", NULL);
            snprintf(p->wmessage, sizeof p->wmessage, "%s%s%s%s%s%s", jstr(w, "message", NULL) ? jstr(w, "message", NULL) : "",
                     tr ? " (last exit: " : "", tr ? tr : "", tr && tm ? ": " : "", tr && tm ? tm : "", tr ? ")" : "");
        }
    }
    p->created_wall_ms = rfc3339_ms(jstr(meta, "creationTimestamp", NULL));
    p->deleting = jstr(meta, "deletionTimestamp", NULL) != NULL || gone;
    p->gen = r->gen;
    p->rv = rv_of(meta);
}

/* A container ran: an init container counts (it saw the delivered environment too), and so does one
 * that already terminated. Not tessera-cuda-shim: it reads no delivered environment and runs at once,
 * before the ConfigMap exists, so a share whose shim is installed can still move to another GPU. */
static bool pod_started(const cJSON *obj) {
    static const char *const lists[2] = {"initContainerStatuses", "containerStatuses"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, model_json_get(model_json_get(obj, "status"), lists[l])) {
            const char *cn = jstr(c, "name", NULL);
            if (l == 0 && cn && !strcmp(cn, EXT_DLV_SHIM_CONTAINER)) continue;
            const cJSON *state = model_json_get(c, "state");
            if (model_json_get(state, "running") || model_json_get(state, "terminated")) return true;
            const cJSON *rc = model_json_get(c, "restartCount");
            if (cJSON_IsNumber(rc) && rc->valuedouble > 0) return true;
        }
    }
    return false;
}

/* Does container c mount volume vol at path (subPath sub, or none)? */
static bool mounts(const cJSON *c, const char *vol, const char *path, const char *sub) {
    const cJSON *m;
    cJSON_ArrayForEach(m, model_json_get(c, "volumeMounts")) {
        const char *n = jstr(m, "name", NULL), *mp = jstr(m, "mountPath", NULL), *sp = jstr(m, "subPath", NULL);
        if (n && mp && !strcmp(n, vol) && !strcmp(mp, path) && (sub ? sp && !strcmp(sp, sub) : !sp || !sp[0])) return true;
    }
    return false;
}

/* Every container and init container but the shim's own mounts vol at path: what makes it a client. */
static bool all_mount(const cJSON *obj, const char *vol, const char *path, const char *sub) {
    static const char *const lists[2] = {"initContainers", "containers"};
    int n = 0;
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, model_json_get(model_json_get(obj, "spec"), lists[l])) {
            const char *cn = jstr(c, "name", NULL);
            if (l == 0 && cn && !strcmp(cn, EXT_DLV_SHIM_CONTAINER)) continue;
            if (!mounts(c, vol, path, sub)) return false;
            n++;
        }
    }
    return n > 0;
}

/* The webhook installed the interposer: its init container comes first, and every other container reads
 * /etc/ld.so.preload from the pod's tessera-cuda volume. */
static bool has_shim(const cJSON *obj) {
    const cJSON *first = cJSON_GetArrayItem(model_json_get(model_json_get(obj, "spec"), "initContainers"), 0);
    const char *fn = jstr(first, "name", NULL);
    return fn && !strcmp(fn, EXT_DLV_SHIM_CONTAINER) &&
           all_mount(obj, EXT_DLV_SHIM_VOLUME, EXT_DLV_SHIM_PRELOAD, EXT_DLV_SHIM_PRELOAD_SUB);
}

static bool has_mps_mounts(const cJSON *obj) {
    return all_mount(obj, EXT_DLV_MPS_VOLUME, EXT_DLV_MPS_ROOT, NULL) &&
           all_mount(obj, EXT_DLV_MPS_SHM_VOLUME, EXT_DLV_DEV_SHM, NULL);
}

/* Why the share's tessera-cuda-shim init container does not install the interposer, into buf ("" when it
 * did or has not had its chance yet): it exited non-zero (the message tessera-reserve --install-shim wrote,
 * kept by the kubelet as the termination message), or waits for good (tessera's image cannot be pulled in
 * the pod's namespace, ...). The pod's other containers never start then: nothing runs unenforced. */
static void shim_failure(const cJSON *obj, char *buf, size_t len) {
    buf[0] = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, model_json_get(model_json_get(obj, "status"), "initContainerStatuses")) {
        const char *cn = jstr(c, "name", NULL);
        if (!cn || strcmp(cn, EXT_DLV_SHIM_CONTAINER) != 0) continue;
        const cJSON *st = model_json_get(c, "state");
        const cJSON *t = model_json_get(st, "terminated");
        if (!t) t = model_json_get(model_json_get(c, "lastState"), "terminated");
        const cJSON *code = model_json_get(t, "exitCode");
        const cJSON *w = model_json_get(st, "waiting");
        const char *wr = jstr(w, "reason", NULL);
        if (cJSON_IsNumber(code) && code->valuedouble != 0) {
            const char *tm = jstr(t, "message", NULL), *tr = jstr(t, "reason", NULL);
            snprintf(buf, len, "exit code %d%s%s%s%s", code->valueint, tr ? " (" : "", tr ? tr : "", tr ? ")" : "",
                     tm && tm[0] ? ": " : "");
            if (tm && tm[0]) snprintf(buf + strlen(buf), len - strlen(buf), "%.500s", tm);
        } else if (wr && strcmp(wr, "ContainerCreating") != 0 && strcmp(wr, "PodInitializing") != 0) {
            const char *wm = jstr(w, "message", NULL);
            snprintf(buf, len, "%s%s%.500s", wr, wm && wm[0] ? ": " : "", wm ? wm : "");
        }
        return;
    }
}

/* A share pod, or removed from the table when it is not (any more) one. */
static void spod_update(ext_rsv *r, const cJSON *obj) {
    const cJSON *meta = model_json_get(obj, "metadata");
    const char *uid = jstr(meta, "uid", NULL), *name = jstr(meta, "name", NULL), *ns = jstr(meta, "namespace", NULL);
    if (!uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN || !name || strlen(name) >= NAME_LEN) return;
    if (!ns) ns = "default";
    spod *s = ext_map_get(r->spods, uid);
    if (!s && ext_map_get(r->tombs, uid)) return;   /* deleted: see rpod_update */
    if (s && stale(s->rv, meta)) { s->gen = r->gen; return; }
    const char *phase = jstr(obj, "status", "phase"), *node = jstr(obj, "spec", "nodeName");
    const char *ann = jstr(meta, "annotations", EXT_ANN_ASSIGNMENT);
    model_request req;
    char err[256];
    bool share = node && node[0] && ann && strlen(node) < NAME_LEN && strlen(ns) < 64 &&
                 !(phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) &&
                 model_request_from_pod(obj, &req, err, sizeof err) == 0 && req.kind == MODEL_REQ_FRACTION;
    if (!share) {
        if (s) spod_free(ext_map_del(r->spods, uid));
        return;
    }
    if (!s) {
        if (!(s = calloc(1, sizeof *s))) return;
        cpy(s->uid, sizeof s->uid, uid);
        if (ext_map_put(r->spods, s->uid, s) != 0) { free(s); return; }
    }
    cpy(s->ns, sizeof s->ns, ns);
    cpy(s->name, sizeof s->name, name);
    cpy(s->node, sizeof s->node, node);
    if (!s->ann || strcmp(s->ann, ann) != 0) {
        char *c = strdup(ann);
        if (c) { free(s->ann); s->ann = c; }
    }
    const char *d = jstr(meta, "annotations", EXT_DLV_ANN_DELIVERY);
    cpy(s->delivery, sizeof s->delivery, d && strlen(d) < NAME_LEN ? d : "");
    s->owned = false;
    const cJSON *o;
    cJSON_ArrayForEach(o, model_json_get(meta, "ownerReferences"))
        if (cJSON_IsTrue(model_json_get(o, "controller"))) s->owned = true;
    s->started = pod_started(obj);
    s->mps = req.compute_sharing == MODEL_COMPUTE_MPS;
    s->run_as_uid = s->mps ? req.run_as_uid : MODEL_UID_UNKNOWN;
    s->shim = has_shim(obj);
    s->mps_mounts = s->mps && has_mps_mounts(obj);
    shim_failure(obj, s->shim_fail, sizeof s->shim_fail);
    const char *rf = jstr(meta, "annotations", EXT_RSV_ANN_REFUSALS);
    s->refusals = rf ? atoi(rf) : 0;
    if (s->refusals < 0) s->refusals = 0;
    s->gen = r->gen;
    s->rv = rv_of(meta);
}

static void kick_locked(ext_rsv *r) {
    r->dirty = true;
    pthread_cond_signal(&r->cv);
}

void ext_rsv_on_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    ext_rsv *r = user;
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    if (kind == KUBE_POD) {
        switch (ev) {
        case KUBE_RELIST: r->gen++; break;
        case KUBE_SYNCED: {
            /* Drop what the list did not mention (deleted while we were not watching). */
            size_t it = 0;
            rpod *p;
            spod *s;
            for (;;) {
                bool again = false;
                it = 0;
                while ((p = ext_map_next(r->rpods, &it)))
                    if (p->gen != r->gen) { free(ext_map_del(r->rpods, p->key)); again = true; break; }
                if (!again) break;
            }
            for (;;) {
                bool again = false;
                it = 0;
                while ((s = ext_map_next(r->spods, &it)))
                    if (s->gen != r->gen) { spod_free(ext_map_del(r->spods, s->uid)); again = true; break; }
                if (!again) break;
            }
            r->synced = true;
            break;
        }
        case KUBE_ADDED:
        case KUBE_MODIFIED:
        case KUBE_DELETED: {
            if (!cJSON_IsObject(obj)) break;
            const cJSON *meta = model_json_get(obj, "metadata");
            if (is_reservation(r, meta)) {
                char key[sizeof ((rpod *)0)->key];
                rpod_key(meta, key, sizeof key);
                if (ev == KUBE_DELETED) {
                    rpod *p = jstr(meta, "name", NULL) ? ext_map_del(r->rpods, key) : NULL;
                    if (p) tomb_add(r, p->uid);
                    free(p);
                } else {
                    rpod_update(r, obj);
                }
            } else if (ev == KUBE_DELETED) {
                const char *uid = jstr(meta, "uid", NULL);
                spod *s = uid ? ext_map_del(r->spods, uid) : NULL;
                if (s) tomb_add(r, s->uid);
                spod_free(s);
            } else {
                spod_update(r, obj);
            }
            break;
        }
        }
    }
    /* Node changes move models (idle GPUs, renames): worth a look too. */
    if (ev != KUBE_RELIST) kick_locked(r);
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------------ the pass: planning */

/* One grant of one share on one unit. */
typedef struct tenant {
    int s;                    /* index into the share snapshot */
    int gpu_slot;             /* index into node->gpus */
    int memory_mib, compute_permille, device_memory_mib;
} tenant;

typedef struct unit {
    char node[NAME_LEN], unit[UNIT_LEN], resource[64], why[256];   /* why: not deliverable */
    bool mps;                 /* its shares are MPS clients: its reservation runs the GPU's MPS daemon */
    int gpu, gpu_slot;
    tenant *t;
    int nt, cap;
    int live;                 /* index of the live reservation kept, -1 */
    int refused;              /* index of a refused reservation, -1 */
} unit;

typedef struct plan {
    rpod *rp;                 /* snapshot */
    int nrp;
    spod *sp;
    int nsp;
    unit *u;
    int nu, ucap;
    int *rp_unit;             /* per reservation: its unit, -1 */
    char (*frozen)[NAME_LEN]; /* nodes whose GPUs cannot be read now (no model, or a reason): tenancy is
                               * unknown there, so nothing is released, created, moved or given up until
                               * they can */
    int nfrozen, frozen_cap;
    struct held { char node[NAME_LEN]; int gpu; } *held;   /* GPUs (index; -1 all of the node) named by a share
                                                             * whose assignment does not decode: not released */
    int nheld, held_cap;
} plan;

static void plan_free(plan *p) {
    for (int i = 0; i < p->nsp; i++) free(p->sp[i].ann);
    for (int i = 0; i < p->nu; i++) free(p->u[i].t);
    free(p->sp);
    free(p->rp);
    free(p->u);
    free(p->rp_unit);
    free(p->frozen);
    free(p->held);
    memset(p, 0, sizeof *p);
}

static int unit_find(plan *p, const char *node, int gpu, const char *u) {
    for (int i = 0; i < p->nu; i++)
        if (p->u[i].gpu == gpu && !strcmp(p->u[i].node, node) && !strcmp(p->u[i].unit, u)) return i;
    return -1;
}

static void unit_key(const char *node, int gpu, const char *u, char *buf, size_t len) {
    snprintf(buf, len, "%s/%d/%s", node, gpu, u);
}

static bool rpod_live(const rpod *p) {
    return !p->deleting && strcmp(p->phase, "Failed") != 0 && !p->rerr[0] && !p->stuck;
}
static bool rpod_refused(const rpod *p) { return !p->deleting && (!strcmp(p->phase, "Failed") || p->rerr[0] || p->stuck); }

/* A waiting reason that will not cure itself by waiting a little (the image, the command, the container's
 * configuration, a crash loop), as opposed to ContainerCreating or PodInitializing: worth a Warning at once. */
static bool container_failing(const char *reason) {
    static const char *const bad[] = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                                      "CreateContainerError", "CreateContainerConfigError", "RunContainerError",
                                      "CrashLoopBackOff", "StartError", "PreStartHookError", "PostStartHookError"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!strcmp(reason, bad[i])) return true;
    return false;
}

/* The kubelet alternates ErrImagePull with ImagePullBackOff, and RunContainerError with CrashLoopBackOff, on every
 * retry: one cause, told to the waiting shares once. */
static const char *reason_family(const char *reason) {
    if (!strcmp(reason, "ErrImagePull") || !strcmp(reason, "ImagePullBackOff")) return "image-pull";
    if (!strcmp(reason, "RunContainerError") || !strcmp(reason, "CrashLoopBackOff") || !strcmp(reason, "StartError"))
        return "start";
    return reason;
}

/* Why a reservation has no UUID yet, from its container's waiting state ("" when it says nothing). */
static void waiting_text(const rpod *p, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s", p->wreason, p->wreason[0] && p->wmessage[0] ? ": " : "", p->wreason[0] ? p->wmessage : "");
}

static bool node_frozen(const plan *p, const char *node) {
    for (int i = 0; i < p->nfrozen; i++)
        if (!strcmp(p->frozen[i], node)) return true;
    return false;
}

static void hold(plan *p, const char *node, int gpu) {
    if (p->nheld == p->held_cap) {
        int cap = p->held_cap ? 2 * p->held_cap : 4;
        struct held *nh = realloc(p->held, (size_t)cap * sizeof *nh);
        if (!nh) return;
        p->held = nh;
        p->held_cap = cap;
    }
    cpy(p->held[p->nheld].node, NAME_LEN, node);
    p->held[p->nheld++].gpu = gpu;
}

static bool is_held(const plan *p, const char *node, int gpu) {
    for (int i = 0; i < p->nheld; i++)
        if ((p->held[i].gpu < 0 || p->held[i].gpu == gpu) && !strcmp(p->held[i].node, node)) return true;
    return false;
}

/* A share whose assignment does not decode against its node's model (a GPU gone from the labels, a MIG
 * profile renamed): its containers may still run on the GPUs its raw text names, so their reservations
 * stay. Text that names none holds the whole node. The node itself goes on. */
static void hold_raw(plan *p, const char *node, const char *ann) {
    cJSON *o = ann ? cJSON_Parse(ann) : NULL, *g;
    int n = 0;
    cJSON_ArrayForEach(g, model_json_get(o, "grants")) {
        const cJSON *i = model_json_get(g, "gpu");
        if (cJSON_IsNumber(i) && i->valuedouble >= 0 && i->valuedouble < 1000) { hold(p, node, i->valueint); n++; }
    }
    if (!n) hold(p, node, -1);
    cJSON_Delete(o);
}

static void freeze(plan *p, const char *node, const char *why) {
    if (node_frozen(p, node)) return;
    if (p->nfrozen == p->frozen_cap) {
        int cap = p->frozen_cap ? 2 * p->frozen_cap : 4;
        char(*nf)[NAME_LEN] = realloc(p->frozen, (size_t)cap * sizeof *nf);
        if (!nf) return;
        p->frozen = nf;
        p->frozen_cap = cap;
    }
    cpy(p->frozen[p->nfrozen++], NAME_LEN, node);
    kube_log(KUBE_LOG_DEBUG, "event=reservations-frozen node=%s why=\"%s\"", node, why);
}

static int snapshot(ext_rsv *r, plan *p) {
    pthread_mutex_lock(&r->mu);
    size_t nr = ext_map_count(r->rpods), ns = ext_map_count(r->spods), it = 0;
    p->rp = calloc(nr + 1, sizeof *p->rp);
    p->sp = calloc(ns + 1, sizeof *p->sp);
    p->rp_unit = calloc(nr + 1, sizeof *p->rp_unit);
    if (!p->rp || !p->sp || !p->rp_unit) {
        pthread_mutex_unlock(&r->mu);
        return -1;
    }
    rpod *rp;
    while ((rp = ext_map_next(r->rpods, &it))) p->rp[p->nrp++] = *rp;
    it = 0;
    spod *s;
    while ((s = ext_map_next(r->spods, &it))) {
        p->sp[p->nsp] = *s;
        p->sp[p->nsp].ann = s->ann ? strdup(s->ann) : NULL;
        p->nsp++;
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Under the state lock: each share's grants -> units. */
static void plan_units(ext_rsv *r, plan *p) {
    ext_state_lock(r->st);
    for (int i = 0; i < p->nsp; i++) {
        spod *s = &p->sp[i];
        const ext_node *en = ext_state_node(r->st, s->node);
        if (!en || !en->m || !s->ann) { freeze(p, s->node, "no node model"); continue; }
        const model_node *n = en->m;
        /* A reason empties the model's GPUs (a device plugin restarting reports allocatable 0, a MIG
         * relabel): the shares there still run on their GPUs. */
        if (n->reason[0]) { freeze(p, s->node, n->reason); continue; }
        model_assignment a;
        char err[256];
        if (ext_ann_decode(n, s->ann, &a, err, sizeof err) != 0) { hold_raw(p, s->node, s->ann); continue; }
        for (int k = 0; k < a.ngrants; k++) {
            const model_grant *gr = &a.grant[k];
            const model_gpu *g = &n->gpus[gr->gpu];
            char u[UNIT_LEN];
            ext_rsv_unit_of(g, gr, u, sizeof u);
            int ui = unit_find(p, s->node, g->index, u);
            if (ui < 0) {
                if (p->nu == p->ucap) {
                    int cap = p->ucap ? 2 * p->ucap : 16;
                    unit *nu = realloc(p->u, (size_t)cap * sizeof *nu);
                    if (!nu) continue;
                    p->u = nu;
                    p->ucap = cap;
                }
                unit *x = &p->u[p->nu];
                memset(x, 0, sizeof *x);
                cpy(x->node, sizeof x->node, s->node);
                cpy(x->unit, sizeof x->unit, u);
                x->gpu = g->index;
                x->gpu_slot = gr->gpu;
                x->live = x->refused = -1;
                if (ext_rsv_resource(n, g, gr, x->resource, sizeof x->resource, x->why, sizeof x->why) != 0)
                    x->resource[0] = 0;
                ui = p->nu++;
            }
            unit *x = &p->u[ui];
            if (x->nt == 0) x->mps = s->mps;
            /* The model never mixes MPS and time-sliced shares on one GPU, nor puts an MPS share anywhere but on
             * one whole unshared GPU (an MPS client talks to one daemon). Should it ever, nothing is delivered
             * there, loudly (give_up), rather than a share served by a daemon of the wrong kind. */
            const char *bad = x->mps != s->mps ? "MPS and time-sliced shares on one GPU"
                              : s->mps && strcmp(u, "gpu") != 0 ? "an MPS share on a MIG instance or a replica"
                              : s->mps && a.ngrants > 1 ? "an MPS share on more than one GPU" : NULL;
            if (bad && x->resource[0]) {
                snprintf(x->why, sizeof x->why, "%s cannot be delivered (the model should never place this)", bad);
                x->resource[0] = 0;
                kube_log(KUBE_LOG_ERROR, "event=share-mode-conflict node=%s gpu=%d unit=%s pod=%s/%s why=\"%s\"", s->node,
                         g->index, u, s->ns, s->name, bad);
            }
            if (x->nt == x->cap) {
                int cap = x->cap ? 2 * x->cap : 4;
                tenant *nt = realloc(x->t, (size_t)cap * sizeof *nt);
                if (!nt) continue;
                x->t = nt;
                x->cap = cap;
            }
            int devmem = g->memory_mib;
            if (gr->mig_profile >= 0 && g->product->profiles[gr->mig_profile].memory_mib > 0)
                devmem = g->product->profiles[gr->mig_profile].memory_mib;
            x->t[x->nt++] = (tenant){i, gr->gpu, gr->memory_mib, gr->compute_permille, devmem};
        }
    }
    for (int i = 0; i < p->nrp; i++) {
        const ext_node *en = ext_state_node(r->st, p->rp[i].node);
        if (!en || !en->m) freeze(p, p->rp[i].node, "no node model");
        else if (en->m->reason[0]) freeze(p, p->rp[i].node, en->m->reason);
    }
    ext_state_unlock(r->st);
    for (int i = 0; i < p->nrp; i++) {
        rpod *rp = &p->rp[i];
        p->rp_unit[i] = rp->gpu >= 0 ? unit_find(p, rp->node, rp->gpu, rp->unit) : -1;
    }
}

/* ------------------------------------------------------------------ the pass: API calls */

static void emit(ext_rsv *r, const spod *s, const char *type, const char *reason, const char *msg) {
    ext_events_emit(r->ev, type, reason, s->ns, s->name, s->uid, msg);
}

/* A write refused because this replica may not act any more (ext_leader_act_begin): the pass just stops. */
#define CALL_NOT_LEADER (-10000)

/* One API call; logs a failure at warn with the API's message. Returns the status (or < 0). A write (anything
 * but GET) is made only while this replica may act, and counted as in flight so that a release of the Lease
 * waits for it (leader.h, ext_leader_act_begin). */
static int call(ext_rsv *r, const char *method, const char *path, const char *body, char **resp, const char *what) {
    char err[512] = "";
    bool write = strcmp(method, "GET") != 0;
    if (write && !ext_leader_act_begin(r->leader)) {
        kube_log(KUBE_LOG_DEBUG, "event=reservation-write-skipped what=\"%s\" why=\"not the leader any more\"", what);
        return CALL_NOT_LEADER;
    }
    int code = kube_request(r->k, method, path, body, r->cfg.request_timeout_ms, resp, err, sizeof err);
    if (write) ext_leader_act_end(r->leader);
    if (code < 200 || code >= 300) {
        if (!(code == 409 && !strcmp(method, "POST")) && !(code == 404 && !strcmp(method, "DELETE"))) {
            kube_log(KUBE_LOG_WARN, "event=reservation-api-error what=\"%s\" method=%s path=%s code=%d err=\"%s\"", what,
                     method, path, code, err);
            /* health.h: the verb, resource and namespace, which a 403 must name ("/api/v1/namespaces/NS/RES[/NAME]") */
            char ns[128] = "", res[64] = "", name[256] = "", msg[700];
            sscanf(path, "/api/v1/namespaces/%127[^/]/%63[^/]/%255[^/?]", ns, res, name);
            const char *verb = !strcmp(method, "GET") ? "get" : !strcmp(method, "POST") ? "create"
                             : !strcmp(method, "PUT") ? "update" : !strcmp(method, "PATCH") ? "patch" : "delete";
            bool own = (!strcmp(ns, r->cfg.ns) || !strcmp(ns, r->cfg.mps_ns)) && !strcmp(res, "pods") &&
                       (!strcmp(verb, "create") || !strcmp(verb, "delete"));
            kube_api_msg(msg, sizeof msg, code, verb, res[0] ? res : path, NULL, ns, name,
                         own ? "tessera-extender Role" : "tessera-extender ClusterRole", err);
            ext_health_fail(EXT_DEP_RESERVATIONS, code, ext_health_reason_of(code), msg);
        }
    } else {
        ext_health_ok(EXT_DEP_RESERVATIONS);
    }
    return code;
}

/* The image of tessera-reserve: the flag, else our own Pod's container image. */
/* The image of our own container, EXT_RSV_SELF_CONTAINER, in our Pod as the API shows it. deploy/ runs it as a
 * native sidecar, in spec.initContainers (restartPolicy: Always); a plain container is looked up too. Never
 * another container's image: kube-scheduler's has no tessera-reserve, and every reservation would wait in
 * RunContainerError for ever. */
static const char *own_container_image(const cJSON *pod) {
    static const char *const lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, model_json_get(model_json_get(pod, "spec"), lists[l])) {
            const char *cn = jstr(c, "name", NULL), *img = jstr(c, "image", NULL);
            if (cn && !strcmp(cn, EXT_RSV_SELF_CONTAINER) && img && img[0]) return img;
        }
    }
    return NULL;
}

/* It cannot be known: say so once per cause, in the log, /readyz (a warning: only soft shares need it) and,
 * when we know our Pod, an Event on it. */
static void image_unknown(ext_rsv *r, const char *why, const cJSON *pod) {
    if (!strcmp(r->image_why, why)) return;   /* written by the worker only: it may read without the lock */
    pthread_mutex_lock(&r->mu);
    cpy(r->image_why, sizeof r->image_why, why);
    pthread_mutex_unlock(&r->mu);
    kube_log(KUBE_LOG_ERROR, "event=reserve-image-unknown why=\"%s\" effect=\"no reservation pod can be created: soft "
             "shares wait\" hint=\"--reserve-image IMAGE\"", why);
    ext_health_fail(EXT_DEP_RESERVE_IMAGE, 0, EXT_REASON_REJECTED, why);
    const cJSON *meta = model_json_get(pod, "metadata");
    if (pod && jstr(meta, "name", NULL) && jstr(meta, "uid", NULL))
        ext_events_emit(r->ev, "Warning", "TesseraReserveImageUnknown", jstr(meta, "namespace", NULL),
                        jstr(meta, "name", NULL), jstr(meta, "uid", NULL), why);
}

/* Learn tessera-reserve's image (worker thread, on every replica, from the start): --reserve-image, else our
 * own container's image from $POD_NAMESPACE/$POD_NAME. Retried with backoff while the API cannot answer. */
static void resolve_image(ext_rsv *r) {
    pthread_mutex_lock(&r->mu);
    bool known = r->cfg.image[0] != 0;
    pthread_mutex_unlock(&r->mu);
    int64_t now = ext_now_ms();
    if (known || now < r->image_next_ms) return;
    const char *ns = getenv("POD_NAMESPACE"), *name = getenv("POD_NAME");
    if (!ns || !name || !ns[0] || !name[0]) {
        image_unknown(r, "no --reserve-image, and $POD_NAMESPACE/$POD_NAME are not set, so tessera cannot read the "
                         "image of its own tessera-extender container", NULL);
        r->image_next_ms = INT64_MAX;   /* the environment does not change */
        return;
    }
    char path[512], *resp = NULL, why[700];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
    int code = call(r, "GET", path, NULL, &resp, "read own pod for --reserve-image");
    cJSON *pod = code == 200 && resp ? cJSON_Parse(resp) : NULL;
    free(resp);
    const char *img = own_container_image(pod);
    if (img) {
        pthread_mutex_lock(&r->mu);
        cpy(r->cfg.image, sizeof r->cfg.image, img);
        r->image_why[0] = 0;
        pthread_mutex_unlock(&r->mu);
        ext_health_ok(EXT_DEP_RESERVE_IMAGE);
        kube_log(KUBE_LOG_INFO, "event=reserve-image image=%s from=pod/%s/%s container=%s", img, ns, name,
                 EXT_RSV_SELF_CONTAINER);
    } else if (pod) {
        snprintf(why, sizeof why, "pod %s/%s has no container named %s (looked in spec.initContainers and "
                 "spec.containers), so tessera does not know the image that holds tessera-reserve", ns, name,
                 EXT_RSV_SELF_CONTAINER);
        image_unknown(r, why, pod);
        r->image_next_ms = now + 300000;   /* a pod's containers do not change; a renamed one needs a restart */
    } else {
        r->image_backoff_ms = r->image_backoff_ms ? (r->image_backoff_ms * 2 > 60000 ? 60000 : r->image_backoff_ms * 2) : 1000;
        r->image_next_ms = now + r->image_backoff_ms;
        snprintf(why, sizeof why, "cannot read pod %s/%s to learn the tessera-reserve image (%s %d)", ns, name,
                 code == 200 ? "not a Pod:" : "API status", code);
        if (r->image_backoff_ms >= 8000) image_unknown(r, why, NULL);   /* a blip is not worth a warning */
    }
    cJSON_Delete(pod);
}

static bool reserve_image(ext_rsv *r, char *buf, size_t len) {
    pthread_mutex_lock(&r->mu);
    cpy(buf, len, r->cfg.image);
    pthread_mutex_unlock(&r->mu);
    return buf[0] != 0;
}

/* How long an admission review waits for the worker's first read of our own Pod: a replica that has just
 * started gets reviews at once (the webhook's Service publishes pods that are not Ready), and refusing a
 * share then would fail a user's `kubectl create` for a start-up race. Bounded well inside the webhook's
 * timeoutSeconds (5, deploy/webhook.yaml); only the first reviews of a replica's life can wait. */
#define IMAGE_FIRST_READ_WAIT_MS 3000

bool ext_rsv_image(ext_rsv *r, char *buf, size_t len, char *why, size_t whylen) {
    if (!r) {
        snprintf(why, whylen, "no reservation controller");
        return false;
    }
    pthread_mutex_lock(&r->mu);
    int64_t deadline = ext_now_ms() + IMAGE_FIRST_READ_WAIT_MS;
    while (r->image_pending && !r->cfg.image[0] && ext_now_ms() < deadline) {
        struct timespec ts = {(time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L};
        pthread_cond_timedwait(&r->image_cv, &r->mu, &ts);
    }
    cpy(buf, len, r->cfg.image);
    if (!buf[0])
        snprintf(why, whylen, "%s", r->image_why[0] ? r->image_why : "tessera has not read its own Pod yet (it does "
                 "so at start, to learn its image)");
    pthread_mutex_unlock(&r->mu);
    return buf[0] != 0;
}

static const char *rsv_ns(const ext_rsv *r, bool mps) { return mps ? r->cfg.mps_ns : r->cfg.ns; }

static void add_host_volume(cJSON *vols, cJSON *mnts, const char *name, const char *host, const char *at) {
    cJSON *v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "name", name);
    cJSON *hp = cJSON_AddObjectToObject(v, "hostPath");
    cJSON_AddStringToObject(hp, "path", host);
    cJSON_AddStringToObject(hp, "type", "DirectoryOrCreate");
    cJSON_AddItemToArray(vols, v);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "mountPath", at);
    cJSON_AddItemToArray(mnts, m);
}

static cJSON *reservation_body(ext_rsv *r, const unit *u, const char *name, const char *image) {
    cJSON *pod = cJSON_CreateObject();
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
    cJSON_AddStringToObject(meta, "name", name);
    cJSON_AddStringToObject(meta, "namespace", rsv_ns(r, u->mps));
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, EXT_RSV_LABEL_APP, EXT_RSV_APP);
    cJSON_AddStringToObject(labels, EXT_DLV_LABEL_PART_OF, EXT_DLV_PART_OF);
    cJSON_AddStringToObject(labels, EXT_RSV_LABEL, "true");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    char gpu[16];
    snprintf(gpu, sizeof gpu, "%d", u->gpu);
    cJSON_AddStringToObject(ann, EXT_RSV_ANN_NODE, u->node);
    cJSON_AddStringToObject(ann, EXT_RSV_ANN_GPU, gpu);
    cJSON_AddStringToObject(ann, EXT_RSV_ANN_UNIT, u->unit);
    if (u->mps) cJSON_AddStringToObject(ann, EXT_RSV_ANN_MPS, "true");
    cJSON *spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON_AddStringToObject(spec, "nodeName", u->node);
    cJSON_AddStringToObject(spec, "priorityClassName", EXT_RSV_PRIORITY_CLASS);
    cJSON_AddStringToObject(spec, "serviceAccountName", EXT_RSV_SERVICE_ACCOUNT);
    cJSON_AddStringToObject(spec, "restartPolicy", "Always");
    cJSON_AddNumberToObject(spec, "terminationGracePeriodSeconds", 5);
    cJSON *tol = cJSON_CreateObject();
    cJSON_AddStringToObject(tol, "operator", "Exists");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "tolerations"), tol);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(spec, "containers"), c);
    cJSON_AddStringToObject(c, "name", EXT_RSV_CONTAINER);
    cJSON_AddStringToObject(c, "image", image);
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    cJSON_AddItemToArray(cmd, cJSON_CreateString(EXT_RSV_COMMAND));
    if (u->mps) {
        /* The directory it mounts, said on the command line too: the daemon's pipe, log and shm directories and the
         * ones the shares' ConfigMaps name can only agree when both follow the pod spec. */
        cJSON_AddItemToArray(cmd, cJSON_CreateString(EXT_RSV_MPS_FLAG));
        cJSON_AddItemToArray(cmd, cJSON_CreateString("--mps-root=" EXT_DLV_MPS_ROOT));
    }
    cJSON *env = cJSON_AddArrayToObject(c, "env");
    const char *vars[2][2] = {{"POD_NAME", "metadata.name"}, {"POD_NAMESPACE", "metadata.namespace"}};
    for (int i = 0; i < 2; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", vars[i][0]);
        cJSON *fr = cJSON_AddObjectToObject(cJSON_AddObjectToObject(e, "valueFrom"), "fieldRef");
        cJSON_AddStringToObject(fr, "fieldPath", vars[i][1]);
        cJSON_AddItemToArray(env, e);
    }
    if (u->mps) {
        /* The NVIDIA runtime mounts nvidia-cuda-mps-control and -server with the compute capability: said
         * outright rather than left to the toolkit's default. */
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", EXT_DLV_ENV_CAPS);
        cJSON_AddStringToObject(e, "value", EXT_DLV_CAPS_VALUE);
        cJSON_AddItemToArray(env, e);
    }
    cJSON *res = cJSON_AddObjectToObject(c, "resources");
    cJSON *req = cJSON_AddObjectToObject(res, "requests"), *lim = cJSON_AddObjectToObject(res, "limits");
    cJSON_AddStringToObject(req, "cpu", "5m");
    cJSON_AddStringToObject(req, "memory", "16Mi");
    cJSON_AddStringToObject(req, u->resource, "1");
    cJSON_AddStringToObject(lim, "memory", "32Mi");
    cJSON_AddStringToObject(lim, u->resource, "1");
    cJSON *sc = cJSON_AddObjectToObject(c, "securityContext");
    cJSON_AddBoolToObject(sc, "allowPrivilegeEscalation", false);
    cJSON_AddBoolToObject(sc, "readOnlyRootFilesystem", true);
    cJSON *caps = cJSON_AddObjectToObject(sc, "capabilities");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(caps, "drop"), cJSON_CreateString("ALL"));
    /* The tessera namespace enforces Pod Security "restricted" (deploy/namespace.yaml), which also wants a
     * seccomp profile: without it the API server refuses the pod. tessera-node is privileged, but nothing
     * here needs more than the runtime's default profile. */
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sc, "seccompProfile"), "type", "RuntimeDefault");
    if (!u->mps) {
        cJSON_AddBoolToObject(sc, "runAsNonRoot", true);
        cJSON_AddNumberToObject(sc, "runAsUser", 65532);
        return pod;
    }
    /* The GPU's MPS control daemon (tessera-reserve --mps runs nvidia-cuda-mps-control -f). It starts each MPS
     * server as the uid of its clients, and manages servers and files of other uids, so it runs as root and keeps
     * what that takes, the file and process part of the runtime's default set:
     *   SETUID, SETGID          start a server under its clients' uid and gid;
     *   CHOWN, FOWNER,          hand a server its files in the pipe and log directories, and reach and remove
     *   DAC_OVERRIDE            what a server of another uid made there (its sockets, a previous run's pipes);
     *   KILL                    stop a server of another uid once its clients are gone (the next uid's turn).
     * The rest of the default set (NET_RAW, NET_BIND_SERVICE, MKNOD, SYS_CHROOT, SETPCAP, SETFCAP, FSETID,
     * AUDIT_WRITE) is dropped, and nothing beyond it is added: no SYS_ADMIN (nothing is mounted: the host's /run
     * is a tmpfs already), no privileged container, no host namespaces, no privilege escalation. Its pipe, log
     * and shared-memory directories are host directories under /run/tessera/mps, where the GPU's clients (other
     * pods) find them: hostPath, which only a privileged namespace admits. */
    cJSON_AddBoolToObject(sc, "runAsNonRoot", false);
    cJSON_AddNumberToObject(sc, "runAsUser", 0);
    cJSON *add = cJSON_AddArrayToObject(caps, "add");
    static const char *const keep[] = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) cJSON_AddItemToArray(add, cJSON_CreateString(keep[i]));
    cJSON *vols = cJSON_AddArrayToObject(spec, "volumes"), *mnts = cJSON_AddArrayToObject(c, "volumeMounts");
    add_host_volume(vols, mnts, EXT_DLV_MPS_VOLUME, EXT_DLV_MPS_ROOT, EXT_DLV_MPS_ROOT);
    add_host_volume(vols, mnts, EXT_DLV_MPS_SHM_VOLUME, EXT_DLV_MPS_SHM, EXT_DLV_DEV_SHM);
    return pod;
}

static unit_mem *unit_mem_get(ext_rsv *r, const char *node, int gpu, const char *u) {
    char key[sizeof ((unit_mem *)0)->key];
    unit_key(node, gpu, u, key, sizeof key);
    unit_mem *m = ext_map_get(r->units, key);
    if (m) return m;
    if (!(m = calloc(1, sizeof *m))) return NULL;
    cpy(m->key, sizeof m->key, key);
    if (ext_map_put(r->units, m->key, m) != 0) { free(m); return NULL; }
    return m;
}

/* Record a pod we wrote in the table at once (the watch will say the same later), unless the watch has shown a
 * later version of it already, or its deletion (rpod_update, spod_update). */
static void table_learn(ext_rsv *r, const char *resp) {
    cJSON *o = resp ? cJSON_Parse(resp) : NULL;
    if (cJSON_IsObject(o)) {
        pthread_mutex_lock(&r->mu);
        const cJSON *meta = model_json_get(o, "metadata");
        if (is_reservation(r, meta)) rpod_update(r, o);
        else spod_update(r, o);
        pthread_mutex_unlock(&r->mu);
    }
    cJSON_Delete(o);
}

static void table_forget_rpod(ext_rsv *r, const char *key, const char *uid) {
    pthread_mutex_lock(&r->mu);
    rpod *p = ext_map_get(r->rpods, key);
    if (p) p->deleting = true;   /* the watch removes it; until then it is releasing, not live */
    tomb_add(r, uid);
    pthread_mutex_unlock(&r->mu);
}

static bool create_reservation(ext_rsv *r, plan *p, unit *u) {
    char image[512];
    if (!reserve_image(r, image, sizeof image)) {
        char msg[2048];
        snprintf(msg, sizeof msg, "no reservation can be created for GPU %d on node %s: %s", u->gpu, u->node,
                 r->image_why[0] ? r->image_why : "the tessera-reserve image is not known yet");
        kube_log(KUBE_LOG_WARN, "event=reservation-skipped node=%s gpu=%d unit=%s why=\"%s\"", u->node, u->gpu, u->unit, msg);
        for (int i = 0; i < u->nt; i++) {
            spod *s = &p->sp[u->t[i].s];
            if (r->image_why[0] && strcmp(s->ev_pending_for, "|no-image") != 0) {
                emit(r, s, "Warning", EXT_DLV_EV_PENDING, msg);
                cpy(s->ev_pending_for, sizeof s->ev_pending_for, "|no-image");
            }
        }
        return false;
    }
    unit_mem *m = unit_mem_get(r, u->node, u->gpu, u->unit);
    int attempt = m ? m->last_attempt : 0;
    for (int i = 0; i < p->nrp; i++)   /* every name of the unit, Failed or terminating too: never reuse one */
        if (p->rp_unit[i] >= 0 && &p->u[p->rp_unit[i]] == u && p->rp[i].attempt > attempt) attempt = p->rp[i].attempt;
    attempt++;
    char name[NAME_LEN];
    if (ext_rsv_pod_name(u->node, u->gpu, u->unit, attempt, name, sizeof name) != 0) return false;
    cJSON *body = reservation_body(r, u, name, image);
    char *text = cJSON_PrintUnformatted(body), path[512], *resp = NULL;
    cJSON_Delete(body);
    const char *ns = rsv_ns(r, u->mps);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
    int code = text ? call(r, "POST", path, text, &resp, "create reservation") : -1;
    free(text);
    bool ok = code == 201 || code == 200 || code == 409;
    /* A failed POST keeps the attempt: if it did create the pod after all, the retry's 409 finds it. */
    if (ok && m) m->last_attempt = attempt;
    op_count(r, EXT_RSV_OP_CREATE, ok);
    if (code == 409) {   /* someone made it (another replica, or our own earlier POST): learn it now */
        free(resp);
        resp = NULL;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
        if (call(r, "GET", path, NULL, &resp, "read existing reservation") != 200) { free(resp); resp = NULL; }
    }
    if (resp) table_learn(r, resp);
    free(resp);
    if (ok) kube_log(KUBE_LOG_INFO, "event=reservation-created name=%s/%s node=%s gpu=%d unit=%s resource=%s mps=%s%s", ns,
                     name, u->node, u->gpu, u->unit, u->resource, u->mps ? "true" : "false", code == 409 ? " existed=true" : "");
    /* Tell the waiting shares where they wait. */
    for (int i = 0; ok && i < u->nt; i++) {
        spod *s = &p->sp[u->t[i].s];
        char msg[768];
        snprintf(msg, sizeof msg, "waiting for reservation %s/%s of GPU %d on node %s%s", ns, name, u->gpu, u->node,
                 u->mps ? " (it starts the GPU's MPS control daemon)" : "");
        if (strcmp(s->ev_pending_for, name) != 0) {
            emit(r, s, "Normal", EXT_DLV_EV_PENDING, msg);
            cpy(s->ev_pending_for, sizeof s->ev_pending_for, name);
        }
    }
    return ok;
}

static bool delete_pod(ext_rsv *r, const char *ns, const char *name, const char *uid, const char *what) {
    char path[512], body[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
    /* A UID precondition: never delete a same-named successor. */
    snprintf(body, sizeof body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{\"uid\":\"%s\"}}", uid);
    int code = call(r, "DELETE", path, uid && uid[0] ? body : NULL, NULL, what);
    bool ok = (code >= 200 && code < 300) || code == 404;
    op_count(r, EXT_RSV_OP_DELETE, ok);
    return ok;
}

/* Delete a reservation (in its own namespace) and mark it releasing in the table at once. false: the API
 * call failed (the next pass tries again). */
static bool drop_rpod(ext_rsv *r, rpod *rp, const char *what) {
    bool ok = delete_pod(r, rp->ns, rp->name, rp->uid, what);
    if (ok) table_forget_rpod(r, rp->key, rp->uid);
    rp->deleting = true;
    return ok;
}

/* Write the share's ConfigMap: POST; when it exists, GET and PUT if it says something else. 1 when the
 * API holds exactly data; *fresh when this call changed it (the share learns its GPU now). 0 on an API
 * error; -1 when a ConfigMap of that name exists that is not this pod's (owned by another pod, or not a
 * delivery ConfigMap at all): it is never taken over. */
static int ensure_cm(ext_rsv *r, const spod *s, const cJSON *data, bool *fresh) {
    *fresh = false;
    cJSON *cm = cJSON_CreateObject();
    cJSON_AddStringToObject(cm, "apiVersion", "v1");
    cJSON_AddStringToObject(cm, "kind", "ConfigMap");
    cJSON *meta = cJSON_AddObjectToObject(cm, "metadata");
    cJSON_AddStringToObject(meta, "name", s->delivery);
    cJSON_AddStringToObject(meta, "namespace", s->ns);
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, EXT_DLV_LABEL_PART_OF, EXT_DLV_PART_OF);
    cJSON_AddStringToObject(labels, EXT_DLV_LABEL_DELIVERY, "true");
    cJSON *own = cJSON_CreateObject();
    cJSON_AddStringToObject(own, "apiVersion", "v1");
    cJSON_AddStringToObject(own, "kind", "Pod");
    cJSON_AddStringToObject(own, "name", s->name);
    cJSON_AddStringToObject(own, "uid", s->uid);
    cJSON_AddBoolToObject(own, "blockOwnerDeletion", false);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), own);
    cJSON_AddItemToObject(cm, "data", cJSON_Duplicate(data, true));
    char path[512], *text = cJSON_PrintUnformatted(cm), *resp = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps", s->ns);
    int code = text ? call(r, "POST", path, text, NULL, "create delivery ConfigMap") : -1;
    free(text);
    bool ok = code == 201 || code == 200;
    if (ok) *fresh = true;
    if (code == 409) {
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", s->ns, s->delivery);
        code = call(r, "GET", path, NULL, &resp, "read delivery ConfigMap");
        cJSON *cur = code == 200 && resp ? cJSON_Parse(resp) : NULL;
        free(resp);
        resp = NULL;
        if (cur) {
            const cJSON *cd = model_json_get(cur, "data");
            const cJSON *co = model_json_get(model_json_get(cur, "metadata"), "ownerReferences");
            const char *rv = jstr(cur, "metadata", "resourceVersion");
            bool owner_ok = false, foreign = false;
            const cJSON *o;
            cJSON_ArrayForEach(o, co) {
                const char *ou = jstr(o, "uid", NULL), *ok_ = jstr(o, "kind", NULL);
                if (ou && !strcmp(ou, s->uid)) owner_ok = true;
                else if (ok_ && !strcmp(ok_, "Pod")) foreign = true;
            }
            const char *lbl = jstr(model_json_get(cur, "metadata"), "labels", EXT_DLV_LABEL_DELIVERY);
            if (!owner_ok && (foreign || !lbl || strcmp(lbl, "true") != 0)) {
                /* Another pod's (a tessera.io/delivery copied into this pod) or someone's own ConfigMap. */
                cJSON_Delete(cur);
                cJSON_Delete(cm);
                op_count(r, EXT_RSV_OP_CONFIGMAP, false);
                return -1;
            }
            if (cd && cJSON_Compare(cd, data, true) && owner_ok) {
                ok = true;
            } else {
                if (rv) cJSON_AddStringToObject(meta, "resourceVersion", rv);
                text = cJSON_PrintUnformatted(cm);
                code = text ? call(r, "PUT", path, text, NULL, "update delivery ConfigMap") : -1;
                free(text);
                ok = *fresh = code == 200 || code == 201;
            }
        }
        cJSON_Delete(cur);
    }
    cJSON_Delete(cm);
    op_count(r, EXT_RSV_OP_CONFIGMAP, ok);
    return ok ? 1 : 0;
}

/* Delete the share's ConfigMap if it is this pod's (before a move: a container created meanwhile must
 * wait for the new GPU's, not start on the old one). true when it is gone or never was. */
static bool drop_cm(ext_rsv *r, const spod *s) {
    if (!s->delivery[0]) return true;
    char path[512], *resp = NULL, body[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", s->ns, s->delivery);
    char err[256] = "";
    int code = kube_request(r->k, "GET", path, NULL, r->cfg.request_timeout_ms, &resp, err, sizeof err);
    if (code == 404) { free(resp); return true; }   /* the usual case: not written yet */
    if (code != 200)
        kube_log(KUBE_LOG_WARN, "event=reservation-api-error what=\"read delivery ConfigMap before a move\" path=%s code=%d "
                              "err=\"%s\"", path, code, err);
    cJSON *cur = code == 200 && resp ? cJSON_Parse(resp) : NULL;
    free(resp);
    if (!cur) return false;
    bool mine = false;
    const cJSON *o;
    cJSON_ArrayForEach(o, model_json_get(model_json_get(cur, "metadata"), "ownerReferences")) {
        const char *ou = jstr(o, "uid", NULL);
        if (ou && !strcmp(ou, s->uid)) mine = true;
    }
    const char *uid = jstr(cur, "metadata", "uid");
    snprintf(body, sizeof body, "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"preconditions\":{\"uid\":\"%s\"}}",
             uid ? uid : "");
    code = mine ? call(r, "DELETE", path, uid ? body : NULL, NULL, "delete delivery ConfigMap before a move") : 200;
    cJSON_Delete(cur);
    return (code >= 200 && code < 300) || code == 404;
}

/* Copy the worker's per-share memory back into the table (the snapshot is a copy). */
static void share_memory_back(ext_rsv *r, const plan *p) {
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < p->nsp; i++) {
        spod *s = ext_map_get(r->spods, p->sp[i].uid);
        if (!s) continue;
        memcpy(s->ev_pending_for, p->sp[i].ev_pending_for, sizeof s->ev_pending_for);
        memcpy(s->ev_refused_for, p->sp[i].ev_refused_for, sizeof s->ev_refused_for);
        memcpy(s->cm_written, p->sp[i].cm_written, sizeof s->cm_written);
        memcpy(s->enforcement, p->sp[i].enforcement, sizeof s->enforcement);
        memcpy(s->ev_enforce_for, p->sp[i].ev_enforce_for, sizeof s->ev_enforce_for);
        memcpy(s->ev_mps_for, p->sp[i].ev_mps_for, sizeof s->ev_mps_for);
        s->ev_delivered = p->sp[i].ev_delivered;
        s->ev_nomut = p->sp[i].ev_nomut;
        s->ev_unavail = p->sp[i].ev_unavail;
        s->ev_lost = p->sp[i].ev_lost;
        s->ev_foreign = p->sp[i].ev_foreign;
        s->retry_ms = p->sp[i].retry_ms;
        s->retry_backoff_ms = p->sp[i].retry_backoff_ms;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Give up on the waiting tenants of u: an Event each (once), and the ones a controller owns are deleted
 * so they are re-created and scheduled again; the others are tried again after a backoff. */
static void give_up(ext_rsv *r, plan *p, unit *u, const char *why, bool *errors) {
    int64_t now = ext_now_ms();
    for (int i = 0; i < u->nt; i++) {
        spod *s = &p->sp[u->t[i].s];
        if (s->started) continue;
        if (!s->owned) {   /* left pending: try again later, doubling */
            s->retry_backoff_ms = s->retry_backoff_ms ? 2 * s->retry_backoff_ms : r->cfg.retry_ms;
            if (s->retry_backoff_ms > 600000) s->retry_backoff_ms = 600000;
            s->retry_ms = now + s->retry_backoff_ms;
        }
        if (s->ev_unavail) continue;
        char msg[2400];
        snprintf(msg, sizeof msg, "no GPU could be reserved on node %s (%s): %s", u->node, why,
                 s->owned ? "deleted for re-scheduling" : "left pending; tessera tries again later");
        emit(r, s, "Warning", EXT_DLV_EV_UNAVAILABLE, msg);
        s->ev_unavail = true;
        kube_log(KUBE_LOG_WARN, "event=share-unavailable pod=%s/%s node=%s gpu=%d why=\"%s\" action=%s", s->ns, s->name,
                 u->node, u->gpu, why, s->owned ? "delete" : "leave");
        if (s->owned && !delete_pod(r, s->ns, s->name, s->uid, "delete unavailable share")) {
            s->ev_unavail = false;   /* try again next pass */
            *errors = true;
        }
    }
}

/* A share tessera cannot deliver safely (ev: which Event flag): a Warning once; a controller's pod is
 * deleted (its replacement goes through the webhook and the scheduler again), a bare one is left. */
static void reject_share(ext_rsv *r, spod *s, bool *ev, const char *reason, const char *what, bool *errors) {
    if (*ev) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s: %s", what,
             s->owned ? "deleted so that its controller re-creates it" : "left as it is; delete and re-create it");
    emit(r, s, "Warning", reason, msg);
    *ev = true;
    kube_log(KUBE_LOG_WARN, "event=share-rejected pod=%s/%s reason=%s why=\"%s\" action=%s", s->ns, s->name, reason, what,
             s->owned ? "delete" : "leave");
    if (s->owned && !delete_pod(r, s->ns, s->name, s->uid, "delete share tessera cannot deliver")) {
        *ev = false;
        *errors = true;
    }
}

/* The policy name in an assignment annotation, kept when the grants move. */
static void ann_policy(const char *ann, char *buf, size_t len) {
    cJSON *o = cJSON_Parse(ann);
    cpy(buf, len, jstr(o, "policy", NULL));
    if (!buf[0]) cpy(buf, len, "reservation");
    cJSON_Delete(o);
}

/* How GPU g (index) of u's node can take u's tenants: 2 = a live reservation of the same unit kind and
 * compute-sharing mode waits there without tenants (its grace period): the GPU is physically held for
 * tessera already, take it first; 1 = no reservation there; 0 = not a candidate (one with tenants, one of
 * another kind or mode, or one still terminating: the kubelet counts its device until it is gone). */
static int candidate_kind(plan *p, const unit *u, int g, int *reuse) {
    int kind = 1;
    *reuse = -1;
    for (int k = 0; k < p->nrp; k++) {
        rpod *x = &p->rp[k];
        if (strcmp(x->node, u->node) != 0 || x->gpu != g) continue;
        if (x->deleting) return 0;
        if (!rpod_live(x)) continue;   /* refused: it is deleted; it holds no device */
        bool tenants = (p->rp_unit[k] >= 0 && p->u[p->rp_unit[k]].nt > 0) || x->claimed;
        /* A held reservation serves only shares of its own kind and mode: an MPS daemon never serves
         * time-sliced shares, nor a plain reservation MPS clients. */
        if (tenants || strcmp(x->unit, u->unit) != 0 || x->mps != u->mps) return 0;
        kind = 2;
        *reuse = k;
    }
    return kind;
}

/* Move u's waiting tenants to another idle GPU of the node (the model decides whether they fit), one that
 * a tenant-less reservation still holds first. Under the state lock the new assignments are applied to
 * the cache first, so no bind can take that GPU meanwhile; then each share's ConfigMap (if one was
 * written for the old GPU) is deleted and its annotation patched, with refusals (the count so far) so
 * that the bound on attempts holds across moves and restarts. true when moved. */
static bool move_tenants(ext_rsv *r, plan *p, unit *u, int refusals, bool *errors, char *why, size_t whylen) {
    int nw = 0;
    for (int i = 0; i < u->nt; i++) nw += !p->sp[u->t[i].s].started;
    if (nw == 0) return true;
    char *newann[64] = {0}, *oldann[64] = {0};
    int who[64], nmoved = 0, target = -1, reused = -1;
    if (nw > 64) { cpy(why, whylen, "too many waiting shares"); return false; }
    ext_state_lock(r->st);
    const ext_node *en = ext_state_node(r->st, u->node);
    const model_node *n = en ? en->m : NULL;
    /* What the reservations allow per GPU (candidate_kind); which GPU takes the shares, the model decides. */
    int8_t rank[MODEL_MAX_GPUS] = {0};
    int reuse_of[MODEL_MAX_GPUS];
    for (int g = 0; n && g < n->ngpus; g++)
        if (g != u->gpu_slot) rank[g] = (int8_t)candidate_kind(p, u, n->gpus[g].index, &reuse_of[g]);
    model_assignment from[64], to[64];
    const char *uids[64];
    char pol[64][64];
    for (int i = 0; n && i < u->nt && nmoved >= 0; i++) {
        spod *s = &p->sp[u->t[i].s];
        if (s->started) continue;
        char err[256];
        if (ext_ann_decode(n, s->ann, &from[nmoved], err, sizeof err) != 0) {
            snprintf(why, whylen, "%s", err);
            nmoved = -1;
            break;
        }
        ann_policy(s->ann, pol[nmoved], sizeof pol[nmoved]);
        uids[nmoved] = s->uid;
        who[nmoved++] = u->t[i].s;
    }
    if (n && nmoved > 0) target = model_regrant_group(n, nmoved, uids, from, u->gpu_slot, rank, to, why, whylen);
    if (target >= 0) {
        reused = reuse_of[target];
        for (int i = 0; i < nmoved; i++) {
            spod *s = &p->sp[who[i]];
            char err[256];
            newann[i] = ext_ann_encode(n, &to[i], pol[i]);
            oldann[i] = strdup(s->ann);
            if (!newann[i] || ext_state_reassign(r->st, s->uid, newann[i], err, sizeof err) != 0) {
                kube_log(KUBE_LOG_WARN, "event=move-refused pod=%s/%s why=\"%s\"", s->ns, s->name, newann[i] ? err : "oom");
                free(newann[i]);
                newann[i] = NULL;
            }
        }
    } else {
        if (!n && !why[0]) snprintf(why, whylen, "node %.200s is not in the cache", u->node);
        nmoved = 0;
    }
    int to_index = target >= 0 && n ? n->gpus[target].index : -1;
    ext_state_unlock(r->st);
    if (target < 0) return false;
    if (reused >= 0) p->rp[reused].claimed = true;   /* not released by this pass's stale view */
    bool any = false;
    for (int i = 0; i < nmoved; i++) {
        spod *s = &p->sp[who[i]];
        if (!newann[i]) { free(oldann[i]); continue; }
        char *text = NULL, path[512], *resp = NULL, cnt[16];
        int code = -1;
        if (drop_cm(r, s)) {
            s->cm_written[0] = 0;
            cJSON *patch = cJSON_CreateObject();
            cJSON *anns = cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"), "annotations");
            cJSON_AddStringToObject(anns, EXT_ANN_ASSIGNMENT, newann[i]);
            snprintf(cnt, sizeof cnt, "%d", refusals);
            cJSON_AddStringToObject(anns, EXT_RSV_ANN_REFUSALS, cnt);
            text = cJSON_PrintUnformatted(patch);
            cJSON_Delete(patch);
            snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", s->ns, s->name);
            code = text ? call(r, "PATCH", path, text, &resp, "move share") : -1;
            free(text);
        }
        bool ok = code == 200 || code == 201;
        op_count(r, EXT_RSV_OP_MOVE, ok);
        if (ok) {
            any = true;
            table_learn(r, resp);
            kube_log(KUBE_LOG_INFO, "event=share-moved pod=%s/%s node=%s from_gpu=%d to_gpu=%d refusals=%d%s", s->ns,
                     s->name, u->node, u->gpu, to_index, refusals, reused >= 0 ? " onto=held-reservation" : "");
        } else {
            *errors = true;
            char err[256];
            ext_state_lock(r->st);   /* the API still says the old GPU: so must the cache */
            if (ext_state_reassign(r->st, s->uid, oldann[i], err, sizeof err) != 0)
                kube_log(KUBE_LOG_WARN, "event=move-undo-failed pod=%s/%s why=\"%s\"", s->ns, s->name, err);
            ext_state_unlock(r->st);
        }
        free(resp);
        free(newann[i]);
        free(oldann[i]);
    }
    return any;
}

/* The share's tessera-cuda-shim init container fails (shim_failure): its other containers never start, so
 * nothing runs unenforced, but nothing runs at all: a Warning once per cause, naming it. Its GPU stays
 * its own while the pod exists, like any pod's that cannot start, and is released with it. */
static void shim_failed(ext_rsv *r, spod *s) {
    char head[sizeof s->ev_enforce_for], fam[sizeof s->ev_enforce_for];
    /* "exit code N ..." or a waiting reason: one Event per cause, not per retry of a crash loop */
    size_t k = strcspn(s->shim_fail, ":( ");
    if (!strncmp(s->shim_fail, "exit code", 9)) k = strcspn(s->shim_fail, ":(");
    snprintf(head, sizeof head, "%.*s", (int)(k < sizeof head - 1 ? k : sizeof head - 1), s->shim_fail);
    snprintf(fam, sizeof fam, "%s", reason_family(head));
    if (!strcmp(s->ev_enforce_for, fam)) return;
    char msg[1400];
    snprintf(msg, sizeof msg, "init container %s cannot install libtessera-cuda.so (%s): the pod's containers do not "
             "start, so none runs without its GPU memory limit; fix the cause (its image is tessera's own: a private "
             "registry needs its pull secret in this namespace too) or delete the pod", EXT_DLV_SHIM_CONTAINER,
             s->shim_fail);
    emit(r, s, "Warning", EXT_DLV_EV_ENFORCEMENT, msg);
    cpy(s->ev_enforce_for, sizeof s->ev_enforce_for, fam);
    kube_log(KUBE_LOG_WARN, "event=share-enforcement-failed pod=%s/%s why=\"%s\"", s->ns, s->name, s->shim_fail);
}

/* ------------------------------------------------------------------ the pass */

/* What the share's units are, for its enforcement line: ready ones carry their UUID, the others "". */
static ext_delivery_unit unit_as_delivered(const plan *p, const unit *u, const tenant *t) {
    const rpod *lv = u->live >= 0 ? &p->rp[u->live] : NULL;
    return (ext_delivery_unit){lv ? lv->uuid : "", t->memory_mib, t->compute_permille, t->device_memory_mib,
                               !strncmp(u->unit, "mig:", 4), !strncmp(u->unit, "replica:", 8) || strstr(u->unit, "/r") != NULL,
                               lv && lv->mps_pipe[0] ? lv->mps_pipe : NULL, lv && lv->mps_log[0] ? lv->mps_log : NULL};
}

static bool tenant_units_ready(const plan *p, int s, ext_delivery_unit *du, int *ndu, int max) {
    *ndu = 0;
    for (int ui = 0; ui < p->nu; ui++) {
        const unit *u = &p->u[ui];
        for (int i = 0; i < u->nt; i++) {
            if (u->t[i].s != s) continue;
            if (u->live < 0 || !p->rp[u->live].uuid[0] || *ndu >= max) return false;
            du[(*ndu)++] = unit_as_delivered(p, u, &u->t[i]);
        }
    }
    return *ndu > 0;
}

/* The share's units whatever their state (for /debug/state before delivery). */
static int tenant_units(const plan *p, int s, ext_delivery_unit *du, int max) {
    int n = 0;
    for (int ui = 0; ui < p->nu; ui++)
        for (int i = 0; i < p->u[ui].nt && n < max; i++)
            if (p->u[ui].t[i].s == s) du[n++] = unit_as_delivered(p, &p->u[ui], &p->u[ui].t[i]);
    return n;
}

static ext_delivery_share share_of(const spod *s) {
    return (ext_delivery_share){s->mps, s->shim, s->mps_mounts};
}

/* The CUDA base images set ENV NVIDIA_VISIBLE_DEVICES all (their "# nvidia-container-runtime" block, as copied
 * into many Dockerfiles built on nvidia/cuda), so a container that tessera's ConfigMap does not override sees
 * every GPU under the NVIDIA runtime. */
#define NOMUT_WHY "not mutated by tessera's webhook (created before the webhook was installed, or it was bypassed): " \
                  "tessera cannot limit which GPUs its containers see; an image that sets NVIDIA_VISIBLE_DEVICES=all " \
                  "(the nvidia/cuda images do) sees every GPU of the node"

/* Does a soft share in the cache (which a bind updates at once, before the watch shows it) hold rp's unit? */
static bool unit_in_use(ext_rsv *r, const rpod *rp) {
    bool used = false;
    ext_state_lock(r->st);
    const ext_node *en = ext_state_node(r->st, rp->node);
    const model_node *n = en ? en->m : NULL;
    for (int i = 0; n && i < n->nallocs && !used; i++) {
        const model_alloc *al = &n->allocs[i];
        if (!al->uid[0]) continue;
        /* Only soft shares are tenants: a whole-GPU pod the model put on that index gets its own device. */
        const ext_pod *ep = ext_state_pod(r->st, al->uid);
        if (!ep || ep->req.kind != MODEL_REQ_FRACTION) continue;
        if ((ep->req.compute_sharing == MODEL_COMPUTE_MPS) != rp->mps) continue;   /* it cannot serve that one */
        for (int k = 0; k < al->a.ngrants && !used; k++) {
            const model_grant *gr = &al->a.grant[k];
            if (gr->gpu < 0 || gr->gpu >= n->ngpus || n->gpus[gr->gpu].index != rp->gpu) continue;
            char u[UNIT_LEN];
            ext_rsv_unit_of(&n->gpus[gr->gpu], gr, u, sizeof u);
            used = !strcmp(u, rp->unit);
        }
    }
    ext_state_unlock(r->st);
    return used;
}

/* Does the ConfigMap of share s name uuid? (the memory of the last write, else the API) */
static bool cm_names(ext_rsv *r, const spod *s, const char *uuid) {
    char buf[1024];
    cpy(buf, sizeof buf, s->cm_written);
    if (!buf[0] && s->delivery[0]) {
        char path[512], *resp = NULL;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", s->ns, s->delivery);
        cJSON *cm = call(r, "GET", path, NULL, &resp, "read delivery ConfigMap") == 200 && resp ? cJSON_Parse(resp) : NULL;
        free(resp);
        cpy(buf, sizeof buf, jstr(model_json_get(cm, "data"), EXT_DLV_ENV_VISIBLE, NULL));
        cJSON_Delete(cm);
    }
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!strcmp(t, uuid)) return true;
    return false;
}

/* Which of two live reservations of one unit to keep: the one whose UUID the started shares' ConfigMaps
 * name (their containers use that device), then one with a UUID, then the lower attempt. */
static int keep_score(ext_rsv *r, plan *p, const unit *u, const rpod *rp) {
    if (!rp->uuid[0]) return 0;
    for (int i = 0; i < u->nt; i++) {
        const spod *s = &p->sp[u->t[i].s];
        if (s->started && cm_names(r, s, rp->uuid)) return 2;
    }
    return 1;
}

/* Does refused reservation rf still hold the device that started shares of u run on? Its pod has not ended (the
 * kubelet frees the device of a Failed or Succeeded pod, not of a running one) and a started share's ConfigMap names
 * the UUID it published. tessera-reserve --mps keeps its UUID beside tessera.io/reserve-error when its MPS daemon dies
 * for good (reserve/mps.h): deleting that reservation would free the device in the kubelet's and the scheduler's
 * counts while the shares still use it, and another pod could be given it. */
static bool holds_started(ext_rsv *r, const plan *p, const unit *u, const rpod *rf) {
    if (!rf->uuid[0] || rf->deleting || !strcmp(rf->phase, "Failed") || !strcmp(rf->phase, "Succeeded")) return false;
    for (int i = 0; i < u->nt; i++) {
        const spod *s = &p->sp[u->t[i].s];
        if (s->started && s->delivery[0] && cm_names(r, s, rf->uuid)) return true;
    }
    return false;
}

/* A started share whose reservation's MPS control daemon failed for good (holds_started): a Warning once per
 * reservation. The share is not deleted and its reservation is kept (its GPU stays held) until it ends. */
static void mps_daemon_failed(ext_rsv *r, spod *s, const unit *u, const rpod *rf) {
    if (!strcmp(s->ev_mps_for, rf->name)) return;
    char msg[2048];
    snprintf(msg, sizeof msg, "the MPS control daemon of GPU %d on node %s failed (reservation %s/%s: %s): this pod's "
             "CUDA processes that were its clients lost their contexts, and those it starts now run without MPS, so "
             "their compute is not capped (memory stays limited by libtessera-cuda); tessera keeps the reservation, so "
             "the GPU stays held for this pod until it ends; re-create the pod to get a working MPS daemon",
             u->gpu, u->node, rf->ns, rf->name, rf->rerr[0] ? rf->rerr : "no reason given");
    emit(r, s, "Warning", EXT_DLV_EV_ENFORCEMENT, msg);
    cpy(s->ev_mps_for, sizeof s->ev_mps_for, rf->name);
    kube_log(KUBE_LOG_WARN, "event=share-mps-daemon-failed pod=%s/%s reservation=%s/%s node=%s gpu=%d action=keep "
             "why=\"%s\"", s->ns, s->name, rf->ns, rf->name, u->node, u->gpu, rf->rerr);
}

/* Every share as this pass left it, for /debug/state (NULL when out of memory: none shown). */
static sview *share_views(const plan *p) {
    sview *vs = calloc((size_t)p->nsp + 1, sizeof *vs);
    for (int i = 0; vs && i < p->nsp; i++) {
        const spod *s = &p->sp[i];
        sview *v = &vs[i];
        snprintf(v->pod, sizeof v->pod, "%s/%s", s->ns, s->name);
        cpy(v->node, sizeof v->node, s->node);
        cpy(v->configmap, sizeof v->configmap, s->delivery);
        cpy(v->uuids, sizeof v->uuids, s->cm_written);
        v->mps = s->mps;
        v->uid = s->run_as_uid;
        if (s->enforcement[0]) {
            cpy(v->enforcement, sizeof v->enforcement, s->enforcement);
        } else {   /* not delivered yet: what it will be */
            ext_delivery_unit du[MODEL_MAX_GPUS];
            ext_delivery_share sh = share_of(s);
            ext_delivery_enforcement(du, tenant_units(p, i, du, MODEL_MAX_GPUS), &sh, v->enforcement, sizeof v->enforcement);
        }
        v->state = !s->delivery[0] ? "not-mutated"
                   : s->shim_fail[0] || s->ev_unavail || s->ev_lost || s->ev_foreign || s->ev_mps_for[0] ? "failed"
                   : s->cm_written[0] ? "delivered" : "waiting";
        if (s->shim_fail[0])
            snprintf(v->problem, sizeof v->problem, "init container %s: %s", EXT_DLV_SHIM_CONTAINER, s->shim_fail);
        else if (s->ev_unavail)
            snprintf(v->problem, sizeof v->problem, "no GPU could be reserved for it (Event %s)", EXT_DLV_EV_UNAVAILABLE);
        else if (s->ev_lost)
            snprintf(v->problem, sizeof v->problem, "its reservation is gone while it runs (Event %s)", EXT_DLV_EV_LOST);
        else if (s->ev_mps_for[0])
            snprintf(v->problem, sizeof v->problem, "the MPS control daemon of its reservation %s failed: compute not "
                     "capped (Event %s)", s->ev_mps_for, EXT_DLV_EV_ENFORCEMENT);
        else if (s->ev_foreign)
            snprintf(v->problem, sizeof v->problem, "its ConfigMap belongs to another pod (Event %s)", EXT_DLV_EV_CONFLICT);
        else if (!s->delivery[0])
            snprintf(v->problem, sizeof v->problem, "not mutated by tessera's webhook (Event %s)", EXT_DLV_EV_NOT_MUTATED);
        else if (strstr(v->enforcement, "not enforced") || strstr(v->enforcement, "not capped (the pod"))
            snprintf(v->problem, sizeof v->problem, "admitted without what enforces it: re-create the pod");
    }
    return vs;
}

static int64_t run_pass(ext_rsv *r) {
    int64_t now = ext_now_ms(), next = now + r->cfg.tick_ms;
    bool errors = false;
    plan p = {0};
    if (snapshot(r, &p) != 0) { plan_free(&p); return now + 1000; }
    r->pass++;
    plan_units(r, &p);

    /* No UUID within --reservation-timeout of its creation (the API's clock, so a restart does not reset
     * it): the image does not pull, tessera-reserve crashes or cannot PATCH its pod. Treated as refused. */
    int64_t wall = wall_ms();
    for (int i = 0; i < p.nrp; i++) {
        rpod *rp = &p.rp[i];
        if (rp->uuid[0] || rp->rerr[0] || rp->deleting || !strcmp(rp->phase, "Failed")) continue;
        int64_t age = rp->created_wall_ms > 0 ? wall - rp->created_wall_ms : now - rp->first_ms;
        rp->stuck = age >= r->cfg.timeout_ms;
    }

    /* Live reservations per unit: exactly one is kept; duplicates (a race, a restart) are deleted. */
    for (int i = 0; i < p.nrp; i++) {
        int ui = p.rp_unit[i];
        if (ui < 0) continue;
        unit *u = &p.u[ui];
        /* Kept through its grace period for shares of the other mode (the GPU's last MPS share left and a
         * time-sliced one came, or the reverse): it cannot serve them. It goes now, and the unit gets one
         * of its mode once it is gone (the kubelet counts its device until then). */
        if (p.rp[i].mps != u->mps && !p.rp[i].deleting && !node_frozen(&p, u->node)) {
            kube_log(KUBE_LOG_INFO, "event=reservation-wrong-mode name=%s/%s node=%s gpu=%d unit=%s mps=%s shares_mps=%s "
                     "action=delete", p.rp[i].ns, p.rp[i].name, u->node, u->gpu, u->unit, p.rp[i].mps ? "true" : "false",
                     u->mps ? "true" : "false");
            if (!drop_rpod(r, &p.rp[i], "delete reservation of the other compute-sharing mode")) errors = true;
            continue;
        }
        if (p.rp[i].mps != u->mps) continue;
        if (rpod_refused(&p.rp[i])) {
            /* one that published a UUID first: it may hold the device its started shares run on (holds_started) */
            if (u->refused < 0 || (!p.rp[u->refused].uuid[0] && p.rp[i].uuid[0])) u->refused = i;
            continue;
        }
        if (!rpod_live(&p.rp[i])) continue;
        if (u->live < 0) { u->live = i; continue; }
        rpod *a = &p.rp[u->live], *b = &p.rp[i];
        int sa = keep_score(r, &p, u, a), sb = keep_score(r, &p, u, b);
        bool b_better = sb > sa || (sb == sa && b->attempt >= 0 && (a->attempt < 0 || b->attempt < a->attempt));
        rpod *drop = b_better ? a : b;
        if (b_better) u->live = i;
        kube_log(KUBE_LOG_WARN, "event=reservation-duplicate name=%s node=%s gpu=%d unit=%s action=delete", drop->name,
                 drop->node, drop->gpu, drop->unit);
        if (!drop_rpod(r, drop, "delete duplicate reservation")) errors = true;
    }

    for (int ui = 0; ui < p.nu; ui++) {
        unit *u = &p.u[ui];
        unit_mem *m = unit_mem_get(r, u->node, u->gpu, u->unit);
        if (m) m->seen_pass = r->pass;
        bool frozen = node_frozen(&p, u->node);
        /* Not mutated by the webhook: nothing limits which GPUs its containers see (an image that sets
         * NVIDIA_VISIBLE_DEVICES=all, as the nvidia/cuda images do, sees every GPU of the node). */
        for (int i = 0; i < u->nt; i++) {
            spod *s = &p.sp[u->t[i].s];
            if (s->shim_fail[0]) shim_failed(r, s);
            if (s->delivery[0]) continue;
            if (s->owned) {
                reject_share(r, s, &s->ev_nomut, EXT_DLV_EV_NOT_MUTATED, NOMUT_WHY, &errors);
            } else if (!s->ev_nomut) {
                emit(r, s, "Warning", EXT_DLV_EV_NOT_MUTATED, NOMUT_WHY ": delete and re-create it");
                s->ev_nomut = true;
            }
        }
        if (frozen) continue;   /* tenancy unknown there: decide nothing until the node reads again */
        if (!u->resource[0]) {   /* not deliverable by a reservation (MPS) */
            give_up(r, &p, u, u->why, &errors);
            continue;
        }
        /* A refused reservation that still holds the device its started shares run on (an MPS daemon dead for
         * good under them) is kept, and those shares are told; nothing is lost yet. */
        rpod *kept = u->live < 0 && u->refused >= 0 && holds_started(r, &p, u, &p.rp[u->refused]) ? &p.rp[u->refused]
                                                                                                    : NULL;
        /* No live reservation any more under shares that already run: it was deleted by hand or evicted.
         * Their containers keep the GPU they were given, which nothing reserves now; a new reservation
         * could get another one, so tessera does not quietly re-home them. */
        if (u->live < 0) {
            for (int i = 0; i < u->nt; i++) {
                spod *s = &p.sp[u->t[i].s];
                if (!s->started || !s->delivery[0]) continue;
                if (kept && cm_names(r, s, kept->uuid)) {
                    mps_daemon_failed(r, s, u, kept);
                    continue;
                }
                char what[768];
                snprintf(what, sizeof what, "the reservation of GPU %d on node %s%s%s is gone (deleted or evicted) while "
                         "the pod runs: its containers keep a GPU that nothing reserves, which the kubelet may give to "
                         "another pod", u->gpu, u->node, u->refused >= 0 ? ", " : "",
                         u->refused >= 0 ? p.rp[u->refused].name : "");
                reject_share(r, s, &s->ev_lost, EXT_DLV_EV_LOST, what, &errors);
            }
        }
        /* A refused reservation: tell the waiting shares, move them if the node has another idle GPU. */
        if (u->refused >= 0 && u->live < 0) {
            rpod *rf = &p.rp[u->refused];
            char rwhy[1400], wt[1100];
            waiting_text(rf, wt, sizeof wt);
            if (rf->stuck)
                snprintf(rwhy, sizeof rwhy, "no GPU UUID %d s after its creation%s%s%s", r->cfg.timeout_ms / 1000,
                         wt[0] ? " (its container waits: " : "", wt, wt[0] ? ")" : "");
            else
                snprintf(rwhy, sizeof rwhy, "%s%s%s", rf->rerr[0] ? rf->rerr : rf->reason[0] ? rf->reason : "Failed",
                         !rf->rerr[0] && rf->message[0] ? ": " : "", !rf->rerr[0] ? rf->message : "");
            /* Refusals are counted per share, on the pod: a move to another GPU does not reset them. */
            int n = 1;
            for (int i = 0; i < u->nt; i++)
                if (!p.sp[u->t[i].s].started && p.sp[u->t[i].s].refusals + 1 > n) n = p.sp[u->t[i].s].refusals + 1;
            /* tessera-reserve could not tell which GPU it got: the node's device-plugin setup (e.g. index IDs
             * under CDI), the same on every GPU of the node: moving would only repeat it. An MPS reservation's
             * error is mostly its daemon's, which a GPU of its own can cause (another MPS daemon or a compute
             * mode set on it): its shares move like a refusal's, as many times as refusals allow. */
            bool setup = rf->rerr[0] != 0 && !rf->mps;
            bool exhausted = setup || n >= r->cfg.max_attempts;
            char mwhy[256] = "";
            bool moved = false;
            if (kept) {
                /* Kept for its started shares: the others wait elsewhere. Only when one of them can act now (not
                 * given up and waiting out its back-off), so a kept reservation is not re-judged every pass. */
                bool act = false;
                for (int i = 0; i < u->nt; i++) {
                    const spod *s = &p.sp[u->t[i].s];
                    if (s->started) continue;
                    if (!s->ev_unavail || (!s->owned && s->retry_ms && now >= s->retry_ms)) act = true;
                    else if (!s->owned && s->retry_ms && s->retry_ms < next) next = s->retry_ms;
                }
                for (int i = 0; i < p.nrp; i++)   /* another refused one of the unit goes as usual */
                    if (p.rp_unit[i] == ui && &p.rp[i] != kept && rpod_refused(&p.rp[i]) &&
                        !drop_rpod(r, &p.rp[i], "delete refused reservation"))
                        errors = true;
                if (!act) continue;
            }
            if (!exhausted) {
                for (int i = 0; i < u->nt; i++) {
                    spod *s = &p.sp[u->t[i].s];
                    if (s->started || s->ev_unavail || !strcmp(s->ev_refused_for, rf->name)) continue;
                    char msg[3072];
                    /* an MPS reservation's error is its daemon's: the kubelet admitted the pod */
                    snprintf(msg, sizeof msg, "%s reservation %s/%s of GPU %d on node %s (%s); tessera tries another GPU "
                             "of the node", rf->mps && rf->rerr[0] ? "the MPS control daemon failed in" : "the kubelet refused",
                             rf->ns, rf->name, u->gpu, u->node, rwhy);
                    emit(r, s, "Warning", EXT_DLV_EV_REFUSED, msg);
                    cpy(s->ev_refused_for, sizeof s->ev_refused_for, rf->name);
                }
                moved = move_tenants(r, &p, u, n, &errors, mwhy, sizeof mwhy);
            }
            kube_log(KUBE_LOG_WARN, "event=reservation-refused name=%s node=%s gpu=%d unit=%s why=\"%s\" refusals=%d action=%s",
                     rf->name, u->node, u->gpu, u->unit, rwhy, n, moved ? "moved" : "give-up");
            if (!moved) {
                char gwhy[1800], lim[64];
                snprintf(lim, sizeof lim, "%d reservations refused", n);
                snprintf(gwhy, sizeof gwhy, "%s; %s", rwhy,
                         setup ? "a node setup problem, not this GPU's" : exhausted ? lim : mwhy);
                give_up(r, &p, u, gwhy, &errors);
            }
            if (kept)
                kube_log(KUBE_LOG_WARN, "event=reservation-kept name=%s/%s node=%s gpu=%d why=\"started shares run on its "
                         "device\"", rf->ns, rf->name, u->node, u->gpu);
            else if (!drop_rpod(r, rf, "delete refused reservation"))
                errors = true;
            continue;   /* next pass sees the moved shares on their new unit */
        }
        if (u->refused >= 0) {   /* refused, but another reservation already serves the unit */
            rpod *rf = &p.rp[u->refused];
            if (!drop_rpod(r, rf, "delete refused reservation")) errors = true;
        }
        if (u->live < 0) {
            /* One of the unit's reservations is still terminating: the kubelet counts its device until it is
             * gone, so a new one now could be refused for nothing. Its DELETED event wakes us. */
            bool terminating = false;
            for (int i = 0; i < p.nrp; i++) terminating |= p.rp_unit[i] == ui && p.rp[i].deleting;
            if (terminating) continue;
            bool waiting = false;
            for (int i = 0; i < u->nt; i++) {
                spod *s = &p.sp[u->t[i].s];
                if (s->started) continue;   /* lost (above) or never mutated: a new GPU would not reach it */
                if (!s->ev_unavail) waiting = true;
                else if (!s->owned && s->retry_ms) {   /* given up and left pending: try again after the backoff */
                    if (now >= s->retry_ms) waiting = true;
                    else if (s->retry_ms < next) next = s->retry_ms;
                }
            }
            if (!waiting) continue;
            if (!create_reservation(r, &p, u)) errors = true;
            continue;
        }
        rpod *lv = &p.rp[u->live];
        for (int i = 0; i < u->nt; i++) {
            spod *s = &p.sp[u->t[i].s];
            if (!lv->uuid[0]) {
                char key[sizeof s->ev_pending_for], wt[1100];
                waiting_text(lv, wt, sizeof wt);
                snprintf(key, sizeof key, "%s|%.90s", lv->name, reason_family(lv->wreason));
                if (strcmp(s->ev_pending_for, key) != 0) {
                    char msg[2048];
                    bool failing = container_failing(lv->wreason);
                    snprintf(msg, sizeof msg, "%s reservation %s/%s of GPU %d on node %s%s%s%s", failing ? "the kubelet cannot start"
                             : "waiting for", lv->ns, lv->name, u->gpu, u->node,
                             wt[0] ? (failing ? ": " : "; its container waits: ") : "", wt,
                             failing ? "; tessera gives up on it after --reservation-timeout" : "");
                    emit(r, s, failing ? "Warning" : "Normal", EXT_DLV_EV_PENDING, msg);
                    cpy(s->ev_pending_for, sizeof s->ev_pending_for, key);
                }
                continue;
            }
            if (!s->delivery[0]) continue;   /* not mutated: warned above */
            ext_delivery_unit du[MODEL_MAX_GPUS];
            int ndu = 0;
            if (!tenant_units_ready(&p, u->t[i].s, du, &ndu, MODEL_MAX_GPUS)) continue;   /* another GPU pending */
            char uuids[1024] = "";
            size_t off = 0;
            for (int k = 0; k < ndu && off < sizeof uuids; k++)
                off += (size_t)snprintf(uuids + off, sizeof uuids - off, "%s%s", k ? "," : "", du[k].uuid);
            ext_delivery_share sh = share_of(s);
            char enf[600];
            ext_delivery_enforcement(du, ndu, &sh, enf, sizeof enf);
            /* Written again when the UUIDs change (a move) or what enforces the share does (it cannot, for
             * one pod, but a restart forgets what was written: then ensure_cm compares with the API). */
            if (!strcmp(s->cm_written, uuids) && !strcmp(s->enforcement, enf)) continue;
            cJSON *data = ext_delivery_data(du, ndu, &sh);
            bool fresh = false;
            int rc = data ? ensure_cm(r, s, data, &fresh) : 0;
            if (rc > 0) {
                cpy(s->cm_written, sizeof s->cm_written, uuids);
                cpy(s->enforcement, sizeof s->enforcement, enf);
                if (fresh || !s->ev_delivered) {
                    char msg[2048];   /* room for every UUID, the ConfigMap's name and enf whole */
                    /* What enforces the share goes with the device, so `kubectl describe pod` says both. A share
                     * whose memory or compute is not enforced says so as a Warning. */
                    bool weak = strstr(enf, "not enforced") || strstr(enf, "not capped (the pod");
                    snprintf(msg, sizeof msg, "%s via ConfigMap %s; enforced by: %s", uuids, s->delivery, enf);
                    if (fresh) emit(r, s, weak ? "Warning" : "Normal", EXT_DLV_EV_DELIVERED, msg);
                    s->ev_delivered = true;
                    kube_log(KUBE_LOG_INFO, "event=share-delivered pod=%s/%s uuid=%s configmap=%s written=%s enforcement=\"%s\"",
                             s->ns, s->name, uuids, s->delivery, fresh ? "yes" : "already", enf);
                }
            } else if (rc < 0) {
                char what[768];
                snprintf(what, sizeof what, "its tessera.io/delivery names ConfigMap %s, which is not this pod's (copied "
                         "from another pod?): tessera does not overwrite it, and the pod's containers would read it",
                         s->delivery);
                reject_share(r, s, &s->ev_foreign, EXT_DLV_EV_CONFLICT, what, &errors);
            } else {
                errors = true;
            }
            cJSON_Delete(data);
        }
    }

    /* Reservations without tenants: refused ones go at once, the others after the grace period. One on a
     * frozen node keeps its tenants as far as anyone can tell; one that shares were moved onto in this
     * pass has them already. */
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < p.nrp; i++) {
        rpod *t = ext_map_get(r->rpods, p.rp[i].key);
        if (!t) continue;
        bool has = (p.rp_unit[i] >= 0 && p.u[p.rp_unit[i]].nt > 0) || p.rp[i].claimed || node_frozen(&p, p.rp[i].node) ||
                   is_held(&p, p.rp[i].node, p.rp[i].gpu);
        if (has || p.rp[i].deleting || t->deleting) {
            t->tenantless_ms = 0;
            p.rp[i].tenantless_ms = 0;
            continue;
        }
        if (!t->tenantless_ms) t->tenantless_ms = now;
        p.rp[i].tenantless_ms = t->tenantless_ms;
    }
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < p.nrp; i++) {
        rpod *rp = &p.rp[i];
        if (!rp->tenantless_ms) continue;
        int64_t due = rp->tenantless_ms + r->cfg.grace_ms;
        if (rpod_refused(rp) || now >= due) {
            /* A bind since this pass's snapshot may have put a share on the unit: the cache knows at once. */
            if (!rpod_refused(rp) && unit_in_use(r, rp)) continue;
            kube_log(KUBE_LOG_INFO, "event=reservation-released name=%s node=%s gpu=%d unit=%s why=%s", rp->name, rp->node,
                     rp->gpu, rp->unit, rpod_refused(rp) ? "refused-without-tenants" : "no-tenants");
            if (!drop_rpod(r, rp, "release reservation")) errors = true;
        } else if (due < next) {
            next = due;
        }
    }

    /* Tombstones outlive any event that could still be on its way. */
    pthread_mutex_lock(&r->mu);
    for (;;) {
        size_t it = 0;
        tomb *t;
        bool again = false;
        while ((t = ext_map_next(r->tombs, &it)))
            if (now - t->ms > TOMB_MS) { free(ext_map_del(r->tombs, t->uid)); again = true; break; }
        if (!again) break;
    }
    pthread_mutex_unlock(&r->mu);

    /* Forget the attempts of units nobody uses any more. */
    for (;;) {
        size_t it = 0;
        unit_mem *m;
        bool again = false;
        while ((m = ext_map_next(r->units, &it)))
            if (m->seen_pass != r->pass) { free(ext_map_del(r->units, m->key)); again = true; break; }
        if (!again) break;
    }

    share_memory_back(r, &p);

    /* The view for /debug/state and the gauge. */
    view *vs = calloc((size_t)p.nrp + 1, sizeof *vs);
    int nv = 0;
    for (int i = 0; vs && i < p.nrp; i++) {
        rpod *rp = &p.rp[i];
        view *v = &vs[nv++];
        cpy(v->node, sizeof v->node, rp->node);
        cpy(v->unit, sizeof v->unit, rp->unit);
        cpy(v->name, sizeof v->name, rp->name);
        cpy(v->ns, sizeof v->ns, rp->ns);
        v->mps = rp->mps;
        cpy(v->uuid, sizeof v->uuid, rp->uuid);
        waiting_text(rp, v->waiting, sizeof v->waiting);
        v->gpu = rp->gpu;
        v->first_ms = rp->first_ms;
        v->state = rp->deleting       ? EXT_RSV_RELEASING
                   : rpod_refused(rp) || rp->stuck ? EXT_RSV_REFUSED
                   : rp->tenantless_ms  ? EXT_RSV_RELEASING
                   : rp->uuid[0]        ? EXT_RSV_READY
                                        : EXT_RSV_PENDING;
        cJSON *ts = cJSON_CreateArray();
        if (p.rp_unit[i] >= 0) {
            unit *u = &p.u[p.rp_unit[i]];
            for (int k = 0; k < u->nt; k++) {
                char nn[400];
                snprintf(nn, sizeof nn, "%s/%s", p.sp[u->t[k].s].ns, p.sp[u->t[k].s].name);
                cJSON_AddItemToArray(ts, cJSON_CreateString(nn));
            }
        }
        v->tenants = cJSON_PrintUnformatted(ts);
        cJSON_Delete(ts);
    }
    sview *svs = share_views(&p);
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nviews; i++) free(r->views[i].tenants);
    free(r->views);
    r->views = vs;
    r->nviews = vs ? nv : 0;
    free(r->sviews);
    r->sviews = svs;
    r->nsviews = svs ? p.nsp : 0;
    pthread_mutex_unlock(&r->mu);

    plan_free(&p);
    atomic_fetch_add(&r->passes, 1);
    if (errors) {
        r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : 200;
        if (r->backoff_ms > 5000) r->backoff_ms = 5000;
        return now + r->backoff_ms;
    }
    r->backoff_ms = 0;
    return next;
}

/* ------------------------------------------------------------------ worker */

static void *worker(void *arg) {
    ext_rsv *r = arg;
    int64_t next = 0;
    bool backing_off = false;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        int64_t now = ext_now_ms();
        if ((!r->dirty || backing_off) && now < next) {
            int64_t wake = next;
            struct timespec ts = {(time_t)(wake / 1000), (long)(wake % 1000) * 1000000L};
            pthread_cond_timedwait(&r->cv, &r->mu, &ts);
            continue;
        }
        r->dirty = false;
        bool synced = r->synced;
        pthread_mutex_unlock(&r->mu);
        resolve_image(r);
        pthread_mutex_lock(&r->mu);
        if (r->image_pending) {   /* the first try has concluded, either way: reviews waiting on it go on */
            r->image_pending = false;
            pthread_cond_broadcast(&r->image_cv);
        }
        pthread_mutex_unlock(&r->mu);
        bool go = synced && ext_state_ready(r->st) && (!r->leader || ext_leader_may_act(r->leader));
        next = go ? run_pass(r) : ext_now_ms() + (r->cfg.tick_ms < 200 ? r->cfg.tick_ms : 200);
        backing_off = r->backoff_ms > 0;
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

ext_rsv *ext_rsv_new(const ext_rsv_config *cfg, ext_state *st, kube_client *k, ext_events *ev, ext_leader *l, char *err,
                     size_t errlen) {
    if (!st || !k) {
        snprintf(err, errlen, "the reservation controller needs the cache and the API client");
        return NULL;
    }
    ext_rsv *r = calloc(1, sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return NULL; }
    ext_rsv_config_defaults(&r->cfg);
    if (cfg) {
        r->cfg = *cfg;
        ext_rsv_config d;
        ext_rsv_config_defaults(&d);
        if (!r->cfg.ns[0]) memcpy(r->cfg.ns, d.ns, sizeof d.ns);
        if (!r->cfg.mps_ns[0]) memcpy(r->cfg.mps_ns, d.mps_ns, sizeof d.mps_ns);
        if (r->cfg.grace_ms < 0) r->cfg.grace_ms = d.grace_ms;
        if (r->cfg.max_attempts <= 0) r->cfg.max_attempts = d.max_attempts;
        if (r->cfg.timeout_ms <= 0) r->cfg.timeout_ms = d.timeout_ms;
        if (r->cfg.retry_ms <= 0) r->cfg.retry_ms = d.retry_ms;
        if (r->cfg.tick_ms <= 0) r->cfg.tick_ms = d.tick_ms;
        if (r->cfg.request_timeout_ms <= 0) r->cfg.request_timeout_ms = d.request_timeout_ms;
    }
    r->st = st;
    r->k = k;
    r->ev = ev;
    r->leader = l;
    r->rpods = ext_map_new();
    r->spods = ext_map_new();
    r->units = ext_map_new();
    r->tombs = ext_map_new();
    if (!r->rpods || !r->spods || !r->units || !r->tombs) {
        ext_map_free(r->rpods);
        ext_map_free(r->spods);
        ext_map_free(r->units);
        ext_map_free(r->tombs);
        free(r);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* ext_now_ms's clock */
    pthread_cond_init(&r->cv, &ca);
    pthread_cond_init(&r->image_cv, &ca);
    pthread_condattr_destroy(&ca);
    return r;
}

int ext_rsv_start(ext_rsv *r, char *err, size_t errlen) {
    if (r->started || r->stop) return r->started ? 0 : -1;
    pthread_mutex_lock(&r->mu);
    r->image_pending = !r->cfg.image[0];
    pthread_mutex_unlock(&r->mu);
    int e = pthread_create(&r->thr, NULL, worker, r);
    if (e) {
        pthread_mutex_lock(&r->mu);
        r->image_pending = false;
        pthread_mutex_unlock(&r->mu);
        snprintf(err, errlen, "reservation controller thread: %s", strerror(e));
        return -1;
    }
    r->started = true;
    kube_log(KUBE_LOG_INFO, "event=reservations-started namespace=%s mps_namespace=%s grace_ms=%d timeout_ms=%d image=%s",
             r->cfg.ns, r->cfg.mps_ns, r->cfg.grace_ms, r->cfg.timeout_ms, r->cfg.image[0] ? r->cfg.image : "(own pod's)");
    return 0;
}

void ext_rsv_stop(ext_rsv *r) {
    if (!r || !r->started) return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    r->image_pending = false;
    pthread_cond_signal(&r->cv);
    pthread_cond_broadcast(&r->image_cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thr, NULL);
    r->started = false;
}

void ext_rsv_free(ext_rsv *r) {
    if (!r) return;
    ext_rsv_stop(r);
    size_t it = 0;
    void *v;
    while ((v = ext_map_next(r->rpods, &it))) free(v);
    it = 0;
    while ((v = ext_map_next(r->spods, &it))) spod_free(v);
    it = 0;
    while ((v = ext_map_next(r->units, &it))) free(v);
    it = 0;
    while ((v = ext_map_next(r->tombs, &it))) free(v);
    ext_map_free(r->rpods);
    ext_map_free(r->spods);
    ext_map_free(r->units);
    ext_map_free(r->tombs);
    for (int i = 0; i < r->nviews; i++) free(r->views[i].tenants);
    free(r->views);
    free(r->sviews);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->image_cv);
    free(r);
}

void ext_rsv_debug(ext_rsv *r, cJSON *out) {
    if (!r || !out) return;
    cJSON *arr = cJSON_AddArrayToObject(out, "reservations");
    int64_t now = ext_now_ms();
    bool active = !r->leader || ext_leader_may_act(r->leader);
    pthread_mutex_lock(&r->mu);
    cJSON *ctl = cJSON_AddObjectToObject(out, "reservation_controller");
    cJSON_AddBoolToObject(ctl, "active", active);   /* this replica holds the Lease: it runs the passes */
    cJSON_AddStringToObject(ctl, "reserve_image", r->cfg.image);
    cJSON_AddStringToObject(ctl, "reserve_image_problem", r->image_why);
    for (int i = 0; i < r->nviews; i++) {
        const view *v = &r->views[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "node", v->node);
        cJSON_AddNumberToObject(j, "gpu", v->gpu);
        cJSON_AddStringToObject(j, "unit", v->unit);
        cJSON_AddStringToObject(j, "name", v->name);
        cJSON_AddStringToObject(j, "namespace", v->ns);
        cJSON_AddBoolToObject(j, "mps", v->mps);
        cJSON_AddStringToObject(j, "uuid", v->uuid);
        cJSON *t = v->tenants ? cJSON_Parse(v->tenants) : NULL;
        cJSON_AddItemToObject(j, "tenants", t ? t : cJSON_CreateArray());
        cJSON_AddStringToObject(j, "state", ext_rsv_state_name(v->state));
        cJSON_AddNumberToObject(j, "age_s", (double)((now - v->first_ms) / 1000));
        cJSON_AddStringToObject(j, "waiting", v->waiting);
        cJSON_AddItemToArray(arr, j);
    }
    cJSON *sh = cJSON_AddArrayToObject(out, "shares");
    for (int i = 0; i < r->nsviews; i++) {
        const sview *v = &r->sviews[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "pod", v->pod);
        cJSON_AddStringToObject(j, "node", v->node);
        cJSON_AddStringToObject(j, "compute_sharing", v->mps ? "mps" : "timeslice");
        if (v->mps) cJSON_AddNumberToObject(j, "uid", (double)v->uid);
        cJSON_AddStringToObject(j, "configmap", v->configmap);
        cJSON_AddStringToObject(j, "uuids", v->uuids);
        cJSON_AddStringToObject(j, "state", v->state);
        cJSON_AddStringToObject(j, "enforcement", v->enforcement);
        cJSON_AddStringToObject(j, "problem", v->problem);
        cJSON_AddItemToArray(sh, j);
    }
    pthread_mutex_unlock(&r->mu);
}

void ext_rsv_get_stats(ext_rsv *r, ext_rsv_stats *out) {
    memset(out, 0, sizeof *out);
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nviews; i++) out->reservations[r->views[i].state]++;
    pthread_mutex_unlock(&r->mu);
    for (int o = 0; o < EXT_RSV_NOPS; o++)
        for (int k = 0; k < 2; k++) out->ops[o][k] = atomic_load(&r->ops[o][k]);
    out->passes = atomic_load(&r->passes);
}
