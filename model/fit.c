/* fit.c -- feasible assignments of a request on a node, and applying or undoing one.
 *
 * A request reaches GPUs by one or more routes: a whole GPU, a soft share of an
 * unshared GPU, a time-slice/MPS replica, or a MIG instance. Which routes a request may
 * take is decided here once (route_plan), from its kind, its isolation and how the
 * node's device plugin advertises its GPUs; everything else is enumeration in a fixed
 * order plus bookkeeping. model_assign trusts nothing it is given.
 */
#include "model/fit.h"
#include "model/dra.h"
#include "model/topo.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- routes ---- */

typedef struct route_plan {
    bool whole;            /* exclusive WHOLE-mode GPUs */
    bool soft;             /* fraction on a WHOLE-mode GPU */
    bool timeslice, mps;   /* one replica per GPU */
    bool mig;              /* MIG instances (plain ones: a shared instance is handed out by replica) */
    bool mig_any_profile;  /* MIG single strategy: nvidia.com/gpu is whichever slice the node has */
    bool mig_rep_ts, mig_rep_mps; /* one replica of a time-sliced / MPS-shared MIG instance (layered) */
    bool hint_first;       /* when nothing fits, the hint explains it better than the counts */
} route_plan;

/* The isolation lets a request take a replica shared by method m (TIMESLICE or MPS). */
static bool iso_allows(model_isolation iso, model_gpu_mode m) {
    return iso == MODEL_ISO_ANY || (iso == MODEL_ISO_TIMESLICE && m == MODEL_GPU_TIMESLICE) ||
           (iso == MODEL_ISO_MPS && m == MODEL_GPU_MPS);
}

static const char *iso_for(model_gpu_mode m) { return m == MODEL_GPU_MPS ? "mps" : "timeslice"; }
static const char *shared_by(model_gpu_mode m) { return m == MODEL_GPU_MPS ? "shared by MPS" : "time-sliced"; }

/* Whether some instance of the named profile carries replicas (layered sharing). */
static bool node_shares_profile(const model_node *n, const char *profile) {
    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        if (!g->ninst) continue;
        int pi = model_product_profile_index(g->product, profile);   /* once per GPU, not per instance */
        for (int k = 0; k < g->ninst; k++)
            if (g->inst[k].replicas > 1 && g->inst[k].profile == pi) return true;
    }
    return false;
}

/* Why a route is closed on this node, for the message when nothing fits. */
static route_plan route_plan_for(const model_node *n, const model_request *r, char *hint, size_t hintlen) {
    route_plan p = {0};
    model_isolation iso = r->isolation;
    hint[0] = 0;
    switch (r->kind) {
    case MODEL_REQ_WHOLE:
        p.whole = iso == MODEL_ISO_DEFAULT || iso == MODEL_ISO_ANY;
        /* With renameByDefault the replicas are nvidia.com/gpu.shared, so a pod asking
         * for nvidia.com/gpu cannot be handed one by the device plugin. */
        if (!n->shared_renamed) {
            p.timeslice = iso == MODEL_ISO_ANY || iso == MODEL_ISO_TIMESLICE;
            p.mps = iso == MODEL_ISO_ANY || iso == MODEL_ISO_MPS;
        }
        if (n->mig_strategy == MODEL_MIG_SINGLE && (iso == MODEL_ISO_ANY || iso == MODEL_ISO_MIG)) {
            p.mig = true;
            p.mig_any_profile = true;
        }
        /* MIG single with time-sliced slices (layered): nvidia.com/gpu is a replica of a slice,
         * unless renameByDefault moved the replicas to nvidia.com/gpu.shared. */
        if (n->mig_strategy == MODEL_MIG_SINGLE && n->mig_sharing != MODEL_GPU_WHOLE) {
            p.mig = false;
            if (!n->mig_renamed && iso_allows(iso, n->mig_sharing)) {
                p.mig_any_profile = true;
                p.mig_rep_ts = n->mig_sharing == MODEL_GPU_TIMESLICE;
                p.mig_rep_mps = n->mig_sharing == MODEL_GPU_MPS;
            }
            if (n->mig_renamed)
                snprintf(hint, hintlen, "MIG single strategy with shared slices: replicas are advertised as "
                         "nvidia.com/gpu.shared (renameByDefault); ask for that resource");
            else if (!iso_allows(iso, n->mig_sharing))
                snprintf(hint, hintlen, "MIG single strategy: nvidia.com/gpu here is a %s replica of a MIG slice "
                         "(%s), not a GPU or a whole slice; add tessera.io/isolation: %s (or any) to accept one",
                         shared_by(n->mig_sharing), n->product_label, iso_for(n->mig_sharing));
            break;
        }
        if (iso == MODEL_ISO_DEFAULT && n->sharing != MODEL_GPU_WHOLE && !n->shared_renamed)
            snprintf(hint, hintlen,
                     "GPUs here are %s (%d replicas each): nvidia.com/gpu buys a replica, not a GPU; "
                     "add tessera.io/isolation: %s (or any) to accept a replica",
                     n->sharing == MODEL_GPU_MPS ? "shared by MPS" : "time-sliced", n->replicas,
                     n->sharing == MODEL_GPU_MPS ? "mps" : "timeslice");
        else if (iso == MODEL_ISO_DEFAULT && n->mig_strategy == MODEL_MIG_SINGLE)
            snprintf(hint, hintlen,
                     "MIG single strategy: nvidia.com/gpu here is a MIG slice (%s), not a GPU; "
                     "add tessera.io/isolation: mig (or any) to accept a slice",
                     n->product_label);
        else if ((iso == MODEL_ISO_TIMESLICE || iso == MODEL_ISO_MPS) && n->shared_renamed)
            snprintf(hint, hintlen, "replicas here are advertised as nvidia.com/gpu.shared; ask for that resource");
        break;
    case MODEL_REQ_SHARED:
        if (n->mig_strategy == MODEL_MIG_SINGLE && n->mig_sharing != MODEL_GPU_WHOLE) {
            /* layered, single strategy: the slices' replicas are nvidia.com/gpu.shared when renamed */
            if (n->mig_renamed) {
                p.mig_any_profile = true;
                p.mig_rep_ts = iso != MODEL_ISO_MPS;
                p.mig_rep_mps = iso != MODEL_ISO_TIMESLICE;
            } else {
                snprintf(hint, hintlen, "replicas of the MIG slices here are advertised as nvidia.com/gpu "
                         "(renameByDefault is off); ask for nvidia.com/gpu with tessera.io/isolation: %s",
                         iso_for(n->mig_sharing));
            }
            break;
        }
        if (n->shared_renamed) {
            p.timeslice = iso != MODEL_ISO_MPS;
            p.mps = iso != MODEL_ISO_TIMESLICE;
        } else if (n->sharing != MODEL_GPU_WHOLE) {
            snprintf(hint, hintlen,
                     "replicas here are advertised as nvidia.com/gpu (renameByDefault is off); ask for "
                     "nvidia.com/gpu with tessera.io/isolation: %s",
                     n->sharing == MODEL_GPU_MPS ? "mps" : "timeslice");
        }
        break;
    case MODEL_REQ_FRACTION:
        if (r->compute_sharing == MODEL_COMPUTE_MPS) {
            /* an MPS share of an unshared GPU, served by tessera's reservation (request.c refuses any isolation) */
            p.soft = true;
            if (n->sharing != MODEL_GPU_WHOLE || n->mig_strategy != MODEL_MIG_NONE)
                snprintf(hint, hintlen, "an MPS share (tessera.io/compute-sharing: mps) takes an unshared GPU, and the "
                         "GPUs here are %s", n->mig_strategy != MODEL_MIG_NONE ? "MIG-enabled"
                                             : n->sharing == MODEL_GPU_MPS ? "MPS replicas of the device plugin"
                                                                           : "time-sliced replicas of the device plugin");
            break;
        }
        p.soft = iso == MODEL_ISO_DEFAULT || iso == MODEL_ISO_ANY;
        p.timeslice = iso == MODEL_ISO_ANY || iso == MODEL_ISO_TIMESLICE;
        p.mps = !r->no_mps && (iso == MODEL_ISO_ANY || iso == MODEL_ISO_MPS);
        p.mig = iso == MODEL_ISO_ANY || iso == MODEL_ISO_MIG;
        /* a replica of a shared MIG instance, when its share holds the fraction */
        p.mig_rep_ts = iso == MODEL_ISO_ANY || iso == MODEL_ISO_TIMESLICE;
        p.mig_rep_mps = !r->no_mps && (iso == MODEL_ISO_ANY || iso == MODEL_ISO_MPS);
        if (r->no_mps && (iso == MODEL_ISO_MPS || (iso == MODEL_ISO_ANY && n->sharing == MODEL_GPU_MPS)))
            snprintf(hint, hintlen,
                     "tessera's reservations cannot deliver a fraction on a device-plugin MPS replica (its clients "
                     "need the plugin's daemon mounts): write tessera.io/compute-sharing: mps instead, or run "
                     "--soft-share-delivery=none");
        break;
    case MODEL_REQ_MIG:
        if (n->mig_strategy == MODEL_MIG_SINGLE) {
            snprintf(hint, hintlen,
                     "MIG single strategy advertises slices as nvidia.com/gpu; ask for nvidia.com/gpu with "
                     "tessera.io/isolation: %s", n->mig_sharing != MODEL_GPU_WHOLE ? iso_for(n->mig_sharing) : "mig");
        } else if (r->mig_replica) {
            /* nvidia.com/mig-<p>.shared: a replica outright, which the device plugin advertises
             * under that name only with renameByDefault */
            if (n->mig_renamed) {
                p.mig_rep_ts = iso != MODEL_ISO_MPS;
                p.mig_rep_mps = iso != MODEL_ISO_TIMESLICE;
            } else if (n->mig_sharing != MODEL_GPU_WHOLE) {
                snprintf(hint, hintlen, "replicas of MIG instances here are advertised as nvidia.com/mig-<profile> "
                         "(renameByDefault is off); ask for nvidia.com/mig-%s with tessera.io/isolation: %s",
                         r->mig_profile, iso_for(n->mig_sharing));
                p.hint_first = true;
            } else {
                snprintf(hint, hintlen, "no time-sliced MIG instances on this node: nvidia.com/mig-%s.shared is not "
                         "advertised here", r->mig_profile);
            }
        } else {
            /* The whole-means-whole rule: a plain instance, or a replica of a shared one only
             * when the isolation accepts a replica (and the replicas carry this name). */
            p.mig = true;
            if (!n->mig_renamed) {
                p.mig_rep_ts = iso_allows(iso, MODEL_GPU_TIMESLICE);
                p.mig_rep_mps = iso_allows(iso, MODEL_GPU_MPS);
            }
            if (n->mig_sharing != MODEL_GPU_WHOLE && node_shares_profile(n, r->mig_profile)) {
                p.hint_first = true;
                if (n->mig_renamed)
                    snprintf(hint, hintlen, "replicas of MIG instances here are advertised as nvidia.com/mig-%s.shared "
                             "(renameByDefault); ask for that resource", r->mig_profile);
                else if (!n->mig_renamed && !iso_allows(iso, n->mig_sharing))
                    snprintf(hint, hintlen, "the %s instances here are %s: nvidia.com/mig-%s buys a replica, not an "
                             "instance; add tessera.io/isolation: %s (or any) to accept a replica", r->mig_profile,
                             shared_by(n->mig_sharing), r->mig_profile, iso_for(n->mig_sharing));
            }
        }
        break;
    case MODEL_REQ_NONE:
        break;
    }
    return p;
}

