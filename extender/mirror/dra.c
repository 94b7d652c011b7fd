/* dra.c -- the DRA object cache of dra.h: ResourceSlices by name, ResourceClaims by namespace/name,
 * DeviceClasses by name, each with a relist mark; and two indexes so that rebuilding one node costs what that
 * node has, not what the cluster has: per node its slices and the claims holding devices there, per pool
 * (driver/pool) the node its slices name (GPU pools are node-local: the driver names them after the node).
 */
#include "extender/mirror/dra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/log.h"
#include "extender/map.h"
#include "model/fit.h"
#include "model/json.h"

#define NDRA 3   /* the DRA kinds, from EXT_KUBE_RESOURCESLICE on */

typedef struct dslice {
    char key[256];                    /* metadata.name */
    model_dra_slice s;
    uint32_t gen;
} dslice;

typedef struct dclaim {
    char key[400];                    /* namespace/name */
    char uid[MODEL_UID_LEN];          /* the model's allocation id: "claim:<metadata.uid>" */
    cJSON *spec;
    int nres;                         /* -1: not allocated */
    model_dra_result res[MODEL_DRA_MAX_RESULTS];
    int nreserved;                    /* status.reservedFor entries (pods sharing it) */
    char reserved[8][MODEL_UID_LEN];  /* the first of their UIDs */
    char node[256];                   /* where its devices are ("" unknown or none) */
    uint32_t gen;
} dclaim;

typedef struct dclass {
    char key[256];
    cJSON *obj;
    uint32_t gen;
} dclass;

/* Per node: its slices, and the claims whose devices are there (both borrowed from the maps above). */
typedef struct dnode {
    char key[256];
    dslice **sl;
    int nsl, capsl;
    dclaim **cl;
    int ncl, capcl;
} dnode;

/* Per pool ("driver/pool"): the node its slices name, and how many slices it has. */
typedef struct dpool {
    char key[400];
    char node[256];
    int refs;
} dpool;

struct ext_dra {
    ext_map *slices, *claims, *classes;
    ext_map *nodes, *pools;    /* the indexes */
    int unlocated;             /* allocated claims whose devices are on no known node yet */
    uint32_t gen[NDRA];
    bool synced[NDRA];
};

ext_dra *ext_dra_new(void) {
    ext_dra *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->slices = ext_map_new();
    d->claims = ext_map_new();
    d->classes = ext_map_new();
    d->nodes = ext_map_new();
    d->pools = ext_map_new();
    if (!d->slices || !d->claims || !d->classes || !d->nodes || !d->pools) {
        ext_dra_free(d);
        return NULL;
    }
    return d;
}

static void slice_free(dslice *s) {
    if (s) model_dra_slice_clear(&s->s);
    free(s);
}
static void claim_free(dclaim *c) {
    if (c) cJSON_Delete(c->spec);
    free(c);
}
static void class_free(dclass *c) {
    if (c) cJSON_Delete(c->obj);
    free(c);
}

void ext_dra_free(ext_dra *d) {
    if (!d) return;
    size_t it = 0;
    void *v;
    while (d->slices && (v = ext_map_next(d->slices, &it))) slice_free(v);
    it = 0;
    while (d->claims && (v = ext_map_next(d->claims, &it))) claim_free(v);
    it = 0;
    while (d->classes && (v = ext_map_next(d->classes, &it))) class_free(v);
    it = 0;
    while (d->nodes && (v = ext_map_next(d->nodes, &it))) {
        free(((dnode *)v)->sl);
        free(((dnode *)v)->cl);
        free(v);
    }
    it = 0;
    while (d->pools && (v = ext_map_next(d->pools, &it))) free(v);
    ext_map_free(d->nodes);
    ext_map_free(d->pools);
    ext_map_free(d->slices);
    ext_map_free(d->claims);
    ext_map_free(d->classes);
    free(d);
}

bool ext_dra_synced(const ext_dra *d) { return d->synced[0] && d->synced[1] && d->synced[2]; }


/* ------------------------------------------------------------ indexes and pools ---- */

static dnode *dnode_find(const ext_dra *d, const char *node) {
    return node && node[0] ? ext_map_get(d->nodes, node) : NULL;
}

