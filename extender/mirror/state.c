/* state.c -- the cache behind the verbs: nodes by name, GPU pods by UID, relist mark and
 * sweep, bind reservations and assumptions with expiry. Placement of pods we did not bind
 * (or whose annotation no longer fits) is re-derived with model_fit, never invented here.
 */
#include "extender/mirror/state.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extender/base/annotation.h"
#include "extender/base/delivery.h"
#include "extender/mirror/dra.h"
#include "extender/mirror/holdings.h"
#include "kube/log.h"
#include "extender/base/map.h"

#define MEMO_CAP 4096

typedef struct memo_ent {
    char uid[MODEL_UID_LEN];
    char key[320];             /* "namespace/name", for /debug/state?pod= */
    model_request req;
} memo_ent;

/* Our annotation text per pod, kept so a pod can be re-placed exactly when its node is
 * rebuilt or shows up after the pod. Stored beside the pod rather than in ext_pod to keep
 * the public struct free of strings nobody else needs. */
typedef struct pod_priv {
    ext_pod pub;
    char *ann;
    bool deferred;             /* on a node, waiting for the pod relist's SYNCED to be derived (pod_apply) */
} pod_priv;

struct ext_state {
    pthread_mutex_t mu;
    ext_state_config cfg;
    ext_map *nodes;            /* name -> ext_node */
    ext_node **narr;
    int nn, ncap;
    ext_map *pods;             /* uid -> pod_priv */
    ext_dra *dra;              /* ResourceSlices, ResourceClaims, DeviceClasses (dra.h) */
    uint32_t gen[2];
    uint64_t version_seq;      /* last ext_node.version handed out */
    bool synced[2];
    bool relisting[2];         /* between RELIST and SYNCED of the kind */
    bool any_deferred;         /* some pod_priv.deferred is set */
    bool maybe_assumed;        /* some pod may be ASSUMED: expiry has work to do */
    ext_state_stats st;
    ext_holdings_stats hstats; /* holdings.h's counters */
    ext_map *rsv;              /* "namespace/name" -> rsv_ent: reservation pods, for the holdings record */
    uint64_t rsv_version;      /* changes with rsv */

    pthread_mutex_t memo_mu;
    ext_map *memo;             /* uid -> memo_ent */
    memo_ent *ring[MEMO_CAP];  /* insertion order; the oldest is recycled first */
    int ring_head, ring_n;
};

int64_t ext_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