/* ------------------------------------------------------------- amounts ---- */

static int mig_profile_memory(const model_gpu *g, const model_mig_profile *pr) {
    return model_mig_profile_memory(g->product, pr, g->memory_mib);
}

static int mig_profile_compute(const model_gpu *g, const model_mig_profile *pr) {
    int slices = g->product->mig_compute_slices > 0 ? g->product->mig_compute_slices : 7;
    return 1000 * pr->compute_slices / slices;
}

static int lowest_free_replica(const model_gpu *g) {
    for (int i = 0; i < g->replicas && i < MODEL_MAX_REPLICAS; i++)
        if (!(g->replica_used[i / 64] & (1ull << (i % 64)))) return i;
    return -1;
}

/* What one replica costs: MPS clients are pinned to memory/replicas and
 * 100/replicas % of threads whatever they ask; a time-slice replica costs what the
 * pod declares, or an equal share when it declares nothing. */
static void replica_charge(const model_gpu *g, const model_request *r, int *memory, int *compute) {
    if (g->mode == MODEL_GPU_MPS) {
        *memory = g->mps_memory_limit_mib;
        *compute = g->mps_thread_permille;
        return;
    }
    int m = r->kind == MODEL_REQ_WHOLE ? 0 : model_fraction_memory(r, g->memory_mib);
    *memory = m > 0 ? m : g->memory_mib / g->replicas;
    *compute = r->compute_permille > 0 ? r->compute_permille : 1000 / g->replicas;
}

/* What one replica of a shared MIG instance costs, as replica_charge does for a
 * time-sliced GPU: a fraction is charged what it declares (memory and SMs of the GPU, the
 * same units as everywhere), anything else an equal share of the instance. The replicas'
 * charges must fit in the instance: time-slicing gives no memory isolation, so the sum is
 * what keeps them from running each other out of memory. */
static void mig_replica_charge(const model_gpu *g, const model_mig_instance *in, const model_request *r, int *memory,
                               int *compute) {
    const model_mig_profile *pr = &g->product->profiles[in->profile];
    int m = r->kind == MODEL_REQ_FRACTION ? model_fraction_memory(r, g->memory_mib) : 0;
    *memory = m > 0 ? m : mig_profile_memory(g, pr) / in->replicas;
    *compute = r->kind == MODEL_REQ_FRACTION && r->compute_permille > 0 ? r->compute_permille
                                                                        : mig_profile_compute(g, pr) / in->replicas;
}
static int mig_lowest_free_replica(const model_mig_instance *in) {
    for (int i = 0; i < in->replicas && i < MODEL_MIG_MAX_REPLICAS; i++)
        if (!(in->rep_used & (1u << i))) return i;
    return -1;
}

/* ---------------------------------------------------------- enumeration ---- */

/* 16 GPUs x (8 idle instances + 7 profiles x 7 starts) stays under this. */
#define MAX_CANDIDATES 1024

typedef struct fit_stats {
    int gpus_model_ok;    /* GPUs whose product the request allows */
    int gpus_route_ok;    /* ... and in a mode some route may use */
    int gpus_with_room;   /* ... and offering at least one candidate */
    int best_free_mem, best_free_compute, best_gpu;
    int idle_instances;   /* MIG: idle instances of a usable profile */
    int profile_missing;  /* MIG: GPUs whose product lacks the profile */
    int mode_refused;     /* soft shares: GPUs with room whose soft-share mode (or uid) turned the share away */
    char mode_why[224];   /* ... the first of them, in words */
} fit_stats;

typedef struct fit_run {
    const model_node *n;
    const model_request *r;
    model_assignment *out;
    int max, found;
    int limit;                               /* stop enumerating at this many (model_fit_any: 1) */
    const model_gpu_product *mig_p;          /* MIG requests: the last product looked up ... */
    int mig_idx;                             /* ... and the request's profile index on it */
    model_assignment cur;
    model_mig_layout layout[MODEL_MAX_GPUS]; /* MIG GPUs: instances plus those chosen so far */
    bool gpu_used[MODEL_MAX_GPUS];
    int need_align;                          /* model_request_required_align: 0 = nothing required */
    bool topo_refused;                       /* need_align turned some GPU away (for the reason) */
    fit_stats st;
    bool dra_groups;                         /* a claim's constraints (model/dra.h) limit which GPUs go together */
    model_dra_groups dg;
    int ncand;
    model_grant cand[MAX_CANDIDATES];        /* last: only the used prefix is ever touched */
} fit_run;