static dnode *dnode_get(ext_dra *d, const char *node, bool create) {
    if (!node || !node[0]) return NULL;
    dnode *n = ext_map_get(d->nodes, node);
    if (n || !create || strlen(node) >= sizeof n->key) return n;
    if (!(n = calloc(1, sizeof *n))) return NULL;
    snprintf(n->key, sizeof n->key, "%s", node);
    if (ext_map_put(d->nodes, n->key, n) != 0) {
        free(n);
        return NULL;
    }
    return n;
}

static void dnode_maybe_drop(ext_dra *d, dnode *n) {
    if (!n || n->nsl || n->ncl) return;
    ext_map_del(d->nodes, n->key);
    free(n->sl);
    free(n->cl);
    free(n);
}

static bool ptr_add(void ***arr, int *n, int *cap, void *p) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        void **g = realloc(*arr, (size_t)c * sizeof *g);
        if (!g) return false;
        *arr = g;
        *cap = c;
    }
    (*arr)[(*n)++] = p;
    return true;
}

static void ptr_del(void **arr, int *n, const void *p) {
    for (int i = 0; i < *n; i++)
        if (arr[i] == p) {
            arr[i] = arr[--*n];
            return;
        }
}

static void pool_key(char *buf, size_t len, const char *driver, const char *pool) {
    snprintf(buf, len, "%.120s/%.256s", driver, pool);
}

static void slice_index(ext_dra *d, dslice *s) {
    dnode *n = dnode_get(d, s->s.node, true);
    if (n) ptr_add((void ***)&n->sl, &n->nsl, &n->capsl, s);
    char k[400];
    pool_key(k, sizeof k, s->s.driver, s->s.pool);
    dpool *p = ext_map_get(d->pools, k);
    if (!p && (p = calloc(1, sizeof *p)) != NULL) {
        snprintf(p->key, sizeof p->key, "%s", k);
        if (ext_map_put(d->pools, p->key, p) != 0) {
            free(p);
            p = NULL;
        }
    }
    if (p) {
        p->refs++;
        if (s->s.node[0]) snprintf(p->node, sizeof p->node, "%s", s->s.node);
    }
}

static void slice_unindex(ext_dra *d, dslice *s) {
    dnode *n = dnode_get(d, s->s.node, false);
    if (n) {
        ptr_del((void **)n->sl, &n->nsl, s);
        dnode_maybe_drop(d, n);
    }
    char k[400];
    pool_key(k, sizeof k, s->s.driver, s->s.pool);
    dpool *p = ext_map_get(d->pools, k);
    if (p && --p->refs <= 0) {
        ext_map_del(d->pools, p->key);
        free(p);
    }
}

static void claim_index(ext_dra *d, dclaim *c) {
    dnode *n = dnode_get(d, c->node, true);
    if (n) ptr_add((void ***)&n->cl, &n->ncl, &n->capcl, c);
    else if (c->nres > 0 && !c->node[0]) d->unlocated++;
}

static void claim_unindex(ext_dra *d, dclaim *c) {
    dnode *n = dnode_get(d, c->node, false);
    if (n) {
        ptr_del((void **)n->cl, &n->ncl, c);
        dnode_maybe_drop(d, n);
    } else if (c->nres > 0 && !c->node[0]) {
        d->unlocated--;
    }
}

/* The node's slices as the model's functions take them (malloc'd, caller frees; NULL for none). */
static const model_dra_slice **slice_ptrs(const dnode *n) {
    if (!n || n->nsl == 0) return NULL;
    const model_dra_slice **p = malloc((size_t)n->nsl * sizeof *p);
    for (int i = 0; p && i < n->nsl; i++) p[i] = &n->sl[i]->s;
    return p;
}

/* A device of the current generation of (driver, pool) (model_dra_find_device), and the node its slice
 * names. */
static const model_dra_device *device_find(const ext_dra *d, const char *driver, const char *pool, const char *name,
                                           const char **node) {
    char k[400];
    pool_key(k, sizeof k, driver, pool);
    const dpool *p = ext_map_get(d->pools, k);
    const dnode *n = p ? dnode_find(d, p->node) : NULL;
    const model_dra_slice **sl = slice_ptrs(n);
    const model_dra_device *dev = sl ? model_dra_find_device(sl, n->nsl, driver, pool, name) : NULL;
    free(sl);
    if (dev && node) *node = n->key;
    return dev;
}