ext_state *ext_state_new(const ext_state_config *cfg) {
    ext_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    if (cfg) st->cfg = *cfg;
    if (!st->cfg.cat) st->cfg.cat = model_catalog_default();
    if (!st->cfg.reservation_ns[0]) snprintf(st->cfg.reservation_ns, sizeof st->cfg.reservation_ns, "tessera");
    if (!st->cfg.mps_reservation_ns[0])
        snprintf(st->cfg.mps_reservation_ns, sizeof st->cfg.mps_reservation_ns, "%s", EXT_RSV_DEFAULT_MPS_NS);
    if (st->cfg.assume_ttl_ms <= 0) st->cfg.assume_ttl_ms = 30000;
    st->nodes = ext_map_new();
    st->pods = ext_map_new();
    st->memo = ext_map_new();
    st->dra = ext_dra_new();
    st->rsv = ext_map_new();
    if (!st->nodes || !st->pods || !st->memo || !st->dra || !st->rsv) {
        ext_dra_free(st->dra);
        ext_map_free(st->rsv);
        ext_map_free(st->nodes);
        ext_map_free(st->pods);
        ext_map_free(st->memo);
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    pthread_mutex_init(&st->memo_mu, NULL);
    if (st->cfg.standalone) st->synced[0] = st->synced[1] = true;
    return st;
}

/* A reservation pod as the holdings record needs it (holdings.h): what it published, which GPU it backs. */
typedef struct rsv_ent {
    char key[320];             /* "namespace/name" */
    char uuid[64];             /* tessera.io/gpu-uuid, "" until published */
    int gpu;                   /* tessera.io/reservation-gpu, -1 unknown */
} rsv_ent;

static void rsv_clear(ext_state *st) {
    st->rsv_version++;
    size_t it = 0;
    rsv_ent *e;
    while (st->rsv && (e = ext_map_next(st->rsv, &it))) free(e);
    ext_map_free(st->rsv);
    st->rsv = ext_map_new();   /* NULL when out of memory: reservations are then not compared (rsv_note) */
}

static const char *rsv_lookup(void *user, const char *key, int *gpu) {
    ext_state *st = user;
    rsv_ent *e = st->rsv ? ext_map_get(st->rsv, key) : NULL;
    if (!e) return NULL;
    *gpu = e->gpu;
    return e->uuid;
}

static void pod_free(pod_priv *p) {
    if (!p) return;
    free(p->pub.ns);
    free(p->pub.name);
    free(p->pub.node);
    free(p->ann);
    free(p);
}

static void node_free(ext_node *n) {
    if (!n) return;
    free(n->memo);
    ext_holdings_free(n->holdings);
    model_node_free(n->m);
    model_node_free(n->base);
    free(n->pods);
    free(n->name);
    free(n);
}

void ext_state_free(ext_state *st) {
    if (!st) return;
    size_t it = 0;
    pod_priv *p;
    while ((p = ext_map_next(st->pods, &it))) pod_free(p);
    for (int i = 0; i < st->nn; i++) node_free(st->narr[i]);
    free(st->narr);
    ext_map_free(st->nodes);
    ext_map_free(st->pods);
    ext_dra_free(st->dra);
    rsv_clear(st);
    ext_map_free(st->rsv);
    for (int i = 0; i < st->ring_n; i++) free(st->ring[(st->ring_head + i) % MEMO_CAP]);
    ext_map_free(st->memo);
    pthread_mutex_destroy(&st->mu);
    pthread_mutex_destroy(&st->memo_mu);
    free(st);
}

void ext_state_lock(ext_state *st) { pthread_mutex_lock(&st->mu); }
void ext_state_unlock(ext_state *st) { pthread_mutex_unlock(&st->mu); }

bool ext_state_ready(ext_state *st) {
    pthread_mutex_lock(&st->mu);
    bool r = st->synced[KUBE_NODE] && st->synced[KUBE_POD] && (!st->cfg.dra || ext_dra_synced(st->dra));
    pthread_mutex_unlock(&st->mu);
    return r;
}

struct ext_dra *ext_state_dra(const ext_state *st) { return st->dra; }

/* ------------------------------------------------------------ reads */

const ext_node *ext_state_node(const ext_state *st, const char *name) { return ext_map_get(st->nodes, name); }
const ext_pod *ext_state_pod(const ext_state *st, const char *uid) {
    pod_priv *p = ext_map_get(st->pods, uid);
    return p ? &p->pub : NULL;
}
int ext_state_node_count(const ext_state *st) { return st->nn; }
const ext_node *ext_state_node_at(const ext_state *st, int i) { return i >= 0 && i < st->nn ? st->narr[i] : NULL; }
size_t ext_state_pod_count(const ext_state *st) { return ext_map_count(st->pods); }
const ext_pod *ext_state_pod_next(const ext_state *st, size_t *it) {
    pod_priv *p = ext_map_next(st->pods, it);
    return p ? &p->pub : NULL;
}

model_node *ext_state_node_without(const ext_state *st, const ext_node *n, const char *const *uids, int nuids) {
    if (!n || !n->m) return NULL;
    model_node *c = model_node_clone(n->m);
    for (int i = 0; c && i < nuids; i++)
        if (uids[i]) model_release(c, uids[i]);
    return c;
}

void ext_state_get_stats(const ext_state *st, ext_state_stats *out) {
    *out = st->st;
    out->nodes = out->nodes_unusable = 0;
    out->pods = out->pending = out->binding = out->assumed = out->bound = out->overcommitted = 0;
    for (int i = 0; i < st->nn; i++) {
        if (!st->narr[i]->m) continue;
        out->nodes++;
        if (st->narr[i]->m->reason[0]) out->nodes_unusable++;
    }
    size_t it = 0;
    pod_priv *p;
    while ((p = ext_map_next(st->pods, &it))) {
        out->pods++;
        switch (p->pub.phase) {
        case EXT_POD_PENDING: out->pending++; break;
        case EXT_POD_BINDING: out->binding++; break;
        case EXT_POD_ASSUMED: out->assumed++; break;
        case EXT_POD_BOUND: out->bound++; break;
        }
        if (p->pub.overcommitted) out->overcommitted++;
    }
}

/* ------------------------------------------------------------ memo */

void ext_state_note_request(ext_state *st, const char *uid, const char *ns, const char *name, const model_request *req) {
    if (!uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN) return;
    pthread_mutex_lock(&st->memo_mu);
    memo_ent *e = ext_map_get(st->memo, uid);
    if (e) {
        e->req = *req;
    } else {
        if (st->ring_n == MEMO_CAP) {
            e = st->ring[st->ring_head];
            ext_map_del(st->memo, e->uid);
            st->ring_head = (st->ring_head + 1) % MEMO_CAP;
            st->ring_n--;
        } else {
            e = malloc(sizeof *e);
        }
        if (e) {
            snprintf(e->uid, sizeof e->uid, "%s", uid);
            snprintf(e->key, sizeof e->key, "%s/%s", ns ? ns : "", name ? name : "");
            e->req = *req;
            if (ext_map_put(st->memo, e->uid, e) == 0) {
                st->ring[(st->ring_head + st->ring_n) % MEMO_CAP] = e;
                st->ring_n++;
            } else {
                free(e);
            }
        }
    }
    pthread_mutex_unlock(&st->memo_mu);
}

int ext_state_pod_request(ext_state *st, const char *uid, model_request *req) {
    pod_priv *p = ext_map_get(st->pods, uid);
    if (p) {
        *req = p->pub.req;
        return 0;
    }
    int rc = -1;
    pthread_mutex_lock(&st->memo_mu);
    memo_ent *e = ext_map_get(st->memo, uid);
    if (e) {
        *req = e->req;
        rc = 0;
    }
    pthread_mutex_unlock(&st->memo_mu);
    return rc;
}

int ext_state_find_request(ext_state *st, const char *key, char *uid, size_t uidlen, model_request *req) {
    pod_priv *pp = ext_map_get(st->pods, key);
    size_t it = 0;
    size_t klen = strlen(key);
    while (!pp && (pp = ext_map_next(st->pods, &it))) {
        size_t nl = strlen(pp->pub.ns);
        if (!(klen == nl + 1 + strlen(pp->pub.name) && !strncmp(key, pp->pub.ns, nl) && key[nl] == '/' &&
              !strcmp(key + nl + 1, pp->pub.name)))
            pp = NULL;
        if (!pp) continue;
    }
    if (pp) {
        snprintf(uid, uidlen, "%s", pp->pub.uid);
        *req = pp->pub.req;
        return 0;
    }
    int rc = -1;
    pthread_mutex_lock(&st->memo_mu);
    for (int i = st->ring_n - 1; i >= 0 && rc; i--) {   /* newest first */
        memo_ent *e = st->ring[(st->ring_head + i) % MEMO_CAP];
        if (!strcmp(e->uid, key) || !strcmp(e->key, key)) {
            snprintf(uid, uidlen, "%s", e->uid);
            *req = e->req;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&st->memo_mu);
    return rc;
}

/* ------------------------------------------------------------ nodes */

/* Every change to a node's model or pod list goes through here (or a caller that does),
 * so cached answers about the node stop matching. */
static void node_touch(ext_state *st, ext_node *n) { n->version = ++st->version_seq; }

struct ext_node_memo **ext_state_node_memo(ext_state *st, const ext_node *n) {
    (void)st;
    return &((ext_node *)n)->memo;   /* the slot is the verbs' scratch, not cache state */
}

static ext_node *node_get_or_create(ext_state *st, const char *name) {
    ext_node *n = ext_map_get(st->nodes, name);
    if (n) return n;
    n = calloc(1, sizeof *n);
    if (!n || !(n->name = strdup(name))) {
        free(n);
        return NULL;
    }
    if (st->nn == st->ncap) {
        int cap = st->ncap ? 2 * st->ncap : 64;
        ext_node **g = realloc(st->narr, (size_t)cap * sizeof *g);
        if (!g) { node_free(n); return NULL; }
        st->narr = g;
        st->ncap = cap;
    }
    if (ext_map_put(st->nodes, n->name, n) != 0) { node_free(n); return NULL; }
    n->idx = st->nn;
    st->narr[st->nn++] = n;
    node_touch(st, n);
    return n;
}

/* A node entry with neither a Node object nor pods has nothing left to say. */
static void node_maybe_drop(ext_state *st, ext_node *n) {
    if (n->m || n->npods > 0) return;
    ext_map_del(st->nodes, n->name);
    st->narr[n->idx] = st->narr[--st->nn];
    st->narr[n->idx]->idx = n->idx;
    node_free(n);
}

static int node_add_pod(ext_state *st, ext_node *n, ext_pod *p) {
    node_touch(st, n);
    if (n->npods == n->cap) {
        int cap = n->cap ? 2 * n->cap : 8;
        ext_pod **g = realloc(n->pods, (size_t)cap * sizeof *g);
        if (!g) return -1;
        n->pods = g;
        n->cap = cap;
    }
    n->pods[n->npods++] = p;
    return 0;
}

static void node_remove_pod(ext_state *st, ext_node *n, ext_pod *p) {
    node_touch(st, n);
    for (int i = 0; i < n->npods; i++)
        if (n->pods[i] == p) {
            memmove(&n->pods[i], &n->pods[i + 1], (size_t)(n->npods - i - 1) * sizeof *n->pods);
            n->npods--;
            return;
        }
}

/* ------------------------------------------------------------ placing pods */

/* Facts before guesses. A pod's GPUs come from what it held before (hint) or from its
 * tessera.io/assignment annotation -- facts -- or else from model_fit -- a guess. A guess made
 * while the facts are still arriving can take a GPU that a later pod's valid annotation names,
 * which then reads as annotation-invalid and over-commits. So while a pod relist is in progress
 * (the first list after a restart, or after 410 Gone) a pod that needs a guess is only marked
 * deferred, and guessed at that relist's SYNCED, after every annotated pod of the list is in
 * place; node_install likewise places annotated pods before guessing for the rest. The watch
 * path guesses at once: one event at a time, every other pod is already known. */
typedef enum apply_mode {
    APPLY_DERIVE,   /* facts, else a guess now */
    APPLY_DEFER,    /* facts, else mark deferred (a relist is in progress) */
    APPLY_FACTS     /* facts only; false when a guess is needed (the caller comes back later) */
} apply_mode;

static apply_mode relist_mode(const ext_state *st) { return st->relisting[KUBE_POD] ? APPLY_DEFER : APPLY_DERIVE; }

/* Give pod p its GPUs on node n: the assignment it held before (hint), else our
 * annotation, else the first assignment model_fit lists. Pods the default scheduler
 * placed with nvidia.com/gpu are a guess: the device plugin's real choice of GPU is not
 * visible in the API, so the first fit stands in for it (deterministic, lowest indices).
 * false only when mode is APPLY_FACTS and a guess would be needed (nothing changed then). */
static bool pod_apply(ext_state *st, ext_node *n, pod_priv *pp, const model_assignment *hint, apply_mode mode) {
    ext_pod *p = &pp->pub;
    char err[MODEL_REASON_LEN];
    p->holds = false;
    p->overcommitted = false;
    node_touch(st, n);
    if (!n->m) return true;   /* no Node object yet: applied when it arrives */
    if (hint && model_assign(n->m, p->uid, hint, err, sizeof err) == 0) {
        p->a = *hint;
        p->holds = true;
        pp->deferred = false;
        return true;
    }
    model_assignment a;
    bool ann_ok = pp->ann && ext_ann_decode(n->m, pp->ann, &a, err, sizeof err) == 0;
    /* the annotation names GPUs and amounts; how the share uses compute (MPS or time-slicing, its uid) the pod says */
    if (ann_ok) model_assignment_set_sharing(&a, &p->req);
    ann_ok = ann_ok && model_assign(n->m, p->uid, &a, err, sizeof err) == 0;
    if (ann_ok) {
        p->a = a;
        p->holds = true;
        p->derived = false;
        pp->deferred = false;
        return true;
    }
    if (mode == APPLY_FACTS) return false;
    if (mode == APPLY_DEFER) {
        pp->deferred = true;
        st->any_deferred = true;
        return true;
    }
    pp->deferred = false;
    if (pp->ann)
        kube_log(KUBE_LOG_WARN, "event=annotation-invalid pod=%s/%s node=%s err=\"%s\" action=re-derive", p->ns, p->name,
                 n->name, err);
    model_request r = p->req;
    int nf = model_fit(n->m, &r, &a, 1, err, sizeof err);
    if (nf == 0 && r.kind == MODEL_REQ_WHOLE && r.isolation == MODEL_ISO_DEFAULT) {
        /* Another scheduler put nvidia.com/gpu on a shared or MIG-single node, where the
         * device plugin hands out a replica or slice: account for what it really got. */
        r.isolation = MODEL_ISO_ANY;
        nf = model_fit(n->m, &r, &a, 1, err, sizeof err);
    }
    if (nf > 0 && model_assign(n->m, p->uid, &a, err, sizeof err) == 0) {
        p->a = a;
        p->holds = true;
        p->derived = true;
        return true;
    }
    p->overcommitted = true;
    kube_log(KUBE_LOG_WARN, "event=overcommitted pod=%s/%s uid=%s node=%s why=\"%s\"", p->ns, p->name, p->uid, n->name, err);
    return true;
}

/* The relist of pods is complete: guess for the pods that waited for it (pod_apply). */
static void derive_deferred(ext_state *st) {
    if (!st->any_deferred) return;
    st->any_deferred = false;
    size_t it = 0;
    pod_priv *pp;
    while ((pp = ext_map_next(st->pods, &it))) {
        if (!pp->deferred) continue;
        pp->deferred = false;
        ext_node *n = pp->pub.node ? ext_map_get(st->nodes, pp->pub.node) : NULL;
        if (n && n->m && !pp->pub.holds) pod_apply(st, n, pp, NULL, APPLY_DERIVE);
    }
}

/* GPUs on node n were just released: pods there that could not have their annotation (it collided with a
 * holding that is now gone: a stale assumption, a pod deleted while the watch was away) get it now, valid
 * annotations first, then the rest are derived again. Without this a pod stayed derived on other GPUs than
 * its device really uses, and the cache showed those as free (found by the soak, tests/support/soak.c). */
static void node_retry(ext_state *st, ext_node *n) {
    bool any = false;
    for (int i = 0; i < n->npods && !any; i++) {
        ext_pod *q = n->pods[i];
        any = q->phase == EXT_POD_BOUND && (q->overcommitted || (q->derived && ((pod_priv *)q)->ann));
    }
    if (!any || !n->m) return;
    for (int i = 0; i < n->npods; i++) {   /* guesses let go of what they hold, so they block no fact */
        ext_pod *q = n->pods[i];
        if (q->phase == EXT_POD_BOUND && q->holds && q->derived && ((pod_priv *)q)->ann) {
            model_release(n->m, q->uid);
            q->holds = false;
            q->overcommitted = true;   /* placed again below */
        }
    }
    for (int i = 0; i < n->npods; i++) {   /* facts first: every annotation that fits now */
        pod_priv *qp = (pod_priv *)n->pods[i];
        if (qp->pub.phase != EXT_POD_BOUND || !qp->pub.overcommitted || !qp->ann) continue;
        if (!pod_apply(st, n, qp, NULL, APPLY_FACTS)) qp->pub.overcommitted = true;   /* a guess, below */
    }
    for (int i = 0; i < n->npods; i++) {   /* then guesses for the rest */
        pod_priv *qp = (pod_priv *)n->pods[i];
        if (qp->pub.phase == EXT_POD_BOUND && qp->pub.overcommitted) pod_apply(st, n, qp, NULL, relist_mode(st));
    }
}

static void pod_unplace(ext_state *st, pod_priv *pp) {
    ext_pod *p = &pp->pub;
    if (!p->node) return;
    ext_node *n = ext_map_get(st->nodes, p->node);
    if (n) {
        bool released = p->holds && n->m;
        if (released) model_release(n->m, p->uid);
        node_remove_pod(st, n, p);
        p->holds = false;
        if (released) node_retry(st, n);
        if (n->m) model_node_trim(n->m);
        node_maybe_drop(st, n);
    }
    free(p->node);
    p->node = NULL;
    p->holds = p->overcommitted = p->derived = false;
    pp->deferred = false;
}

static int pod_place(ext_state *st, pod_priv *pp, const char *node, const model_assignment *hint) {
    ext_node *n = node_get_or_create(st, node);
    if (!n || !(pp->pub.node = strdup(node))) return -1;
    if (node_add_pod(st, n, &pp->pub) != 0) {
        free(pp->pub.node);
        pp->pub.node = NULL;
        node_maybe_drop(st, n);
        return -1;
    }
    pod_apply(st, n, pp, hint, relist_mode(st));
    return 0;
}

static void pod_remove(ext_state *st, pod_priv *pp) {
    pod_unplace(st, pp);
    ext_map_del(st->pods, pp->pub.uid);
    pod_free(pp);
}

/* ------------------------------------------------------------ node objects */

/* Install a freshly built model for a node and put its pods back: first those that held
 * GPUs (same assignment if it still fits), then those whose annotation fits, then the rest
 * (guessed), so a relabel that shrinks a node over-commits the fewest pods and never
 * silently drops one, and a node that arrives after its pods places facts before guesses. */
static void node_install(ext_state *st, model_node *m) {
    ext_node *n = node_get_or_create(st, m->name);
    if (!n) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", m->name);
        model_node_free(m);
        return;
    }
    model_node *old = n->m;
    n->m = m;
    n->gen = st->gen[KUBE_NODE];
    node_touch(st, n);
    ext_dra_apply_claims(st->dra, m);   /* claims hold their devices before any pod is put back */
    if (!old && n->npods == 0) return;
    bool *held = n->npods ? calloc((size_t)n->npods, sizeof *held) : NULL;
    for (int i = 0; i < n->npods; i++) {
        if (held) held[i] = n->pods[i]->holds;
        n->pods[i]->holds = false;
    }
    bool *done = n->npods ? calloc((size_t)n->npods, sizeof *done) : NULL;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < n->npods; i++) {
            bool h = held ? held[i] : false;
            if (pass == 0 ? !h : h || (done && done[i])) continue;
            ext_pod *p = n->pods[i];
            /* without the bookkeeping (out of memory) skip the facts-only pass: order matters less than placing */
            if (pass == 1 && !done) continue;
            bool ok = pod_apply(st, n, (pod_priv *)p, h ? &p->a : NULL, pass == 1 ? APPLY_FACTS : relist_mode(st));
            if (done) done[i] = ok;
        }
    free(done);
    free(held);
    model_node_free(old);
}

