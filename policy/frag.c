/* frag.c -- FGD's fragmentation measure (sim/fgd-method.md section 2), generalised
 * beyond whole-mode GPUs, over a compact view of a node that the scoring loops share.
 *
 * F_n(m) for a task type m on node n, R_g = policy_gpu_free(g), free_n = sum R_g:
 *   CPU-only type: free_n (every idle GPU is a fragment for a task using none);
 *   the node's product not allowed, or not enough CPU, or fewer than k_m GPUs with
 *   room for one unit of m: free_n;
 *   otherwise the sum of R_g over the GPUs without room for m (the slivers).
 * "Room for one unit of m" on a GPU, by mode (the paper has only the first line):
 *   whole mode, whole type:     the GPU is idle;
 *   whole mode, fraction type:  no exclusive holder, R >= d_m, and free memory for
 *                               the type's memory demand when it gives one;
 *   time-slice/MPS:             a free replica, for shared types and for types whose
 *                               isolation lets them take a replica;
 *   MIG:                        an idle instance of the type's profile, or (dynamic
 *                               MIG) a legal free start slot for a new one; for types
 *                               that take a replica (.shared, isolation timeslice/mps/
 *                               any), a free replica of a shared instance of it.
 * A fraction whose isolation would let model_fit map it onto a MIG slice is not counted
 * as having room on MIG GPUs (the measure stays per-GPU and cheap; such types are rare).
 * Memory on the host is not part of the measure, as in the paper.
 */
#include "policy/policy_int.h"

#include <stdio.h>
#include <string.h>

uint64_t policy_hash_str(uint64_t h, const char *s) {
    uint64_t f = 0xcbf29ce484222325ull;
    for (; s && *s; s++) f = (f ^ (unsigned char)*s) * 0x100000001b3ull;
    return policy_hash64(h ^ policy_hash64(f));
}

int policy_gpu_free(const model_gpu *g) {
    if (!g) return 0;
    switch (g->mode) {
    case MODEL_GPU_TIMESLICE:
    case MODEL_GPU_MPS:
        return g->replicas > 0 ? 1000 * model_gpu_free_replicas(g) / g->replicas : 0;
    case MODEL_GPU_WHOLE:
    case MODEL_GPU_MIG:
        return model_gpu_free_compute(g);
    }
    return 0;
}

/* ------------------------------------------------------------ MIG helpers */

void mig_starts(const model_gpu_product *p, const model_mig_layout *l, uint8_t *out) {
    model_mig_free_starts_all(p, l, out);
}

typedef struct type_memo {
    uint64_t wid;
    const model_gpu_product *p;
    int8_t idx[POLICY_MAX_TYPES];
} type_memo;
static _Thread_local type_memo tmemo[4];

int mig_type_profile(const policy_workload *w, int t, const model_gpu_product *p) {
    type_memo *m = &tmemo[((uintptr_t)p >> 4) & 3];
    if (m->wid != w->id || m->p != p) {
        m->wid = w->id;
        m->p = p;
        for (int i = 0; i < w->nkept; i++)
            m->idx[i] = (int8_t)(w->types[i].kind == MODEL_REQ_MIG ? model_product_profile_index(p, w->types[i].req.mig_profile) : -1);
    }
    return m->idx[t];
}

static int mig_free_permille(const pv_gpu *g) {
    const model_gpu_product *p = g->product;
    if (!p || p->mig_compute_slices <= 0) return 0;
    if (g->shared) {
        /* layered: model/gpu.c's arithmetic, thousandths of a slice, a shared instance
         * counted by its free replicas */
        long held = 0, idle = 0;
        for (int i = 0; i < g->layout.n; i++) {
            long c = 1000L * p->profiles[g->layout.inst[i].profile].compute_slices, f;
            if (g->shared & (1u << i)) f = c * g->rep_free[i] / g->rep_n[i];
            else f = g->held & (1u << i) ? 0 : c;
            idle += f;
            held += c - f;
        }
        long free = g->dyn ? 1000L * p->mig_compute_slices - held : idle;
        return free < 0 ? 0 : (int)(free / p->mig_compute_slices);
    }
    int held = 0, idle = 0;
    for (int i = 0; i < g->layout.n; i++) {
        int c = p->profiles[g->layout.inst[i].profile].compute_slices;
        if (g->held & (1u << i)) held += c; else idle += c;
    }
    int free = g->dyn ? p->mig_compute_slices - held : idle;
    return free < 0 ? 0 : 1000 * free / p->mig_compute_slices;
}