static void add_candidate(fit_run *f, model_grant g) {
    if (f->ncand < MAX_CANDIDATES) f->cand[f->ncand++] = g;
}

static model_grant grant_blank(int gpu) {
    model_grant g;
    memset(&g, 0, sizeof g);
    g.gpu = (int8_t)gpu;
    g.mig_inst = g.mig_profile = g.mig_start = -1;
    g.replica = -1;
    return g;
}

static bool product_allows(const model_gpu_product *p, const model_node *n, const model_request *r) {
    if (r->nmodels == 0) return true;
    for (int i = 0; i < r->nmodels; i++) {
        const char *m = r->models[i];
        if (!strcasecmp(m, p->product) || !strcasecmp(m, p->model_id)) return true;
        /* Accept the label as written too, so "Tesla-T4-SHARED" or a pre-R470 name works. */
        if (n->product_label[0] && !strcasecmp(m, n->product_label)) return true;
    }
    return false;
}

bool model_fit_product_allowed(const model_node *n, const model_request *r) {
    for (int i = 0; i < n->ngpus; i++)
        if (product_allows(n->gpus[i].product, n, r)) return true;
    return false;
}

bool model_fit_gpu_allowed(const model_node *n, const model_gpu *g, const model_request *r) {
    return product_allows(g->product, n, r) && model_gpu_reachable(g, r);
}

static void note_room(fit_run *f, const model_gpu *g) {
    int mem = model_gpu_free_memory(g), comp = model_gpu_free_compute(g);
    if (mem > f->st.best_free_mem || (mem == f->st.best_free_mem && comp > f->st.best_free_compute)) {
        f->st.best_free_mem = mem;
        f->st.best_free_compute = comp;
        f->st.best_gpu = g->index;
    }
}

/* Whether a soft share of r may join GPU g's soft shares: one mode per GPU, one uid per MPS server,
 * MPS only with per-client limits (compute capability 7.0) and within the server's client cap.
 * NULL when it may, else why not (written into buf). */
static const char *soft_mode_refusal(const model_gpu *g, const model_request *r, char *buf, size_t len) {
    if (r->compute_sharing != MODEL_COMPUTE_MPS) {
        if (!g->mps_clients) return NULL;
        snprintf(buf, len, "GPU %d serves MPS clients (uid %d); a time-sliced share never joins them", g->index,
                 (int)g->mps_uid);
        return buf;
    }
    if (!model_gpu_mps_capable(g)) {
        if (g->product->cc_major > 0)
            snprintf(buf, len, "GPU %d (%s) has compute capability %d.%d; MPS shares need 7.0 (Volta) or later for "
                     "per-client limits", g->index, g->product->product, g->product->cc_major, g->product->cc_minor);
        else
            snprintf(buf, len, "GPU %d (%s): compute capability unknown (not in the catalog, no "
                     "nvidia.com/gpu.compute.major label); MPS shares need 7.0 (Volta) or later", g->index,
                     g->product->product);
        return buf;
    }
    if (model_gpu_timeslice_shares(g) > 0) {
        snprintf(buf, len, "GPU %d carries time-sliced soft shares; an MPS share never joins them", g->index);
        return buf;
    }
    if (g->mps_clients && g->mps_uid != r->run_as_uid) {
        snprintf(buf, len, "GPU %d runs MPS clients as uid %d; this pod runs as uid %lld (MPS serves one user at a time)",
                 g->index, (int)g->mps_uid, (long long)r->run_as_uid);
        return buf;
    }
    if (g->mps_clients >= g->product->mps_max_clients) {
        snprintf(buf, len, "GPU %d serves %d MPS clients, the most its MPS server takes", g->index, g->mps_clients);
        return buf;
    }
    return NULL;
}

/* MIG candidates on one GPU: idle instances of a usable profile, then (dynamic GPUs)
 * each legal free start of each usable profile. */
static bool mig_profile_usable(const fit_run *f, const model_gpu *g, int pi, bool creating) {
    const model_request *r = f->r;
    const model_mig_profile *pr = &g->product->profiles[pi];
    if (r->kind == MODEL_REQ_MIG) return pi == f->mig_idx;   /* resolved by gen_mig for this product */
    if (r->kind == MODEL_REQ_WHOLE || r->kind == MODEL_REQ_SHARED) return true; /* single strategy: whatever slice is there */
    /* a fraction maps onto any profile that holds it; media engines are not made for it */
    if (creating && pr->media) return false;
    return mig_profile_memory(g, pr) >= model_fraction_memory(r, g->memory_mib) &&
           mig_profile_compute(g, pr) >= r->compute_permille;   /* (a replica: checked against what is left) */
}

static int gen_mig(fit_run *f, const route_plan *p, int gi) {
    const model_gpu *g = &f->n->gpus[gi];
    int before = f->ncand;
    if (f->r->kind == MODEL_REQ_MIG && g->product != f->mig_p) {   /* names compared once per product */
        f->mig_p = g->product;
        f->mig_idx = model_product_profile_index(g->product, f->r->mig_profile);
    }
    if (f->r->kind == MODEL_REQ_MIG && f->mig_idx < 0) {
        f->st.profile_missing++;
        return 0;
    }
    bool rep_ok = g->mig_sharing == MODEL_GPU_MPS ? p->mig_rep_mps : p->mig_rep_ts;
    for (int k = 0; k < g->ninst; k++) {
        const model_mig_instance *in = &g->inst[k];
        if (in->replicas > 1) {
            /* layered: the lowest free replica, when what it is charged still fits the instance */
            int rep = rep_ok && mig_profile_usable(f, g, in->profile, false) ? mig_lowest_free_replica(in) : -1;
            if (rep < 0) continue;
            int mem, comp;
            mig_replica_charge(g, in, f->r, &mem, &comp);
            const model_mig_profile *pr = &g->product->profiles[in->profile];
            if (in->mem_used + mem > mig_profile_memory(g, pr) || in->comp_used + comp > mig_profile_compute(g, pr))
                continue;
            model_grant c = grant_blank(gi);
            c.mig_inst = (int8_t)k;
            c.mig_profile = in->profile;
            c.mig_start = in->start;
            c.replica = (int16_t)rep;
            c.memory_mib = mem;
            c.compute_permille = (int16_t)comp;
            add_candidate(f, c);
            f->st.idle_instances++;
            continue;
        }
        if (!p->mig || in->holder >= 0 || !mig_profile_usable(f, g, in->profile, false)) continue;
        model_grant c = grant_blank(gi);
        c.mig_inst = (int8_t)k;
        c.mig_profile = in->profile;
        c.mig_start = in->start;
        c.memory_mib = mig_profile_memory(g, &g->product->profiles[in->profile]);
        c.compute_permille = (int16_t)mig_profile_compute(g, &g->product->profiles[in->profile]);
        add_candidate(f, c);
        f->st.idle_instances++;
    }
    if (g->mig_dynamic && p->mig) {
        for (int pi = 0; pi < g->product->nprofiles; pi++) {
            if (!mig_profile_usable(f, g, pi, true)) continue;
            uint8_t starts = model_mig_free_starts(g->product, &f->layout[gi], pi);
            for (int s = 0; s < MODEL_MIG_MAX_SLICES; s++) {
                if (!(starts & (1u << s))) continue;
                model_grant c = grant_blank(gi);
                c.mig_profile = (int8_t)pi;
                c.mig_start = (int8_t)s;
                c.mig_create = true;
                c.memory_mib = mig_profile_memory(g, &g->product->profiles[pi]);
                c.compute_permille = (int16_t)mig_profile_compute(g, &g->product->profiles[pi]);
                add_candidate(f, c);
            }
        }
    }
    return f->ncand - before;
}

