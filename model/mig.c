/* mig.c -- MIG placement rules: legal starts, validity of a set of GPU instances,
 * mig-parted style configs and the physical layouts that realise them.
 * Everything works on an 8-bit memory-slice occupancy mask plus per-profile counts.
 */
#include "mig.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool mig_fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool mig_fail(char *why, size_t whylen, const char *fmt, ...) {
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return false;
}

static uint8_t slot_bits(int start, int size) {
    return (uint8_t)(((1u << size) - 1u) << start);
}

uint8_t model_mig_used_mask(const model_gpu_product *p, const model_mig_layout *l) {
    uint8_t used = 0;
    for (int i = 0; i < l->n && i < MODEL_MIG_MAX_INSTANCES; i++) {
        int pi = l->inst[i].profile, s = l->inst[i].start;
        /* Out-of-range entries are reported by model_mig_layout_valid; here they take nothing. */
        if (pi < 0 || pi >= p->nprofiles || s < 0 || s >= MODEL_MIG_MAX_SLICES) continue;
        int size = p->profiles[pi].memory_slices;
        if (s + size > MODEL_MIG_MAX_SLICES) continue;
        used |= slot_bits(s, size);
    }
    return used;
}

static void starts_text(uint8_t mask, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (int s = 0; s < MODEL_MIG_MAX_SLICES; s++)
        if ((mask >> s) & 1) {
            int w = snprintf(buf + off, len - off, "%s%d", off ? "," : "", s);
            if (w < 0 || (size_t)w >= len - off) return;
            off += (size_t)w;
        }
}

/* What every placement rule needs from a layout, gathered in one pass: the policies and
 * model_fit ask "where can profile X go?" for every GPU of every node they look at. */
typedef struct mig_summary {
    uint8_t used;                       /* model_mig_used_mask */
    bool media;                         /* some instance owns the media engines */
    int compute;                        /* compute slices taken */
    int8_t count[MODEL_MAX_PROFILES];   /* instances per profile */
} mig_summary;

static void mig_summarise(const model_gpu_product *p, const model_mig_layout *l, mig_summary *s) {
    memset(s, 0, sizeof *s);
    int n = l->n < MODEL_MIG_MAX_INSTANCES ? l->n : MODEL_MIG_MAX_INSTANCES;
    for (int i = 0; i < n; i++) {
        int pi = l->inst[i].profile, st = l->inst[i].start;
        if (pi < 0 || pi >= p->nprofiles) continue;   /* as model_mig_can_add and the used mask skip it */
        const model_mig_profile *mp = &p->profiles[pi];
        s->count[pi]++;
        s->compute += mp->compute_slices;
        s->media |= mp->media;
        if (st >= 0 && st < MODEL_MIG_MAX_SLICES && st + mp->memory_slices <= MODEL_MIG_MAX_SLICES)
            s->used |= slot_bits(st, mp->memory_slices);
    }
}

/* The legal free starts of one more `profile`: model_mig_can_add's rules as bit masks.
 * A start s is blocked when any used slice lies in [s, s + size). */
static uint8_t starts_of(const model_gpu_product *p, const model_mig_layout *l, const mig_summary *s, int profile) {
    const model_mig_profile *mp = &p->profiles[profile];
    if (l->n >= MODEL_MIG_MAX_INSTANCES || s->count[profile] >= mp->max_instances ||
        s->compute + mp->compute_slices > p->mig_compute_slices || (mp->media && s->media))
        return 0;
    unsigned blocked = 0;
    for (int k = 0; k < mp->memory_slices && k < MODEL_MIG_MAX_SLICES; k++) blocked |= (unsigned)s->used >> k;
    return (uint8_t)(mp->start_mask & ~blocked);
}

