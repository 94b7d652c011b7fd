/* score.c -- one node's score and chosen assignment for each policy.
 *
 * Two paths, same answers. The fast path covers what fills a cluster -- CPU-only, whole
 * GPUs and fractions of one GPU (compute-only, or memory-sized as HAMi's gpumem /
 * gpumem-percentage with or without gpucores), default isolation, on a node whose GPUs
 * are all whole mode -- and reads the node state directly, mirroring model_fit's rules
 * for those routes (fit.c: soft share = no exclusive holder, compute and
 * model_fraction_memory MiB free; whole = GPU without holders, lowest indices first).
 * One MIG instance lists fit.c's MIG candidates itself, in its order. Everything else
 * (replicas, isolation, multi-GPU fractions and MIG instances) takes the first GEN_MAX
 * candidates model_fit lists. Candidates are applied to a copy of the changed GPUs
 * only. Tests check every path against model_fit on random states.
 */
#include "policy/policy_int.h"
#include "model/topo.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CPU_SPEC 128000.0   /* FGD normalisation: 128 cores */
#define GPU_SPEC 8000.0     /* FGD normalisation: 8 GPUs */
#define GEN_MAX 128         /* candidates examined on the generic path (model_fit order) */

enum { P_BINPACK, P_SPREAD, P_BESTFIT, P_DOTPROD, P_GPUPACKING, P_GPUCLUSTERING, P_RANDOM, P_FGD, P_MIGAWARE, P_PACK };

struct policy {
    const char *name;
    int kind;
    const char *summary;
};

static const policy registry[] = {
    {"binpack", P_BINPACK, "fullest node and fullest GPU first (memory, compute, replicas, weighted); best-aligned GPU set"},
    {"spread", P_SPREAD, "emptiest node and emptiest GPU first (memory, compute, replicas, weighted); best-aligned GPU set"},
    {"bestfit", P_BESTFIT, "least CPU+GPU left over (FGD baseline, min-max normalised); tightest GPU"},
    {"dotprod", P_DOTPROD, "free vector least aligned with the request (Tetris, FGD baseline); tightest GPU"},
    {"gpupacking", P_GPUPACKING, "used GPUs first, then used nodes, then idle nodes (FGD baseline); tightest GPU"},
    {"gpuclustering", P_GPUCLUSTERING, "nodes already hosting the same task class (FGD baseline); tightest GPU"},
    {"random", P_RANDOM, "one random feasible node, random GPU (FGD baseline)"},
    {"fgd", P_FGD, "least growth of fragmentation against the target workload (FGD, ATC '23)"},
    {"mig-aware", P_MIGAWARE, "idle MIG instance first, else the GPU/slot that keeps most demand placeable; best-aligned GPU set"},
    {"fgd-pack", P_PACK, "FGD less the idle GPUs a node's CPU would strand, per task type (tessera); best-aligned GPU set"},
};
#define NPOLICIES ((int)(sizeof registry / sizeof registry[0]))

const policy *policy_find(const char *name) {
    for (int i = 0; name && i < NPOLICIES; i++)
        if (!strcmp(registry[i].name, name)) return &registry[i];
    return NULL;
}
int policy_count(void) { return NPOLICIES; }
const policy *policy_at(int i) { return i >= 0 && i < NPOLICIES ? &registry[i] : NULL; }
const char *policy_name(const policy *p) { return p ? p->name : NULL; }
const char *policy_summary(const policy *p) { return p ? p->summary : NULL; }
bool policy_draws_per_decision(const policy *p) { return p && p->kind == P_RANDOM; }
int policy_norm_kind(const policy *p) {
    return p->kind == P_BESTFIT ? NORM_MINMAX : p->kind == P_RANDOM ? NORM_ONE_WINNER : NORM_NONE;
}

void policy_ctx_init(policy_ctx *ctx, uint64_t seed) {
    if (!ctx) return;
    memset(ctx, 0, sizeof *ctx);
    ctx->seed = seed;
    ctx->w_memory = ctx->w_compute = ctx->w_replica = 1.0;
    ctx->w_topology = 1.0;
}

/* The rank from the name's hash (computed once per node and also used by random). */
static uint64_t rank_of(const policy_ctx *ctx, uint64_t name_hash) {
    uint64_t h = policy_hash64(ctx->seed);
    if (ctx->tiebreak == POLICY_TIE_RANDOM) h = policy_hash64(h ^ policy_hash64(ctx->decision + 0x5bd1e995ull));
    return policy_hash64(h ^ name_hash);
}

double policy_random_draw(const policy_ctx *ctx, uint64_t name_hash) {
    return 100.0 * (double)(policy_hash64(policy_hash64(ctx->seed ^ 0x5eedu) ^ policy_hash64(ctx->decision) ^ name_hash) >> 11) /
           9007199254740992.0;
}

uint64_t policy_node_rank(const policy_ctx *ctx, const char *node_name) {
    return rank_of(ctx, policy_hash_str(0, node_name));
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The FGD plugin's output for a fragmentation decrease delta (milli-GPU). */
static double fgd_value(double delta, bool exact) {
    double s = 100.0 * sigmoid(delta / 1000.0);
    return exact ? s : (double)(int64_t)s;
}

/* ------------------------------------------------------------ candidates */

/* One way to place the request on the node: the choice, and how it changes the GPUs. */
typedef struct cand {
    policy_choice c;
    int nchg;
    int8_t g[MODEL_MAX_GPUS];
    int16_t R0[MODEL_MAX_GPUS], E0[MODEL_MAX_GPUS], R1[MODEL_MAX_GPUS], E1[MODEL_MAX_GPUS];
    int32_t mem1[MODEL_MAX_GPUS];   /* GPU memory used after (whole mode), for binpack/spread */
    bool idle_instance;             /* MIG: takes an existing idle instance */
} cand;

static void choice_blank(policy_choice *c) {
    memset(c, 0, sizeof *c);
    c->mig_profile = c->mig_start = -1;
    c->replica = -1;
}

/* Every node-level number the policies read, before placement. */
typedef struct nodeinfo {
    int64_t cpu_free;     /* 0 when the node does not track host resources */
    int64_t gpu_free;     /* sum of R */
    int fully_free;       /* GPUs with R == 1000 */
    int64_t cpu_req, gpu_req;
} nodeinfo;

/* ------------------------------------------------------------ binpack / spread */

/* Used share of one GPU (0..1) after a candidate, over the weighted dimensions that
 * apply to its mode: compute always, memory, replicas on time-slice/MPS GPUs. */
static double gpu_used_share(const policy_ctx *ctx, const model_gpu *g, int R, int mem_used, int rep_used) {
    double wc = ctx->w_compute, wm = ctx->w_memory, wr = ctx->w_replica;
    double sum = wc * (1000 - R) / 1000.0, wsum = wc;
    if (g->mode == MODEL_GPU_MIG) {
        sum += wm * (1000 - R) / 1000.0;   /* MIG memory goes with its slices */
        wsum += wm;
    } else if (g->memory_mib > 0) {
        sum += wm * (double)mem_used / g->memory_mib;
        wsum += wm;
    }
    if ((g->mode == MODEL_GPU_TIMESLICE || g->mode == MODEL_GPU_MPS) && g->replicas > 0) {
        sum += wr * (double)rep_used / g->replicas;
        wsum += wr;
    }
    return wsum > 0 ? sum / wsum : 0.0;
}

/* Mean used share over the node's GPUs with the candidate applied (c NULL: as is). For
 * CPU-only requests the host CPU share is what fills, so that is the measure. */
static double node_used_share(const policy_ctx *ctx, const model_node *n, const pv_node *v, const model_request *r,
                              const cand *c, bool after) {
    if (r->kind == MODEL_REQ_NONE || v->ngpus == 0) {
        if (!n->track_host || n->cpu_milli <= 0) return 0.0;
        return (double)(n->cpu_used_milli + (after ? r->cpu_milli : 0)) / (double)n->cpu_milli;
    }
    double s = 0;
    for (int i = 0; i < v->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        int R = v->R[i], mem = g->memory_used_mib, rep = g->replicas_used;
        if (after && c) {
            for (int k = 0; k < c->nchg; k++) {
                if (c->g[k] != i) continue;
                R = c->R1[k];
                mem = c->mem1[k];
                if (c->c.replica >= 0) rep++;
            }
        }
        s += gpu_used_share(ctx, g, R, mem, rep);
    }
    return s / v->ngpus;
}

/* ------------------------------------------------------------ gpupacking / gpuclustering */

/* Task class bits: bit 0 share, bit k a k-GPU task. */
static uint32_t request_class(const model_request *r) {
    if (r->kind == MODEL_REQ_NONE) return 0;
    if (r->count == 1 && r->kind != MODEL_REQ_WHOLE && !(r->kind == MODEL_REQ_FRACTION && r->compute_permille >= 1000))
        return 1u;
    return 1u << (r->count > 16 ? 16 : r->count);
}

/* Classes of the GPU tasks already on the node, read from GPU holders rather than the
 * allocation list: an exclusive holder is a k-GPU task (k = its grants), any other
 * holder is a share. */
static uint32_t node_classes(const model_node *n) {
    uint32_t m = 0;
    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        if (g->nholders == 0) continue;
        int h = g->exclusive_holder;
        if (h >= 0 && h < n->nallocs) {
            int k = n->allocs[h].a.ngrants;
            m |= 1u << (k > 16 ? 16 : k < 1 ? 1 : k);
        }
        if (h < 0 || g->nholders > 1) m |= 1u;
    }
    return m;
}