static void gen_candidates(fit_run *f, const route_plan *p) {
    const model_node *n = f->n;
    const model_request *r = f->r;
    for (int gi = 0; gi < n->ngpus; gi++) {
        const model_gpu *g = &n->gpus[gi];
        if (!product_allows(g->product, n, r) || !model_gpu_reachable(g, r)) continue;
        f->st.gpus_model_ok++;
        int made = 0;
        switch (g->mode) {
        case MODEL_GPU_WHOLE:
            if (!p->whole && !p->soft) continue;
            f->st.gpus_route_ok++;
            note_room(f, g);
            if (p->whole && g->nholders == 0) {
                model_grant c = grant_blank(gi);
                c.exclusive = true;
                c.memory_mib = g->memory_mib;
                c.compute_permille = 1000;
                add_candidate(f, c);
                made++;
            }
            if (p->soft && g->exclusive_holder < 0) {
                int mem = model_fraction_memory(r, g->memory_mib);
                int comp = model_fraction_compute(r, model_mps_capacity(g->product, g->memory_mib));
                char mwhy[sizeof f->st.mode_why];
                const char *refused;
                if (mem > model_gpu_free_memory(g) || comp > model_gpu_free_compute(g)) {
                } else if ((refused = soft_mode_refusal(g, r, mwhy, sizeof mwhy))) {
                    if (!f->st.mode_refused++) snprintf(f->st.mode_why, sizeof f->st.mode_why, "%s", refused);
                } else {
                    model_grant c = grant_blank(gi);
                    c.memory_mib = mem;
                    c.compute_permille = (int16_t)comp;
                    c.mps = r->compute_sharing == MODEL_COMPUTE_MPS;
                    add_candidate(f, c);
                    made++;
                }
            }
            break;
        case MODEL_GPU_TIMESLICE:
        case MODEL_GPU_MPS: {
            bool ok = g->mode == MODEL_GPU_TIMESLICE ? p->timeslice : p->mps;
            if (!ok) continue;
            f->st.gpus_route_ok++;
            note_room(f, g);
            int replica = lowest_free_replica(g), mem, comp;
            replica_charge(g, r, &mem, &comp);
            /* An MPS client cannot use more than its pinned share, whatever is free. */
            bool fits_client = g->mode != MODEL_GPU_MPS || r->kind == MODEL_REQ_WHOLE ||
                               model_fraction_memory(r, g->memory_mib) <= g->mps_memory_limit_mib;
            if (replica >= 0 && fits_client && mem <= model_gpu_free_memory(g) &&
                comp <= model_gpu_free_compute(g)) {
                model_grant c = grant_blank(gi);
                c.replica = (int16_t)replica;
                c.memory_mib = mem;
                c.compute_permille = (int16_t)comp;
                add_candidate(f, c);
                made++;
            }
            break;
        }
        case MODEL_GPU_MIG:
            if (!p->mig && !p->mig_rep_ts && !p->mig_rep_mps) continue;
            f->st.gpus_route_ok++;
            note_room(f, g);
            made = gen_mig(f, p, gi);
            break;
        }
        if (made) f->st.gpus_with_room++;
        /* One grant wanted and one found: any candidate alone is an assignment. */
        if (f->limit == 1 && r->count == 1 && f->ncand > 0 && !f->dra_groups) return;
    }
}

static void emit(fit_run *f) {
    if (f->found < f->max && f->out) f->out[f->found] = f->cur;
    f->found++;
}

/* Whether candidate c can join those already chosen: one grant per GPU except for
 * MIG, where instances on one GPU must be distinct and created ones must still fit. */
static bool compatible(fit_run *f, const model_grant *c) {
    if (f->dra_groups) {
        int8_t chosen[MODEL_MAX_GPUS];
        for (int k = 0; k < f->cur.ngrants; k++) chosen[k] = f->cur.grant[k].gpu;
        if (!model_dra_groups_admit(&f->dg, chosen, f->cur.ngrants, c->gpu)) return false;
    }
    if (c->mig_profile < 0) return !f->gpu_used[c->gpu];
    for (int k = 0; k < f->cur.ngrants; k++) {
        const model_grant *o = &f->cur.grant[k];
        if (o->gpu == c->gpu && o->mig_profile < 0) return false;
        if (o->gpu == c->gpu && o->mig_start == c->mig_start) return false;
    }
    if (c->mig_create) {
        const model_gpu *g = &f->n->gpus[c->gpu];
        return model_mig_can_add(g->product, &f->layout[c->gpu], c->mig_profile, c->mig_start, NULL, 0);
    }
    return true;
}

/* Whether GPU g may join the GPUs chosen so far under the required alignment: a set is as
 * aligned as its worst pair (topo.h), so checking each new GPU against those chosen prunes
 * early. Another grant on a GPU already chosen (MIG) adds no pair. */
static bool aligned_with_chosen(fit_run *f, int g) {
    if (!f->need_align || f->gpu_used[g]) return true;
    unsigned chosen = 0;
    for (int k = 0; k < f->cur.ngrants; k++) chosen |= 1u << f->cur.grant[k].gpu;
    chosen &= ~(1u << g);
    /* the links at the required level or better, as model_topo_set keeps them (none without topology) */
    unsigned linked = f->n->topo && f->need_align <= MODEL_ALIGN_NVLINK ? f->n->topo->adj[f->need_align][g] : 0;
    if (chosen & ~linked) {
        f->topo_refused = true;
        return false;
    }
    return true;
}

static void choose(fit_run *f, int from, int left) {
    if (left == 0) {
        emit(f);
        return;
    }
    for (int i = from; i < f->ncand && f->found < f->limit; i++) {
        const model_grant *c = &f->cand[i];
        if (f->ncand - i < left) return;
        if (!compatible(f, c) || !aligned_with_chosen(f, c->gpu)) continue;
        f->cur.grant[f->cur.ngrants++] = *c;
        bool was_used = f->gpu_used[c->gpu];
        f->gpu_used[c->gpu] = true;
        model_mig_layout *l = &f->layout[c->gpu];
        if (c->mig_create) l->inst[l->n++] = (model_mig_placement){c->mig_profile, c->mig_start};
        choose(f, i + 1, left - 1);
        if (c->mig_create) l->n--;
        f->gpu_used[c->gpu] = was_used;
        f->cur.ngrants--;
    }
}

/* ------------------------------------------------------------- reasons ---- */

/* Nothing fit because of the required alignment: what the node's free GPUs offer instead.
 * The GPUs with a candidate grant are the free ones for this request. */
static void explain_topology(const fit_run *f, char *why, size_t len) {
    const model_node *n = f->n;
    const char *want = model_align_name((model_align)f->need_align);
    if (!n->topo) {
        snprintf(why, len, "tessera.io/topology: %s needs the GPU topology, and this node's is unknown (the tessera "
                 "node agent publishes it in the tessera.io/gpus annotation)", want);
        return;
    }
    bool cand[MODEL_MAX_GPUS] = {false};
    int ngpus = 0;
    for (int i = 0; i < f->ncand; i++) {
        ngpus += !cand[f->cand[i].gpu];
        cand[f->cand[i].gpu] = true;
    }
    int k = f->r->count < ngpus ? f->r->count : ngpus;
    int8_t set[MODEL_MAX_GPUS];
    int al = model_topo_best_set(n, cand, k, set);
    char list[64] = "";
    size_t off = 0;
    for (int i = 0; al >= 0 && i < k && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? "," : "", set[i]);
    snprintf(why, len, "tessera.io/topology: %s: no %d free GPUs here are %s-aligned (the best free set is %s: GPUs %s)",
             want, f->r->count, want, model_align_name((model_align)(al < 0 ? 0 : al)), list);
}

