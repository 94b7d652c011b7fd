/* charge.c -- the quota units of a grant, and the largest a request could be granted.
 * The rules are in charge.h; README "Quotas" says why each one.
 */
#include "model/charge.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "model/fit.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ceil(1000 x compute slices / the GPU's compute slices): 3g.40gb on an A100 is 429. */
static int mig_milli(const model_gpu_product *p, const model_mig_profile *pr) {
    int total = p->mig_compute_slices > 0 ? p->mig_compute_slices : 7;
    return (1000 * pr->compute_slices + total - 1) / total;
}

/* floor(1000 x memory / cap), never above 1000. Rounded down so that a share declared as a
 * fraction (memory = ceil(fraction x cap)) comes back as exactly that fraction. */
static int memory_share(int64_t memory_mib, int cap) {
    if (cap <= 0 || memory_mib <= 0) return 0;
    int64_t s = memory_mib * 1000 / cap;
    return s > 1000 ? 1000 : (int)s;
}

/* A replica's milli: its slot (slot_milli / replicas, rounded up) or more when what it is
 * charged says more. */
static int replica_milli(int slot_milli, int replicas, int compute, int mem_share) {
    int r = replicas > 1 ? replicas : 1;
    int m = (slot_milli + r - 1) / r;
    if (compute > m) m = compute;
    if (mem_share > m) m = mem_share;
    return m > 1000 ? 1000 : m;
}

model_charge model_charge_grant(const model_node *n, const model_grant *gr) {
    model_charge c = {0, 0};
    if (gr->gpu < 0 || gr->gpu >= n->ngpus) return c;
    const model_gpu *g = &n->gpus[gr->gpu];
    /* The larger of the two memories, so that a GPU labelled below its catalog size (an old
     * driver's 40537 MiB A100-40GB) is not charged a larger share than admission declared. */
    int cap = g->memory_mib > g->product->memory_mib ? g->memory_mib : g->product->memory_mib;
    int share = memory_share(gr->memory_mib, cap);
    c.memory_mib = gr->memory_mib;
    if (gr->exclusive) {
        c.gpu_milli = 1000;
    } else if (gr->mig_profile >= 0 && gr->mig_profile < g->product->nprofiles) {
        int inst = mig_milli(g->product, &g->product->profiles[gr->mig_profile]);
        if (gr->replica < 0) {
            c.gpu_milli = inst;
        } else {
            int reps = g->mig_replicas[gr->mig_profile];
            for (int k = 0; k < g->ninst; k++)
                if (g->inst[k].start == gr->mig_start && g->inst[k].profile == gr->mig_profile) reps = g->inst[k].replicas;
            c.gpu_milli = replica_milli(inst, reps, gr->compute_permille, share);
        }
    } else if (gr->replica >= 0) {
        c.gpu_milli = replica_milli(1000, g->replicas, gr->compute_permille, share);
    } else {
        c.gpu_milli = gr->compute_permille > share ? gr->compute_permille : share;
    }
    return c;
}

model_charge model_charge_assignment(const model_node *n, const model_assignment *a) {
    model_charge sum = {0, 0};
    for (int i = 0; i < a->ngrants; i++) {
        model_charge c = model_charge_grant(n, &a->grant[i]);
        sum.gpu_milli += c.gpu_milli;
        sum.memory_mib += c.memory_mib;
    }
    return sum;
}

/* ------------------------------------------------------------ admission ---- */

static bool names_product(const model_request *r, const model_gpu_product *p) {
    for (int i = 0; i < r->nmodels; i++)
        if (!strcasecmp(r->models[i], p->product) || !strcasecmp(r->models[i], p->model_id)) return true;
    return false;
}

/* The products r may land on: those it names, or all when it names none or names one the
 * catalog does not know (a label spelling or a new card could be any of them). */
static bool product_possible(const model_catalog *cat, const model_request *r, const model_gpu_product *p) {
    if (r->nmodels == 0 || names_product(r, p)) return true;
    for (int i = 0; i < r->nmodels; i++) {
        bool known = false;
        for (int k = 0; k < model_catalog_count(cat) && !known; k++) {
            const model_gpu_product *q = model_catalog_at(cat, k);
            known = !strcasecmp(r->models[i], q->product) || !strcasecmp(r->models[i], q->model_id);
        }
        if (!known) return true;
    }
    return false;
}

typedef struct unit_max {
    model_charge best;
    bool any;
} unit_max;

static void take(unit_max *u, int64_t milli, int64_t mem) {
    u->best.gpu_milli = max64(u->best.gpu_milli, milli);
    u->best.memory_mib = max64(u->best.memory_mib, mem);
    u->any = true;
}

static bool iso_in(model_isolation iso, model_isolation a, model_isolation b, model_isolation c) {
    return iso == a || iso == b || iso == c;
}

