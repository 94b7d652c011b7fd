/* incremental.c -- the per-shape score caches and tournament trees behind
 * policy_inc_place; see incremental.h for why the answers equal policy_place's.
 *
 * Changes reach the caches through one touch log (node indices in order). Each cache
 * remembers how far into the log it has read; a pick replays the unread part, scoring
 * each touched node once. The log is compacted when it grows past 2n entries: a cache
 * lagging by n or more entries is marked for a full re-score (no dearer than the replay
 * would be), and the prefix every other cache has read is dropped.
 */
#include "policy/incremental.h"
#include "policy/policy_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SHAPES 256

typedef struct shape_cache {
    bool used;
    bool stale;            /* every node needs a new score */
    model_request key;
    uint64_t hash;
    uint64_t last_use;     /* LRU clock */
    size_t logpos;         /* touch log entries [0, logpos) are reflected */
    double *val;           /* per node: the value the winner is chosen by */
    uint8_t *feas;         /* per node: feasible */
    int *tree;             /* [1, 2*leaves): winner node of the subtree, -1 none */
} shape_cache;

struct policy_inc {
    const policy *p;
    policy_ctx ctx;
    int n, leaves;
    model_node **nodes;
    uint64_t *rank;
    bool fallback;              /* random tie-break: no caching */
    bool random;                /* random policy: feasibility cached, draws redone per decision */
    uint64_t *name_hash;        /* random: policy_hash_str of each node's name */
    bool minmax;                /* bestfit: choose by integer raw */
    policy_result *scratch;     /* n results, for the fallback */
    int *log;
    size_t loglen, logcap;
    uint32_t *stamp, curstamp;  /* dedupe touched nodes within one replay */
    int nshapes, maxshapes;
    shape_cache *shapes;
    uint64_t clock;
    policy_inc_stats stats;
};

/* ---------------------------------------------------------------- request shapes */

static uint64_t shape_hash(const model_request *r) {
    uint64_t h = policy_hash64(((uint64_t)r->kind << 56) ^ ((uint64_t)(uint32_t)r->count << 24) ^ (uint64_t)r->isolation);
    h = policy_hash64(h ^ (uint64_t)(uint32_t)r->memory_mib ^ ((uint64_t)(uint16_t)r->memory_permille << 32) ^
                      ((uint64_t)(uint16_t)r->compute_permille << 48));
    h = policy_hash64(h ^ (uint64_t)r->cpu_milli);
    h = policy_hash64(h ^ (uint64_t)r->memory_bytes ^ ((uint64_t)(uint32_t)r->priority << 40));
    h = policy_hash_str(h, r->mig_profile);
    for (int i = 0; i < r->nmodels && i < MODEL_MAX_MODELS; i++) h = policy_hash_str(h, r->models[i]);
    return policy_hash64(h ^ (uint64_t)r->nmodels);
}

/* ---------------------------------------------------------------- tournament tree */

/* policy_select's order: feasible first, higher value, smaller rank, smaller index. */
static bool beats(const policy_inc *s, const shape_cache *c, int a, int b) {
    if (a < 0) return false;
    if (b < 0) return true;
    if (c->val[a] != c->val[b]) return c->val[a] > c->val[b];
    if (s->rank[a] != s->rank[b]) return s->rank[a] < s->rank[b];
    return a < b;
}

static int leaf_of(const shape_cache *c, int i) { return c->feas[i] ? i : -1; }

static void tree_update(const policy_inc *s, shape_cache *c, int i) {
    int k = s->leaves + i;
    c->tree[k] = leaf_of(c, i);
    for (k >>= 1; k >= 1; k >>= 1) {
        int a = c->tree[2 * k], b = c->tree[2 * k + 1];
        c->tree[k] = beats(s, c, a, b) ? a : b;   /* no early exit: the winner's value may have moved */
    }
}

static void tree_build(const policy_inc *s, shape_cache *c) {
    for (int i = 0; i < s->leaves; i++) c->tree[s->leaves + i] = i < s->n ? leaf_of(c, i) : -1;
    for (int k = s->leaves - 1; k >= 1; k--) {
        int a = c->tree[2 * k], b = c->tree[2 * k + 1];
        c->tree[k] = beats(s, c, a, b) ? a : b;
    }
}