static void explain(const fit_run *f, const route_plan *p, const char *hint, char *why, size_t len) {
    const model_node *n = f->n;
    const model_request *r = f->r;
    const fit_stats *s = &f->st;
    char req[160];
    model_request_format(r, req, sizeof req);
    if (s->gpus_model_ok == 0 && n->has_dra) {
        /* which GPUs a request may use depends on its path (model_gpu_reachable) */
        int reach = 0;
        for (int i = 0; i < n->ngpus; i++) reach += model_gpu_reachable(&n->gpus[i], r);
        if (!reach) {
            snprintf(why, len, r->via_dra ? "no GPU here is published through DRA (a claim cannot get one)"
                                          : "every GPU here is published through DRA only (the device plugin hands out "
                                            "none): ask for it with a ResourceClaim");
            return;
        }
    }
    if (s->gpus_model_ok == 0) {
        snprintf(why, len, "GPU model %s is not among tessera.io/gpu-models", n->ngpus ? n->gpus[0].product->product : "?");
        return;
    }
    if (s->gpus_route_ok == 0 || (p->hint_first && hint[0] && s->gpus_with_room < r->count)) {
        if (hint[0]) snprintf(why, len, "%s", hint);
        else if (r->kind == MODEL_REQ_MIG || (p->mig && !p->soft && !p->timeslice && !p->mps && !p->whole))
            snprintf(why, len, "no MIG-enabled GPU on this node for %s", req);
        else if (p->whole && !p->timeslice && !p->mps && !p->mig)
            snprintf(why, len, "no unshared GPU on this node (its GPUs are %s) for %s",
                     model_gpu_mode_name(n->gpus[0].mode), req);
        else
            snprintf(why, len, "no GPU on this node can serve %s (GPUs are %s)", req,
                     model_gpu_mode_name(n->gpus[0].mode));
        return;
    }
    if (r->kind == MODEL_REQ_MIG && s->profile_missing == s->gpus_route_ok) {
        snprintf(why, len, "MIG profile %s does not exist on %s", r->mig_profile, n->gpus[0].product->product);
        return;
    }
    if (s->gpus_with_room < r->count && s->mode_refused) {
        /* room enough, but the GPU's soft shares are of another mode or uid: that is the reason */
        snprintf(why, len, "needs %s; %s%s", req, s->mode_why,
                 s->mode_refused > 1 ? " (and so on for the other GPUs with room)" : "");
        return;
    }
    if (s->gpus_with_room < r->count) {
        if (r->kind == MODEL_REQ_WHOLE && !p->mig && !p->timeslice && !p->mps)
            snprintf(why, len, "needs %d whole GPU%s, %d of %d free", r->count, r->count > 1 ? "s" : "",
                     s->gpus_with_room, s->gpus_route_ok);
        else if (r->kind == MODEL_REQ_MIG)
            snprintf(why, len, "needs %d x MIG %s, %d idle instance%s%s", r->count, r->mig_profile,
                     s->idle_instances, s->idle_instances == 1 ? "" : "s",
                     s->idle_instances ? " (and no room to create more)" : "");
        else if (s->best_gpu < 0)
            snprintf(why, len, "needs %s; no GPU has any memory or compute free", req);
        else
            snprintf(why, len, "needs %s; %d GPU%s with room (most free: %d MiB, %d percent SMs on GPU %d)", req,
                     s->gpus_with_room, s->gpus_with_room == 1 ? "" : "s", s->best_free_mem,
                     s->best_free_compute / 10, s->best_gpu);
        return;
    }
    if (f->dra_groups) {   /* enough room, but maybe not on GPUs that meet the claim's constraints together */
        bool room[MODEL_MAX_GPUS] = {false};
        for (int i = 0; i < f->ncand; i++) room[f->cand[i].gpu] = true;
        if (model_dra_groups_largest(&f->dg, room, n->ngpus, r->count) < r->count) {
            model_dra_groups_why(&f->dg, r, room, n->ngpus, "free ", why, len);
            return;
        }
    }
    if (f->topo_refused) {
        explain_topology(f, why, len);
        return;
    }
    snprintf(why, len, "the free slots cannot hold %s at once", req);
}

/* ----------------------------------------------------------------- fit ---- */

static int64_t host_memory_mib(const model_request *r) { return (r->memory_bytes + (1 << 20) - 1) >> 20; }

/* model_fit and model_fit_any: enumerate up to limit assignments; the reason is
 * written only when none is found and the caller asked for it. */
static int fit_count(const model_node *n, const model_request *r, uint32_t only, model_assignment *out, int max,
                     int limit, char *why, size_t whylen) {
    char scratch[8];
    bool want_why = why && whylen;
    if (!want_why) {
        why = scratch;
        whylen = sizeof scratch;
    }
    why[0] = 0;
    if (n->reason[0] && r->kind != MODEL_REQ_NONE) {
        snprintf(why, whylen, "node takes no GPU pods: %s", n->reason);
        return 0;
    }
    if (n->track_host) {
        if (n->cpu_milli - n->cpu_used_milli < r->cpu_milli) {
            snprintf(why, whylen, "not enough CPU: needs %lldm, %lldm free", (long long)r->cpu_milli,
                     (long long)(n->cpu_milli - n->cpu_used_milli));
            return 0;
        }
        if (n->memory_mib - n->memory_used_mib < host_memory_mib(r)) {
            snprintf(why, whylen, "not enough memory: needs %lld MiB, %lld MiB free",
                     (long long)host_memory_mib(r), (long long)(n->memory_mib - n->memory_used_mib));
            return 0;
        }
    }
    model_assignment base;
    memset(&base, 0, sizeof base);
    if (r->compute_sharing == MODEL_COMPUTE_MPS) base.mps_uid = r->run_as_uid;
    if (n->track_host) {
        base.cpu_milli = r->cpu_milli;
        base.memory_mib = host_memory_mib(r);
    }
    if (r->kind == MODEL_REQ_NONE) {
        if (out && max > 0) out[0] = base;
        return 1;
    }
    if (n->ngpus == 0) {
        snprintf(why, whylen, "node has no GPUs");
        return 0;
    }
    if (r->count < 1 || r->count > MODEL_MAX_GPUS) {
        snprintf(why, whylen, "request for %d GPUs cannot be placed", r->count);
        return 0;
    }

    /* On the stack and zeroed only up to the candidate array: fit runs once per node
     * per request, so it must not cost an allocation or a 16 KiB memset. */
    fit_run run, *f = &run;
    memset(f, 0, offsetof(fit_run, cand));
    f->n = n;
    f->r = r;
    f->out = out;
    f->max = out ? max : 0;
    f->cur = base;
    f->limit = limit;
    f->need_align = model_request_required_align(r);
    f->st.best_gpu = -1;
    for (int gi = 0; gi < n->ngpus; gi++) {
        const model_gpu *g = &n->gpus[gi];
        f->layout[gi].n = g->ninst;
        for (int k = 0; k < g->ninst; k++)
            f->layout[gi].inst[k] = (model_mig_placement){g->inst[k].profile, g->inst[k].start};
    }
    char hint[MODEL_REASON_LEN];
    route_plan p = route_plan_for(n, r, hint, sizeof hint);
    if (r->via_dra && r->dra_nconstraints > 0) {
        f->dra_groups = true;
        model_dra_groups_of(n, r, &f->dg);
    }
    gen_candidates(f, &p);
    if (only != UINT32_MAX) {   /* model_fit_on: keep the candidates on the GPUs asked about, in order */
        int k = 0;
        for (int i = 0; i < f->ncand; i++)
            if (only >> f->cand[i].gpu & 1u) f->cand[k++] = f->cand[i];
        f->ncand = k;
    }
    choose(f, 0, r->count);
    int found = f->found > MODEL_FIT_MAX ? MODEL_FIT_MAX : f->found;
    if (found == 0 && want_why) explain(f, &p, hint, why, whylen);
    return found;
}

int model_fit(const model_node *n, const model_request *r, model_assignment *out, int max, char *why,
              size_t whylen) {
    return fit_count(n, r, UINT32_MAX, out, max, MODEL_FIT_MAX, why, whylen);
}

int model_fit_on(const model_node *n, const model_request *r, uint32_t gpus, model_assignment *out, int max, char *why,
                 size_t whylen) {
    return fit_count(n, r, gpus, out, max, MODEL_FIT_MAX, why, whylen);
}

bool model_fit_any(const model_node *n, const model_request *r, char *why, size_t whylen) {
    return fit_count(n, r, UINT32_MAX, NULL, 0, 1, why, whylen) > 0;
}