static void claim_locate(const ext_dra *d, dclaim *c) {
    c->node[0] = 0;
    for (int i = 0; i < c->nres; i++) {
        const char *node = NULL;
        if (c->res[i].admin || !device_find(d, c->res[i].driver, c->res[i].pool, c->res[i].device, &node)) continue;
        if (node && node[0]) {
            snprintf(c->node, sizeof c->node, "%s", node);
            return;
        }
    }
}

/* ------------------------------------------------------------ events ---- */

static void touch_node(ext_dra_touch_fn touch, void *user, const char *node) {
    if (touch && node && node[0]) touch(user, node);
}

/* Forget a slice or a claim: out of its map and the indexes, its node told, freed. */
static void slice_drop(ext_dra *d, dslice *s, ext_dra_touch_fn touch, void *user) {
    ext_map_del(d->slices, s->key);
    slice_unindex(d, s);
    touch_node(touch, user, s->s.node);
    slice_free(s);
}

static void claim_drop(ext_dra *d, dclaim *c, ext_dra_touch_fn touch, void *user) {
    ext_map_del(d->claims, c->key);
    claim_unindex(d, c);
    touch_node(touch, user, c->node);
    claim_free(c);
}

static void slice_event(ext_dra *d, ext_kube_event ev, const cJSON *obj, ext_dra_touch_fn touch, void *user) {
    const char *name = model_json_str(model_json_get(obj, "metadata"), "name");
    if (!name || !name[0] || strlen(name) >= sizeof((dslice *)0)->key) {
        ext_log(EXT_LOG_WARN, "event=bad-object kind=ResourceSlice why=\"no usable metadata.name\"");
        return;
    }
    dslice *old = ext_map_get(d->slices, name);
    if (ev == EXT_KUBE_DELETED) {
        if (old) slice_drop(d, old, touch, user);
        return;
    }
    char oldnode[256] = "";
    if (old) snprintf(oldnode, sizeof oldnode, "%s", old->s.node);
    dslice *s = calloc(1, sizeof *s);
    char err[256];
    if (!s || model_dra_slice_parse(obj, &s->s, err, sizeof err) != 0) {
        if (s) ext_log(EXT_LOG_WARN, "event=bad-object kind=ResourceSlice name=%s why=\"%s\"", name, err);
        free(s);
        return;
    }
    snprintf(s->key, sizeof s->key, "%s", name);
    s->gen = d->gen[0];
    if (old) slice_unindex(d, old);
    if (ext_map_put(d->slices, s->key, s) != 0) {   /* out of memory; only a new key can fail (map.h) */
        slice_free(s);
        return;
    }
    slice_index(d, s);
    slice_free(old);
    touch_node(touch, user, oldnode);
    if (strcmp(oldnode, s->s.node) != 0) touch_node(touch, user, s->s.node);
    /* claims on this pool may only now be placeable on a node */
    size_t it = 0;
    dclaim *c;
    while (d->unlocated > 0 && (c = ext_map_next(d->claims, &it)))
        if (!c->node[0] && c->nres > 0) {
            claim_locate(d, c);
            if (!c->node[0]) continue;
            d->unlocated--;
            claim_index(d, c);
            touch_node(touch, user, c->node);
        }
}