static int popcount32(uint32_t x) { return __builtin_popcount(x); }

static double gpuclustering_score(const model_node *n, const model_request *r, const nodeinfo *ni, char *why,
                                  size_t whylen) {
    uint32_t rc = request_class(r);
    if (!rc) {
        if (why) snprintf(why, whylen, "gpuclustering: CPU-only task scores 0 everywhere");
        return 0;
    }
    uint32_t nc = node_classes(n);
    int64_t base = 25 * ((int64_t)GPU_SPEC - ni->gpu_free) / (int64_t)GPU_SPEC;
    int64_t tier;
    const char *what;
    if (nc & rc) {
        tier = popcount32(nc) == 1 ? 75 : 50;
        what = tier == 75 ? "hosts only this task class" : "hosts this class and others";
    } else {
        tier = nc ? 0 : 25;
        what = nc ? "hosts only other classes" : "idle node";
    }
    if (why) snprintf(why, whylen, "gpuclustering: %s (tier +%lld), GPU free %lld of 8000 -> +%lld", what,
                      (long long)tier, (long long)ni->gpu_free, (long long)base);
    return (double)(tier + base);
}

static double gpupacking_score(const pv_node *v, const model_request *r, const cand *c, const nodeinfo *ni,
                               char *why, size_t whylen) {
    if (r->kind == MODEL_REQ_NONE || ni->gpu_req <= 0) {
        if (why) snprintf(why, whylen, "gpupacking: CPU-only task scores 0 everywhere");
        return 0;
    }
    if (ni->fully_free == v->ngpus) {
        int64_t s = 33 - v->ngpus;
        if (s < v->ngpus) s = v->ngpus;
        if (why) snprintf(why, whylen, "gpupacking: idle node, %d free GPUs -> %lld", v->ngpus, (long long)s);
        return (double)s;
    }
    int used_free = 0, pct = 0;
    for (int k = 0; k < c->nchg; k++) {
        if (c->R0[k] >= 1000) used_free++;
        pct += c->R0[k] * 100 / 1000;
    }
    if (used_free > 0) {
        int64_t s = 50 - used_free;
        if (s < 33) s = 33;
        if (why) snprintf(why, whylen, "gpupacking: used node, takes %d fully free GPU(s) -> %lld", used_free, (long long)s);
        return (double)s;
    }
    int64_t s = 100 - pct / 10;
    if (s < 50) s = 50;
    if (why) snprintf(why, whylen, "gpupacking: fits on used GPU(s) with %d percent free -> %lld", pct, (long long)s);
    return (double)s;
}

/* ------------------------------------------------------------ scoring one candidate */

static double bestfit_raw(const nodeinfo *ni) {
    double left = 0.5 * (double)(ni->cpu_free - ni->cpu_req) / CPU_SPEC + 0.5 * (double)(ni->gpu_free - ni->gpu_req) / GPU_SPEC;
    return (double)(int64_t)(100.0 * (1.0 - left));
}

static double dotprod_raw(const nodeinfo *ni) {
    double dot = ((double)ni->cpu_free / CPU_SPEC) * ((double)ni->cpu_req / CPU_SPEC) +
                 ((double)ni->gpu_free / GPU_SPEC) * ((double)ni->gpu_req / GPU_SPEC);
    return (double)(int64_t)(100.0 * (1.0 - dot / 2.0));
}

static void fmt_choice(const model_node *n, const policy_choice *c, char *buf, size_t len) {
    if (c->ngpus == 0) {
        snprintf(buf, len, "no GPU");
        return;
    }
    size_t off = (size_t)snprintf(buf, len, "GPU");
    for (int i = 0; i < c->ngpus && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : " ", c->gpu[i]);
    const model_gpu_product *p = c->gpu[0] >= 0 && c->gpu[0] < n->ngpus ? n->gpus[c->gpu[0]].product : NULL;
    if (off < len && c->mig_profile >= 0)
        off += (size_t)snprintf(buf + off, len - off, " MIG %s@%d%s",
                                p && c->mig_profile < p->nprofiles ? p->profiles[c->mig_profile].name : "?",
                                c->mig_start, c->mig_create ? " (new)" : " (idle instance)");
    if (off < len && c->replica >= 0) snprintf(buf + off, len - off, " replica %d", c->replica);
}

/* ------------------------------------------------------------ frag helpers for fgd / mig-aware */

/* The workload fgd/mig-aware measure against. mig-aware without a workload (or without
 * MIG types, for a MIG request) measures against an implicit one: every profile of the
 * node's MIG product, equally likely, for MIG requests; the request's own shape
 * otherwise ("keep room for more like this"). */
typedef struct wl_buf {
    policy_workload w;
    policy_task_type types[MODEL_MAX_PROFILES];
    tt_hot hot[MODEL_MAX_PROFILES];
} wl_buf;

static const policy_workload *implicit_workload(wl_buf *b, const model_node *n, const model_request *r) {
    memset(&b->w, 0, sizeof b->w);
    b->w.types = b->types;
    b->w.hot = b->hot;
    b->w.finished = true;
    int nt = 0;
    const model_gpu_product *mp = NULL;
    for (int i = 0; i < n->ngpus && !mp; i++)
        if (n->gpus[i].mode == MODEL_GPU_MIG) mp = n->gpus[i].product;
    if (r->kind == MODEL_REQ_MIG && mp) {
        for (int i = 0; i < mp->nprofiles && nt < MODEL_MAX_PROFILES; i++) {
            policy_task_type *t = &b->types[nt++];
            memset(t, 0, sizeof *t);
            t->kind = t->req.kind = MODEL_REQ_MIG;
            t->gpus = t->req.count = 1;
            memcpy(t->req.mig_profile, mp->profiles[i].name, sizeof t->req.mig_profile);
        }
        b->w.has_mig = true;
    } else {
        policy_task_type *t = &b->types[nt++];
        memset(t, 0, sizeof *t);
        t->kind = r->kind;
        t->cpu_milli = r->cpu_milli;
        t->req = *r;
        t->req.nmodels = 0;
        t->gpus = r->kind == MODEL_REQ_NONE ? 0 : r->count;
        t->demand_permille = r->kind == MODEL_REQ_WHOLE ? 1000 : r->kind == MODEL_REQ_FRACTION ? r->compute_permille : 0;
        b->w.has_mig = r->kind == MODEL_REQ_MIG;
    }
    for (int i = 0; i < nt; i++) {
        b->types[i].p = 1.0 / nt;
        b->types[i].count = 1;
        tt_hot_of(&b->types[i], &b->hot[i]);
    }
    b->w.n = b->w.nkept = b->w.cap = nt;
    b->w.total = b->w.kept = nt;
    /* An id from the shapes, so the per-thread profile-index memo tells them apart. */
    uint64_t id = policy_hash64((uint64_t)nt ^ ((uint64_t)r->kind << 8));
    for (int i = 0; i < nt; i++) id = policy_hash_str(id, b->types[i].req.mig_profile);
    b->w.id = id | (1ull << 63);
    return &b->w;
}

/* ------------------------------------------------------------ the scorer */

typedef struct scorer {
    const policy *p;
    const model_request *r;
    const model_node *n;
    const policy_ctx *ctx;
    pv_node v;
    nodeinfo ni;
    const policy_workload *w;     /* fgd / mig-aware */
    uint8_t access[POLICY_MAX_TYPES];
    frag_state st;
    double F0;
    uint64_t name_hash;
    bool topo;                    /* a topology-aware policy on a node whose topology is known */
    bool want_why;                /* the caller asked why (policy_score's why) */
    int need;                     /* model_request_required_align(r): set and read on fast_single's path only */
    uint16_t idle;                /* topo: the GPUs without any grant (model_gpu_idle) */
    model_topo_room room0;        /* topo: what they offer multi-GPU pods now */
    int all_pairs;                /* topo: room_pairs with every GPU idle */
    model_topo_graph tg;          /* topo: the links, built once per node scored */
} scorer;

_Thread_local bool policy_test_generic_only;

/* ------------------------------------------------------------ topology (issue 22)
 *
 * binpack, spread, fgd-pack and mig-aware weigh how the node's GPUs are linked (topo.h);
 * the FGD paper's policies do not, but obey a required alignment (tessera.io/topology),
 * which model_fit enforces and fast_single mirrors. Within a node, a request on two GPUs
 * or more takes the most aligned set, then the one that leaves the largest aligned sets
 * of idle GPUs whole (model_topo_best_set's rule), then the policy's own preference; a
 * request on one GPU takes the policy's preference, then the GPU that keeps aligned sets
 * whole. Across nodes, see topo_bonus. A node without topology takes none of this: one
 * pointer test. */

static bool topo_aware(const policy *p) {
    return p->kind == P_BINPACK || p->kind == P_SPREAD || p->kind == P_PACK || p->kind == P_MIGAWARE;
}

/* The idle GPUs and what they offer now, once per node scored (out of line, as the rest). */
static __attribute__((noinline)) void topo_prepare(scorer *s) {
    s->idle = 0;
    for (int i = 0; i < s->n->ngpus && i < MODEL_MAX_GPUS; i++)
        if (model_gpu_idle(&s->n->gpus[i])) s->idle |= (uint16_t)(1u << i);
    model_topo_graph_of(s->n, &s->tg);
    model_topo_graph_room(&s->tg, s->idle, &s->room0);
    s->all_pairs = model_topo_graph_pairs(&s->tg, 0xffff);   /* room_pairs with every GPU idle */
}