/* Everything a MIG GPU's scoring needs follows from (product, dynamic, which profile
 * starts at each slice and whether a pod holds it), and a cluster has few distinct such
 * states: the derived values are memoised per thread in a direct-mapped table, keyed by
 * that state packed in 64 bits (6 bits per slice, then the instance count and the
 * dynamic flag). Layouts that do not pack (a start out of range, two instances on one
 * slice, a profile index past 30) are derived every time. */
#define MIG_MEMO 4096
typedef struct mig_memo {
    uint64_t key;
    const model_gpu_product *p;
    int16_t R;
    uint16_t idle_prof, addable;
    uint8_t starts[MODEL_MAX_PROFILES];
} mig_memo;
static _Thread_local mig_memo memo[MIG_MEMO];

/* A state's slot: one multiply (Fibonacci hashing, the top 12 bits), not a full mix --
 * it is on the path of every MIG GPU scored, and a collision only costs a recompute. */
static inline mig_memo *memo_slot(uint64_t key, const model_gpu_product *p) {
    _Static_assert(MIG_MEMO == 1 << 12, "memo_slot takes 12 bits");
    return &memo[((key ^ (uint64_t)(uintptr_t)p) * 0x9e3779b97f4a7c15ull) >> 52];
}

static bool mig_key(const pv_gpu *g, uint64_t *key) {
    uint64_t k = 0;
    if (g->shared) return false;   /* replica counts do not pack */
    for (int i = 0; i < g->layout.n; i++) {
        int s = g->layout.inst[i].start, pi = g->layout.inst[i].profile;
        if (s < 0 || s >= MODEL_MIG_MAX_SLICES || pi < 0 || pi > 30 || ((k >> (6 * s)) & 63)) return false;
        k |= (uint64_t)((pi + 1) | ((g->held >> i) & 1u) << 5) << (6 * s);
    }
    *key = k | (uint64_t)g->layout.n << 48 | (uint64_t)g->dyn << 52 | 1ull << 63;
    return true;
}

/* Set a detailed MIG GPU's derived values (R, idle profiles, addable profiles, free
 * starts per profile) from its layout; returns R. key: mig_key's packing of that
 * layout, 0 when it does not pack. */
static int pv_mig_derive_slow(pv_gpu *g, uint64_t key, mig_memo *m);

/* The memo hit inline: it runs once per MIG GPU scored. */
static inline int pv_mig_derive(pv_gpu *g, uint64_t key) {
    g->key = key;
    if (key && g->product) {
        const mig_memo *m = memo_slot(key, g->product);
        if (m->key == key && m->p == g->product) {
            g->idle_prof = m->idle_prof;
            g->addable = m->addable;
            memcpy(g->starts, m->starts, sizeof g->starts);
            return m->R;
        }
    }
    return pv_mig_derive_slow(g, key, key && g->product ? memo_slot(key, g->product) : NULL);
}

/* Not memoised (m: the slot to fill, NULL when the state does not pack). */
static int pv_mig_derive_slow(pv_gpu *g, uint64_t key, mig_memo *m) {
    if (!g->product) {
        g->idle_prof = g->addable = 0;
        memset(g->starts, 0, sizeof g->starts);
        g->key = 0;
        return 0;
    }
    g->idle_prof = 0;
    g->addable = 0;
    g->rep_prof = 0;
    for (int i = 0; i < g->layout.n; i++) {
        if ((g->held & (1u << i)) || g->layout.inst[i].profile < 0) continue;
        if (g->shared & (1u << i)) g->rep_prof |= (uint16_t)(1u << g->layout.inst[i].profile);
        else g->idle_prof |= (uint16_t)(1u << g->layout.inst[i].profile);
    }
    model_mig_free_starts_all(g->product, &g->layout, g->starts);
    if (g->dyn)
        for (int i = 0; i < g->product->nprofiles && i < MODEL_MAX_PROFILES; i++)
            if (g->starts[i]) g->addable |= (uint16_t)(1u << i);
    int R = mig_free_permille(g);
    if (m) {
        m->key = key;
        m->p = g->product;
        m->R = (int16_t)R;
        m->idle_prof = g->idle_prof;
        m->addable = g->addable;
        memcpy(m->starts, g->starts, sizeof m->starts);
    }
    return R;
}

