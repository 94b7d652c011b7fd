/* workload.c -- the target workload: request shapes with counts, cut to the most common
 * ones covering a share of all tasks (95 % in the FGD paper) and renormalised. The
 * simulator builds it from a trace, the extender from pods it has seen or a file; or
 * either estimates it online from arrivals so far (policy_online_*, the end of the file).
 */
#include "policy/policy_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

policy_workload *policy_workload_new(void) { return calloc(1, sizeof(policy_workload)); }

void policy_workload_free(policy_workload *w) {
    if (!w) return;
    free(w->types);
    free(w->hot);
    free(w);
}

/* The shape of a request as a task type: everything but host memory and priority. */
static void shape_of(const model_request *r, policy_task_type *t) {
    memset(t, 0, sizeof *t);
    t->kind = r->kind;
    t->cpu_milli = r->cpu_milli;
    t->req.kind = r->kind;
    t->req.count = r->kind == MODEL_REQ_NONE ? 0 : r->count;
    t->req.memory_mib = r->memory_mib;
    t->req.memory_permille = r->memory_permille;
    t->req.compute_permille = r->compute_permille;
    if (r->kind == MODEL_REQ_MIG) snprintf(t->req.mig_profile, sizeof t->req.mig_profile, "%s", r->mig_profile);
    t->req.mig_replica = r->kind == MODEL_REQ_MIG && r->mig_replica;
    t->req.isolation = r->isolation;
    t->req.no_mps = r->no_mps;   /* where its delivery lets it go is part of the shape */
    /* an MPS share's room depends on its uid (one per MPS server); a time-sliced share's does not */
    t->req.compute_sharing = r->compute_sharing;
    t->req.run_as_uid = r->compute_sharing == MODEL_COMPUTE_MPS ? r->run_as_uid : 0;
    t->req.nmodels = r->nmodels;
    for (int i = 0; i < r->nmodels && i < MODEL_MAX_MODELS; i++)
        snprintf(t->req.models[i], sizeof t->req.models[i], "%s", r->models[i]);
    t->req.cpu_milli = r->cpu_milli;
    switch (r->kind) {
    case MODEL_REQ_NONE: t->demand_permille = 0; t->gpus = 0; break;
    case MODEL_REQ_WHOLE: t->demand_permille = 1000; t->gpus = r->count; break;
    case MODEL_REQ_FRACTION: t->demand_permille = r->compute_permille; t->gpus = r->count; break;
    case MODEL_REQ_SHARED:
    case MODEL_REQ_MIG: t->demand_permille = 0; t->gpus = r->count; break;
    }
}

/* Total order on shapes, for grouping and for a deterministic sort among equal counts. */
static int shape_cmp(const policy_task_type *a, const policy_task_type *b) {
#define CMP(x, y) do { if ((x) != (y)) return (x) < (y) ? -1 : 1; } while (0)
    CMP(a->kind, b->kind);
    CMP(a->cpu_milli, b->cpu_milli);
    CMP(a->demand_permille, b->demand_permille);
    CMP(a->gpus, b->gpus);
    CMP(a->req.memory_mib, b->req.memory_mib);
    CMP(a->req.memory_permille, b->req.memory_permille);
    CMP(a->req.isolation, b->req.isolation);
    CMP(a->req.nmodels, b->req.nmodels);
    CMP(a->req.mig_replica, b->req.mig_replica);
    CMP(a->req.no_mps, b->req.no_mps);
    CMP(a->req.compute_sharing, b->req.compute_sharing);
    CMP(a->req.run_as_uid, b->req.run_as_uid);
#undef CMP
    int c = strcmp(a->req.mig_profile, b->req.mig_profile);
    for (int i = 0; !c && i < a->req.nmodels; i++) c = strcmp(a->req.models[i], b->req.models[i]);
    return c;
}