/* Bits of the GPUs a candidate touches. */
static uint16_t cand_mask(const cand *c) {
    uint16_t m = 0;
    for (int i = 0; i < c->c.ngpus; i++) m |= (uint16_t)(1u << c->c.gpu[i]);
    return m;
}

static int cand_align(const scorer *s, const cand *c) { return (int)model_topo_graph_align(&s->tg, cand_mask(c)); }

/* What the idle GPUs offer once the candidate has its GPUs. */
static void cand_room(const scorer *s, const cand *c, model_topo_room *out) {
    uint16_t after = s->idle & (uint16_t)~cand_mask(c);
    if (after == s->idle) *out = s->room0;   /* no idle GPU taken (a share on a used GPU) */
    else model_topo_graph_room(&s->tg, after, out);
}

/* The order of two candidates by topology around the policy's key (>0: a wins); ra, rb: what
 * each leaves (cand_room). */
static int topo_cmp(const scorer *s, const cand *a, const model_topo_room *ra, double ka, const cand *b,
                    const model_topo_room *rb, double kb) {
    int c = 0;
    if (s->r->count >= 2) {
        c = cand_align(s, a) - cand_align(s, b);
        if (!c) c = model_topo_room_cmp(ra, rb);
    }
    if (!c) c = ka > kb ? 1 : ka < kb ? -1 : 0;
    if (!c) c = model_topo_room_cmp(ra, rb);
    return c;
}

/* Aligned pairs of idle GPUs at the nvlink, pcie and numa levels together (a pair aligned at
 * nvlink counts three times: it serves a pod at each level). */
static int room_pairs(const model_topo_room *r) {
    return r->pairs[MODEL_ALIGN_NVLINK] + r->pairs[MODEL_ALIGN_PCIE] + r->pairs[MODEL_ALIGN_NUMA];
}

#define TOPO_TIER 100.0        /* per alignment level: above any policy's 0..100 */
#define TOPO_PACK_POINTS 10.0  /* x ctx->w_topology: breaking every aligned pair of the idle GPUs */

/* What the node score gains from topology (registry comment in policy.h):
 *   alignment tier, requests on 2+ GPUs: +100 x (3 nvlink, 2 pcie, 1 numa, 0 none or unknown),
 *     so a node offering a better-aligned set always wins, whatever the packing terms say; a
 *     node whose topology is unknown ranks with one whose best set crosses sockets: it may
 *     well have an aligned set (and the device plugin then picks one), so it is not put below,
 *     but tessera cannot vouch for it, so it is not put above a node it knows to be aligned;
 *   packing term, every request: - 10 x w_topology x (aligned pairs of idle GPUs the placement
 *     breaks) / (aligned pairs the node's GPUs have when all are idle), counting pairs at the
 *     nvlink, pcie and numa levels together: the share of the node's aligned capacity the
 *     placement uses up, so small pods go where they break the least.
 * Zero on nodes without topology and for policies that do not weigh it. */
static __attribute__((noinline)) double topo_bonus(const scorer *s, const cand *c, const model_topo_room *known,
                                                   int *tier_out, double *pack_out) {
    int tier = 0;
    if (s->r->count >= 2 && c->c.ngpus >= 2) {
        int al = cand_align(s, c);
        tier = al >= MODEL_ALIGN_NUMA ? al - MODEL_ALIGN_NONE : 0;
    } else if (s->r->count >= 2) {
        tier = MODEL_ALIGN_NVLINK - MODEL_ALIGN_NONE;   /* all on one GPU (MIG instances): nothing crossed */
    }
    model_topo_room after;
    if (known) after = *known;   /* what the candidate walk found it leaves */
    else cand_room(s, c, &after);
    int total = s->all_pairs, lost = room_pairs(&s->room0) - room_pairs(&after);
    double pack = total > 0 ? -TOPO_PACK_POINTS * s->ctx->w_topology * lost / total : 0;
    *tier_out = tier;
    *pack_out = pack;
    return TOPO_TIER * tier + pack;
}

/* "GPUs 0,1,2,3: nvlink (NV12)" for a choice of two GPUs or more ("" otherwise). */
static void fmt_topo(const model_node *n, const policy_choice *c, char *buf, size_t len) {
    buf[0] = 0;
    if (c->ngpus < 2) return;
    size_t off = (size_t)snprintf(buf, len, "; GPUs ");
    for (int i = 0; i < c->ngpus && off < len; i++) off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", c->gpu[i]);
    if (off >= len) return;
    if (!n->topo) {
        snprintf(buf + off, len - off, ": topology unknown");
        return;
    }
    int nv;
    model_link worst = model_topo_worst_link(n, c->gpu, c->ngpus, &nv);
    char link[16];
    model_link_format(worst, nv, link, sizeof link);
    snprintf(buf + off, len - off, ": %s (%s)", model_align_name(model_topo_align(n, c->gpu, c->ngpus)),
             worst == MODEL_LINK_UNKNOWN ? "some pair unknown" : link);
}

static inline __attribute__((always_inline)) void cand_fraction(const scorer *s, int i, int d, cand *c) {
    const model_gpu *g = &s->n->gpus[i];
    choice_blank(&c->c);
    c->c.ngpus = 1;
    c->c.gpu[0] = (int8_t)i;
    c->nchg = 1;
    c->g[0] = (int8_t)i;
    c->R0[0] = s->v.R[i];
    c->E0[0] = s->v.E[i];
    c->R1[0] = (int16_t)(s->v.R[i] - d);
    c->E1[0] = (int16_t)(c->R1[0] > 999 ? 999 : c->R1[0]);
    c->mem1[0] = g->memory_used_mib + model_fraction_memory(s->r, g->memory_mib);
    c->idle_instance = false;
}

/* Δ = F_before - F_after for a candidate; ga: the changed GPUs' hypothetical state
 * (generic path), NULL on the fast path. */
static double frag_delta(scorer *s, const cand *c, const pv_gpu *ga) {
    double F1 = ga ? frag_after_generic(s->w, s->access, &s->st, s->r->cpu_milli, c->nchg, c->g, c->R0, c->R1, c->E1, ga)
                   : frag_after_fast(s->w, s->access, &s->st, s->r->cpu_milli, c->nchg, c->g, c->R0, c->E0, c->R1, c->E1);
    return s->F0 - F1;
}

/* Set bits of a start mask (a table: no popcnt instruction is assumed). */
#define P2(n) n, n + 1, n + 1, n + 2
#define P4(n) P2(n), P2(n + 1), P2(n + 1), P2(n + 2)
#define P6(n) P4(n), P4(n + 1), P4(n + 1), P4(n + 2)
static const uint8_t pop8_table[256] = {P6(0), P6(1), P6(1), P6(2)};
static inline int pop8(unsigned x) { return pop8_table[x & 0xffu]; }

/* mig-aware's second criterion, below any real difference in fragmentation: the
 * legal start slots the changed MIG GPUs still offer the workload's MIG types,
 * weighted by popularity. Room is all-or-nothing per GPU in the measure; this prefers,
 * among slots that keep the same types placeable, the one that keeps more ways to
 * place them (a 1g at slot 6 rather than 4 leaves 2g/1g.20gb a slot at 4). */
static double mig_placements(const scorer *s, const cand *c, const pv_gpu *ga) {
    const policy_workload *w = s->w;
    if (!w->has_mig) return 0;
    double sum = 0;
    for (int i = 0; i < c->nchg; i++) {
        const pv_gpu *g = &ga[i];
        if (g->mode != MODEL_GPU_MIG || !g->dyn || !g->product) continue;
        for (int t = 0; t < w->nkept; t++) {
            if (!w->hot[t].mig) continue;
            int idx = g->product == s->st.mig_p ? s->st.mig_idx[t] : mig_type_profile(w, t, g->product);
            if (idx >= 0) sum += w->hot[t].p * pop8(g->starts[idx]);
        }
    }
    return sum;
}

/* ------------------------------------------------------------ fgd-pack
 *
 * tessera's own policy (sim/README.md, "Packing beyond FGD" has the measurements). FGD
 * leaves idle GPUs behind on nodes whose host CPU is gone: its measure asks only whether
 * one task of each type still fits a node, so it happily takes the CPU that the node's
 * other idle GPUs would have needed. fgd-pack scores a node by FGD's quantised score of
 *     fragmentation decrease - PACK_STRAND_WEIGHT x growth of stranded GPUs,
 * where the stranded GPUs of a node are, for each GPU task type of the target workload,
 * the idle GPUs its free CPU cannot serve at that type's CPU per GPU, weighted by the
 * type's popularity. Per type, not at the workload's mean CPU per GPU: a node with little
 * CPU per GPU (openb's V100M16) is not stranded for the many tasks that ask for little
 * CPU, and a mean-based measure pulled every low-CPU task onto such nodes, taking GPUs
 * that model-restricted tasks needed (it lost to FGD on all four gpuspec lists; per type
 * it still loses gpuspec25 and gpuspec33, sim/README.md).
 * The seeded node ranking breaks FGD's ties, as in fgd: the spread it gives is worth
 * keeping (an exact, unquantised FGD does much worse). Within a node the GPU(s) with the
 * largest exact fragmentation decrease win, then the tightest. A pure function of
 * (request, node, ctx): the incremental selector applies. */

#define PACK_STRAND_WEIGHT 0.1   /* tuned on the default list, seeds 42..51 */