/* ---- DRA (dra.h): the installed model is the Node object's (base) plus what ResourceSlices and
 * ResourceClaims say about the node; a change to either rebuilds it from base. Only a node some ResourceSlice
 * names keeps base beside the installed model: without slices nothing is merged and no claim holds a device
 * there (ext_dra_apply_claims), so the installed model is the Node object's model plus pods, one copy, and a Node
 * event costs no clone and no merge. Most clusters publish no GPU through DRA yet. */

/* m with room for its own GPUs only (model_node_compact), m itself when out of memory. Kept models get no
 * more GPUs: a DRA merge works on a clone, which has room again. */
static model_node *compacted(model_node *m) {
    model_node *c = model_node_compact(m);
    if (!c) return m;
    model_node_free(m);
    return c;
}

/* Install base's DRA view: base itself when no slice names the node (n->base dropped), else a merged copy
 * (base kept for the next DRA change). */
static void node_install_view(ext_state *st, ext_node *n, model_node *base) {
    if (!ext_dra_node_has_slices(st->dra, base->name)) {
        if (n->base != base) model_node_free(n->base);
        n->base = NULL;
        node_install(st, compacted(base));
        return;
    }
    if (n->base != base) {
        model_node_free(n->base);
        n->base = compacted(base);
    }
    model_node *m = model_node_clone(n->base);
    if (!m) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", n->name);
        return;
    }
    ext_dra_merge(st->dra, m, st->cfg.cat);
    if (m->dra_note[0]) kube_log(KUBE_LOG_DEBUG, "event=dra-note node=%s why=\"%s\"", n->name, m->dra_note);
    node_install(st, compacted(m));
}