/* After the layout changed. */
static int pv_mig_refresh(pv_gpu *g) {
    uint64_t key = 0;
    return pv_mig_derive(g, mig_key(g, &key) ? key : 0);
}

int pv_mig_after(const pv_gpu *g, const model_grant *gr, uint16_t *room, uint8_t *starts) {
    int s = gr->mig_start;
    uint64_t key = g->key, k1 = 0;
    if (key && g->product && s >= 0 && s < MODEL_MIG_MAX_SLICES && gr->mig_profile >= 0 && gr->mig_profile <= 30) {
        unsigned code = (unsigned)(key >> (6 * s)) & 63u;
        if (gr->mig_create && !code && g->layout.n < MODEL_MIG_MAX_INSTANCES)
            k1 = (key + (1ull << 48)) | (uint64_t)((gr->mig_profile + 1) | 32) << (6 * s);
        else if (!gr->mig_create && code && !(code & 32u))
            k1 = key | 32ull << (6 * s);
    }
    if (k1) {
        const mig_memo *m = memo_slot(k1, g->product);
        if (m->key == k1 && m->p == g->product) {
            *room = m->idle_prof | m->addable;
            memcpy(starts, m->starts, MODEL_MAX_PROFILES);
            return m->R;
        }
    }
    pv_gpu ga = *g;   /* not memoised yet (or not packable): apply to a copy, which fills the memo */
    int16_t R = 0, E = 0;
    pv_gpu_apply(&ga, &R, &E, gr, true);
    *room = ga.idle_prof | ga.addable;
    memcpy(starts, ga.starts, MODEL_MAX_PROFILES);
    return R;
}

int16_t pv_eff(const pv_gpu *g, int R) {
    if (g->mode != MODEL_GPU_WHOLE || g->mps_clients) return -1;
    if (g->idle) return 1001;
    return (int16_t)(R > 999 ? 999 : R);
}