static void claim_event(ext_dra *d, ext_kube_event ev, const cJSON *obj, ext_dra_touch_fn touch, void *user) {
    const cJSON *meta = model_json_get(obj, "metadata");
    const char *ns = model_json_str(meta, "namespace"), *name = model_json_str(meta, "name");
    const char *uid = model_json_str(meta, "uid");
    char key[400];
    if (!name || !name[0] || snprintf(key, sizeof key, "%s/%s", ns ? ns : "default", name) >= (int)sizeof key) {
        ext_log(EXT_LOG_WARN, "event=bad-object kind=ResourceClaim why=\"no usable metadata.name\"");
        return;
    }
    dclaim *old = ext_map_get(d->claims, key);
    if (ev == EXT_KUBE_DELETED) {
        if (old) claim_drop(d, old, touch, user);
        return;
    }
    char oldnode[256] = "";
    if (old) snprintf(oldnode, sizeof oldnode, "%s", old->node);
    dclaim *c = calloc(1, sizeof *c);
    if (!c) return;
    snprintf(c->key, sizeof c->key, "%s", key);
    snprintf(c->uid, sizeof c->uid, "claim:%.56s", uid && uid[0] ? uid : key);
    c->spec = cJSON_Duplicate(model_json_get(obj, "spec"), 1);
    c->nres = model_dra_claim_results(obj, c->res, MODEL_DRA_MAX_RESULTS);
    const cJSON *rf;
    cJSON_ArrayForEach(rf, model_json_get(model_json_get(obj, "status"), "reservedFor")) {
        const char *u = model_json_str(rf, "uid");
        if (u && c->nreserved < 8) snprintf(c->reserved[c->nreserved], MODEL_UID_LEN, "%.63s", u);
        c->nreserved++;
    }
    c->gen = d->gen[1];
    claim_locate(d, c);
    if (old) claim_unindex(d, old);
    if (ext_map_put(d->claims, c->key, c) != 0) {   /* out of memory; only a new key can fail (map.h) */
        claim_free(c);
        return;
    }
    claim_index(d, c);
    /* an unchanged allocation changes no node (reservedFor churns as pods come and go) */
    bool same = old && old->nres == c->nres && !strcmp(oldnode, c->node) &&
                (c->nres <= 0 || !memcmp(old->res, c->res, (size_t)c->nres * sizeof c->res[0])) && !strcmp(old->uid, c->uid);
    claim_free(old);
    if (same) return;
    touch_node(touch, user, oldnode);
    if (strcmp(oldnode, c->node) != 0) touch_node(touch, user, c->node);
}

static void class_event(ext_dra *d, ext_kube_event ev, const cJSON *obj) {
    const char *name = model_json_str(model_json_get(obj, "metadata"), "name");
    if (!name || !name[0] || strlen(name) >= sizeof((dclass *)0)->key) return;
    dclass *old = ext_map_get(d->classes, name);
    if (ev == EXT_KUBE_DELETED) {
        if (old) {
            ext_map_del(d->classes, name);
            class_free(old);
        }
        return;
    }
    dclass *c = calloc(1, sizeof *c);
    if (!c) return;
    snprintf(c->key, sizeof c->key, "%s", name);
    c->obj = cJSON_Duplicate(obj, 1);
    c->gen = d->gen[2];
    if (!c->obj || ext_map_put(d->classes, c->key, c) != 0) {
        class_free(c);
        return;
    }
    class_free(old);
}

/* Drop what the relist of kind i did not mention. */
static void sweep(ext_dra *d, int i, ext_dra_touch_fn touch, void *user) {
    ext_map *m = i == 0 ? d->slices : i == 1 ? d->claims : d->classes;
    for (;;) {   /* one at a time: the map must not change during a walk */
        size_t it = 0;
        void *v, *gone = NULL;
        while (!gone && (v = ext_map_next(m, &it))) {
            uint32_t g = i == 0 ? ((dslice *)v)->gen : i == 1 ? ((dclaim *)v)->gen : ((dclass *)v)->gen;
            if (g != d->gen[i]) gone = v;
        }
        if (!gone) return;
        if (i == 0) {
            slice_drop(d, gone, touch, user);
        } else if (i == 1) {
            claim_drop(d, gone, touch, user);
        } else {
            dclass *c = gone;
            ext_map_del(m, c->key);
            class_free(c);
        }
    }
}

void ext_dra_event(ext_dra *d, ext_kube_kind kind, ext_kube_event ev, const cJSON *obj, ext_dra_touch_fn touch,
                   void *user) {
    int i = (int)kind - EXT_KUBE_RESOURCESLICE;
    if (!d || i < 0 || i >= NDRA) return;
    switch (ev) {
    case EXT_KUBE_RELIST:
        d->gen[i]++;
        return;
    case EXT_KUBE_SYNCED:
        sweep(d, i, touch, user);
        if (!d->synced[i]) ext_log(EXT_LOG_INFO, "event=synced kind=%s", ext_kube_kind_name(kind));
        d->synced[i] = true;
        return;
    default:
        break;
    }
    if (!cJSON_IsObject(obj)) return;
    if (i == 0) slice_event(d, ev, obj, touch, user);
    else if (i == 1) claim_event(d, ev, obj, touch, user);
    else class_event(d, ev, obj);
}

/* ------------------------------------------------------------ node models ---- */

bool ext_dra_node_has_slices(const ext_dra *d, const char *node) {
    const dnode *dn = d ? dnode_find(d, node) : NULL;
    return dn && dn->nsl > 0;
}