/* A Node object's model. */
static void node_install_base(ext_state *st, model_node *base) {
    ext_node *n = node_get_or_create(st, base->name);
    if (!n) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", base->name);
        model_node_free(base);
        return;
    }
    node_install_view(st, n, base);
}

/* The Node object's model of a node kept without base: the installed model with every pod's GPUs given back
 * (it holds nothing else: no slice, so no claim, was merged into it). Releasing restores usage exactly and
 * removes the MIG instances assignments created on demand, leaving the others in their order. */
static model_node *node_base_of(const ext_node *n) {
    model_node *b = model_node_clone(n->m);
    for (int i = 0; b && i < b->nallocs; i++) {
        if (!b->allocs[i].uid[0]) continue;
        char uid[MODEL_UID_LEN];
        memcpy(uid, b->allocs[i].uid, sizeof uid);
        model_release(b, uid);
    }
    return b;
}

static void dra_touch(void *user, const char *node) {
    ext_state *st = user;
    ext_node *n = ext_map_get(st->nodes, node);
    if (!n || !n->m) return;
    model_node *base = n->base;
    if (!base && !ext_dra_node_has_slices(st->dra, node)) return;   /* a claim's change: nothing held here */
    if (!base && !(base = node_base_of(n))) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", n->name);
        return;
    }
    uint32_t g = n->gen;   /* a DRA change is no sighting of the Node object (node relist sweep) */
    node_install_view(st, n, base);
    n->gen = g;
}