void pv_build(pv_node *v, const model_node *n, bool detail) {
    v->n = n;
    v->ngpus = n->ngpus < 0 ? 0 : n->ngpus > MODEL_MAX_GPUS ? MODEL_MAX_GPUS : n->ngpus;
    v->track = n->track_host;
    v->cpu_free = n->track_host ? n->cpu_milli - n->cpu_used_milli : INT64_MAX;
    v->mem_free = n->track_host ? n->memory_mib - n->memory_used_mib : INT64_MAX;
    v->all_whole = true;
    for (int i = 0; i < v->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        /* A detailed MIG GPU gets R from its own layout copy below (same rule as
         * model_gpu_free_compute, one pass instead of three). */
        int R = detail && g->mode == MODEL_GPU_MIG ? 0 : policy_gpu_free(g);
        v->R[i] = (int16_t)R;
        if (g->mode == MODEL_GPU_WHOLE) {
            v->E[i] = g->nholders == 0 ? 1001 : g->mps_clients ? -1 : (int16_t)(R > 999 ? 999 : R);
        } else {
            v->E[i] = -1;
            v->all_whole = false;
        }
        if (!detail) continue;
        pv_gpu *pg = &v->g[i];
        pg->mode = g->mode;
        pg->idle = g->nholders == 0;
        pg->excl = g->exclusive_holder >= 0;
        pg->dyn = g->mig_dynamic;
        pg->mem_cap = g->memory_mib;
        pg->replicas = g->replicas;
        pg->mps_clients = g->mps_clients;
        pg->mps_uid = g->mps_uid;
        pg->ts_shares = g->mode == MODEL_GPU_WHOLE && model_gpu_timeslice_shares(g) > 0;
        if (g->mode == MODEL_GPU_MIG) {
            pg->free_rep = 0;
        } else {
            pg->free_mem = model_gpu_free_memory(g);
            pg->free_rep = model_gpu_free_replicas(g);
        }
        pg->product = g->product;
        pg->layout.n = 0;
        pg->held = 0;
        pg->shared = 0;
        pg->rep_prof = 0;
        if (g->mode == MODEL_GPU_MIG) {
            /* mig_key's packing in the same pass as the copy: scoring a MIG node is
             * mostly this loop and the memo lookup, once per GPU */
            uint64_t key = 0;
            bool packs = true;
            for (int k = 0; k < g->ninst && k < MODEL_MIG_MAX_INSTANCES; k++) {
                int pi = g->inst[k].profile, st = g->inst[k].start;
                unsigned held = g->inst[k].holder >= 0;
                if (g->inst[k].replicas > 1) {   /* layered: held when every replica is taken */
                    pg->shared |= (uint8_t)(1u << k);
                    pg->rep_n[k] = g->inst[k].replicas;
                    pg->rep_free[k] = (uint8_t)(g->inst[k].replicas - __builtin_popcount(g->inst[k].rep_used));
                    held = pg->rep_free[k] == 0;
                    packs = false;
                }
                pg->layout.inst[k].profile = (int8_t)pi;
                pg->layout.inst[k].start = (int8_t)st;
                pg->held |= (uint8_t)(held << k);
                pg->layout.n = k + 1;
                if (st < 0 || st >= MODEL_MIG_MAX_SLICES || pi < 0 || pi > 30 || ((key >> (6 * st)) & 63)) packs = false;
                else key |= (uint64_t)((pi + 1) | held << 5) << (6 * st);
            }
            key = packs ? key | (uint64_t)pg->layout.n << 48 | (uint64_t)pg->dyn << 52 | 1ull << 63 : 0;
            R = pv_mig_derive(pg, key);
            v->R[i] = (int16_t)R;
            pg->free_mem = (int)((long long)pg->mem_cap * R / 1000);
        } else {
            pg->idle_prof = pg->addable = 0;
            pg->key = 0;
            memset(pg->starts, 0, sizeof pg->starts);
        }
    }
}

void pv_gpu_apply(pv_gpu *g, int16_t *Rp, int16_t *Ep, const model_grant *gr, bool room) {
    int R = *Rp;
    if (gr->mig_profile >= 0 && gr->replica >= 0) {
        /* one replica of a shared instance (layered): the instance is held once all are taken */
        for (int i = 0; i < g->layout.n; i++)
            if (g->layout.inst[i].start == gr->mig_start && (g->shared & (1u << i)) && g->rep_free[i] > 0) {
                if (--g->rep_free[i] == 0) g->held |= (uint8_t)(1u << i);
                break;
            }
        R = pv_mig_refresh(g);
        g->free_mem = (int)((long long)g->mem_cap * R / 1000);
    } else if (gr->mig_profile >= 0) {
        int at = -1;
        for (int i = 0; i < g->layout.n; i++)
            if (g->layout.inst[i].start == gr->mig_start && !(g->held & (1u << i))) at = i;
        if ((gr->mig_create || at < 0) && g->layout.n < MODEL_MIG_MAX_INSTANCES) {
            at = g->layout.n++;
            g->layout.inst[at].profile = gr->mig_profile;
            g->layout.inst[at].start = gr->mig_start;
        }
        if (at >= 0) g->held |= (uint8_t)(1u << at);
        /* room or not, one memo lookup gives R; the room bits come with it */
        (void)room;
        R = pv_mig_refresh(g);
        g->free_mem = (int)((long long)g->mem_cap * R / 1000);
    } else if (gr->replica >= 0) {
        if (g->free_rep > 0) g->free_rep--;
        R = g->replicas > 0 ? 1000 * g->free_rep / g->replicas : 0;
        g->free_mem -= gr->memory_mib;
    } else if (gr->exclusive) {
        R = 0;
        g->free_mem = 0;
        g->excl = true;
    } else {
        R -= gr->compute_permille;
        g->free_mem -= gr->memory_mib;
        if (R < 0) R = 0;
        /* the soft-share mode follows; an MPS share's uid is the assignment's, set by the caller */
        if (gr->mps) g->mps_clients++;
        else g->ts_shares = true;
    }
    g->idle = false;
    *Rp = (int16_t)R;
    *Ep = pv_eff(g, R);
}