int policy_workload_add(policy_workload *w, const model_request *r, long count, char *err, size_t errlen) {
    if (!w || !r || count < 0 || (w->finished)) {
        if (err) snprintf(err, errlen, "workload add: %s", !w || !r ? "NULL argument" : count < 0 ? "negative count" : "workload already finished");
        return -1;
    }
    if (r->kind < MODEL_REQ_NONE || r->kind > MODEL_REQ_MIG || (r->kind != MODEL_REQ_NONE && r->count < 1) ||
        r->nmodels < 0 || r->nmodels > MODEL_MAX_MODELS || r->cpu_milli < 0 || r->compute_permille < 0 ||
        r->compute_permille > 1000) {
        if (err) snprintf(err, errlen, "workload add: request out of range (kind %d, count %d, compute %d)", (int)r->kind,
                          r->count, r->compute_permille);
        return -1;
    }
    if (count == 0) return 0;
    policy_task_type t;
    shape_of(r, &t);
    /* Linear search: a trace has at most a few thousand distinct shapes. */
    for (int i = 0; i < w->n; i++) {
        if (shape_cmp(&w->types[i], &t) == 0) {
            w->types[i].count += count;
            w->total += count;
            return 0;
        }
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        policy_task_type *nt = realloc(w->types, (size_t)cap * sizeof *nt);
        if (!nt) {
            if (err) snprintf(err, errlen, "workload add: out of memory");
            return -1;
        }
        w->types = nt;
        w->cap = cap;
    }
    t.count = count;
    w->types[w->n++] = t;
    w->total += count;
    return 0;
}

/* Equal counts keep the order shapes were first seen in (types are appended in that
 * order), as a stable sort of the trace's counts does (Python's Counter.most_common),
 * so the cut at the coverage line is reproducible. */
typedef struct order_key { long count; int idx; } order_key;