/* -------------------------------------------------------- assign/release ---- */

const model_alloc *model_node_find(const model_node *n, const char *uid) {
    if (!uid || !uid[0]) return NULL;
    for (int i = 0; i < n->nallocs; i++)
        if (n->allocs[i].uid[0] && !strcmp(n->allocs[i].uid, uid)) return &n->allocs[i];
    return NULL;
}

#define REFUSE(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* Check one grant against the GPU as it is now and apply it; the GPU is a scratch
 * copy, so a refusal half-way leaves the node untouched. */
static int apply_grant(model_gpu *gpus, int ngpus, int holder, const model_grant *gr, int64_t mps_uid, char *err,
                       size_t errlen) {
    if (gr->gpu < 0 || gr->gpu >= ngpus) REFUSE("grant names GPU %d, node has %d", gr->gpu, ngpus);
    model_gpu *g = &gpus[gr->gpu];
    if (gr->mps && (gr->mig_profile >= 0 || gr->exclusive || gr->replica >= 0))
        REFUSE("GPU %d: an MPS share is a soft share of an unshared GPU, not a whole GPU, replica or MIG instance", g->index);
    if (gr->mig_profile >= 0) {
        if (g->mode != MODEL_GPU_MIG) REFUSE("GPU %d is not in MIG mode", g->index);
        if (gr->mig_profile >= g->product->nprofiles) REFUSE("GPU %d has no MIG profile #%d", g->index, gr->mig_profile);
        const char *pname = g->product->profiles[gr->mig_profile].name;
        if (gr->replica >= 0) {
            /* one replica of a shared (layered) instance */
            if (gr->mig_create) REFUSE("GPU %d: a replica needs an existing shared %s instance", g->index, pname);
            if (gr->memory_mib < 0 || gr->compute_permille < 0) REFUSE("grant on GPU %d has negative amounts", g->index);
            int k;
            for (k = 0; k < g->ninst; k++)
                if (g->inst[k].start == gr->mig_start && g->inst[k].profile == gr->mig_profile) break;
            if (k == g->ninst) REFUSE("GPU %d has no %s instance at slot %d", g->index, pname, gr->mig_start);
            model_mig_instance *in = &g->inst[k];
            if (in->replicas < 2) REFUSE("GPU %d: %s at slot %d is not shared by replicas", g->index, pname, gr->mig_start);
            if (gr->replica >= in->replicas)
                REFUSE("GPU %d: %s at slot %d has no replica %d", g->index, pname, gr->mig_start, gr->replica);
            if (in->rep_used & (1u << gr->replica))
                REFUSE("GPU %d: %s at slot %d replica %d is taken", g->index, pname, gr->mig_start, gr->replica);
            const model_mig_profile *pr = &g->product->profiles[in->profile];
            if (in->mem_used + gr->memory_mib > mig_profile_memory(g, pr) ||
                in->comp_used + gr->compute_permille > mig_profile_compute(g, pr))
                REFUSE("GPU %d: %s at slot %d has %d MiB and %d permille SMs left, the replica needs %d and %d", g->index,
                       pname, gr->mig_start, mig_profile_memory(g, pr) - in->mem_used,
                       mig_profile_compute(g, pr) - in->comp_used, gr->memory_mib, gr->compute_permille);
            in->rep_used |= 1u << gr->replica;
            in->mem_used += gr->memory_mib;
            in->comp_used = (int16_t)(in->comp_used + gr->compute_permille);
            g->nholders++;
            return 0;
        }
        if (gr->mig_create) {
            char why[128];
            model_mig_layout l = {.n = g->ninst};
            for (int k = 0; k < g->ninst; k++) l.inst[k] = (model_mig_placement){g->inst[k].profile, g->inst[k].start};
            if (!g->mig_dynamic) REFUSE("GPU %d: MIG instances cannot be created on demand here", g->index);
            if (g->ninst >= MODEL_MIG_MAX_INSTANCES ||
                !model_mig_can_add(g->product, &l, gr->mig_profile, gr->mig_start, why, sizeof why))
                REFUSE("GPU %d: cannot create %s at slot %d: %s", g->index, pname, gr->mig_start, why);
            g->inst[g->ninst++] = (model_mig_instance){.profile = gr->mig_profile, .start = gr->mig_start,
                                                       .on_demand = true, .replicas = 1, .holder = holder};
        } else {
            int k;
            for (k = 0; k < g->ninst; k++)
                if (g->inst[k].start == gr->mig_start && g->inst[k].profile == gr->mig_profile) break;
            if (k == g->ninst) REFUSE("GPU %d has no %s instance at slot %d", g->index, pname, gr->mig_start);
            if (g->inst[k].replicas > 1)
                REFUSE("GPU %d: %s at slot %d is shared by %d replicas; a grant takes one of them", g->index, pname,
                       gr->mig_start, g->inst[k].replicas);
            if (g->inst[k].holder >= 0) REFUSE("GPU %d: %s at slot %d is already held", g->index, pname, gr->mig_start);
            g->inst[k].holder = holder;
        }
        g->nholders++;
        return 0;
    }
    if (gr->memory_mib < 0 || gr->compute_permille < 0) REFUSE("grant on GPU %d has negative amounts", g->index);
    if (gr->exclusive) {
        if (g->mode != MODEL_GPU_WHOLE) REFUSE("GPU %d is %s, not an unshared GPU", g->index, model_gpu_mode_name(g->mode));
        if (g->nholders) REFUSE("GPU %d is in use", g->index);
        if (gr->memory_mib != g->memory_mib || gr->compute_permille != 1000)
            REFUSE("whole-GPU grant on GPU %d must charge all of it", g->index);
        g->exclusive_holder = holder;
    } else if (gr->replica >= 0) {
        if (g->mode != MODEL_GPU_TIMESLICE && g->mode != MODEL_GPU_MPS) REFUSE("GPU %d has no replicas", g->index);
        if (gr->replica >= g->replicas || gr->replica >= MODEL_MAX_REPLICAS) REFUSE("GPU %d has no replica %d", g->index, gr->replica);
        uint64_t bit = 1ull << (gr->replica % 64);
        if (g->replica_used[gr->replica / 64] & bit) REFUSE("GPU %d replica %d is taken", g->index, gr->replica);
        g->replica_used[gr->replica / 64] |= bit;
        g->replicas_used++;
    } else {
        if (g->mode != MODEL_GPU_WHOLE) REFUSE("GPU %d is %s; shares go on unshared GPUs", g->index, model_gpu_mode_name(g->mode));
        if (g->exclusive_holder >= 0) REFUSE("GPU %d is held whole", g->index);
        if (gr->memory_mib == 0 && gr->compute_permille == 0) REFUSE("share on GPU %d charges nothing", g->index);
        if (gr->mps) {
            /* the rules soft_mode_refusal gives model_fit, for assignments from anywhere */
            if (mps_uid < 0 || mps_uid > INT32_MAX) REFUSE("MPS share on GPU %d has no valid uid (%lld)", g->index, (long long)mps_uid);
            if (gr->compute_permille <= 0) REFUSE("MPS share on GPU %d charges no compute, its SM cap", g->index);
            model_request probe = {.kind = MODEL_REQ_FRACTION, .compute_sharing = MODEL_COMPUTE_MPS, .run_as_uid = mps_uid};
            char why[224];
            if (soft_mode_refusal(g, &probe, why, sizeof why)) REFUSE("%s", why);
            g->mps_clients++;
            g->mps_uid = (int32_t)mps_uid;
        } else if (g->mps_clients) {
            REFUSE("GPU %d serves MPS clients (uid %d); a time-sliced share never joins them", g->index, (int)g->mps_uid);
        }
    }
    if (g->memory_used_mib + gr->memory_mib > g->memory_mib)
        REFUSE("GPU %d has %d MiB free, grant needs %d", g->index, g->memory_mib - g->memory_used_mib, gr->memory_mib);
    if (g->compute_used_permille + gr->compute_permille > 1000)
        REFUSE("GPU %d has %d percent SMs free, grant needs %d percent", g->index, (1000 - g->compute_used_permille) / 10,
               gr->compute_permille / 10);
    g->memory_used_mib += gr->memory_mib;
    g->compute_used_permille += gr->compute_permille;
    g->nholders++;
    return 0;
}