static void node_delete(ext_state *st, ext_node *n) {
    ext_holdings_free(n->holdings);   /* the record lives on the Node object */
    n->holdings = NULL;
    model_node_free(n->base);
    n->base = NULL;
    model_node_free(n->m);
    n->m = NULL;
    node_touch(st, n);
    for (int i = 0; i < n->npods; i++) {
        n->pods[i]->holds = false;
        n->pods[i]->overcommitted = false;
    }
    node_maybe_drop(st, n);
}

static void holdings_touch(ext_state *st, ext_node *n);

static const char *obj_str(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, b) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void node_event(ext_state *st, kube_event ev, const cJSON *obj) {
    const char *name = obj_str(obj, "metadata", "name");
    if (!name || !name[0]) {
        kube_log(KUBE_LOG_WARN, "event=bad-object kind=Node why=\"no metadata.name\"");
        return;
    }
    if (ev == KUBE_DELETED) {
        ext_node *n = ext_map_get(st->nodes, name);
        if (n && n->m) node_delete(st, n);
        kube_log(KUBE_LOG_INFO, "event=node-deleted node=%s", name);
        return;
    }
    char err[256];
    model_node *m = model_node_from_json(obj, st->cfg.cat, err, sizeof err);
    if (!m) {
        kube_log(KUBE_LOG_WARN, "event=bad-object kind=Node node=%s why=\"%s\"", name, err);
        return;
    }
    if (m->reason[0]) kube_log(KUBE_LOG_DEBUG, "event=node-unusable node=%s why=\"%s\"", name, m->reason);
    node_install_base(st, m);
    ext_node *n = ext_map_get(st->nodes, name);
    if (n) {
        ext_holdings_read(&n->holdings, name, obj, ext_now_ms(), &st->hstats);
        holdings_touch(st, n);   /* the model was rebuilt, or the record changed: compare again */
    }
}

/* Set the node's holdings record against its model now, or once the pod relist is complete (holdings_touch_all):
 * a record entry for a pod the cache has not listed yet is no finding (holdings.h). */
static void holdings_touch(ext_state *st, ext_node *n) {
    if (!n || !n->holdings || !n->m) return;
    if (st->relisting[KUBE_POD] || !st->synced[KUBE_POD]) return;
    if (ext_holdings_reconcile(n->holdings, n, rsv_lookup, st, st->rsv_version, ext_now_ms(), &st->hstats))
        node_touch(st, n);
}

/* At the pod relist's end every node with a record, not only those an event touched meanwhile: the sweep, the
 * deferred guesses and the reservation table's refill change nodes without an event of their own. Once per relist;
 * a node whose inputs did not change is skipped by the reconcile itself. */
static void holdings_touch_all(ext_state *st) {
    for (int i = 0; i < st->nn; i++) holdings_touch(st, st->narr[i]);
}

const ext_holdings_stats *ext_state_holdings_stats(const ext_state *st) { return &st->hstats; }

/* A reservation pod's ADDED/MODIFIED (DELETED: gone) for the holdings record. true when what rsv_lookup
 * answers for it changed (then rsv_version changes too): most of its events are status updates. */