void ext_dra_merge(const ext_dra *d, model_node *m, const model_catalog *cat) {
    const dnode *dn = d && m ? dnode_find(d, m->name) : NULL;
    const model_dra_slice **sl = slice_ptrs(dn);
    if (sl && model_dra_merge_slices(m, sl, dn->nsl, cat) < 0)
        ext_log(EXT_LOG_WARN, "event=dra-merge-failed node=%s why=\"out of memory\"", m->name);
    free(sl);
}

typedef struct claim_find {
    const ext_dra *d;
    const char *node;
} claim_find;

static const model_dra_device *claim_device(void *user, const model_dra_result *r, bool *on_node) {
    const claim_find *f = user;
    const char *node = NULL;
    const model_dra_device *dev = device_find(f->d, r->driver, r->pool, r->device, &node);
    *on_node = node && !strcmp(node, f->node);
    return dev;
}

int ext_dra_apply_claims(const ext_dra *d, model_node *m) {
    const dnode *dn = d && m && m->has_dra ? dnode_find(d, m->name) : NULL;
    claim_find f = {d, m ? m->name : ""};
    int applied = 0;
    for (int k = 0; dn && k < dn->ncl; k++) {
        const dclaim *c = dn->cl[k];
        if (c->nres <= 0) continue;
        char err[256] = "";
        int rc = model_dra_account_claim(m, c->uid, c->res, c->nres, claim_device, &f, err, sizeof err);
        if (rc >= 0) {
            applied += rc;
            continue;
        }
        ext_log(EXT_LOG_WARN, "event=claim-unaccounted claim=%s node=%s why=\"%s\"", c->key, m->name, err);
        if (!m->dra_note[0])
            snprintf(m->dra_note, sizeof m->dra_note, "claim %.100s could not be accounted: %.100s", c->key, err);
    }
    return applied;
}

/* ------------------------------------------------------------ pods ---- */

bool ext_dra_pod_has_claims(const cJSON *pod) {
    return cJSON_GetArraySize(model_json_get(model_json_get(pod, "spec"), "resourceClaims")) > 0;
}

/* The ResourceClaim name behind one entry of pod.spec.resourceClaims, or NULL (a template's claim not made yet). */
static const char *claim_name(const cJSON *pod, const cJSON *rc) {
    const char *direct = model_json_str(rc, "resourceClaimName");
    if (direct) return direct;
    const char *entry = model_json_str(rc, "name");
    const cJSON *st;
    cJSON_ArrayForEach(st, model_json_get(model_json_get(pod, "status"), "resourceClaimStatuses")) {
        const char *n = model_json_str(st, "name");
        if (entry && !strcmp(n ? n : "", entry)) return model_json_str(st, "resourceClaimName");
    }
    return NULL;
}

static const cJSON *class_fn(void *user, const char *name) {
    const dclass *c = ext_map_get(((const ext_dra *)user)->classes, name);
    return c ? c->obj : NULL;
}

model_dra_verdict ext_dra_pod_request(const ext_dra *d, const cJSON *pod, model_request *out, char *why,
                                      size_t whylen) {
    memset(out, 0, sizeof *out);
    if (why && whylen) why[0] = 0;
    const char *ns = model_json_str(model_json_get(pod, "metadata"), "namespace");
    if (!ns) ns = "default";
    model_dra_verdict v = MODEL_DRA_NOTHING;
    const cJSON *rc;
    cJSON_ArrayForEach(rc, model_json_get(model_json_get(pod, "spec"), "resourceClaims")) {
        const char *cn = claim_name(pod, rc);
        if (!cn) {
            const char *tn = model_json_str(rc, "resourceClaimTemplateName");
            snprintf(why, whylen, "the claim of template %s is not created yet", tn ? tn : "?");
            return MODEL_DRA_UNJUDGED;
        }
        char key[400];
        snprintf(key, sizeof key, "%s/%s", ns, cn);
        const dclaim *c = d ? ext_map_get(d->claims, key) : NULL;
        if (!c) {
            snprintf(why, whylen, "claim %s is not in tessera's cache yet", key);
            return MODEL_DRA_UNJUDGED;
        }
        if (c->nres >= 0) continue;   /* allocated already (a shared claim): it asks for nothing new */
        model_dra_verdict one = model_dra_request(c->spec, class_fn, (void *)d, out, why, whylen);
        if (one == MODEL_DRA_UNJUDGED) return one;
        if (one == MODEL_DRA_JUDGED) v = one;
    }
    return v;
}