/* The target workload's GPU task types by CPU per GPU, with prefix sums, so the stranded
 * GPUs of a node cost a binary search rather than a pass over the types. Built per
 * thread for the last workload seen (an @online estimate changes id when republished). */
typedef struct pack_cpu_profile {
    uint64_t id;
    int n;                               /* GPU types that ask for host CPU */
    double cpu_per_gpu[POLICY_MAX_TYPES];   /* descending */
    double P[POLICY_MAX_TYPES + 1];      /* P[k]: popularity of the first k, over all GPU types' */
    double Q[POLICY_MAX_TYPES + 1];      /* Q[k]: sum of popularity / cpu_per_gpu of the first k */
} pack_cpu_profile;

/* By CPU per GPU, descending; equal ones by popularity, so the prefix sums are added in
 * one order on every libc (qsort is not stable). */
static int cmp_desc(const void *a, const void *b) {
    const double *x = a, *y = b;
    if (x[0] != y[0]) return (x[0] < y[0]) - (x[0] > y[0]);
    return (x[1] < y[1]) - (x[1] > y[1]);
}

static const pack_cpu_profile *pack_profile(const policy_workload *w) {
    static _Thread_local pack_cpu_profile pr;
    static _Thread_local bool built;
    if (built && pr.id == w->id) return &pr;
    double pairs[POLICY_MAX_TYPES][2], gpu_p = 0;
    int n = 0;
    for (int t = 0; t < w->nkept && n < POLICY_MAX_TYPES; t++) {
        const policy_task_type *tt = &w->types[t];
        if (tt->gpus <= 0) continue;   /* CPU-only: no GPU to strand */
        gpu_p += tt->p;
        /* a share needs its CPU for its fraction of a GPU */
        double gpus = tt->demand_permille > 0 ? tt->gpus * tt->demand_permille / 1000.0 : tt->gpus;
        if (tt->cpu_milli <= 0 || gpus <= 0) continue;
        pairs[n][0] = (double)tt->cpu_milli / gpus;
        pairs[n][1] = tt->p;
        n++;
    }
    qsort(pairs, (size_t)n, sizeof pairs[0], cmp_desc);
    pr.n = n;
    pr.P[0] = pr.Q[0] = 0;
    for (int i = 0; i < n; i++) {
        double p = gpu_p > 0 ? pairs[i][1] / gpu_p : 0;
        pr.cpu_per_gpu[i] = pairs[i][0];
        pr.P[i + 1] = pr.P[i] + p;
        pr.Q[i + 1] = pr.Q[i] + p / pairs[i][0];
    }
    pr.id = w->id;
    built = true;
    return &pr;
}

/* Milli-GPU of the node's `idle` GPUs that cpu_free cannot serve, averaged over the types:
 * sum of p x max(0, idle - cpu_free / cpu_per_gpu). A type strands GPUs exactly when its
 * CPU per GPU exceeds cpu_free / idle, a prefix of the descending list. */
static double pack_stranded(const pack_cpu_profile *pr, int idle, int64_t cpu_free) {
    if (idle <= 0) return 0;
    if (cpu_free < 0) cpu_free = 0;
    double x = (double)cpu_free / idle;
    int lo = 0, hi = pr->n;   /* first index with cpu_per_gpu <= x */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (pr->cpu_per_gpu[mid] > x) lo = mid + 1;
        else hi = mid;
    }
    return 1000.0 * (idle * pr->P[lo] - (double)cpu_free * pr->Q[lo]);
}

/* Among equal fragmentation decreases, the tightest GPU(s). */
static double pack_gpu_key(const cand *c) {
    double k = 0;
    for (int i = 0; i < c->nchg; i++) k -= c->R0[i];
    return 1e-6 * k;
}

static double pack_node_score(scorer *s, const cand *c, double delta, char *why, size_t whylen) {
    double strand = 0;
    if (s->n->track_host) {
        const pack_cpu_profile *pr = pack_profile(s->w);
        int idle0 = s->ni.fully_free, idle1 = idle0;
        for (int i = 0; i < c->nchg; i++) idle1 -= c->R0[i] >= 1000 && c->R1[i] < 1000;
        int64_t cf = s->n->cpu_milli - s->n->cpu_used_milli;
        strand = pack_stranded(pr, idle1, cf - s->r->cpu_milli) - pack_stranded(pr, idle0, cf);
    }
    double q = fgd_value(delta - PACK_STRAND_WEIGHT * strand, false);   /* 0..100, integer */
    if (why)
        snprintf(why, whylen, "fgd-pack: fragmentation %.1f -> %.1f (decrease %+.1f), stranded idle GPUs %+.0f milli "
                 "(x%.2g) -> FGD %.0f", s->F0, s->F0 - delta, delta, strand, PACK_STRAND_WEIGHT, q);
    return q;
}

/* Candidate preference within a node; higher wins, ties keep the earlier candidate. */
static double cand_key(scorer *s, const cand *c, const pv_gpu *ga, int idx, double *delta_out) {
    switch (s->p->kind) {
    case P_SPREAD: {
        double k = 0;
        for (int i = 0; i < c->nchg; i++) k += c->R0[i];
        return k;   /* emptiest GPU */
    }
    case P_RANDOM:   /* mig_lean draws the same way */
        return (double)(policy_hash64(policy_hash64(s->ctx->seed ^ 0xa5a5u) ^ policy_hash64(s->ctx->decision) ^
                                      s->name_hash ^ (uint64_t)idx) >> 11);
    case P_PACK: {
        double d = frag_delta(s, c, ga);
        *delta_out = d;
        return d + pack_gpu_key(c);
    }
    case P_FGD:
    case P_MIGAWARE: {
        double d = frag_delta(s, c, ga);
        *delta_out = d;
        bool exact = s->p->kind == P_MIGAWARE || s->ctx->fgd_exact;
        double k = exact ? d : fgd_value(d, false);
        if (s->p->kind == P_MIGAWARE) {
            if (c->idle_instance) k += 1e12;   /* idle instance first */
            if (ga) k += 1e-6 * mig_placements(s, c, ga);
        }
        return k;
    }
    default: {
        double k = 0;
        for (int i = 0; i < c->nchg; i++) k -= c->R0[i];
        return k;   /* tightest GPU that fits */
    }
    }
}

static double node_score(scorer *s, const cand *c, double delta, char *why, size_t whylen) {
    nodeinfo *ni = &s->ni;
    switch (s->p->kind) {
    case P_BINPACK:
    case P_SPREAD: {
        double u0 = why ? node_used_share(s->ctx, s->n, &s->v, s->r, c, false) : 0;   /* only told */
        double u1 = node_used_share(s->ctx, s->n, &s->v, s->r, c, true);
        double sc = s->p->kind == P_BINPACK ? 100.0 * u1 : 100.0 * (1.0 - u1);
        if (why) snprintf(why, whylen, "%s: node use %.1f percent -> %.1f percent (weights compute %.2g memory %.2g replicas %.2g)",
                          s->p->name, 100 * u0, 100 * u1, s->ctx->w_compute, s->ctx->w_memory, s->ctx->w_replica);
        return sc;
    }
    case P_BESTFIT: {
        double raw = bestfit_raw(ni);
        if (why) snprintf(why, whylen, "bestfit: leaves CPU %lldm, GPU %lld milli -> raw %.0f (min-max normalised over nodes)",
                          (long long)(ni->cpu_free - ni->cpu_req), (long long)(ni->gpu_free - ni->gpu_req), raw);
        return raw;
    }
    case P_DOTPROD: {
        double raw = dotprod_raw(ni);
        if (why) snprintf(why, whylen, "dotprod: free (CPU %lldm, GPU %lld milli) . request (CPU %lldm, GPU %lld milli) -> %.0f",
                          (long long)ni->cpu_free, (long long)ni->gpu_free, (long long)ni->cpu_req,
                          (long long)ni->gpu_req, raw);
        return raw;
    }
    case P_GPUPACKING: return gpupacking_score(&s->v, s->r, c, ni, why, whylen);
    case P_GPUCLUSTERING: return gpuclustering_score(s->n, s->r, ni, why, whylen);
    case P_RANDOM: {
        /* a uniform draw in [0, 100) from (seed, decision, node) */
        double raw = policy_random_draw(s->ctx, s->name_hash);
        if (why) snprintf(why, whylen, "random: draw %.6f (the highest draw among feasible nodes gets 100)", raw);
        return raw;
    }
    case P_PACK: return pack_node_score(s, c, delta, why, whylen);
    case P_FGD:
    case P_MIGAWARE: {
        bool exact = s->p->kind == P_MIGAWARE || s->ctx->fgd_exact;
        double sc = fgd_value(delta, exact);
        if (s->p->kind == P_MIGAWARE && s->r->kind == MODEL_REQ_MIG) sc = (c->idle_instance ? 50.0 : 0.0) + sc / 2.0;
        if (why) snprintf(why, whylen, "%s: fragmentation %.1f -> %.1f milli-GPU (decrease %+.1f) -> %s%.*f%s", s->p->name,
                          s->F0, s->F0 - delta, delta, exact ? "" : "int(100*sigmoid) = ", exact ? 3 : 0, sc,
                          s->p->kind == P_MIGAWARE && c->idle_instance ? ", uses an idle instance" : "");
        return sc;
    }
    }
    return 0;
}