static bool rsv_note(ext_state *st, const char *ns, const char *name, const cJSON *meta, bool gone) {
    char key[320];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    if (!st->rsv) return false;
    rsv_ent *e = ext_map_get(st->rsv, key);
    if (gone) {
        if (!e) return false;
        free(ext_map_del(st->rsv, key));
        st->rsv_version++;
        return true;
    }
    bool created = false;
    if (!e) {
        if (!(e = calloc(1, sizeof *e))) return false;
        snprintf(e->key, sizeof e->key, "%s", key);
        if (ext_map_put(st->rsv, e->key, e) != 0) { free(e); return false; }
        created = true;
    }
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(ann, EXT_RSV_ANN_UUID), *g = cJSON_GetObjectItemCaseSensitive(ann, EXT_RSV_ANN_GPU);
    char uuid[sizeof e->uuid];
    snprintf(uuid, sizeof uuid, "%s", cJSON_IsString(u) ? u->valuestring : "");
    int gpu = cJSON_IsString(g) ? atoi(g->valuestring) : -1;
    if (!created && gpu == e->gpu && !strcmp(uuid, e->uuid)) return false;
    memcpy(e->uuid, uuid, sizeof uuid);
    e->gpu = gpu;
    st->rsv_version++;
    return true;
}

/* ------------------------------------------------------------ pod objects */

static void pod_event_apply(ext_state *st, kube_event ev, const cJSON *obj);

/* A pod's change can make the node's holdings record say something else of it (placed, moved, gone, a GPU
 * freed for a pod whose move was refused): the nodes it left and reached are compared again. Only when the
 * event changed the node (its version: every change to its model or pod list bumps it): most pod events are
 * status updates of a pod that stays where it is, and the record is not compared for them. */
static void pod_event(ext_state *st, kube_event ev, const cJSON *obj) {
    const char *uid = obj_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "uid", NULL);
    pod_priv *before = uid ? ext_map_get(st->pods, uid) : NULL;
    char old[256] = "";
    uint64_t oldver = 0;
    if (before && before->pub.node) {
        snprintf(old, sizeof old, "%s", before->pub.node);
        const ext_node *on = ext_map_get(st->nodes, old);
        oldver = on ? on->version : 0;
    }
    pod_event_apply(st, ev, obj);
    pod_priv *after = uid ? ext_map_get(st->pods, uid) : NULL;
    ext_node *on = old[0] ? ext_map_get(st->nodes, old) : NULL;   /* looked up again: it may have been dropped */
    if (on && on->version != oldver) holdings_touch(st, on);
    /* a pod placed on another node was added to it, which changed it */
    if (after && after->pub.node && strcmp(after->pub.node, old)) holdings_touch(st, ext_map_get(st->nodes, after->pub.node));
}

/* One of the namespaces tessera's reservation pods live in (reservation.h: the MPS ones have their own). */
static bool rsv_ns(const ext_state *st, const char *ns) {
    return !strcmp(ns, st->cfg.reservation_ns) || !strcmp(ns, st->cfg.mps_reservation_ns);
}

static void pod_event_apply(ext_state *st, kube_event ev, const cJSON *obj) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const char *uid = obj_str(meta, "uid", NULL), *ns = obj_str(meta, "namespace", NULL);
    const char *name = obj_str(meta, "name", NULL);
    if (!uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN || !name) {
        kube_log(KUBE_LOG_WARN, "event=bad-object kind=Pod why=\"no metadata.uid/name\"");
        return;
    }
    if (!ns) ns = "default";
    pod_priv *pp = ext_map_get(st->pods, uid);
    if (ev == KUBE_DELETED) {
        if (pp) pod_remove(st, pp);
        if (rsv_ns(st, ns)) rsv_note(st, ns, name, meta, true);
        return;
    }
    const char *rlabel = obj_str(meta, "labels", EXT_RSV_LABEL);
    if (rlabel && !strcmp(rlabel, "true") && rsv_ns(st, ns)) {
        const char *rnode = obj_str(obj, "spec", "nodeName");   /* what it published is compared there */
        if (rsv_note(st, ns, name, meta, false) && rnode) holdings_touch(st, ext_map_get(st->nodes, rnode));
        /* A reservation pod (reservation.h) holds a physical GPU through the device plugin, but the logical
         * GPU it backs is accounted by its tenants' assignments: counting it too would charge the GPU twice. */
        if (pp) pod_remove(st, pp);
        return;
    }
    const char *phase = obj_str(obj, "status", "phase");
    if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
        if (pp) pod_remove(st, pp);   /* a finished pod's containers are gone: its GPUs are free */
        return;
    }
    model_request req;
    char err[256];
    /* a pod whose nvidia.com/gpu DRA serves holds nothing itself: the claim kube-scheduler made for it holds the
     * devices and is accounted as a claim (dra.h), once */
    if (model_request_from_pod(obj, &req, err, sizeof err) != 0 || !model_request_wants_gpu(&req) ||
        ext_dra_pod_extended(obj)) {
        if (pp && pp->pub.phase != EXT_POD_BINDING) pod_remove(st, pp);
        return;
    }
    const char *node = obj_str(obj, "spec", "nodeName");
    if (node && !node[0]) node = NULL;
    const char *ann = obj_str(meta, "annotations", EXT_ANN_ASSIGNMENT);
    if (!pp) {
        pp = calloc(1, sizeof *pp);
        if (!pp) return;
        snprintf(pp->pub.uid, sizeof pp->pub.uid, "%s", uid);
        if (!(pp->pub.ns = strdup(ns)) || !(pp->pub.name = strdup(name)) || ext_map_put(st->pods, pp->pub.uid, pp) != 0) {
            pod_free(pp);
            return;
        }
        pp->pub.phase = EXT_POD_PENDING;
    }
    ext_pod *p = &pp->pub;
    p->req = req;
    p->from_api = true;
    p->gen = st->gen[KUBE_POD];
    /* A bound pod whose assignment changed (the reservation controller moved it to another GPU) is
     * placed again from the new text. A bind being confirmed is not: its annotation is what it holds. */
    bool reapply = false;
    if (ann && (!pp->ann || strcmp(pp->ann, ann) != 0)) {
        reapply = p->phase == EXT_POD_BOUND && p->node && node && !strcmp(p->node, node);
        free(pp->ann);
        pp->ann = strdup(ann);
    }
    if (!node) {
        /* A pending pod we are binding, or whose binding the watch has not shown yet. */
        if (p->phase == EXT_POD_BINDING || p->phase == EXT_POD_ASSUMED) return;
        pod_unplace(st, pp);
        p->phase = EXT_POD_PENDING;
        return;
    }
    if (p->node && strcmp(p->node, node) == 0) {
        if (p->phase != EXT_POD_BOUND)
            kube_log(KUBE_LOG_DEBUG, "event=bind-confirmed pod=%s/%s node=%s", p->ns, p->name, node);
        p->phase = EXT_POD_BOUND;
        if (!p->holds || reapply) {   /* over-committed before, its node was unknown, or moved: try again */
            ext_node *n = ext_map_get(st->nodes, node);
            if (n && n->m && p->holds) model_release(n->m, p->uid);
            if (n) pod_apply(st, n, pp, NULL, relist_mode(st));
        }
        return;
    }
    if (p->node)
        kube_log(KUBE_LOG_WARN, "event=pod-moved pod=%s/%s from=%s to=%s", p->ns, p->name, p->node, node);
    pod_unplace(st, pp);
    p->phase = EXT_POD_BOUND;
    if (pod_place(st, pp, node, NULL) != 0) kube_log(KUBE_LOG_ERROR, "event=oom pod=%s/%s", p->ns, p->name);
}