static bool iso_takes_replica(model_isolation iso, model_gpu_mode mode) {
    return iso == MODEL_ISO_ANY || (iso == MODEL_ISO_TIMESLICE && mode == MODEL_GPU_TIMESLICE) ||
           (iso == MODEL_ISO_MPS && mode == MODEL_GPU_MPS);
}

/* Room for one unit of a TT_GENERIC type (w->types[ti]) on one GPU of a detailed view. */
static bool room_generic(const policy_workload *w, const frag_state *st, int ti, const pv_gpu *g, int R) {
    const policy_task_type *t = &w->types[ti];
    const model_request *r = &t->req;
    bool replica_mode = g->mode == MODEL_GPU_TIMESLICE || g->mode == MODEL_GPU_MPS;
    switch (t->kind) {
    case MODEL_REQ_NONE:
        return false;
    case MODEL_REQ_WHOLE:
        if (g->mode == MODEL_GPU_WHOLE) return r->isolation != MODEL_ISO_MIG && g->idle;
        return replica_mode && iso_takes_replica(r->isolation, g->mode) && g->free_rep >= 1;
    case MODEL_REQ_FRACTION:
        if (r->compute_sharing == MODEL_COMPUTE_MPS) {
            /* fit.c's soft_mode_refusal: an unshared GPU that takes MPS clients, no time-sliced shares there,
             * the server's uid and client cap, then room */
            if (g->mode != MODEL_GPU_WHOLE || g->excl || g->ts_shares || !model_product_mps_capable(g->product) ||
                g->mps_clients >= g->product->mps_max_clients ||
                (g->mps_clients && g->mps_uid != r->run_as_uid))
                return false;
            return R >= model_fraction_compute(r, model_mps_capacity(g->product, g->mem_cap)) &&
                   g->free_mem >= model_fraction_memory(r, g->mem_cap);
        }
        if (g->mode == MODEL_GPU_WHOLE && (r->isolation == MODEL_ISO_DEFAULT || r->isolation == MODEL_ISO_ANY)) {
            int need = r->memory_mib > 0 ? r->memory_mib
                       : r->memory_permille > 0 ? (int)((long long)r->memory_permille * g->mem_cap / 1000)
                                                : 0;
            if (g->mps_clients) return false;   /* a time-sliced share never joins MPS clients */
            return !g->excl && R >= t->demand_permille && g->free_mem >= need;
        }
        if (r->no_mps && g->mode == MODEL_GPU_MPS) return false;   /* fit would not place it there either */
        return replica_mode && iso_takes_replica(r->isolation, g->mode) && g->free_rep >= 1;
    case MODEL_REQ_SHARED:
        if (!replica_mode || g->free_rep < 1) return false;
        return r->isolation == MODEL_ISO_DEFAULT || iso_takes_replica(r->isolation, g->mode);
    case MODEL_REQ_MIG: {
        if (g->mode != MODEL_GPU_MIG || !g->product) return false;
        int idx = g->product == st->mig_p ? st->mig_idx[ti] : mig_type_profile(w, ti, g->product);
        return idx >= 0 && (((w->hot[ti].mig_whole ? g->idle_prof | g->addable : 0) |
                             (w->hot[ti].mig_rep ? g->rep_prof : 0)) >> idx) & 1u;
    }
    }
    return false;
}

/* Room for type t on one GPU, whatever its class. */
static inline bool room_any(const policy_workload *w, const frag_state *st, int t, const pv_gpu *g, int R, int E) {
    const tt_hot *h = &w->hot[t];
    if (h->cls == TT_FAST) return E >= h->d_eff;
    if (h->mig) {
        if (g->mode != MODEL_GPU_MIG || !g->product) return false;
        int idx = g->product == st->mig_p ? st->mig_idx[t] : mig_type_profile(w, t, g->product);
        return idx >= 0 && (((h->mig_whole ? g->idle_prof | g->addable : 0) | (h->mig_rep ? g->rep_prof : 0)) >> idx) & 1u;
    }
    return room_generic(w, st, t, g, R);
}