int model_assign(model_node *n, const char *uid, const model_assignment *a, char *err, size_t errlen) {
    if (!uid || !uid[0] || strlen(uid) >= MODEL_UID_LEN) REFUSE("pod UID must be 1..%d characters", MODEL_UID_LEN - 1);
    if (model_node_find(n, uid)) REFUSE("pod %s already holds GPUs on node %s", uid, n->name);
    if (a->ngrants < 0 || a->ngrants > MODEL_MAX_GPUS) REFUSE("assignment has %d grants", a->ngrants);
    if (a->cpu_milli < 0 || a->memory_mib < 0) REFUSE("assignment charges negative host resources");
    if (n->reason[0] && a->ngrants > 0) REFUSE("node %s takes no GPU pods: %s", n->name, n->reason);
    if (n->track_host && (n->cpu_used_milli + a->cpu_milli > n->cpu_milli ||
                          n->memory_used_mib + a->memory_mib > n->memory_mib))
        REFUSE("node %s has not enough CPU or memory left", n->name);

    int slot = 0;
    while (slot < n->nallocs && n->allocs[slot].uid[0]) slot++;
    if (slot == n->allocs_cap) {
        int cap = n->allocs_cap ? 2 * n->allocs_cap : 4;
        model_alloc *grown = realloc(n->allocs, (size_t)cap * sizeof *grown);
        if (!grown) REFUSE("out of memory");
        n->allocs = grown;
        n->allocs_cap = cap;
    }
    model_gpu scratch[MODEL_MAX_GPUS];
    memcpy(scratch, n->gpus, (size_t)n->ngpus * sizeof *scratch);
    for (int k = 0; k < a->ngrants; k++)
        if (apply_grant(scratch, n->ngpus, slot, &a->grant[k], a->mps_uid, err, errlen) < 0) return -1;

    memcpy(n->gpus, scratch, (size_t)n->ngpus * sizeof *scratch);
    model_alloc *al = &n->allocs[slot];
    snprintf(al->uid, sizeof al->uid, "%s", uid);
    al->a = *a;
    if (slot == n->nallocs) n->nallocs++;
    n->nlive++;
    n->cpu_used_milli += a->cpu_milli;
    n->memory_used_mib += a->memory_mib;
    return 0;
}

int model_release(model_node *n, const char *uid) {
    const model_alloc *found = model_node_find(n, uid);
    if (!found) return -1;
    int slot = (int)(found - n->allocs);
    model_alloc *al = &n->allocs[slot];
    for (int k = 0; k < al->a.ngrants; k++) {
        const model_grant *gr = &al->a.grant[k];
        model_gpu *g = &n->gpus[gr->gpu];
        g->nholders--;
        if (gr->mig_profile >= 0) {
            for (int i = 0; i < g->ninst; i++) {
                if (g->inst[i].start != gr->mig_start) continue;
                if (gr->replica >= 0) {
                    g->inst[i].rep_used &= ~(1u << gr->replica);
                    g->inst[i].mem_used -= gr->memory_mib;
                    g->inst[i].comp_used = (int16_t)(g->inst[i].comp_used - gr->compute_permille);
                } else if (g->inst[i].on_demand) {
                    memmove(&g->inst[i], &g->inst[i + 1], (size_t)(g->ninst - i - 1) * sizeof g->inst[0]);
                    g->ninst--;
                } else {
                    g->inst[i].holder = -1;
                }
                break;
            }
            continue;
        }
        if (gr->exclusive) g->exclusive_holder = -1;
        if (gr->mps && --g->mps_clients == 0) g->mps_uid = -1;   /* the GPU's MPS uid leaves with its last client */
        if (gr->replica >= 0) {
            g->replica_used[gr->replica / 64] &= ~(1ull << (gr->replica % 64));
            g->replicas_used--;
        }
        g->memory_used_mib -= gr->memory_mib;
        g->compute_used_permille -= gr->compute_permille;
    }
    n->cpu_used_milli -= al->a.cpu_milli;
    n->memory_used_mib -= al->a.memory_mib;
    al->uid[0] = 0;
    n->nlive--;
    while (n->nallocs > 0 && !n->allocs[n->nallocs - 1].uid[0]) n->nallocs--;
    return 0;
}

int model_regrant(const model_node *n, const model_assignment *from, int from_gpu, int to_gpu, model_assignment *out,
                  char *err, size_t errlen) {
    if (from_gpu < 0 || from_gpu >= n->ngpus || to_gpu < 0 || to_gpu >= n->ngpus || from_gpu == to_gpu)
        REFUSE("cannot move grants from GPU #%d to GPU #%d on a node with %d GPUs", from_gpu, to_gpu, n->ngpus);
    if (from->ngrants < 0 || from->ngrants > MODEL_MAX_GPUS) REFUSE("assignment has %d grants", from->ngrants);
    *out = *from;
    model_assignment moved = {0};
    const model_gpu *to = &n->gpus[to_gpu], *fr = &n->gpus[from_gpu];
    /* The fit chose from_gpu for the request's constraints (gpu-models, isolation); the same product in
     * the same mode satisfies them too, anything else might not (a time-slice replica on an MPS GPU, a
     * model the pod excluded), and regrant does not see the request. */
    if (to->product != fr->product || to->mode != fr->mode)
        REFUSE("GPU %d (%s, %s) is not like GPU %d (%s, %s)", to->index, to->product ? to->product->product : "?",
               model_gpu_mode_name(to->mode), fr->index, fr->product ? fr->product->product : "?", model_gpu_mode_name(fr->mode));
    for (int k = 0; k < from->ngrants; k++) {
        if (from->grant[k].gpu == to_gpu) REFUSE("assignment already has a grant on GPU %d", to->index);
        if (from->grant[k].gpu != from_gpu) continue;
        model_grant *g = &out->grant[k];
        g->gpu = (int8_t)to_gpu;
        if (g->mig_profile >= 0) {
            if (to->mode != MODEL_GPU_MIG)
                REFUSE("GPU %d cannot take a MIG grant of GPU %d", to->index, n->gpus[from_gpu].index);
            int i = 0;
            while (i < to->ninst && !(to->inst[i].profile == g->mig_profile && to->inst[i].start == g->mig_start)) i++;
            if (g->replica >= 0) {   /* a replica moves to a free replica of the same shared instance there */
                int rep = i < to->ninst && to->inst[i].replicas > 1 ? mig_lowest_free_replica(&to->inst[i]) : -1;
                if (rep < 0) REFUSE("GPU %d has no free replica of a shared instance at slot %d", to->index, g->mig_start);
                g->replica = (int16_t)rep;
                g->mig_inst = (int8_t)i;
                moved.grant[moved.ngrants++] = *g;
                continue;
            }
            g->mig_create = i == to->ninst;
            g->mig_inst = (int8_t)(i < to->ninst ? i : -1);
        } else if (g->exclusive) {
            g->memory_mib = to->memory_mib;
        }
        moved.grant[moved.ngrants++] = *g;
    }
    if (moved.ngrants == 0) REFUSE("assignment has no grant on GPU %d", n->gpus[from_gpu].index);
    moved.mps_uid = from->mps_uid;   /* MPS shares keep their uid (and to's MPS clients must have it) */
    /* Only the moved grants are checked: the others are still held by the pod on n. */
    model_node *c = model_node_clone(n);
    if (!c) REFUSE("out of memory");
    int rc = model_assign(c, "\001regrant", &moved, err, errlen);
    model_node_free(c);
    return rc;
}