/* ------------------------------------------------------------ events */

static void sweep(ext_state *st, kube_kind kind) {
    uint32_t g = st->gen[kind];
    if (kind == KUBE_NODE) {
        for (int i = st->nn - 1; i >= 0; i--) {
            ext_node *n = st->narr[i];
            if (n->m && n->gen != g) {
                kube_log(KUBE_LOG_INFO, "event=node-swept node=%s", n->name);
                node_delete(st, n);
                st->st.sweeps[kind]++;
            }
        }
        return;
    }
    size_t cap = 64, cnt = 0, it = 0;
    pod_priv **gone = malloc(cap * sizeof *gone), *pp;
    while ((pp = ext_map_next(st->pods, &it))) {
        if (pp->pub.gen == g) continue;
        if (pp->pub.phase == EXT_POD_BINDING || pp->pub.phase == EXT_POD_ASSUMED) {
            /* Our bind keeps holding (its POST may be newer than the list), but the API had no such pod when
             * it listed: if the assumption expires unconfirmed, the pod goes (found by the soak: it used to
             * fall back to PENDING and stay as a ghost until the next relist). */
            pp->pub.from_api = false;
            continue;
        }
        if (gone && cnt == cap) {
            pod_priv **gr = realloc(gone, 2 * cap * sizeof *gone);
            if (!gr) break;
            gone = gr;
            cap *= 2;
        }
        if (gone) gone[cnt++] = pp;
    }
    for (size_t i = 0; i < cnt; i++) {
        kube_log(KUBE_LOG_INFO, "event=pod-swept pod=%s/%s", gone[i]->pub.ns, gone[i]->pub.name);
        pod_remove(st, gone[i]);
        st->st.sweeps[kind]++;
    }
    free(gone);
}

void ext_state_apply(ext_state *st, kube_kind kind, kube_event ev, const cJSON *obj) {
    ext_state_on_event(st, kind, ev, obj);
}

void ext_state_on_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    ext_state *st = user;
    if (kind >= KUBE_RESOURCESLICE && kind < KUBE_NKINDS) {
        pthread_mutex_lock(&st->mu);
        ext_dra_event(st->dra, kind, ev, obj, dra_touch, st);
        pthread_mutex_unlock(&st->mu);
        return;
    }
    if (kind != KUBE_NODE && kind != KUBE_POD) return;
    pthread_mutex_lock(&st->mu);
    st->st.events[kind]++;
    switch (ev) {
    case KUBE_RELIST:
        st->gen[kind]++;
        st->st.relists[kind]++;
        st->relisting[kind] = true;
        if (kind == KUBE_POD) rsv_clear(st);   /* the list names every reservation pod again */
        kube_log(KUBE_LOG_INFO, "event=relist kind=%s", kind == KUBE_NODE ? "Node" : "Pod");
        break;
    case KUBE_SYNCED:
        sweep(st, kind);   /* first: what the list no longer names frees its GPUs before any guess */
        st->relisting[kind] = false;
        if (kind == KUBE_POD) derive_deferred(st);
        if (!st->synced[kind])
            kube_log(KUBE_LOG_INFO, "event=synced kind=%s", kind == KUBE_NODE ? "Node" : "Pod");
        st->synced[kind] = true;
        if (kind == KUBE_POD) holdings_touch_all(st);   /* after synced: holdings_touch waits for it */
        break;
    case KUBE_ADDED:
    case KUBE_MODIFIED:
    case KUBE_DELETED:
        if (!cJSON_IsObject(obj)) break;
        if (kind == KUBE_NODE) node_event(st, ev, obj);
        else pod_event(st, ev, obj);
        break;
    }
    pthread_mutex_unlock(&st->mu);
}

int ext_state_load_cluster(ext_state *st, const char *json, size_t len, char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *items = root;
    if (cJSON_IsObject(root)) items = cJSON_GetObjectItemCaseSensitive(root, "items");
    if (!cJSON_IsArray(items)) {
        snprintf(err, errlen, "%s", root ? "cluster file must be a JSON array of Node objects or a NodeList"
                                         : "cluster file is not valid JSON");
        cJSON_Delete(root);
        return -1;
    }
    int n = cJSON_GetArraySize(items), i = 0;
    model_node **ms = calloc((size_t)(n ? n : 1), sizeof *ms);
    if (!ms) {
        snprintf(err, errlen, "out of memory");
        cJSON_Delete(root);
        return -1;
    }
    const cJSON *it;
    char why[256];
    cJSON_ArrayForEach(it, items) {
        ms[i] = model_node_from_json(it, st->cfg.cat, why, sizeof why);
        if (!ms[i]) {
            snprintf(err, errlen, "cluster file item %d: %s", i, why);
            for (int k = 0; k < i; k++) model_node_free(ms[k]);
            free(ms);
            cJSON_Delete(root);
            return -1;
        }
        i++;
    }
    cJSON_Delete(root);
    pthread_mutex_lock(&st->mu);
    st->gen[KUBE_NODE]++;   /* a relist of nodes: what the file does not name is dropped */
    for (int k = 0; k < n; k++) node_install_base(st, ms[k]);
    sweep(st, KUBE_NODE);
    st->synced[KUBE_NODE] = st->synced[KUBE_POD] = true;
    pthread_mutex_unlock(&st->mu);
    free(ms);
    return 0;
}