bool frag_workload_fast(const policy_workload *w) {
    for (int t = 0; t < w->nkept; t++)
        if (w->hot[t].cls == TT_GENERIC) return false;
    return true;
}

void frag_access(const policy_workload *w, const model_node *n, uint8_t *access) {
    for (int t = 0; t < w->nkept; t++)
        access[t] = !w->hot[t].restricted || model_fit_product_allowed(n, &w->types[t].req);
}

double frag_eval(const policy_workload *w, const pv_node *v, const uint8_t *access, frag_state *st, double *per_type) {
    int64_t free = 0;
    for (int i = 0; i < v->ngpus; i++) free += v->R[i];
    st->free = free;
    st->cpu = v->cpu_free;
    st->mig_p = NULL;
    if (w->has_mig) {   /* resolve the MIG types' profiles once per node, not per GPU */
        for (int i = 0; i < v->ngpus && !st->mig_p; i++)
            if (!v->all_whole && v->g[i].mode == MODEL_GPU_MIG) st->mig_p = v->g[i].product;
        for (int t = 0; st->mig_p && t < w->nkept; t++) st->mig_idx[t] = (int8_t)mig_type_profile(w, t, st->mig_p);
    }
    /* GPUs with equal (R, E) answer every FAST type alike: group them first (a node
     * has two or three distinct states, not eight). */
    int nb = 0;
    int16_t bE[MODEL_MAX_GPUS], kR[MODEL_MAX_GPUS];
    int64_t bR[MODEL_MAX_GPUS];
    int bn[MODEL_MAX_GPUS];
    unsigned bm[MODEL_MAX_GPUS];
    for (int i = 0; i < v->ngpus; i++) {
        int b = 0;
        while (b < nb && !(bE[b] == v->E[i] && kR[b] == v->R[i])) b++;
        if (b == nb) {
            bE[nb] = v->E[i];
            kR[nb] = v->R[i];
            bR[nb] = 0;
            bn[nb] = 0;
            bm[nb++] = 0;
        }
        bR[b] += v->R[i];
        bn[b]++;
        bm[b] |= 1u << i;
    }
    /* MIG types on a node whose MIG GPUs all have product mig_p: room is one bit of the
     * GPU's profile mask (room_any's rule without its lookups). */
    bool mig_simple = st->mig_p != NULL;
    unsigned pm[MODEL_MAX_GPUS];
    for (int i = 0; i < v->ngpus && mig_simple; i++) {
        const pv_gpu *g = &v->g[i];
        pm[i] = g->mode == MODEL_GPU_MIG && g->product ? (unsigned)(g->idle_prof | g->addable) : 0;
        if (g->mode == MODEL_GPU_MIG && (g->product != st->mig_p || g->shared)) mig_simple = false;   /* layered: room_any */
    }
    double F = 0;
    for (int t = 0; t < w->nkept; t++) {
        const tt_hot *h = &w->hot[t];
        int64_t f = free;
        if (h->cls != TT_CPU) {
            int cnt = 0;
            int64_t sl = 0;
            unsigned mask = 0;
            if (h->cls != TT_FAST && h->mig && mig_simple) {
                int idx = st->mig_idx[t];
                for (int i = 0; i < v->ngpus; i++) {
                    if (idx >= 0 && ((pm[i] >> idx) & 1u)) { cnt++; mask |= 1u << i; }
                    else sl += v->R[i];
                }
            } else if (h->cls == TT_FAST) {
                for (int b = 0; b < nb; b++) {
                    if (bE[b] >= h->d_eff) { cnt += bn[b]; mask |= bm[b]; }
                    else sl += bR[b];
                }
            } else {
                for (int i = 0; i < v->ngpus; i++) {
                    if (room_any(w, st, t, &v->g[i], v->R[i], v->E[i])) { cnt++; mask |= 1u << i; }
                    else sl += v->R[i];
                }
            }
            st->cnt[t] = cnt;
            st->sl[t] = sl;
            st->room[t] = (uint16_t)mask;
            if (access[t] && v->cpu_free >= h->cpu && cnt >= h->k) f = sl;
        }
        if (per_type) per_type[t] = (double)f;
        F += h->p * (double)f;
    }
    return F;
}