bool model_mig_can_add(const model_gpu_product *p, const model_mig_layout *l, int profile, int start,
                       char *why, size_t whylen) {
    if (!why || !whylen) {   /* the hot case: no words wanted, only the answer */
        if (profile < 0 || profile >= p->nprofiles || start < 0 || start >= MODEL_MIG_MAX_SLICES) return false;
        mig_summary s;
        mig_summarise(p, l, &s);
        return (starts_of(p, l, &s, profile) >> start) & 1u;
    }
    if (profile < 0 || profile >= p->nprofiles)
        return mig_fail(why, whylen, "%s has no MIG profile number %d", p->product, profile);
    const model_mig_profile *mp = &p->profiles[profile];
    if (start < 0 || start >= MODEL_MIG_MAX_SLICES || !((mp->start_mask >> start) & 1)) {
        char legal[32];
        starts_text(mp->start_mask, legal, sizeof legal);
        return mig_fail(why, whylen, "%s cannot start at memory slice %d (legal starts: %s)", mp->name, start, legal);
    }
    if (l->n >= MODEL_MIG_MAX_INSTANCES)
        return mig_fail(why, whylen, "a GPU holds at most %d MIG instances", MODEL_MIG_MAX_INSTANCES);
    if (model_mig_used_mask(p, l) & slot_bits(start, mp->memory_slices))
        return mig_fail(why, whylen, "%s@%d overlaps memory slices already in use", mp->name, start);
    int same = 0, compute = 0;
    for (int i = 0; i < l->n; i++) {
        int pi = l->inst[i].profile;
        if (pi < 0 || pi >= p->nprofiles) continue;
        if (pi == profile) same++;
        compute += p->profiles[pi].compute_slices;
        if (mp->media && p->profiles[pi].media)
            return mig_fail(why, whylen, "only one +me instance per GPU: %s@%d already owns the media engines",
                            p->profiles[pi].name, l->inst[i].start);
    }
    if (same >= mp->max_instances)
        return mig_fail(why, whylen, "%s allows at most %d instances per GPU", mp->name, mp->max_instances);
    if (compute + mp->compute_slices > p->mig_compute_slices)
        return mig_fail(why, whylen, "%s needs %d compute slices but only %d of %d are free", mp->name,
                        mp->compute_slices, p->mig_compute_slices - compute, p->mig_compute_slices);
    return true;
}

uint8_t model_mig_free_starts(const model_gpu_product *p, const model_mig_layout *l, int profile) {
    if (profile < 0 || profile >= p->nprofiles) return 0;
    mig_summary s;
    mig_summarise(p, l, &s);
    return starts_of(p, l, &s, profile);
}

void model_mig_free_starts_all(const model_gpu_product *p, const model_mig_layout *l, uint8_t *out) {
    mig_summary s;
    mig_summarise(p, l, &s);
    for (int i = 0; i < MODEL_MAX_PROFILES; i++) out[i] = i < p->nprofiles ? starts_of(p, l, &s, i) : 0;
}

bool model_mig_layout_valid(const model_gpu_product *p, const model_mig_layout *l, char *why, size_t whylen) {
    if (l->n < 0 || l->n > MODEL_MIG_MAX_INSTANCES)
        return mig_fail(why, whylen, "layout has %d instances (at most %d)", l->n, MODEL_MIG_MAX_INSTANCES);
    /* Every rule is pairwise or a count, so adding the instances one by one checks them all. */
    model_mig_layout prefix = {0};
    for (int i = 0; i < l->n; i++) {
        char reason[160];
        int pi = l->inst[i].profile;
        if (!model_mig_can_add(p, &prefix, pi, l->inst[i].start, reason, sizeof reason))
            return mig_fail(why, whylen, "instance %d (%s@%d): %s", i,
                            pi >= 0 && pi < p->nprofiles ? p->profiles[pi].name : "?", l->inst[i].start, reason);
        prefix.inst[prefix.n++] = l->inst[i];
    }
    return true;
}