/* ---------------------------------------------------------------- scoring */

static int score_node(policy_inc *s, shape_cache *c, const model_request *r, int i, char *why, size_t whylen) {
    policy_result res;
    s->stats.scored++;
    if (policy_score(s->p, r, s->nodes[i], &s->ctx, &res, why, whylen) < 0) return -1;
    c->feas[i] = res.feasible;
    /* bestfit: min-max gives 100 exactly to the largest integer raw (policy_normalize) */
    c->val[i] = s->minmax ? (double)(int64_t)res.raw : res.score;
    return 0;
}

static shape_cache *find_shape(policy_inc *s, const model_request *r) {
    uint64_t h = shape_hash(r);
    shape_cache *lru = NULL;
    for (int k = 0; k < s->nshapes; k++) {
        shape_cache *c = &s->shapes[k];
        if (c->used && c->hash == h && model_request_same(&c->key, r)) return c;
        if (!lru || c->last_use < lru->last_use) lru = c;
    }
    shape_cache *c = lru;
    if (s->nshapes < s->maxshapes) {
        c = &s->shapes[s->nshapes];
        c->val = malloc((size_t)s->n * sizeof *c->val);
        c->feas = malloc((size_t)s->n);
        c->tree = malloc((size_t)(2 * s->leaves) * sizeof *c->tree);
        if (!c->val || !c->feas || !c->tree) {
            free(c->val), free(c->feas), free(c->tree);
            c->val = NULL, c->feas = NULL, c->tree = NULL;
            return NULL;
        }
        s->nshapes++;
    }
    c->used = true;
    c->stale = true;
    c->key = *r;
    c->hash = h;
    return c;
}

/* Drop the log prefix every up-to-date cache has read (see the top of the file). */
static void compact_log(policy_inc *s) {
    size_t low = s->loglen;
    for (int k = 0; k < s->nshapes; k++) {
        shape_cache *c = &s->shapes[k];
        if (!c->stale && s->loglen - c->logpos >= (size_t)s->n) c->stale = true;
        if (!c->stale && c->logpos < low) low = c->logpos;
    }
    memmove(s->log, s->log + low, (s->loglen - low) * sizeof *s->log);
    s->loglen -= low;
    for (int k = 0; k < s->nshapes; k++)
        if (!s->shapes[k].stale) s->shapes[k].logpos -= low;
}

/* ---------------------------------------------------------------- API */

policy_inc *policy_inc_new(const policy *p, const policy_ctx *ctx, model_node *const *nodes, int n, int max_shapes) {
    if (!p || !ctx || n < 0 || (n > 0 && !nodes) || max_shapes < 0) return NULL;
    policy_inc *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->p = p;
    s->ctx = *ctx;
    s->n = n;
    s->leaves = 1;
    while (s->leaves < n) s->leaves *= 2;
    s->maxshapes = max_shapes ? max_shapes : DEFAULT_SHAPES;
    s->fallback = ctx->tiebreak == POLICY_TIE_RANDOM;
    s->random = policy_draws_per_decision(p);
    s->minmax = policy_norm_kind(p) == NORM_MINMAX;
    s->nodes = malloc((size_t)(n ? n : 1) * sizeof *s->nodes);
    s->rank = malloc((size_t)(n ? n : 1) * sizeof *s->rank);
    s->name_hash = malloc((size_t)(n ? n : 1) * sizeof *s->name_hash);
    s->scratch = malloc((size_t)(n ? n : 1) * sizeof *s->scratch);
    s->stamp = calloc((size_t)(n ? n : 1), sizeof *s->stamp);
    s->logcap = 2 * (size_t)n + 64;
    s->log = malloc(s->logcap * sizeof *s->log);
    s->shapes = calloc((size_t)s->maxshapes, sizeof *s->shapes);
    if (!s->nodes || !s->rank || !s->name_hash || !s->scratch || !s->stamp || !s->log || !s->shapes) {
        policy_inc_free(s);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!nodes[i] || !nodes[i]->name) {
            policy_inc_free(s);
            return NULL;
        }
        s->nodes[i] = nodes[i];
        s->rank[i] = policy_node_rank(ctx, nodes[i]->name);
        s->name_hash[i] = policy_hash_str(0, nodes[i]->name);
    }
    return s;
}