/* ------------------------------------------------------------ bind */

int ext_state_reserve(ext_state *st, const char *uid, const char *ns, const char *name, const char *node,
                      const model_request *req, const model_assignment *a, char *err, size_t errlen) {
    ext_node *n = ext_map_get(st->nodes, node);
    if (!n || !n->m) {
        snprintf(err, errlen, "node %s is not known to tessera", node);
        return -1;
    }
    pod_priv *pp = ext_map_get(st->pods, uid);
    if (pp && pp->pub.node) {
        snprintf(err, errlen, "pod %s/%s already holds GPUs on node %s", pp->pub.ns, pp->pub.name, pp->pub.node);
        return -1;
    }
    bool created = false;
    if (!pp) {
        pp = calloc(1, sizeof *pp);
        if (!pp) goto oom;
        snprintf(pp->pub.uid, sizeof pp->pub.uid, "%s", uid);
        if (!(pp->pub.ns = strdup(ns)) || !(pp->pub.name = strdup(name)) || ext_map_put(st->pods, pp->pub.uid, pp) != 0) {
            pod_free(pp);
            goto oom;
        }
        pp->pub.gen = st->gen[KUBE_POD];
        created = true;
    }
    if (model_assign(n->m, uid, a, err, errlen) != 0) goto undo;
    if (!(pp->pub.node = strdup(node)) || node_add_pod(st, n, &pp->pub) != 0) {
        free(pp->pub.node);
        pp->pub.node = NULL;
        model_release(n->m, uid);
        snprintf(err, errlen, "out of memory");
        goto undo;
    }
    pp->pub.req = *req;
    pp->pub.a = *a;
    pp->pub.holds = true;
    pp->pub.derived = pp->pub.overcommitted = false;
    pp->pub.phase = EXT_POD_BINDING;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
undo:
    if (created) {
        ext_map_del(st->pods, pp->pub.uid);
        pod_free(pp);
    }
    return -1;
}

int ext_state_reassign(ext_state *st, const char *uid, const char *ann, char *err, size_t errlen) {
    pod_priv *pp = ext_map_get(st->pods, uid);
    ext_node *n = pp && pp->pub.node ? ext_map_get(st->nodes, pp->pub.node) : NULL;
    if (!pp || pp->pub.phase != EXT_POD_BOUND || !n || !n->m) {
        snprintf(err, errlen, "pod %s is not bound on a known node", uid);
        return -1;
    }
    model_assignment a;
    if (ext_ann_decode(n->m, ann, &a, err, errlen) != 0) return -1;
    model_assignment_set_sharing(&a, &pp->pub.req);
    char *text = strdup(ann);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    bool held = pp->pub.holds;
    if (held) model_release(n->m, uid);
    if (model_assign(n->m, uid, &a, err, errlen) != 0) {
        if (held && model_assign(n->m, uid, &pp->pub.a, NULL, 0) != 0) pp->pub.holds = false;
        free(text);
        return -1;
    }
    pp->pub.a = a;
    pp->pub.holds = true;
    pp->pub.derived = pp->pub.overcommitted = false;
    free(pp->ann);
    pp->ann = text;
    node_touch(st, n);
    return 0;
}

void ext_state_bind_done(ext_state *st, const char *uid, bool ok) {
    pod_priv *pp = ext_map_get(st->pods, uid);
    if (!pp || pp->pub.phase != EXT_POD_BINDING) return;   /* the watch got there first */
    if (ok) {
        if (st->cfg.standalone) {
            pp->pub.phase = EXT_POD_BOUND;
        } else {
            pp->pub.phase = EXT_POD_ASSUMED;
            pp->pub.expires_ms = ext_now_ms() + st->cfg.assume_ttl_ms;
            st->maybe_assumed = true;
        }
        return;
    }
    pod_unplace(st, pp);
    if (pp->pub.from_api) pp->pub.phase = EXT_POD_PENDING;
    else pod_remove(st, pp);
}

int ext_state_expire(ext_state *st, int64_t now_ms) {
    if (!st->maybe_assumed) return 0;   /* the common case: skip the walk over every pod */
    size_t it = 0, cnt = 0, cap = 0, live = 0;
    pod_priv *pp, **gone = NULL;
    /* Collect first: removing while walking the table would break the walk. */
    while ((pp = ext_map_next(st->pods, &it))) {
        if (pp->pub.phase != EXT_POD_ASSUMED) continue;
        if (pp->pub.expires_ms > now_ms) { live++; continue; }
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 16;
            pod_priv **g = realloc(gone, nc * sizeof *g);
            if (!g) break;
            gone = g;
            cap = nc;
        }
        gone[cnt++] = pp;
    }
    for (size_t i = 0; i < cnt; i++) {
        pod_priv *v = gone[i];
        kube_log(KUBE_LOG_WARN, "event=assumption-expired pod=%s/%s node=%s", v->pub.ns, v->pub.name,
                 v->pub.node ? v->pub.node : "-");
        pod_unplace(st, v);
        if (v->pub.from_api) v->pub.phase = EXT_POD_PENDING;
        else pod_remove(st, v);
        st->st.expired++;
    }
    free(gone);
    if (live == 0) st->maybe_assumed = false;
    return (int)cnt;
}
