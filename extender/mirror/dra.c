/* dra.c -- the DRA object cache of dra.h: ResourceSlices by name, ResourceClaims by namespace/name,
 * DeviceClasses by name, each with a relist mark; and two indexes so that rebuilding one node costs what that
 * node has, not what the cluster has: per node its slices and the claims holding devices there, per pool
 * (driver/pool) the node its slices name (GPU pools are node-local: the driver names them after the node).
 */
#include "extender/mirror/dra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/log.h"
#include "kube/strbuf.h"
#include "extender/base/map.h"
#include "model/fit.h"
#include "model/json.h"

#define NDRA 3   /* the DRA kinds, from KUBE_RESOURCESLICE on */

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
    char (*reserved)[MODEL_UID_LEN];  /* their UIDs (malloc'd; the API allows 256) */
    bool extended;                    /* made by kube-scheduler for a pod's extended resources (annotation
                                       * resource.kubernetes.io/extended-resource-claim: "true") */
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

typedef struct dnote dnote;
static void note_free(dnote *n);

struct ext_dra {
    ext_map *slices, *claims, *classes;
    ext_map *nodes, *pools;    /* the indexes */
    ext_map *notes;            /* pod uid -> the claims its bind records (dnote), the last EXT_DRA_NOTES */
    dnote *ring[EXT_DRA_NOTES];
    int ring_next;
    bool xok;                  /* a DeviceClass maps nvidia.com/gpu and tessera judges it: xbase is one device of it */
    model_request xbase;       /* refreshed whenever a DeviceClass changes (extended_refresh) */
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
    d->notes = ext_map_new();
    if (!d->slices || !d->claims || !d->classes || !d->nodes || !d->pools || !d->notes) {
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
    if (c) {
        cJSON_Delete(c->spec);
        free(c->reserved);
    }
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
    it = 0;
    while (d->notes && (v = ext_map_next(d->notes, &it))) note_free(v);
    ext_map_free(d->notes);
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

static void slice_event(ext_dra *d, kube_event ev, const cJSON *obj, ext_dra_touch_fn touch, void *user) {
    const char *name = model_json_str(model_json_get(obj, "metadata"), "name");
    if (!name || !name[0] || strlen(name) >= sizeof((dslice *)0)->key) {
        kube_log(KUBE_LOG_WARN, "event=bad-object kind=ResourceSlice why=\"no usable metadata.name\"");
        return;
    }
    dslice *old = ext_map_get(d->slices, name);
    if (ev == KUBE_DELETED) {
        if (old) slice_drop(d, old, touch, user);
        return;
    }
    char oldnode[256] = "";
    if (old) snprintf(oldnode, sizeof oldnode, "%s", old->s.node);
    dslice *s = calloc(1, sizeof *s);
    char err[256];
    if (!s || model_dra_slice_parse(obj, &s->s, err, sizeof err) != 0) {
        if (s) kube_log(KUBE_LOG_WARN, "event=bad-object kind=ResourceSlice name=%s why=\"%s\"", name, err);
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

static void claim_event(ext_dra *d, kube_event ev, const cJSON *obj, ext_dra_touch_fn touch, void *user) {
    const cJSON *meta = model_json_get(obj, "metadata");
    const char *ns = model_json_str(meta, "namespace"), *name = model_json_str(meta, "name");
    const char *uid = model_json_str(meta, "uid");
    char key[400];
    if (!name || !name[0] || snprintf(key, sizeof key, "%s/%s", ns ? ns : "default", name) >= (int)sizeof key) {
        kube_log(KUBE_LOG_WARN, "event=bad-object kind=ResourceClaim why=\"no usable metadata.name\"");
        return;
    }
    dclaim *old = ext_map_get(d->claims, key);
    if (ev == KUBE_DELETED) {
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
    const cJSON *rf, *rlist = model_json_get(model_json_get(obj, "status"), "reservedFor");
    int nrf = cJSON_IsArray(rlist) ? cJSON_GetArraySize(rlist) : 0;
    if (nrf > 0 && !(c->reserved = calloc((size_t)nrf, sizeof *c->reserved))) {
        claim_free(c);
        return;
    }
    cJSON_ArrayForEach(rf, rlist) {
        const char *u = model_json_str(rf, "uid");
        if (u && c->nreserved < nrf) snprintf(c->reserved[c->nreserved++], MODEL_UID_LEN, "%.63s", u);
    }
    const char *xa = model_json_str(model_json_get(meta, "annotations"), EXT_DRA_EXTENDED_ANNOTATION);
    c->extended = xa && !strcmp(xa, "true");
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

static void class_event(ext_dra *d, kube_event ev, const cJSON *obj) {
    const char *name = model_json_str(model_json_get(obj, "metadata"), "name");
    if (!name || !name[0] || strlen(name) >= sizeof((dclass *)0)->key) return;
    dclass *old = ext_map_get(d->classes, name);
    if (ev == KUBE_DELETED) {
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

static void extended_refresh(ext_dra *d);

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

void ext_dra_event(ext_dra *d, kube_kind kind, kube_event ev, const cJSON *obj, ext_dra_touch_fn touch,
                   void *user) {
    int i = (int)kind - KUBE_RESOURCESLICE;
    if (!d || i < 0 || i >= NDRA) return;
    switch (ev) {
    case KUBE_RELIST:
        d->gen[i]++;
        return;
    case KUBE_SYNCED:
        sweep(d, i, touch, user);
        if (i == 2) extended_refresh(d);
        if (!d->synced[i]) kube_log(KUBE_LOG_INFO, "event=synced kind=%s", kube_kind_name(kind));
        d->synced[i] = true;
        return;
    default:
        break;
    }
    if (!cJSON_IsObject(obj)) return;
    if (i == 0) slice_event(d, ev, obj, touch, user);
    else if (i == 1) claim_event(d, ev, obj, touch, user);
    else {
        class_event(d, ev, obj);
        extended_refresh(d);
    }
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
        kube_log(KUBE_LOG_WARN, "event=dra-merge-failed node=%s why=\"out of memory\"", m->name);
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
            if (rc == 1 && err[0])
                kube_log(KUBE_LOG_INFO, "event=claim-partly-published claim=%s node=%s why=\"%s\" action=held-the-rest",
                         c->key, m->name, err);
            continue;
        }
        kube_log(KUBE_LOG_WARN, "event=claim-unaccounted claim=%s node=%s why=\"%s\"", c->key, m->name, err);
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

/* The pod's claim names (ext_dra_pod_claim_names), with or without the one kube-scheduler made for its extended
 * resources. */
static int pod_claims(const cJSON *pod, bool extended, const char **names, int max, char *missing, size_t mlen) {
    int n = 0;
    const cJSON *rc;
    cJSON_ArrayForEach(rc, model_json_get(model_json_get(pod, "spec"), "resourceClaims")) {
        const char *cn = claim_name(pod, rc);
        if (!cn) {
            const char *tn = model_json_str(rc, "resourceClaimTemplateName");
            snprintf(missing, mlen, "the claim of template %s (not created yet)", tn ? tn : "?");
            return -1;
        }
        if (n >= max) {
            snprintf(missing, mlen, "room for more than %d claims of one pod", max);
            return -1;
        }
        names[n++] = cn;
    }
    const char *xc = model_json_str(model_json_get(model_json_get(pod, "status"), "extendedResourceClaimStatus"),
                                    "resourceClaimName");
    if (extended && xc && xc[0]) {
        if (n >= max) {
            snprintf(missing, mlen, "room for more than %d claims of one pod", max);
            return -1;
        }
        names[n++] = xc;
    }
    return n;
}

int ext_dra_pod_claim_names(const cJSON *pod, const char **names, int max, char *missing, size_t mlen) {
    return pod_claims(pod, true, names, max, missing, mlen);
}

model_dra_verdict ext_dra_pod_request(const ext_dra *d, const cJSON *pod, model_request *out, char *why,
                                      size_t whylen, char *claim, size_t claimlen) {
    memset(out, 0, sizeof *out);
    if (why && whylen) why[0] = 0;
    if (claim && claimlen) claim[0] = 0;
    const char *ns = model_json_str(model_json_get(pod, "metadata"), "namespace");
    if (!ns) ns = "default";
    const char *names[EXT_DRA_MAX_POD_CLAIMS];
    int n = pod_claims(pod, false, names, EXT_DRA_MAX_POD_CLAIMS, why, whylen);
    if (n < 0) return MODEL_DRA_UNJUDGED;
    model_dra_verdict v = MODEL_DRA_NOTHING;
    for (int i = 0; i < n; i++) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns, names[i]);
        const dclaim *c = d ? ext_map_get(d->claims, key) : NULL;
        if (!c) {
            snprintf(why, whylen, "claim %s is not in tessera's cache yet", key);
            return MODEL_DRA_UNJUDGED;
        }
        if (c->nres >= 0) continue;   /* allocated already (a shared claim): it asks for nothing new */
        int had = out->dra_nconstraints;
        model_dra_verdict one = model_dra_request(c->spec, class_fn, (void *)d, out, why, whylen);
        if (one == MODEL_DRA_UNJUDGED) return one;
        if (one == MODEL_DRA_JUDGED) v = one;
        if (claim && claimlen && out->dra_nconstraints > had) snprintf(claim, claimlen, "%s", names[i]);
    }
    return v;
}

int ext_dra_each_request(const ext_dra *d, ext_dra_request_fn fn, void *user) {
    int n = 0;
    size_t it = 0;
    const dclaim *c;
    while (d && (c = ext_map_next(d->claims, &it))) {
        if (c->extended) continue;
        model_request r = {0};
        char why[256];
        if (model_dra_request(c->spec, class_fn, (void *)d, &r, why, sizeof why) != MODEL_DRA_JUDGED) continue;
        fn(user, &r);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------ extended resources ---- */

const char *ext_dra_class_for_resource(const ext_dra *d, const char *resource) {
    size_t it = 0;
    const dclass *c;
    while (d && resource && (c = ext_map_next(d->classes, &it))) {
        const char *x = model_json_str(model_json_get(c->obj, "spec"), "extendedResourceName");
        if (x && !strcmp(x, resource)) return c->key;
    }
    return NULL;
}

/* The request of one device of the class mapped to nvidia.com/gpu, as the claim kube-scheduler makes asks it: once
 * per DeviceClass change, not per pod. */
static void extended_refresh(ext_dra *d) {
    d->xok = false;
    const char *cls = ext_dra_class_for_resource(d, EXT_DRA_GPU_RESOURCE);
    if (!cls) return;
    /* the claim kube-scheduler makes: one request of count N of that class (dynamicresources, extended resources) */
    cJSON *spec = cJSON_CreateObject(), *rq = cJSON_CreateObject();
    cJSON *ex = cJSON_AddObjectToObject(rq, "exactly");
    cJSON_AddStringToObject(rq, "name", "container-0-request-0");
    cJSON_AddStringToObject(ex, "deviceClassName", cls);
    cJSON_AddNumberToObject(ex, "count", 1);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(cJSON_AddObjectToObject(spec, "devices"), "requests"), rq);
    memset(&d->xbase, 0, sizeof d->xbase);
    char why[256];
    d->xok = model_dra_request(spec, class_fn, d, &d->xbase, why, sizeof why) == MODEL_DRA_JUDGED;
    cJSON_Delete(spec);
    if (!d->xok) kube_log(KUBE_LOG_INFO, "event=extended-resource-not-judged class=%s resource=%s why=\"%s\"", cls,
                          EXT_DRA_GPU_RESOURCE, why);
}

bool ext_dra_extended_request(const ext_dra *d, const model_request *pod_req, model_request *out) {
    return d && d->xok && model_dra_extended_request(&d->xbase, pod_req, out);
}

bool ext_dra_pod_extended(const cJSON *pod) {
    const char *n = model_json_str(model_json_get(model_json_get(pod, "status"), "extendedResourceClaimStatus"),
                                   "resourceClaimName");
    return n && n[0];
}

/* ------------------------------------------------------------ bind's record ---- */

/* "<claim>:<pool>/<device>" per result. */
static void rec_claim(kube_strbuf *b, const char *claim, const model_dra_result *res, int n) {
    for (int i = 0; i < n; i++)
        kube_strbuf_printf(b, "%s%s:%s/%s", b->len ? "," : "", claim, res[i].pool, res[i].device);
}

/* The finished record into *text, or -1 (out of memory). */
static int rec_done(kube_strbuf *b, char **text, char *missing, size_t mlen) {
    *text = kube_strbuf_finish(b);
    if (!*text) snprintf(missing, mlen, "memory for the record (out of memory)");
    return *text ? 1 : -1;
}

/* Pods noted at filter: which claims their bind must record. A ring of the last EXT_DRA_NOTES pods. */
typedef struct dnote {
    char uid[MODEL_UID_LEN];
    char ns[256];
    int n;
    char **names;
} dnote;

static void note_free(dnote *n) {
    if (!n) return;
    for (int i = 0; i < n->n; i++) free(n->names[i]);
    free(n->names);
    free(n);
}

void ext_dra_note_pod(ext_dra *d, const cJSON *pod) {
    const cJSON *meta = model_json_get(pod, "metadata");
    const char *uid = model_json_str(meta, "uid"), *ns = model_json_str(meta, "namespace");
    const char *names[EXT_DRA_MAX_POD_CLAIMS];
    char miss[256];
    int n = ext_dra_pod_claim_names(pod, names, EXT_DRA_MAX_POD_CLAIMS, miss, sizeof miss);
    if (!d || !uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN || n < 0) return;
    dnote *old = ext_map_get(d->notes, uid);
    if (old && old->n == n) {
        bool same = true;
        for (int i = 0; i < n && same; i++) same = !strcmp(old->names[i], names[i]);
        if (same) return;   /* filter, then prioritize: noted once */
    }
    dnote *x = calloc(1, sizeof *x);
    if (!x || (n > 0 && !(x->names = calloc((size_t)n, sizeof *x->names)))) {
        free(x);
        return;
    }
    snprintf(x->uid, sizeof x->uid, "%s", uid);
    snprintf(x->ns, sizeof x->ns, "%s", ns ? ns : "default");
    for (int i = 0; i < n; i++)
        if ((x->names[x->n] = strdup(names[i])) != NULL) x->n++;
    if (old) {
        ext_map_del(d->notes, uid);
        for (int i = 0; i < EXT_DRA_NOTES; i++)
            if (d->ring[i] == old) d->ring[i] = NULL;
        note_free(old);
    }
    dnote *evict = d->ring[d->ring_next];
    if (evict) {
        ext_map_del(d->notes, evict->uid);
        note_free(evict);
    }
    if (ext_map_put(d->notes, x->uid, x) != 0) {
        d->ring[d->ring_next] = NULL;
        note_free(x);
        return;
    }
    d->ring[d->ring_next] = x;
    d->ring_next = (d->ring_next + 1) % EXT_DRA_NOTES;
}

bool ext_dra_noted(const ext_dra *d, const char *pod_uid) {
    const dnote *n = d && pod_uid ? ext_map_get(d->notes, pod_uid) : NULL;
    return n && n->n > 0;
}

static bool reserved_for(const dclaim *c, const char *uid) {
    for (int i = 0; i < c->nreserved; i++)
        if (!strcmp(c->reserved[i], uid)) return true;
    return false;
}

int ext_dra_bind_record(const ext_dra *d, const char *ns, const char *pod_uid, bool want_extended, char **text,
                        char *missing, size_t mlen) {
    *text = NULL;
    const dnote *note = d ? ext_map_get(d->notes, pod_uid) : NULL;
    if (!note) {
        snprintf(missing, mlen, "which claims pod uid %s has (tessera saw it in no filter call)", pod_uid);
        return -1;
    }
    kube_strbuf b = {0};
    for (int i = 0; i < note->n; i++) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns, note->names[i]);
        const dclaim *c = ext_map_get(d->claims, key);
        if (!c || c->nres < 0) {
            snprintf(missing, mlen, "the allocation of claim %s%s", key, c ? "" : " (the claim is not in tessera's cache)");
            kube_strbuf_free(&b);
            return 0;
        }
        rec_claim(&b, note->names[i], c->res, c->nres);
    }
    if (want_extended) {
        /* kube-scheduler's claim for the pod's extended resources: made in PreBind, named in the pod's status */
        size_t pre = strlen(ns), it = 0;
        const dclaim *c, *x = NULL;
        while (!x && (c = ext_map_next(d->claims, &it)))
            if (c->extended && c->nres >= 0 && !strncmp(c->key, ns, pre) && c->key[pre] == '/' && reserved_for(c, pod_uid))
                x = c;
        if (!x) {
            snprintf(missing, mlen, "the allocation of the claim kube-scheduler makes for the pod's extended resources");
            kube_strbuf_free(&b);
            return 0;
        }
        rec_claim(&b, x->key + pre + 1, x->res, x->nres);
    }
    return rec_done(&b, text, missing, mlen);
}

/* GET path into a parsed object; NULL with why. */
static cJSON *api_get(kube_client *k, const char *path, int timeout_ms, char *why, size_t whylen) {
    char *resp = NULL, err[512] = "";
    int code = kube_request(k, "GET", path, NULL, timeout_ms, &resp, err, sizeof err);
    cJSON *o = code == 200 && resp ? cJSON_Parse(resp) : NULL;
    free(resp);
    if (!o) {
        if (code == 200) snprintf(why, whylen, "GET %s: the answer is not JSON", path);
        else if (code > 0) snprintf(why, whylen, "GET %s: API server answered %d: %s", path, code, err);
        else snprintf(why, whylen, "GET %s: %s", path, err[0] ? err : "no answer");
    }
    return o;
}

int ext_dra_record_from_api(kube_client *k, const char *ns, const char *name, const char *pod_uid, bool want_extended,
                            int timeout_ms, char **text, char *missing, size_t mlen) {
    *text = NULL;
    char path[1200];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
    cJSON *pod = api_get(k, path, timeout_ms, missing, mlen);
    if (!pod) return -1;
    const char *uid = model_json_str(model_json_get(pod, "metadata"), "uid");
    const char *names[EXT_DRA_MAX_POD_CLAIMS];
    int n = 0;
    if (!uid || strcmp(uid, pod_uid) != 0) {
        snprintf(missing, mlen, "pod %s/%s has uid %s there, not %s (replaced)", ns, name, uid ? uid : "(none)", pod_uid);
        n = -1;
    } else if ((n = ext_dra_pod_claim_names(pod, names, EXT_DRA_MAX_POD_CLAIMS, missing, mlen)) >= 0 && want_extended &&
               !model_json_get(model_json_get(pod, "status"), "extendedResourceClaimStatus")) {
        snprintf(missing, mlen, "pod %s/%s has no status.extendedResourceClaimStatus (kube-scheduler writes it in PreBind)",
                 ns, name);
        n = -1;
    }
    kube_strbuf b = {0};
    int rc = n < 0 ? -1 : 1;
    for (int i = 0; rc == 1 && i < n; i++) {
        snprintf(path, sizeof path, "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", ns, names[i]);
        cJSON *c = api_get(k, path, timeout_ms, missing, mlen);
        model_dra_result res[MODEL_DRA_MAX_RESULTS];
        int nr = c ? model_dra_claim_results(c, res, MODEL_DRA_MAX_RESULTS) : -1;
        if (c && nr < 0) snprintf(missing, mlen, "claim %s/%s is not allocated there either", ns, names[i]);
        if (nr < 0) rc = -1;
        else rec_claim(&b, names[i], res, nr);
        cJSON_Delete(c);
    }
    cJSON_Delete(pod);
    if (rc < 0) {
        kube_strbuf_free(&b);
        return -1;
    }
    return rec_done(&b, text, missing, mlen);
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