/* Which GPUs a request may use depends on its path where DRA publishes GPUs (model_gpu_reachable); the lean paths
 * assume every GPU may be used, which holds when each is reachable: a claim on a node whose GPUs all come from DRA,
 * a device-plugin pod on one whose GPUs all come from the device plugin. */
static bool all_reachable(const scorer *s) {
    if (!s->n->has_dra && !s->r->via_dra) return true;
    for (int i = 0; i < s->n->ngpus; i++)
        if (!model_gpu_reachable(&s->n->gpus[i], s->r)) return false;
    return true;
}

/* Fast path: whole-mode node, request CPU-only / whole / 1-GPU fraction. */
static bool fast_eligible(const scorer *s) {
    const model_request *r = s->r;
    if (policy_test_generic_only) return false;
    if (!all_reachable(s)) return false;   /* which GPUs qualify depends on the path: model_fit knows */
    if (r->dra_nconstraints > 0) return false;   /* which GPUs go together: a claim's constraints (model_fit) */
    if (!s->v.all_whole || r->isolation != MODEL_ISO_DEFAULT) return false;
    if (r->compute_sharing == MODEL_COMPUTE_MPS) return false;   /* mode, uid and client cap: model_fit's rules */
    if (s->w && !frag_workload_fast(s->w)) return false;
    if (r->nmodels > 0) {   /* per-GPU model check: fast only on a single-product node */
        for (int i = 1; i < s->n->ngpus; i++)
            if (s->n->gpus[i].product != s->n->gpus[0].product) return false;
    }
    switch (r->kind) {
    case MODEL_REQ_NONE: return true;
    case MODEL_REQ_WHOLE: return r->count >= 1 && r->count <= MODEL_MAX_GPUS;
    case MODEL_REQ_FRACTION:
        /* a share that charges something (compute, memory or both): fit.c's soft route */
        return r->count == 1 && r->memory_mib >= 0 && r->memory_permille >= 0 && r->compute_permille >= 0 &&
               r->compute_permille <= 1000 && (r->compute_permille > 0 || r->memory_mib > 0 || r->memory_permille > 0);
    default: return false;
    }
}

/* fast_single's set when topology counts (a topology-aware policy on a node with topology, or
 * a required alignment): the best set, or model_fit's first aligned one (the lowest indices
 * that meet it) for the policies that do not weigh topology. 0 when no set will do. Out of
 * line: nodes without topology must not pay for it. */
static __attribute__((noinline)) int topo_whole_set(scorer *s, int8_t *set, char *why, size_t whylen) {
    bool idle[MODEL_MAX_GPUS];
    int nidle = 0;
    for (int i = 0; i < s->v.ngpus; i++) nidle += idle[i] = s->v.E[i] == 1001;
    int al = nidle < s->r->count ? -1
             : s->topo ? model_topo_graph_best_set(&s->tg, idle, s->r->count, set)
                       : model_topo_first_set(s->n, idle, s->r->count, (model_align)s->need, set);
    if (al < 0 || al < s->need) {
        if (nidle < s->r->count) {
            if (why) snprintf(why, whylen, "needs %d whole GPU%s, %d free", s->r->count, s->r->count > 1 ? "s" : "", nidle);
        } else if (s->want_why) {
            model_fit(s->n, s->r, NULL, 0, why, whylen);   /* its words for the refusal, only when asked */
        } else if (why) {
            snprintf(why, whylen, "no %d idle GPUs here are %s-aligned", s->r->count, model_align_name((model_align)s->need));
        }
        return 0;
    }
    return s->r->count;
}

/* CPU-only or whole GPUs: the one candidate (the lowest-indexed idle GPUs, or topo_whole_set's).
 * 1, or 0 when none, with the reason in why. */
static int fast_single(scorer *s, cand *c, char *why, size_t whylen) {
    const model_request *r = s->r;
    choice_blank(&c->c);
    c->nchg = 0;
    c->idle_instance = false;
    if (r->kind == MODEL_REQ_NONE) return 1;
    s->need = model_request_required_align(r);
    if (s->topo || s->need) {
        int8_t set[MODEL_MAX_GPUS];
        int k = topo_whole_set(s, set, why, whylen);
        for (int q = 0; q < k; q++) {
            int i = set[q];
            c->g[q] = (int8_t)i;
            c->c.gpu[q] = (int8_t)i;
            c->R0[q] = s->v.R[i];
            c->E0[q] = s->v.E[i];
            c->R1[q] = 0;
            c->E1[q] = 0;
            c->mem1[q] = s->n->gpus[i].memory_mib;
        }
        c->nchg = c->c.ngpus = k;
        return k > 0;
    }
    for (int i = 0; i < s->v.ngpus && c->nchg < r->count; i++) {
        if (s->v.E[i] != 1001) continue;
        int k = c->nchg++;
        c->g[k] = (int8_t)i;
        c->c.gpu[k] = (int8_t)i;
        c->R0[k] = s->v.R[i];
        c->E0[k] = s->v.E[i];
        c->R1[k] = 0;
        c->E1[k] = 0;
        c->mem1[k] = s->n->gpus[i].memory_mib;
    }
    c->c.ngpus = c->nchg;
    if (c->nchg < r->count) {
        if (why) snprintf(why, whylen, "needs %d whole GPU%s, %d free", r->count, r->count > 1 ? "s" : "", c->nchg);
        return 0;
    }
    return 1;
}

/* A share of one GPU: walk the GPUs that take it, keep the best by the policy's key;
 * equal (R, E) gives an equal delta, computed once (memory is in no FAST type's room
 * rule, so it decides which GPUs take the share, never a GPU's key). Returns the number
 * of GPUs that take it; *best is built for the winner only. */
/* Equal for the policy: whether GPU i keeps aligned sets more whole than GPU win, whose room
 * *win_room holds when *have (and then holds i's if i wins). Out of line, as topo_whole_set. */
static __attribute__((noinline)) bool fraction_topo_better(const scorer *s, int i, int win, int d,
                                                           model_topo_room *win_room, bool *have) {
    cand a, b;
    model_topo_room ra;
    cand_fraction(s, i, d, &a);
    cand_fraction(s, win, d, &b);
    cand_room(s, &a, &ra);
    if (!*have) cand_room(s, &b, win_room);
    *have = true;
    if (topo_cmp(s, &a, &ra, 0, &b, win_room, 0) <= 0) return false;
    *win_room = ra;
    return true;
}

static inline __attribute__((always_inline)) int fast_fraction_loop(scorer *s, cand *best, double *best_key,
                                                                    double *best_delta, const bool topo) {
    int d = s->r->compute_permille, nc = 0, win = -1;
    model_topo_room win_room;   /* topo: what the winner leaves, once asked */
    bool have_room = false;
    bool mem_sized = s->r->memory_mib > 0 || s->r->memory_permille > 0;
    int16_t seenR[MODEL_MAX_GPUS], seenE[MODEL_MAX_GPUS];
    double seenK[MODEL_MAX_GPUS], seenD[MODEL_MAX_GPUS];
    int nseen = 0;
    cand t;   /* only the first change is filled: enough for cand_key */
    t.nchg = 1;
    t.idle_instance = false;
    for (int i = 0; i < s->v.ngpus; i++) {
        const model_gpu *g = &s->n->gpus[i];
        /* fit.c's soft share: no exclusive holder, no MPS clients (a time-sliced share never joins them),
         * compute and the fraction's memory free */
        if (g->exclusive_holder >= 0 || g->mps_clients || s->v.R[i] < d ||
            model_fraction_memory(s->r, g->memory_mib) > g->memory_mib - g->memory_used_mib)
            continue;
        /* random draws per candidate by its index: the generic path's (model_fit's
         * ordinal) for memory-sized shares; compute-only shares keep the GPU index their
         * decisions were pinned with (test_policy_digest.c) */
        int idx = mem_sized ? nc : i;
        nc++;
        double key, delta = 0;
        int memo = -1;
        if (s->w)
            for (int q = 0; q < nseen && memo < 0; q++)
                if (seenR[q] == s->v.R[i] && seenE[q] == s->v.E[i]) memo = q;
        if (memo >= 0) {
            key = seenK[memo];
            delta = seenD[memo];
        } else {
            t.g[0] = (int8_t)i;
            t.R0[0] = s->v.R[i];
            t.E0[0] = s->v.E[i];
            t.R1[0] = (int16_t)(s->v.R[i] - d);
            t.E1[0] = (int16_t)(t.R1[0] > 999 ? 999 : t.R1[0]);
            key = cand_key(s, &t, NULL, idx, &delta);
            if (s->w) {
                seenR[nseen] = s->v.R[i];
                seenE[nseen] = s->v.E[i];
                seenK[nseen] = key;
                seenD[nseen++] = delta;
            }
        }
        if (topo && win >= 0 && key == *best_key) {
            if (fraction_topo_better(s, i, win, d, &win_room, &have_room)) {
                win = i;
                *best_delta = delta;
            }
        } else if (win < 0 || key > *best_key) {
            have_room = false;
            win = i;
            *best_key = key;
            *best_delta = delta;
        }
    }
    if (win >= 0) cand_fraction(s, win, d, best);
    return nc;
}

/* The loop compiled twice: the topology tie-break costs nodes without topology nothing. */
static int fast_fraction(scorer *s, cand *best, double *best_key, double *best_delta) {
    return s->topo ? fast_fraction_loop(s, best, best_key, best_delta, true)
                   : fast_fraction_loop(s, best, best_key, best_delta, false);
}

/* Generic path: one of model_fit's assignments as a candidate; ga receives the changed
 * GPUs' hypothetical state, in the order of c->g. */