double frag_after_fast(const policy_workload *w, const uint8_t *access, const frag_state *st, int64_t cpu_take,
                       int nchg, const int8_t *chg_g, const int16_t *R0, const int16_t *E0, const int16_t *R1,
                       const int16_t *E1) {
    (void)chg_g;
    int64_t free = st->free;
    for (int c = 0; c < nchg; c++) free += R1[c] - R0[c];
    int64_t cpu = st->cpu == INT64_MAX ? INT64_MAX : st->cpu - cpu_take;
    double F = 0;
    for (int t = 0; t < w->nkept; t++) {
        const tt_hot *h = &w->hot[t];
        int64_t f = free;
        if (h->cls != TT_CPU) {
            int cnt = st->cnt[t];
            int64_t sl = st->sl[t];
            for (int c = 0; c < nchg; c++) {
                if (E0[c] >= h->d_eff) cnt--; else sl -= R0[c];
                if (E1[c] >= h->d_eff) cnt++; else sl += R1[c];
            }
            if (access[t] && cpu >= h->cpu && cnt >= h->k) f = sl;
        }
        F += h->p * (double)f;
    }
    return F;
}

double frag_after_generic(const policy_workload *w, const uint8_t *access, const frag_state *st, int64_t cpu_take,
                          int nchg, const int8_t *chg_g, const int16_t *R0, const int16_t *R1, const int16_t *E1,
                          const pv_gpu *gafter) {
    int64_t free = st->free;
    for (int c = 0; c < nchg; c++) free += R1[c] - R0[c];
    int64_t cpu = st->cpu == INT64_MAX ? INT64_MAX : st->cpu - cpu_take;
    double F = 0;
    for (int t = 0; t < w->nkept; t++) {
        const tt_hot *h = &w->hot[t];
        int64_t f = free;
        if (h->cls != TT_CPU) {
            int cnt = st->cnt[t];
            int64_t sl = st->sl[t];
            for (int c = 0; c < nchg; c++) {
                if (st->room[t] & (1u << chg_g[c])) cnt--; else sl -= R0[c];
                bool room = room_any(w, st, t, &gafter[c], R1[c], E1[c]);
                if (room) cnt++; else sl += R1[c];
            }
            if (access[t] && cpu >= h->cpu && cnt >= h->k) f = sl;
        }
        F += h->p * (double)f;
    }
    return F;
}

double policy_frag_node(const model_node *n, const policy_workload *w, double *per_type) {
    if (!n || !w || !w->finished) return -1.0;
    pv_node v;
    pv_build(&v, n, !frag_workload_fast(w));
    uint8_t access[POLICY_MAX_TYPES];
    frag_access(w, n, access);
    frag_state st;
    return frag_eval(w, &v, access, &st, per_type);
}

int policy_frag_cluster(model_node *const *nodes, int n, const policy_workload *w, policy_frag_report *out) {
    if (!out || !w || !w->finished || n < 0 || (n > 0 && !nodes)) return -1;
    memset(out, 0, sizeof *out);
    bool fast = frag_workload_fast(w);
    uint8_t access[POLICY_MAX_TYPES];
    for (int i = 0; i < n; i++) {
        if (!nodes[i]) return -1;
        pv_node v;
        pv_build(&v, nodes[i], !fast);
        frag_access(w, nodes[i], access);
        frag_state st;
        out->frag_milli += frag_eval(w, &v, access, &st, NULL);
        out->free_milli += (double)st.free;
        out->capacity_milli += 1000.0 * v.ngpus;
        out->gpus += v.ngpus;
    }
    out->amount_pct = out->capacity_milli > 0 ? 100.0 * out->frag_milli / out->capacity_milli : 0.0;
    out->ratio_pct = out->free_milli > 0 ? 100.0 * out->frag_milli / out->free_milli : 0.0;
    return 0;
}