int model_mig_config_parse(const model_gpu_product *p, const char *json, model_mig_config *out,
                           char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json) {
        mig_fail(err, errlen, "MIG config: no JSON text");
        return -1;
    }
    cJSON *root = cJSON_Parse(json);
    if (!root) {
        mig_fail(err, errlen, "MIG config is not valid JSON");
        return -1;
    }
    int rc = 0;
    bool seen[MODEL_MAX_PROFILES] = {0};
    if (!cJSON_IsObject(root)) {
        mig_fail(err, errlen, "MIG config must be a JSON object of profile -> count");
        rc = -1;
    }
    const cJSON *it;
    for (it = rc ? NULL : root->child; it; it = it->next) {
        const char *key = it->string ? it->string : "";
        int pi = model_product_profile_index(p, key);
        if (pi < 0) {
            mig_fail(err, errlen, "unknown MIG profile \"%s\" on %s", key, p->product);
            rc = -1;
            break;
        }
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d < 0 || d != floor(d)) {
            mig_fail(err, errlen, "count for \"%s\" must be a whole number >= 0", key);
            rc = -1;
            break;
        }
        if (d > MODEL_MIG_MAX_INSTANCES) {
            mig_fail(err, errlen, "count for \"%s\" must be at most %d (instances per GPU)", key,
                     MODEL_MIG_MAX_INSTANCES);
            rc = -1;
            break;
        }
        if (seen[pi]) {
            mig_fail(err, errlen, "MIG profile \"%s\" is given twice", p->profiles[pi].name);
            rc = -1;
            break;
        }
        seen[pi] = true;
        if (d == 0) continue;  /* asks for nothing; keeps layouts and comparisons simple */
        out->item[out->n].profile = (int8_t)pi;
        out->item[out->n].count = (int8_t)d;
        out->n++;
    }
    cJSON_Delete(root);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

typedef struct layout_search {
    const model_gpu_product *p;
    int remaining[MODEL_MAX_PROFILES];  /* instances still to place, per profile */
    int left;                           /* sum of remaining */
    model_mig_layout cur;
    model_mig_layout *out;
    int max, found;
} layout_search;

/* Walks the memory slices in order: at each free slice either start an instance there
 * (profiles in index order) or leave it empty. Instances therefore come out sorted by
 * start, each placement set is produced once, and the order is lexicographic. */
static void layout_walk(layout_search *ls, int slot) {
    if (ls->left == 0) {
        if (ls->found < ls->max) ls->out[ls->found] = ls->cur;
        ls->found++;
        return;
    }
    if (slot >= MODEL_MIG_MAX_SLICES) return;
    uint8_t used = model_mig_used_mask(ls->p, &ls->cur);
    if (!((used >> slot) & 1)) {
        for (int pi = 0; pi < ls->p->nprofiles; pi++) {
            if (!ls->remaining[pi] || !model_mig_can_add(ls->p, &ls->cur, pi, slot, NULL, 0)) continue;
            ls->cur.inst[ls->cur.n++] = (model_mig_placement){(int8_t)pi, (int8_t)slot};
            ls->remaining[pi]--;
            ls->left--;
            layout_walk(ls, slot + ls->p->profiles[pi].memory_slices);
            ls->left++;
            ls->remaining[pi]++;
            ls->cur.n--;
        }
    }
    layout_walk(ls, slot + 1);
}

int model_mig_layouts(const model_gpu_product *p, const model_mig_config *cfg, model_mig_layout *out, int max) {
    layout_search ls;
    memset(&ls, 0, sizeof ls);
    ls.p = p;
    ls.out = out;
    ls.max = out ? max : 0;
    for (int i = 0; i < cfg->n; i++) {
        int pi = cfg->item[i].profile, n = cfg->item[i].count;
        if (pi < 0 || pi >= p->nprofiles || n < 0) return 0;
        ls.remaining[pi] += n;
        ls.left += n;
    }
    if (ls.left > MODEL_MIG_MAX_INSTANCES) return 0;
    layout_walk(&ls, 0);
    return ls.found;
}

void model_mig_layout_format(const model_gpu_product *p, const model_mig_layout *l, char *buf, size_t len) {
    if (!len) return;
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n && i < MODEL_MIG_MAX_INSTANCES; i++) {
        int pi = l->inst[i].profile;
        const char *name = pi >= 0 && pi < p->nprofiles ? p->profiles[pi].name : "?";
        int w = snprintf(buf + off, len - off, "%s%s@%d", i ? " " : "", name, l->inst[i].start);
        if (w < 0 || (size_t)w >= len - off) {
            buf[off] = 0;  /* drop the instance that did not fit rather than show half of it */
            return;
        }
        off += (size_t)w;
    }
}