static void generic_cand(const scorer *s, const model_assignment *a, cand *c, pv_gpu *ga, bool room) {
    choice_blank(&c->c);
    c->nchg = 0;
    c->idle_instance = false;
    for (int q = 0; q < a->ngrants; q++) {
        const model_grant *gr = &a->grant[q];
        if (gr->gpu < 0 || gr->gpu >= s->v.ngpus) continue;
        int k = 0;
        while (k < c->nchg && c->g[k] != gr->gpu) k++;
        if (k == c->nchg) {   /* first grant on this GPU */
            c->nchg++;
            c->g[k] = gr->gpu;
            c->R0[k] = c->R1[k] = s->v.R[gr->gpu];
            c->E0[k] = c->E1[k] = s->v.E[gr->gpu];
            ga[k] = s->v.g[gr->gpu];
            c->c.gpu[c->c.ngpus++] = gr->gpu;
        }
        pv_gpu_apply(&ga[k], &c->R1[k], &c->E1[k], gr, room);
        if (gr->mps) ga[k].mps_uid = (int32_t)a->mps_uid;
        c->mem1[k] = ga[k].mem_cap - ga[k].free_mem;
        if (gr->mig_profile >= 0 && c->c.mig_profile < 0) {
            c->c.mig_profile = gr->mig_profile;
            c->c.mig_start = gr->mig_start;
            c->c.mig_create = gr->mig_create;
        }
        if (gr->mig_profile >= 0 && !gr->mig_create) c->idle_instance = true;
        if (gr->replica >= 0 && c->c.replica < 0) c->c.replica = gr->replica;
    }
    for (int i = 1; i < c->c.ngpus; i++)   /* GPU list ascending */
        for (int j = i; j > 0 && c->c.gpu[j - 1] > c->c.gpu[j]; j--) {
            int8_t t = c->c.gpu[j];
            c->c.gpu[j] = c->c.gpu[j - 1];
            c->c.gpu[j - 1] = t;
        }
}

/* One MIG instance on a mixed-strategy node: the candidates fit.c's gen_mig lists, in
 * its order (GPU ascending; idle instances of the profile, then on dynamic GPUs each
 * legal free start), without its general machinery. */
static bool mig_eligible(const scorer *s) {
    const model_request *r = s->r;
    if (r->kind != MODEL_REQ_MIG || r->count != 1 || s->n->mig_strategy == MODEL_MIG_SINGLE) return false;
    if (s->topo) return false;   /* the generic loop weighs topology */
    if (!all_reachable(s)) return false;   /* as in fast_eligible */
    /* layered nodes (replicas on MIG instances) take model_fit's candidates: the lean
     * paths below know plain instances only */
    for (int i = 0; i < s->v.ngpus; i++)
        if (s->v.g[i].shared) return false;
    if (r->nmodels > 0)
        for (int i = 1; i < s->n->ngpus; i++)
            if (s->n->gpus[i].product != s->n->gpus[0].product) return false;
    return true;
}

/* model_product_profile_index, remembered for the last (product, name) per thread. */
static int request_profile(const model_gpu_product *p, const char *name) {
    static _Thread_local const model_gpu_product *lp;
    static _Thread_local char lname[32];
    static _Thread_local int lidx;
    if (p != lp || strncmp(name, lname, sizeof lname)) {
        lp = p;
        snprintf(lname, sizeof lname, "%s", name);
        lidx = model_product_profile_index(p, name);
    }
    return lidx;
}

/* one_per_gpu: the policy's key ignores the slot (no fragmentation measure, no
 * random draw), so the first candidate per GPU stands for the rest. */
static int mig_candidates(const scorer *s, model_assignment *as, int max, bool one_per_gpu) {
    int nc = 0, idx = -1;
    const model_gpu_product *last = NULL;
    for (int gi = 0; gi < s->v.ngpus && nc < max; gi++) {
        const pv_gpu *g = &s->v.g[gi];
        if (g->mode != MODEL_GPU_MIG || !g->product) continue;
        if (g->product != last) {
            last = g->product;
            idx = request_profile(g->product, s->r->mig_profile);
        }
        if (idx < 0) continue;
        int before = nc;
        for (int k = 0; k < g->layout.n && nc < max && !(one_per_gpu && nc > before); k++) {
            if ((g->held & (1u << k)) || g->layout.inst[k].profile != idx) continue;
            model_assignment *a = &as[nc++];
            a->ngrants = 1;
            a->grant[0] = (model_grant){.gpu = (int8_t)gi, .mig_inst = (int8_t)k, .mig_profile = (int8_t)idx,
                                        .mig_start = g->layout.inst[k].start, .replica = -1};
        }
        if (!g->dyn) continue;
        for (int st = 0; st < MODEL_MIG_MAX_SLICES && nc < max && !(one_per_gpu && nc > before); st++) {
            if (!(g->starts[idx] & (1u << st))) continue;
            model_assignment *a = &as[nc++];
            a->ngrants = 1;
            a->grant[0] = (model_grant){.gpu = (int8_t)gi, .mig_inst = -1, .mig_profile = (int8_t)idx,
                                        .mig_start = (int8_t)st, .mig_create = true, .replica = -1};
        }
    }
    return nc;
}

/* One MIG instance for a policy that needs no fragmentation measure: what the generic
 * loop does with mig_candidates, without building an assignment per candidate. Random
 * draws a key per candidate (mig_candidates' order and index, GEN_MAX at most); the
 * others key a GPU's first candidate (its first idle instance of the profile, else on a
 * dynamic GPU the lowest free start) by R as cand_key does, the first best GPU winning.
 * Returns the number of candidates (random) or of GPUs that take it (others). */
static int mig_lean(scorer *s, cand *best, double *best_key) {
    bool all = s->p->kind == P_RANDOM;
    int nc = 0, idx = -1, win = -1;
    /* per GPU, its candidates in order: idle instances of the profile (bits of layout
     * index), then free starts (dynamic) */
    unsigned idle_of[MODEL_MAX_GPUS] = {0}, starts_of[MODEL_MAX_GPUS] = {0};
    int8_t prof_of[MODEL_MAX_GPUS];
    const model_gpu_product *last = NULL;
    for (int gi = 0; gi < s->v.ngpus && nc < GEN_MAX; gi++) {
        const pv_gpu *g = &s->v.g[gi];
        if (g->mode != MODEL_GPU_MIG || !g->product) continue;
        if (g->product != last) {
            last = g->product;
            idx = request_profile(g->product, s->r->mig_profile);
        }
        if (idx < 0) continue;
        unsigned idle = 0, starts = g->dyn ? g->starts[idx] : 0;
        if ((g->idle_prof >> idx) & 1u)
            for (int i = 0; i < g->layout.n; i++)
                if (!(g->held & (1u << i)) && g->layout.inst[i].profile == idx) idle |= 1u << i;
        if (!(idle | starts)) continue;
        idle_of[gi] = idle;
        starts_of[gi] = starts;
        prof_of[gi] = (int8_t)idx;
        if (all) {
            int cnt = pop8(idle) + pop8(starts);
            nc = nc + cnt > GEN_MAX ? GEN_MAX : nc + cnt;
            continue;
        }
        double key = s->p->kind == P_SPREAD ? s->v.R[gi] : -s->v.R[gi];
        nc++;
        if (win >= 0 && !(key > *best_key)) continue;
        win = gi;
        *best_key = key;
    }
    /* Random: a draw depends on the candidate's index alone, so the draws run in one
     * loop of independent hashes (which pipeline, where interleaving them with the
     * candidate walk did not), and the winning index is mapped back to its GPU after.
     * Keys compare as integers: below 2^53, the same order as cand_key's doubles. */
    int j = 0;
    if (all && nc) {
        uint64_t rbase = policy_hash64(s->ctx->seed ^ 0xa5a5u) ^ policy_hash64(s->ctx->decision) ^ s->name_hash;
        uint64_t bk = policy_hash64(rbase) >> 11;
        for (int q = 1; q < nc; q++) {
            uint64_t k = policy_hash64(rbase ^ (uint64_t)q) >> 11;
            if (k > bk) bk = k, j = q;
        }
        *best_key = (double)bk;
        for (int gi = 0; gi < s->v.ngpus && win < 0; gi++) {
            int cnt = pop8(idle_of[gi]) + pop8(starts_of[gi]);
            if (j < cnt) win = gi; else j -= cnt;
        }
    }
    if (win >= 0) {
        /* the j-th candidate of the winning GPU (its first, unless random) */
        const pv_gpu *g = &s->v.g[win];
        unsigned idle = idle_of[win], starts = starts_of[win];
        int ni = pop8(idle), k = -1, st;
        if (j < ni) {
            while (j-- > 0) idle &= idle - 1;
            k = __builtin_ctz(idle);
            st = g->layout.inst[k].start;
        } else {
            for (j -= ni; j > 0; j--) starts &= starts - 1;
            st = __builtin_ctz(starts);
        }
        model_grant gr = {.gpu = (int8_t)win, .mig_inst = (int8_t)k, .mig_profile = prof_of[win],
                          .mig_start = (int8_t)st, .mig_create = k < 0, .replica = -1};
        /* generic_cand's candidate for this one grant, with R after from the memo
         * (pv_mig_after) rather than from a copy of the GPU with the grant applied */
        uint16_t room;
        uint8_t starts1[MODEL_MAX_PROFILES];
        choice_blank(&best->c);
        best->c.ngpus = 1;
        best->c.gpu[0] = (int8_t)win;
        best->c.mig_profile = gr.mig_profile;
        best->c.mig_start = gr.mig_start;
        best->c.mig_create = gr.mig_create;
        best->nchg = 1;
        best->g[0] = (int8_t)win;
        best->R0[0] = s->v.R[win];
        best->E0[0] = s->v.E[win];
        best->R1[0] = (int16_t)pv_mig_after(g, &gr, &room, starts1);
        best->E1[0] = -1;   /* pv_eff of a MIG GPU */
        best->mem1[0] = g->mem_cap - (int)((long long)g->mem_cap * best->R1[0] / 1000);
        best->idle_instance = !gr.mig_create;
    }
    return nc;
}