int model_regrant_group(const model_node *n, int ntenants, const char *const *uids, const model_assignment *from,
                        int from_gpu, const int8_t *rank, model_assignment *out, char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    int top = 0;
    for (int g = 0; g < n->ngpus; g++)
        if (rank[g] > top) top = rank[g];
    for (int want = top; want >= 1; want--)
        for (int g = 0; g < n->ngpus; g++) {
            if (g == from_gpu || rank[g] != want || !model_gpu_idle(&n->gpus[g])) continue;
            model_node *c = model_node_clone(n);
            if (!c) REFUSE("out of memory");
            bool fits = true;
            for (int i = 0; i < ntenants && fits; i++) {
                fits = model_regrant(c, &from[i], from_gpu, g, &out[i], err, errlen) == 0;
                if (fits) {
                    model_release(c, uids[i]);
                    fits = model_assign(c, uids[i], &out[i], err, errlen) == 0;
                }
            }
            model_node_free(c);
            if (fits) {
                if (errlen) err[0] = 0;   /* an earlier candidate's refusal is no answer */
                return g;
            }
        }
    if (errlen && !err[0]) snprintf(err, errlen, "no other idle GPU on the node");
    return -1;
}

void model_assignment_format(const model_node *n, const model_assignment *a, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    if (a->ngrants == 0) {
        snprintf(buf, len, "no GPU");
        return;
    }
    for (int k = 0; k < a->ngrants && off < len; k++) {
        const model_grant *gr = &a->grant[k];
        const char *sep = k ? "; " : "";
        int w;
        if (gr->mig_profile >= 0) {
            const model_gpu *g = gr->gpu >= 0 && gr->gpu < n->ngpus ? &n->gpus[gr->gpu] : NULL;
            const char *pname = g && gr->mig_profile < g->product->nprofiles ? g->product->profiles[gr->mig_profile].name : "?";
            if (gr->replica >= 0)
                w = snprintf(buf + off, len - off, "%sGPU %d mig %s@%d replica %d", sep, gr->gpu, pname,
                             gr->mig_start, gr->replica);
            else
                w = snprintf(buf + off, len - off, "%sGPU %d mig %s@%d%s", sep, gr->gpu, pname, gr->mig_start,
                             gr->mig_create ? " (new)" : "");
        } else if (gr->exclusive) {
            w = snprintf(buf + off, len - off, "%sGPU %d whole", sep, gr->gpu);
        } else if (gr->replica >= 0) {
            w = snprintf(buf + off, len - off, "%sGPU %d replica %d (%d MiB, %d percent SMs)", sep, gr->gpu, gr->replica,
                         gr->memory_mib, gr->compute_permille / 10);
        } else if (gr->mps) {
            w = snprintf(buf + off, len - off, "%sGPU %d MPS share (%d MiB, %d percent SMs, uid %lld)", sep, gr->gpu,
                         gr->memory_mib, gr->compute_permille / 10, (long long)a->mps_uid);
        } else {
            w = snprintf(buf + off, len - off, "%sGPU %d share (%d MiB, %d percent SMs)", sep, gr->gpu, gr->memory_mib,
                         gr->compute_permille / 10);
        }
        if (w < 0) break;
        off += (size_t)w;
    }
}

void model_assignment_set_sharing(model_assignment *a, const model_request *r) {
    bool mps = r->compute_sharing == MODEL_COMPUTE_MPS;
    a->mps_uid = mps ? r->run_as_uid : 0;
    for (int k = 0; k < a->ngrants && k < MODEL_MAX_GPUS; k++) {
        model_grant *gr = &a->grant[k];
        gr->mps = mps && !gr->exclusive && gr->replica < 0 && gr->mig_profile < 0;
    }
}

/* ---- claims (Dynamic Resource Allocation) ------------------------------------------------------------ */

int model_dra_account_claim(model_node *m, const char *uid, const model_dra_result *res, int nres,
                            model_dra_device_fn find, void *user, char *err, size_t errlen) {
    model_assignment a;
    memset(&a, 0, sizeof a);
    int missing = 0;
    if (err && errlen) err[0] = 0;
    for (int i = 0; i < nres; i++) {
        const model_dra_result *r = &res[i];
        if (r->admin || strcmp(r->driver, MODEL_DRA_DRIVER) != 0) continue;   /* admin access holds nothing */
        bool here = false;
        const model_dra_device *dev = find(user, r, &here);
        if (!dev) {
            /* the rest of the claim still holds its devices: dropping it whole would show them free */
            if (!missing++) snprintf(err, errlen, "device %s of pool %s is not published", r->device, r->pool);
            continue;
        }
        if (!here || a.ngrants >= MODEL_MAX_GPUS) continue;
        if (model_dra_grant(m, dev, &a.grant[a.ngrants], err, errlen) != 0) return -1;
        a.ngrants++;
    }
    if (a.ngrants == 0) return missing ? -1 : 0;
    char aerr[256];
    if (model_assign(m, uid, &a, aerr, sizeof aerr) != 0) {
        snprintf(err, errlen, "%s", aerr);
        return -1;
    }
    return 1;
}

bool model_dra_could_fit(const model_node *n, const model_request *r, char *why, size_t whylen) {
    int have = 0, dra = 0;
    bool whole[MODEL_MAX_GPUS] = {false};   /* GPUs a whole-GPU claim could get, for its constraints */
    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        if (!g->dra) continue;
        dra++;
        if (!model_fit_gpu_allowed(n, g, r)) continue;
        if (r->kind == MODEL_REQ_WHOLE) {
            whole[i] = g->mode == MODEL_GPU_WHOLE || (g->mode == MODEL_GPU_MIG && g->mig_dynamic);
            have += whole[i];
        } else if (r->kind == MODEL_REQ_MIG && g->mode == MODEL_GPU_MIG) {
            int pi = model_product_profile_index(g->product, r->mig_profile);
            if (pi < 0) continue;
            if (g->mig_dynamic) { have += g->product->profiles[pi].max_instances; continue; }
            for (int k = 0; k < g->ninst; k++) have += g->inst[k].profile == pi;
        }
    }
    if (have >= r->count && r->dra_nconstraints > 0 && r->kind == MODEL_REQ_WHOLE) {
        /* the claim's devices must also meet its constraints together (model_dra_request judges them on whole
         * GPUs only) */
        model_dra_groups gr;
        model_dra_groups_of(n, r, &gr);
        if (model_dra_groups_largest(&gr, whole, n->ngpus, r->count) < r->count) {
            model_dra_groups_why(&gr, r, whole, n->ngpus, "", why, whylen);
            return false;
        }
    }
    int need = model_request_required_align(r);
    if (have >= r->count && need > MODEL_ALIGN_UNKNOWN && r->kind == MODEL_REQ_WHOLE) {
        /* the pod requires an aligned set (tessera.io/topology): some set of the published devices must be one */
        const char *want = model_align_name((model_align)need);
        int8_t set[MODEL_MAX_GPUS];
        /* any set that meets it will do: the first one found (the best is sought only to name it in the reason) */
        if (n->topo && model_topo_first_set(n, whole, r->count, (model_align)need, set) >= need) return true;
        if (!why) return false;
        int al = n->topo ? model_topo_best_set(n, whole, r->count, set) : MODEL_ALIGN_UNKNOWN;
        if (!n->topo)
            snprintf(why, whylen, "tessera.io/topology: %s needs the GPU topology, and this node's is unknown (no two "
                     "of its DRA devices share a resource.kubernetes.io/pcieRoot, and the tessera node agent's "
                     "tessera.io/gpus annotation has no topo)", want);
        else
            snprintf(why, whylen, "tessera.io/topology: %s: no %d GPUs DRA publishes here are %s-aligned (the best set "
                     "is %s)", want, r->count, want, model_align_name((model_align)(al < 0 ? 0 : al)));
        return false;
    }
    if (have >= r->count) return true;
    char rb[160];
    model_request_format(r, rb, sizeof rb);
    if (why) {
        if (!dra) snprintf(why, whylen, "no GPU published through DRA (%s) on this node", MODEL_DRA_DRIVER);
        else snprintf(why, whylen, "DRA publishes %d matching device%s here, the claim asks %s", have, have == 1 ? "" : "s", rb);
    }
    return false;
}