static int by_count_then_seen(const void *x, const void *y) {
    const order_key *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static int stable_sort(policy_workload *w) {
    order_key *k = malloc((size_t)(w->n ? w->n : 1) * sizeof *k);
    policy_task_type *t = malloc((size_t)(w->n ? w->n : 1) * sizeof *t);
    if (!k || !t) {
        free(k);
        free(t);
        return -1;
    }
    for (int i = 0; i < w->n; i++) k[i] = (order_key){w->types[i].count, i};
    qsort(k, (size_t)w->n, sizeof *k, by_count_then_seen);
    for (int i = 0; i < w->n; i++) t[i] = w->types[k[i].idx];
    free(w->types);
    free(k);
    w->types = t;
    w->cap = w->n;
    return 0;
}

void tt_hot_of(const policy_task_type *t, tt_hot *h) {
    h->cpu = t->cpu_milli;
    h->p = t->p;
    h->k = (int8_t)(t->gpus > 127 ? 127 : t->gpus);
    h->restricted = t->req.nmodels > 0;
    h->d_eff = 0;
    h->mig = t->kind == MODEL_REQ_MIG;
    h->mig_whole = h->mig && !t->req.mig_replica;
    h->mig_rep = h->mig && (t->req.mig_replica || t->req.isolation == MODEL_ISO_TIMESLICE ||
                            t->req.isolation == MODEL_ISO_MPS || t->req.isolation == MODEL_ISO_ANY);
    bool plain = t->req.isolation == MODEL_ISO_DEFAULT;
    if (t->kind == MODEL_REQ_NONE) {
        h->cls = TT_CPU;
    } else if (t->kind == MODEL_REQ_WHOLE && plain) {
        h->cls = TT_FAST;
        h->d_eff = 1001;
    } else if (t->kind == MODEL_REQ_FRACTION && plain && t->req.memory_mib == 0 && t->req.memory_permille == 0 &&
               t->demand_permille > 0 && t->req.compute_sharing == MODEL_COMPUTE_TIMESLICE) {
        h->cls = TT_FAST;
        h->d_eff = (int16_t)t->demand_permille;
    } else {
        h->cls = TT_GENERIC;
    }
}

int policy_workload_finish(policy_workload *w, double coverage_pct, char *err, size_t errlen) {
    if (!w || w->finished || w->total <= 0 || !(coverage_pct > 0 && coverage_pct <= 100)) {
        if (err) snprintf(err, errlen, "workload finish: %s", !w ? "NULL workload" : w->finished ? "already finished"
                                                                  : w->total <= 0 ? "no tasks added"
                                                                                  : "coverage must be in (0, 100]");
        return -1;
    }
    /* qsort is not stable; sort an index array instead of relying on addresses. */
    if (stable_sort(w) < 0) {
        if (err) snprintf(err, errlen, "workload finish: out of memory");
        return -1;
    }
    /* Keep types until kept * 100 >= coverage * total (the paper's ">= 95 %"). */
    long kept = 0;
    int i = 0;
    while (i < w->n && i < POLICY_MAX_TYPES && (double)kept * 100.0 < coverage_pct * (double)w->total)
        kept += w->types[i++].count;
    w->nkept = i;
    w->kept = kept;
    w->hot = calloc((size_t)(i ? i : 1), sizeof *w->hot);
    if (!w->hot) {
        if (err) snprintf(err, errlen, "workload finish: out of memory");
        return -1;
    }
    for (int j = 0; j < w->n; j++) w->types[j].p = j < i ? (double)w->types[j].count / (double)kept : 0.0;
    w->has_mig = false;
    for (int j = 0; j < i; j++) {
        tt_hot_of(&w->types[j], &w->hot[j]);
        w->has_mig |= w->types[j].kind == MODEL_REQ_MIG;
    }
    static _Atomic uint64_t next_id = 1;
    w->id = next_id++;   /* below 2^63: implicit workloads (score.c) use the top bit */
    w->finished = true;
    return 0;
}

int policy_workload_count(const policy_workload *w) { return w && w->finished ? w->nkept : 0; }

const policy_task_type *policy_workload_type(const policy_workload *w, int i) {
    if (!w || !w->finished || i < 0 || i >= w->nkept) return NULL;
    return &w->types[i];
}

double policy_workload_coverage(const policy_workload *w) {
    return w && w->finished && w->total ? (double)w->kept / (double)w->total : 0.0;
}

uint64_t policy_workload_version(const policy_workload *w) { return w && w->finished ? w->id : 0; }

/* ---------------------------------------------------------------- online estimate */

/* Decay without touching every weight per arrival: arrival n adds g^n (g = 2^(1/half
 * life)) to its shape, so weight / g^n is the decayed count. When g^n grows large every
 * weight is divided down (RESCALE), which changes nothing relative. */
#define RESCALE 1e200

typedef struct online_shape {
    policy_task_type t;     /* shape_of; count unused */
    model_request r;        /* one request of the shape, to rebuild the workload from */
    double weight;
} online_shape;

struct policy_online {
    double half_life, g, scale;   /* scale = g^arrivals (since the last rescale) */
    long warmup, arrivals;
    int n, cap;
    online_shape *shapes;
    policy_workload *cur;
};

policy_online *policy_online_new(double half_life, long warmup, char *err, size_t errlen) {
    if (!(half_life > 0 && half_life < 1e12) || warmup < 0) {
        if (err) snprintf(err, errlen, "online workload: half-life must be > 0 arrivals and warm-up >= 0");
        return NULL;
    }
    policy_online *o = calloc(1, sizeof *o);
    if (!o) {
        if (err) snprintf(err, errlen, "online workload: out of memory");
        return NULL;
    }
    o->half_life = half_life;
    o->g = pow(2.0, 1.0 / half_life);
    o->scale = 1.0;
    o->warmup = warmup;
    return o;
}

void policy_online_free(policy_online *o) {
    if (!o) return;
    free(o->shapes);
    policy_workload_free(o->cur);
    free(o);
}

const policy_workload *policy_online_current(const policy_online *o) { return o ? o->cur : NULL; }
long policy_online_arrivals(const policy_online *o) { return o ? o->arrivals : 0; }

/* A finished workload from the decayed weights. Counts are the weights relative to the
 * newest arrival's, in millionths (integers, as policy_workload_add takes): a shape last
 * seen 20 half-lives ago still counts 1. */
static policy_workload *online_build(const policy_online *o, char *err, size_t errlen) {
    policy_workload *w = policy_workload_new();
    if (!w) {
        if (err) snprintf(err, errlen, "online workload: out of memory");
        return NULL;
    }
    for (int i = 0; i < o->n; i++) {
        double c = o->shapes[i].weight / o->scale * 1e6;
        long count = c < 1 ? 1 : c > 1e15 ? (long)1e15 : (long)llround(c);
        if (policy_workload_add(w, &o->shapes[i].r, count, err, errlen) < 0) {
            policy_workload_free(w);
            return NULL;
        }
    }
    if (policy_workload_finish(w, 95.0, err, errlen) < 0) {
        policy_workload_free(w);
        return NULL;
    }
    return w;
}

/* Total variation distance between two finished workloads' popularities: half the sum
 * over shapes of |p_a - p_b| (a shape kept in one only counts its whole p). 0..1. */
static double online_distance(const policy_workload *a, const policy_workload *b) {
    double d = 0;
    for (int i = 0; i < a->nkept; i++) {
        double pb = 0;
        for (int j = 0; j < b->nkept; j++)
            if (shape_cmp(&a->types[i], &b->types[j]) == 0) {
                pb = b->types[j].p;
                break;
            }
        d += fabs(a->types[i].p - pb);
    }
    for (int j = 0; j < b->nkept; j++) {
        bool in_a = false;
        for (int i = 0; i < a->nkept && !in_a; i++) in_a = shape_cmp(&a->types[i], &b->types[j]) == 0;
        if (!in_a) d += b->types[j].p;
    }
    return d / 2;
}

int policy_online_observe(policy_online *o, const model_request *r, char *err, size_t errlen) {
    if (!o || !r) {
        if (err) snprintf(err, errlen, "online workload: NULL argument");
        return -1;
    }
    /* validate as policy_workload_add would, before changing anything */
    policy_workload *probe = policy_workload_new();
    int ok = probe ? policy_workload_add(probe, r, 1, err, errlen) : -1;
    policy_workload_free(probe);
    if (ok < 0) return -1;
    policy_task_type t;
    shape_of(r, &t);
    int i = 0;
    while (i < o->n && shape_cmp(&o->shapes[i].t, &t) != 0) i++;
    if (i == o->n) {
        if (o->n == o->cap) {
            int cap = o->cap ? 2 * o->cap : 64;
            online_shape *ns = realloc(o->shapes, (size_t)cap * sizeof *ns);
            if (!ns) {
                if (err) snprintf(err, errlen, "online workload: out of memory");
                return -1;
            }
            o->shapes = ns;
            o->cap = cap;
        }
        o->shapes[i] = (online_shape){.t = t, .r = *r, .weight = 0};
        o->n++;
    }
    o->arrivals++;
    o->scale *= o->g;
    o->shapes[i].weight += o->scale;
    if (o->scale > RESCALE) {
        for (int k = 0; k < o->n; k++) o->shapes[k].weight /= o->scale;
        o->scale = 1.0;
    }
    long every = (long)(o->half_life / 20);
    if (every < 1) every = 1;
    bool warm = o->arrivals > o->warmup;
    if (o->cur && warm && o->arrivals % every != 0) return 0;
    policy_workload *w = online_build(o, err, errlen);
    if (!w) return -1;
    if (o->cur && warm && online_distance(o->cur, w) < POLICY_ONLINE_MIN_CHANGE) {
        policy_workload_free(w);   /* not worth invalidating every cached score */
        return 0;
    }
    policy_workload_free(o->cur);
    o->cur = w;
    return 1;
}