/* Replicas of p's GPUs (R >= 2) and of its MIG instances (layered): the most one can be charged.
 * mem_declared is what the request declares per GPU (0: nothing, an equal share then). */
static void take_replicas(unit_max *u, const model_gpu_product *p, int compute, int mem_declared) {
    int cap = p->memory_mib;
    int share = memory_share(mem_declared, cap);
    /* A time-slice replica is charged what it declares, else cap / R; an MPS client cap / R. */
    take(u, replica_milli(1000, 2, compute, share), max64(mem_declared, cap / 2));
    for (int k = 0; k < p->nprofiles; k++) {
        const model_mig_profile *pr = &p->profiles[k];
        take(u, replica_milli(mig_milli(p, pr), 2, compute, share),
             max64(mem_declared, model_mig_profile_memory(p, pr, cap) / 2));
    }
}

static void take_product(unit_max *u, const model_request *r, const model_gpu_product *p) {
    int cap = p->memory_mib;
    model_isolation iso = r->isolation;
    switch (r->kind) {
    case MODEL_REQ_WHOLE:
        if (iso_in(iso, MODEL_ISO_DEFAULT, MODEL_ISO_ANY, MODEL_ISO_ANY)) take(u, 1000, cap);
        if (iso_in(iso, MODEL_ISO_ANY, MODEL_ISO_TIMESLICE, MODEL_ISO_MPS)) take_replicas(u, p, 0, 0);
        if (iso_in(iso, MODEL_ISO_ANY, MODEL_ISO_MIG, MODEL_ISO_MIG))   /* MIG single: whichever slice */
            for (int k = 0; k < p->nprofiles; k++)
                take(u, mig_milli(p, &p->profiles[k]), model_mig_profile_memory(p, &p->profiles[k], cap));
        break;
    case MODEL_REQ_SHARED: {
        int fm = model_fraction_memory(r, cap);
        if (fm <= cap) take_replicas(u, p, r->compute_permille, fm);
        break;
    }
    case MODEL_REQ_MIG: {
        int k = model_product_profile_index(p, r->mig_profile);
        if (k < 0) break;
        const model_mig_profile *pr = &p->profiles[k];
        int mem = model_mig_profile_memory(p, pr, cap);
        if (!r->mig_replica) take(u, mig_milli(p, pr), mem);
        else take(u, replica_milli(mig_milli(p, pr), 2, 0, 0), mem / 2);
        break;
    }
    case MODEL_REQ_FRACTION: {
        int fm = model_fraction_memory(r, cap);
        if (fm > cap) break;
        int share = memory_share(fm, cap);
        /* an MPS share naming only memory is charged compute in proportion (model_fraction_compute) */
        int soft = model_fraction_compute(r, cap);
        if (iso_in(iso, MODEL_ISO_DEFAULT, MODEL_ISO_ANY, MODEL_ISO_ANY)) take(u, soft > share ? soft : share, fm);
        if (iso_in(iso, MODEL_ISO_ANY, MODEL_ISO_TIMESLICE, MODEL_ISO_MPS)) take_replicas(u, p, r->compute_permille, fm);
        /* Onto MIG the fraction takes an instance that holds it, and an idle one of any size
         * may be the one it gets: the largest that holds it is its most. */
        if (iso_in(iso, MODEL_ISO_ANY, MODEL_ISO_MIG, MODEL_ISO_MIG))
            for (int k = 0; k < p->nprofiles; k++) {
                const model_mig_profile *pr = &p->profiles[k];
                int mem = model_mig_profile_memory(p, pr, cap);
                int comp = 1000 * pr->compute_slices / (p->mig_compute_slices > 0 ? p->mig_compute_slices : 7);
                if (mem >= fm && comp >= r->compute_permille) take(u, mig_milli(p, pr), mem);
            }
        break;
    }
    case MODEL_REQ_NONE:
        break;
    }
}

int model_charge_request(const model_request *r, const model_catalog *cat, model_charge *out, char *err,
                         size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!model_request_wants_gpu(r)) return 0;
    if (!cat) cat = model_catalog_default();
    unit_max u = {{0, 0}, false};
    for (int i = 0; i < model_catalog_count(cat); i++) {
        const model_gpu_product *p = model_catalog_at(cat, i);
        if (product_possible(cat, r, p)) take_product(&u, r, p);
    }
    if (!u.any) {
        char what[160];
        model_request_format(r, what, sizeof what);
        snprintf(err, errlen, "%s fits no GPU of the catalog%s", what, r->nmodels ? " among tessera.io/gpu-models" : "");
        return -1;
    }
    out->gpu_milli = u.best.gpu_milli * r->count;
    out->memory_mib = u.best.memory_mib * r->count;
    return 0;
}