void policy_inc_free(policy_inc *s) {
    if (!s) return;
    for (int k = 0; s->shapes && k < s->nshapes; k++) {
        free(s->shapes[k].val);
        free(s->shapes[k].feas);
        free(s->shapes[k].tree);
    }
    free(s->shapes);
    free(s->nodes);
    free(s->rank);
    free(s->name_hash);
    free(s->scratch);
    free(s->stamp);
    free(s->log);
    free(s);
}

void policy_inc_touch(policy_inc *s, int i) {
    if (!s || i < 0 || i >= s->n || s->fallback) return;
    if (s->loglen == s->logcap) compact_log(s);
    s->log[s->loglen++] = i;
}

void policy_inc_touch_all(policy_inc *s) {
    if (!s) return;
    for (int k = 0; k < s->nshapes; k++) s->shapes[k].stale = true;
    s->loglen = 0;
}

void policy_inc_set_workload(policy_inc *s, const policy_workload *w) {
    if (!s || s->ctx.workload == w) return;
    s->ctx.workload = w;
    policy_inc_touch_all(s);   /* every score may depend on it */
}

/* Bring the cache up to date with the log; -1 if a score failed. */
static int refresh(policy_inc *s, shape_cache *c, const model_request *r, char *why, size_t whylen) {
    if (c->stale) {
        for (int i = 0; i < s->n; i++)
            if (score_node(s, c, r, i, why, whylen) < 0) return -1;
        tree_build(s, c);
        c->stale = false;
        c->logpos = s->loglen;
        return 0;
    }
    if (++s->curstamp == 0) {   /* wrapped: old stamps could collide */
        memset(s->stamp, 0, (size_t)s->n * sizeof *s->stamp);
        s->curstamp = 1;
    }
    for (size_t k = c->logpos; k < s->loglen; k++) {
        int i = s->log[k];
        if (s->stamp[i] == s->curstamp) continue;
        s->stamp[i] = s->curstamp;
        if (score_node(s, c, r, i, why, whylen) < 0) return -1;
        tree_update(s, c, i);
    }
    c->logpos = s->loglen;
    return 0;
}

int policy_inc_place(policy_inc *s, const model_request *r, uint64_t decision, model_assignment *out, char *why,
                     size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!s || !r || !out) {
        if (why) snprintf(why, whylen, "policy_inc_place: bad argument");
        return -1;
    }
    s->ctx.decision = decision;
    s->stats.places++;
    if (s->fallback) {
        s->stats.fallbacks++;
        s->stats.scored += s->n;
        return policy_place(s->p, &s->ctx, r, s->nodes, s->n, s->scratch, out, why, whylen);
    }
    if (s->n == 0) {
        if (why) snprintf(why, whylen, "no node fits the request");
        return -1;
    }
    shape_cache *c = find_shape(s, r);
    if (!c) {
        if (why) snprintf(why, whylen, "policy_inc_place: out of memory");
        return -1;
    }
    c->last_use = ++s->clock;
    if (refresh(s, c, r, why, whylen) < 0) {
        c->stale = true;
        return -1;
    }
    int win = c->tree[1];
    if (s->random) {
        /* policy_normalize's one winner: the first feasible node with the highest draw */
        double best = -1;
        win = -1;
        for (int i = 0; i < s->n; i++) {
            if (!c->feas[i]) continue;
            double d = policy_random_draw(&s->ctx, s->name_hash[i]);
            if (win < 0 || d > best) {
                best = d;
                win = i;
            }
        }
    }
    if (win < 0) {
        if (why) snprintf(why, whylen, "no node fits the request");
        return -1;
    }
    /* the choice (which GPUs) is not cached: score the winner again to get it */
    policy_result res;
    if (policy_score(s->p, r, s->nodes[win], &s->ctx, &res, why, whylen) < 0) return -1;
    if (policy_materialize(s->nodes[win], r, &res.choice, out, why, whylen) < 0) return -1;
    return win;
}

policy_inc_stats policy_inc_get_stats(const policy_inc *s) {
    policy_inc_stats z = {0, 0, 0};
    return s ? s->stats : z;
}