/* One MIG instance under fgd / mig-aware, when every task type is CPU-only, FAST or MIG
 * and the node's MIG GPUs share the product the measure resolved (st.mig_p): the generic
 * loop's answer, frag_after_generic's arithmetic term by term, without building
 * candidates or hashing signatures. A GPU in the same state as an earlier one offers the
 * same candidates with the same keys, which never displace the earlier ones: skipped. */
static bool mig_frag_eligible(const scorer *s) {
    if (!s->w || !mig_eligible(s)) return false;
    for (int t = 0; t < s->w->nkept; t++)
        if (s->w->hot[t].cls == TT_GENERIC && !s->w->hot[t].mig) return false;
    for (int gi = 0; gi < s->v.ngpus; gi++)
        if (s->v.g[gi].mode == MODEL_GPU_MIG && s->v.g[gi].product != s->st.mig_p) return false;
    return true;
}

static int mig_frag_lean(scorer *s, cand *best, double *best_key, double *best_delta) {
    const policy_workload *w = s->w;
    const frag_state *st = &s->st;
    bool migaware = s->p->kind == P_MIGAWARE, exact = migaware || s->p->kind == P_PACK || s->ctx->fgd_exact;
    int64_t cpu = st->cpu == INT64_MAX ? INT64_MAX : st->cpu - s->r->cpu_milli;
    int nc = 0, idx = -2, win = -1;
    model_grant wg = {0};
    /* mig_placements' terms: the MIG types with a profile on the node's product, in order */
    int nmt = 0;
    int8_t mt_idx[POLICY_MAX_TYPES];
    double mt_p[POLICY_MAX_TYPES];
    for (int t = 0; t < w->nkept && migaware; t++)
        if (w->hot[t].mig && st->mig_idx[t] >= 0) {
            mt_idx[nmt] = st->mig_idx[t];
            mt_p[nmt++] = w->hot[t].p;
        }
    for (int gi = 0; gi < s->v.ngpus && nc < GEN_MAX; gi++) {
        const pv_gpu *g = &s->v.g[gi];
        if (g->mode != MODEL_GPU_MIG || !g->product) continue;
        if (idx == -2) idx = request_profile(g->product, s->r->mig_profile);   /* one product */
        if (idx < 0) break;
        unsigned idle = 0, starts = g->dyn ? g->starts[idx] : 0;
        if ((g->idle_prof >> idx) & 1u)
            for (int i = 0; i < g->layout.n; i++)
                if (!(g->held & (1u << i)) && g->layout.inst[i].profile == idx) idle |= 1u << i;
        int cnt = pop8(idle) + pop8(starts);
        bool dup = false;
        for (int j = 0; j < gi && g->key && !dup; j++) dup = s->v.g[j].mode == MODEL_GPU_MIG && s->v.g[j].key == g->key;
        if (dup) {
            nc = nc + cnt > GEN_MAX ? GEN_MAX : nc + cnt;
            continue;
        }
        int R0 = s->v.R[gi];
        /* F after depends on the candidate only through R and the room bits after */
        int nmemo = 0;
        unsigned memo_m[16];
        int16_t memo_R[16];
        double memo_F[16];
        while ((idle | starts) && nc < GEN_MAX) {
            model_grant gr = {.gpu = (int8_t)gi, .mig_inst = -1, .mig_profile = (int8_t)idx, .replica = -1};
            if (idle) {
                gr.mig_inst = (int8_t)__builtin_ctz(idle);
                idle &= idle - 1;
                gr.mig_start = g->layout.inst[gr.mig_inst].start;
            } else {
                gr.mig_start = (int8_t)__builtin_ctz(starts);
                gr.mig_create = true;
                starts &= starts - 1;
            }
            uint16_t room1;
            uint8_t starts1[MODEL_MAX_PROFILES];
            int16_t R1 = (int16_t)pv_mig_after(g, &gr, &room1, starts1), E1 = -1;   /* pv_eff of a MIG GPU */
            unsigned m1 = room1;
            int64_t free = st->free + R1 - R0;
            double F = 0;
            int q = 0;
            while (q < nmemo && !(memo_m[q] == m1 && memo_R[q] == R1)) q++;
            for (int t = 0; t < w->nkept && q == nmemo; t++) {
                const tt_hot *h = &w->hot[t];
                int64_t f = free;
                if (h->cls != TT_CPU) {
                    int c = st->cnt[t];
                    int64_t sl = st->sl[t];
                    if (st->room[t] & (1u << gi)) c--; else sl -= R0;
                    bool room = h->cls == TT_FAST ? E1 >= h->d_eff : st->mig_idx[t] >= 0 && ((m1 >> st->mig_idx[t]) & 1u);
                    if (room) c++; else sl += R1;
                    if (s->access[t] && cpu >= h->cpu && c >= h->k) f = sl;
                }
                F += h->p * (double)f;
            }
            if (q < nmemo) {
                F = memo_F[q];
            } else if (nmemo < 16) {
                memo_m[nmemo] = m1;
                memo_R[nmemo] = R1;
                memo_F[nmemo++] = F;
            }
            double d = s->F0 - F;
            /* fgd's quantised key is non-decreasing in d: a d no larger than the best's
             * cannot displace it, and skips the exp() */
            if (!exact && win >= 0 && d <= *best_delta) {
                nc++;
                continue;
            }
            double key = exact ? d : fgd_value(d, false);
            if (migaware) {   /* cand_key's terms; mig_placements with the node's one MIG product */
                double sum = 0;
                if (w->has_mig && g->dyn)
                    for (int j = 0; j < nmt; j++) sum += mt_p[j] * pop8(starts1[mt_idx[j]]);
                if (!gr.mig_create) key += 1e12;
                key += 1e-6 * sum;
            }
            nc++;
            if (win >= 0 && !(key > *best_key)) continue;
            win = gi;
            *best_key = key;
            *best_delta = d;
            wg = gr;
        }
    }
    if (win >= 0) {
        model_assignment a;
        a.ngrants = 1;
        a.grant[0] = wg;
        pv_gpu ga[1];
        generic_cand(s, &a, best, ga, true);
    }
    return nc;
}

/* Same GPU state and same grant shape: the same delta. Saves most of the work on nodes
 * of identical GPUs (8 empty MIG GPUs x 7 start slots). */
static uint64_t gpu_sig(const pv_node *v, int i) {
    const pv_gpu *g = &v->g[i];
    uint64_t h = policy_hash64(((uint64_t)(uint16_t)v->R[i] << 16) ^ (uint16_t)v->E[i] ^ ((uint64_t)g->mode << 40) ^
                               ((uint64_t)g->held << 48) ^ ((uint64_t)(uint32_t)g->free_mem << 20));
    h = policy_hash64(h ^ (uint64_t)(uintptr_t)g->product ^ ((uint64_t)g->free_rep << 56));
    if (g->mps_clients)   /* who may join depends on the MPS clients and their uid (without them: on R, E, holders) */
        h = policy_hash64(h ^ ((uint64_t)g->mps_clients << 32) ^ (uint32_t)g->mps_uid);
    for (int k = 0; k < g->layout.n; k++)
        h = policy_hash64(h ^ ((uint64_t)(uint8_t)g->layout.inst[k].profile << 8) ^ (uint8_t)g->layout.inst[k].start ^
                          ((g->shared >> k) & 1u ? (uint64_t)g->rep_free[k] << 24 | 1ull << 40 : 0));
    return h;
}