void ext_dra_allocation_for(const ext_dra *d, const char *ns, const char *pod_uid, char *buf, size_t len) {
    size_t off = 0, pre = strlen(ns) + 1;
    buf[0] = 0;
    size_t it = 0;
    dclaim *c;
    while (d && pod_uid && (c = ext_map_next(d->claims, &it))) {
        if (c->nres <= 0 || strncmp(c->key, ns, pre - 1) != 0 || c->key[pre - 1] != '/') continue;
        bool mine = false;
        for (int i = 0; i < c->nreserved && i < 8; i++) mine |= !strcmp(c->reserved[i], pod_uid);
        if (!mine) continue;
        for (int i = 0; i < c->nres && off + 1 < len; i++) {
            int w = snprintf(buf + off, len - off, "%s%s:%s/%s", off ? "," : "", c->key + pre, c->res[i].pool,
                             c->res[i].device);
            if (w < 0 || (size_t)w >= len - off) {
                buf[off] = 0;   /* cut at the last whole entry */
                return;
            }
            off += (size_t)w;
        }
    }
}

/* ------------------------------------------------------------ debug ---- */

cJSON *ext_dra_debug(const ext_dra *d) {
    cJSON *o = cJSON_CreateObject();
    if (!d) return o;
    cJSON_AddBoolToObject(o, "synced", ext_dra_synced(d));
    cJSON *sl = cJSON_AddArrayToObject(o, "resourceSlices");
    size_t it = 0;
    dslice *s;
    while ((s = ext_map_next(d->slices, &it))) {
        int have = 0, want = 0;
        const dnode *dn = dnode_find(d, s->s.node);
        const model_dra_slice **ptrs = slice_ptrs(dn);
        int64_t g = ptrs ? model_dra_pool_current(ptrs, dn->nsl, s->s.driver, s->s.pool, &have, &want) : INT64_MIN;
        free(ptrs);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->key);
        cJSON_AddStringToObject(j, "driver", s->s.driver);
        cJSON_AddStringToObject(j, "pool", s->s.pool);
        cJSON_AddStringToObject(j, "node", s->s.node);
        cJSON_AddNumberToObject(j, "generation", (double)s->s.generation);
        cJSON_AddBoolToObject(j, "current", g == s->s.generation);
        cJSON_AddBoolToObject(j, "poolComplete", have >= want);
        cJSON_AddNumberToObject(j, "devices", s->s.ndev);
        cJSON_AddItemToArray(sl, j);
    }
    cJSON *cl = cJSON_AddArrayToObject(o, "resourceClaims");
    it = 0;
    dclaim *c;
    while ((c = ext_map_next(d->claims, &it))) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "claim", c->key);
        cJSON_AddBoolToObject(j, "allocated", c->nres >= 0);
        cJSON_AddStringToObject(j, "node", c->node);
        cJSON_AddNumberToObject(j, "reservedFor", c->nreserved);
        cJSON *devs = cJSON_AddArrayToObject(j, "devices");
        for (int i = 0; i < c->nres; i++) {
            char b[512];
            snprintf(b, sizeof b, "%s/%s/%s%s", c->res[i].driver, c->res[i].pool, c->res[i].device,
                     c->res[i].admin ? " (admin access: holds nothing)" : "");
            cJSON_AddItemToArray(devs, cJSON_CreateString(b));
        }
        model_request r = {0};
        char why[256];
        model_dra_verdict v = model_dra_request(c->spec, class_fn, (void *)d, &r, why, sizeof why);
        char rb[160];
        model_request_format(&r, rb, sizeof rb);
        cJSON_AddStringToObject(j, "asks", v == MODEL_DRA_JUDGED ? rb : v == MODEL_DRA_NOTHING ? "nothing tessera accounts" : "");
        if (v == MODEL_DRA_UNJUDGED) cJSON_AddStringToObject(j, "notJudged", why);
        cJSON_AddItemToArray(cl, j);
    }
    cJSON *cs = cJSON_AddArrayToObject(o, "deviceClasses");
    it = 0;
    dclass *k;
    while ((k = ext_map_next(d->classes, &it))) cJSON_AddItemToArray(cs, cJSON_CreateString(k->key));
    return o;
}