int policy_score(const policy *p, const model_request *r, const model_node *n, const policy_ctx *ctx,
                 policy_result *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!p || !r || !n || !ctx || !out || !n->name) {
        if (why) snprintf(why, whylen, "policy_score: NULL argument");
        return -1;
    }
    /* A large cluster's nodes do not stay in cache between decisions (5,000 MIG nodes
     * score about 40% slower than 500), and every GPU's head (mode, holders, product)
     * and MIG instances (the next 64 bytes) are read below, GPU by GPU. Asking for all
     * of those lines now lets the misses overlap instead of queueing one after another. */
    for (int i = 0; i < n->ngpus && i < MODEL_MAX_GPUS; i++) {
        __builtin_prefetch(&n->gpus[i]);
        __builtin_prefetch(&n->gpus[i].inst[MODEL_MIG_MAX_INSTANCES - 1]);
    }
    memset(out, 0, sizeof *out);
    choice_blank(&out->choice);
    uint64_t name_hash = policy_hash_str(0, n->name);
    out->rank = rank_of(ctx, name_hash);
    if (r->kind < MODEL_REQ_NONE || r->kind > MODEL_REQ_MIG || (r->kind != MODEL_REQ_NONE && (r->count < 1 || r->count > MODEL_MAX_GPUS))) {
        if (why) snprintf(why, whylen, "policy_score: request kind %d count %d out of range", (int)r->kind, r->count);
        return -1;
    }

    scorer S, *s = &S;
    s->p = p;
    s->r = r;
    s->n = n;
    s->ctx = ctx;
    s->w = NULL;
    s->name_hash = name_hash;
    s->topo = n->topo && r->kind != MODEL_REQ_NONE && topo_aware(p);
    s->want_why = why != NULL;
    if (s->topo) topo_prepare(s);
    wl_buf wb;
    if (p->kind == P_FGD || p->kind == P_PACK) {
        if (!ctx->workload || !ctx->workload->finished || ctx->workload->nkept == 0) {
            if (why) snprintf(why, whylen, "%s needs a finished target workload in ctx->workload", p->name);
            return -1;
        }
        s->w = ctx->workload;
    } else if (p->kind == P_MIGAWARE) {
        const policy_workload *w = ctx->workload;
        bool usable = w && w->finished && w->nkept > 0 && (r->kind != MODEL_REQ_MIG || w->has_mig);
        s->w = usable ? w : implicit_workload(&wb, n, r);
    }

    /* Host and model checks first: cheap, and the commonest reasons a node is out. */
    if (n->track_host) {
        int64_t mem = (r->memory_bytes + (1 << 20) - 1) >> 20;
        if (n->cpu_milli - n->cpu_used_milli < r->cpu_milli || n->memory_mib - n->memory_used_mib < mem) {
            if (why) snprintf(why, whylen, "not enough host %s", n->cpu_milli - n->cpu_used_milli < r->cpu_milli ? "CPU" : "memory");
            return 0;
        }
    }
    if (r->kind != MODEL_REQ_NONE) {
        if (n->reason[0]) {
            if (why) snprintf(why, whylen, "node takes no GPU pods: %s", n->reason);
            return 0;
        }
        if (r->via_dra && !n->has_dra) {
            if (why) snprintf(why, whylen, "no GPU published through DRA on this node");
            return 0;
        }
        if (r->nmodels > 0 && !model_fit_product_allowed(n, r)) {
            if (why) snprintf(why, whylen, "GPU model not among the request's allowed models");
            return 0;
        }
    }

    /* Decide the path before building the view: the generic one needs the detail. */
    s->v.all_whole = true;
    for (int i = 0; i < n->ngpus && i < MODEL_MAX_GPUS; i++)
        if (n->gpus[i].mode != MODEL_GPU_WHOLE) s->v.all_whole = false;
    bool fast = fast_eligible(s);
    pv_build(&s->v, n, !fast);

    nodeinfo *ni = &s->ni;
    ni->cpu_free = n->track_host ? n->cpu_milli - n->cpu_used_milli : 0;
    ni->cpu_req = n->track_host ? r->cpu_milli : 0;
    ni->gpu_free = 0;
    ni->fully_free = 0;
    for (int i = 0; i < s->v.ngpus; i++) {
        ni->gpu_free += s->v.R[i];
        ni->fully_free += s->v.R[i] >= 1000;
    }
    if (s->w) {
        frag_access(s->w, n, s->access);
        s->F0 = frag_eval(s->w, &s->v, s->access, &s->st, NULL);
    }

    /* Walk the candidates, keep the one the policy prefers (first among equals). */
    cand cur, best;
    double best_key = 0, best_delta = 0;
    int nc = 0;
    char fitwhy[MODEL_REASON_LEN];
    fitwhy[0] = 0;
    model_topo_room best_room = {{0}, {0}};   /* topo, generic path: what best leaves */
    bool have_best_room = false;
    if (fast && s->r->kind == MODEL_REQ_FRACTION) {
        nc = fast_fraction(s, &best, &best_key, &best_delta);
        if (!nc && (r->memory_mib > 0 || r->memory_permille > 0)) {
            if (why) model_fit(n, r, NULL, 0, fitwhy, sizeof fitwhy);   /* its words, only when asked */
        } else if (!nc) {
            snprintf(fitwhy, sizeof fitwhy, "no GPU has %d milli-GPU free", r->compute_permille);
        }
    } else if (fast) {
        nc = fast_single(s, &best, fitwhy, sizeof fitwhy);
        if (nc) best_key = cand_key(s, &best, NULL, 0, &best_delta);
    } else {
        /* model_fit lists every placement; on the stack, GEN_MAX at most are looked at.
         * One MIG instance is common and model_fit's generality costs: list those here. */
        model_assignment as[GEN_MAX];
        bool lean = !s->w && mig_eligible(s), frag_lean = !lean && mig_frag_eligible(s);
        if (lean || frag_lean) {
            nc = lean ? mig_lean(s, &best, &best_key) : mig_frag_lean(s, &best, &best_key, &best_delta);
            if (!nc) snprintf(fitwhy, sizeof fitwhy, "no idle %s instance and no free slot to create one", r->mig_profile);
            lean = true;
        } else if (mig_eligible(s)) {
            nc = mig_candidates(s, as, GEN_MAX, !s->w && p->kind != P_RANDOM);
            if (!nc) snprintf(fitwhy, sizeof fitwhy, "no idle %s instance and no free slot to create one", r->mig_profile);
        } else {
            int total = model_fit(n, r, as, GEN_MAX, fitwhy, sizeof fitwhy);
            nc = total < GEN_MAX ? total : GEN_MAX;
        }
        /* Same GPU state and same one-grant shape: same delta, and an equal key never
         * displaces the earlier candidate, so repeats are skipped unbuilt. */
        pv_gpu ga[MODEL_MAX_GPUS];
        uint64_t gsig[MODEL_MAX_GPUS], seen[256];
        bool have_gsig[MODEL_MAX_GPUS] = {false};
        unsigned nseen = 16;
        while (nseen < 2u * (unsigned)nc && nseen < 256) nseen *= 2;
        if (!lean) memset(seen, 0, nseen * sizeof seen[0]);
        bool first = true;
        model_topo_room cur_room = {{0}, {0}};   /* topo: what cur leaves */
        for (int k = 0; k < nc && !lean; k++) {
            /* (random draws per candidate; the others' keys depend on the GPU state and
             * the grant shape only, and on the slot only when fragmentation counts) */
            if (p->kind != P_RANDOM && !s->topo && as[k].ngrants == 1) {
                const model_grant *g0 = &as[k].grant[0];
                int slot = s->w ? g0->mig_start : 0;
                int gi = g0->gpu;
                if (gi >= 0 && gi < s->v.ngpus) {
                    if (!have_gsig[gi]) {
                        gsig[gi] = gpu_sig(&s->v, gi);
                        have_gsig[gi] = true;
                    }
                    uint64_t sg = policy_hash64(gsig[gi] ^ ((uint64_t)(uint8_t)g0->mig_profile << 8) ^
                                                ((uint64_t)(uint8_t)slot << 16) ^ ((uint64_t)g0->mig_create << 24) ^
                                                ((uint64_t)(g0->replica >= 0) << 25) ^ ((uint64_t)g0->exclusive << 26) ^
                                                ((uint64_t)(uint16_t)g0->compute_permille << 32) ^
                                                ((uint64_t)(uint32_t)g0->memory_mib << 48)) | 1;
                    unsigned h = (unsigned)(sg % nseen);
                    while (seen[h] && seen[h] != sg) h = (h + 1) % nseen;
                    if (seen[h] == sg) continue;
                    seen[h] = sg;
                }
            }
            generic_cand(s, &as[k], &cur, ga, s->w != NULL);
            double delta = 0;
            double key = cand_key(s, &cur, ga, k, &delta);
            if (s->topo) cand_room(s, &cur, &cur_room);
            if (first || (s->topo ? topo_cmp(s, &cur, &cur_room, key, &best, &best_room, best_key) > 0 : key > best_key)) {
                best = cur;
                best_room = cur_room;
                have_best_room = s->topo;
                best_key = key;
                best_delta = delta;
                first = false;
            }
        }
    }
    if (nc == 0) {
        if (why) snprintf(why, whylen, "%s", fitwhy);
        return 0;
    }
    const cand *c = &best;
    ni->gpu_req = 0;
    for (int i = 0; i < c->nchg; i++) ni->gpu_req += c->R0[i] - c->R1[i];

    char wbuf[256], cbuf[96], tbuf[80], bbuf[96];
    bbuf[0] = 0;
    out->feasible = true;
    out->choice = c->c;
    out->raw = node_score(s, c, best_delta, why ? wbuf : NULL, sizeof wbuf);
    out->score = out->raw;
    if (s->topo) {
        int tier;
        double pack;
        out->score += topo_bonus(s, c, have_best_room ? &best_room : NULL, &tier, &pack);
        if (s->p->kind == P_BINPACK || s->p->kind == P_SPREAD) out->raw = out->score;
        if (why)
            snprintf(bbuf, sizeof bbuf, "; topology: alignment +%.0f, keeping aligned sets whole %+.2f -> %.2f",
                     TOPO_TIER * tier, pack, out->score);
    }
    if (s->p->kind == P_FGD || s->p->kind == P_MIGAWARE || s->p->kind == P_PACK) out->raw = best_delta;
    if (why) {
        fmt_choice(n, &c->c, cbuf, sizeof cbuf);
        fmt_topo(n, &c->c, tbuf, sizeof tbuf);
        snprintf(why, whylen, "%s; %s of %d candidate%s%s%s", wbuf, cbuf, nc, nc == 1 ? "" : "s", tbuf, bbuf);
    }
    return 0;
}
