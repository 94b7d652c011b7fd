/* holdings.c -- the kubelet's word set against the model (holdings.h): device ids mapped through the GPUs'
 * UUIDs, each pod's grants compared with them, and the disagreeing pods re-homed together on a copy of the
 * node first, so that what model_holdings_apply then does to the real node is known to fit.
 */
#include "model/holdings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fit.h"

const char *model_hold_verdict_name(model_hold_verdict v) {
    static const char *names[] = {"agree", "moved", "refused", "not-compared"};
    return v >= 0 && v <= MODEL_HOLD_NOT_COMPARED ? names[v] : "?";
}

#define WHY(...) (why ? (void)snprintf(why, whylen, __VA_ARGS__) : (void)0)

model_held_map model_held_map_id(const model_node *n, const char *id, model_held *out, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!strncmp(id, "MIG-", 4)) {
        WHY("%s is a MIG instance; the model keeps no MIG instance UUIDs", id);
        return MODEL_HELD_UNMAPPED;
    }
    const char *sep = strstr(id, "::");
    size_t blen = sep ? (size_t)(sep - id) : strlen(id);
    int replica = -1;
    if (sep) {
        const char *d = sep + 2;
        long v = 0;
        if (!*d) v = -1;
        for (; *d && v >= 0; d++) v = *d >= '0' && *d <= '9' && v < MODEL_MAX_REPLICAS ? v * 10 + (*d - '0') : -1;
        if (v < 0 || v >= MODEL_MAX_REPLICAS) {
            WHY("%s: the replica after \"::\" is not a number below %d", id, MODEL_MAX_REPLICAS);
            return MODEL_HELD_UNKNOWN;
        }
        replica = (int)v;
    }
    bool any_uuid = false;
    for (int i = 0; i < n->ngpus; i++) {
        const char *u = n->gpus[i].uuid;
        any_uuid |= u[0] != 0;
        if (u[0] && strlen(u) == blen && !strncmp(u, id, blen)) {
            out->gpu = (int8_t)i;
            out->replica = (int16_t)replica;
            return MODEL_HELD_MAPPED;
        }
    }
    if (!any_uuid) {
        WHY("node %s publishes no GPU UUIDs (the tessera.io/gpus annotation)", n->name);
        return MODEL_HELD_UNMAPPED;
    }
    WHY("%.*s is not a GPU of node %s", (int)(blen < 64 ? blen : 64), id, n->name);
    return MODEL_HELD_UNKNOWN;
}

model_held_map model_holding_map(const model_node *n, char *const *ids, int nids, model_holding *h, char *why,
                                 size_t whylen) {
    char one[MODEL_REASON_LEN];
    int unmapped = 0, unknown = 0;
    if (why && whylen) why[0] = 0;
    h->nheld = 0;
    for (int d = 0; d < nids; d++) {
        model_held_map m = h->nheld < MODEL_HELD_MAX ? model_held_map_id(n, ids[d], &h->held[h->nheld], one, sizeof one)
                                                     : MODEL_HELD_UNKNOWN;
        if (h->nheld == MODEL_HELD_MAX && m == MODEL_HELD_UNKNOWN)
            snprintf(one, sizeof one, "more than %d devices", MODEL_HELD_MAX);
        if (m == MODEL_HELD_MAPPED) h->nheld++;
        else if ((unmapped + unknown == 0 || (m == MODEL_HELD_UNKNOWN && !unknown)) && why && whylen)
            snprintf(why, whylen, "%s", one);
        unmapped += m == MODEL_HELD_UNMAPPED;
        unknown += m == MODEL_HELD_UNKNOWN;
    }
    return unknown ? MODEL_HELD_UNKNOWN : unmapped ? MODEL_HELD_UNMAPPED : MODEL_HELD_MAPPED;
}

bool model_held_id_is(const char *id, const char *uuid) {
    size_t ul = strlen(uuid);
    return ul && !strncmp(id, uuid, ul) && (!id[ul] || !strncmp(id + ul, "::", 2));
}

typedef enum shape { SHAPE_OTHER = 0, SHAPE_WHOLE, SHAPE_REPLICA } shape;

static shape shape_of_grants(const model_assignment *a) {
    int whole = 0, rep = 0;
    for (int k = 0; k < a->ngrants; k++) {
        const model_grant *g = &a->grant[k];
        if (g->mig_profile >= 0) return SHAPE_OTHER;
        if (g->exclusive) whole++;
        else if (g->replica >= 0) rep++;
    }
    if (a->ngrants > 0 && whole == a->ngrants) return SHAPE_WHOLE;
    if (a->ngrants > 0 && rep == a->ngrants) return SHAPE_REPLICA;
    return SHAPE_OTHER;
}

static int cmp_i8(const void *a, const void *b) { return *(const int8_t *)a - *(const int8_t *)b; }
static int cmp_grant(const void *a, const void *b) {
    const model_grant *x = a, *y = b;
    return x->gpu != y->gpu ? x->gpu - y->gpu : x->replica - y->replica;
}

/* One pod alone: AGREE, NOT_COMPARED, REFUSED (shapes differ), or MOVED with the kubelet's version of its
 * assignment (replica numbers as the kubelet gave them; judge() settles them against the node). */
static void judge_one(const model_node *n, const model_holding *h, model_hold_result *r) {
    memset(r, 0, sizeof *r);
    const model_alloc *al = h->uid ? model_node_find(n, h->uid) : NULL;
    if (!al) {
        r->verdict = MODEL_HOLD_NOT_COMPARED;
        snprintf(r->why, sizeof r->why, "the model holds no GPU for the pod on node %s", n->name);
        return;
    }
    r->a = al->a;
    shape s = shape_of_grants(&al->a);
    if (s == SHAPE_OTHER) {
        r->verdict = MODEL_HOLD_NOT_COMPARED;
        snprintf(r->why, sizeof r->why, "the pod holds MIG instances or soft shares, which are not compared");
        return;
    }
    int whole = 0;
    for (int i = 0; i < h->nheld; i++) whole += h->held[i].replica < 0;
    r->verdict = MODEL_HOLD_REFUSED;
    if (h->nheld == 0 || (whole != 0 && whole != h->nheld)) {
        snprintf(r->why, sizeof r->why, "the kubelet's devices (%d) are neither all whole GPUs nor all replicas",
                 h->nheld);
        return;
    }
    if ((s == SHAPE_WHOLE) != (whole == h->nheld)) {
        snprintf(r->why, sizeof r->why, "the kubelet says the pod holds %s, the model %s",
                 whole ? "whole GPUs" : "replicas", s == SHAPE_WHOLE ? "whole GPUs" : "replicas");
        return;
    }
    if (h->nheld != al->a.ngrants) {
        snprintf(r->why, sizeof r->why, "the kubelet says the pod holds %d devices, the model %d", h->nheld,
                 al->a.ngrants);
        return;
    }
    int8_t mine[MODEL_HELD_MAX], theirs[MODEL_HELD_MAX];
    for (int i = 0; i < h->nheld; i++) {
        mine[i] = al->a.grant[i].gpu;
        theirs[i] = h->held[i].gpu;
    }
    qsort(mine, (size_t)h->nheld, 1, cmp_i8);
    qsort(theirs, (size_t)h->nheld, 1, cmp_i8);
    if (!memcmp(mine, theirs, (size_t)h->nheld)) {
        r->verdict = MODEL_HOLD_AGREE;
        return;
    }
    /* Grants already on a GPU the kubelet names stay; the others take the kubelet's remaining devices in
     * order. A whole grant charges its new GPU's memory (fit does the same). */
    bool used[MODEL_HELD_MAX] = {false}, kept[MODEL_MAX_GPUS] = {false};
    model_assignment na = al->a;
    for (int k = 0; k < na.ngrants; k++)
        for (int i = 0; i < h->nheld && !kept[k]; i++)
            if (!used[i] && h->held[i].gpu == na.grant[k].gpu) {
                used[i] = kept[k] = true;
                if (s == SHAPE_REPLICA) na.grant[k].replica = h->held[i].replica;
            }
    int next = 0;
    for (int k = 0; k < na.ngrants; k++) {
        if (kept[k]) continue;
        while (used[next]) next++;
        used[next] = true;
        model_grant *g = &na.grant[k];
        g->gpu = h->held[next].gpu;
        if (s == SHAPE_WHOLE) g->memory_mib = n->gpus[g->gpu].memory_mib;
        else g->replica = h->held[next].replica;
    }
    qsort(na.grant, (size_t)na.ngrants, sizeof na.grant[0], cmp_grant);
    r->verdict = MODEL_HOLD_MOVED;
    r->a = na;
}

/* The kubelet's replica number when the GPU (as c stands, and after the pod's own earlier grants) has it
 * free, else the lowest free one; -1 if none is free. */
static void settle_replicas(const model_node *c, model_assignment *a) {
    uint64_t taken[MODEL_MAX_GPUS][2];
    for (int g = 0; g < c->ngpus; g++) memcpy(taken[g], c->gpus[g].replica_used, sizeof taken[g]);
    for (int k = 0; k < a->ngrants; k++) {
        model_grant *gr = &a->grant[k];
        if (gr->replica < 0 || gr->exclusive || gr->mig_profile >= 0) continue;
        int reps = c->gpus[gr->gpu].replicas, want = gr->replica, pick = -1;
        uint64_t *t = taken[gr->gpu];
        if (want >= 0 && want < reps && !(t[want / 64] >> (want % 64) & 1)) pick = want;
        for (int r = 0; r < reps && r < MODEL_MAX_REPLICAS && pick < 0; r++)
            if (!(t[r / 64] >> (r % 64) & 1)) pick = r;
        if (pick < 0) continue;   /* none free: model_assign refuses the replica number as it is */
        t[pick / 64] |= 1ull << (pick % 64);
        gr->replica = (int16_t)pick;
    }
}

int model_holdings_judge(const model_node *n, int k, const model_holding *h, model_hold_result *out) {
    int movers = 0;
    for (int i = 0; i < k; i++) {
        judge_one(n, &h[i], &out[i]);
        movers += out[i].verdict == MODEL_HOLD_MOVED;
    }
    if (movers == 0) return 0;   /* the common case, on every event of a node that agrees: no copy of it */
    /* Release every mover, re-assign each in order; a mover refused there keeps the model's view and the
     * rest are tried again without it (each round drops one, so at most k rounds). */
    for (;;) {
        model_node *c = model_node_clone(n);
        if (!c) return -1;
        for (int i = 0; i < k; i++)
            if (out[i].verdict == MODEL_HOLD_MOVED) model_release(c, h[i].uid);
        int refused = -1, moved = 0;
        char err[MODEL_REASON_LEN];
        for (int i = 0; i < k && refused < 0; i++) {
            if (out[i].verdict != MODEL_HOLD_MOVED) continue;
            settle_replicas(c, &out[i].a);
            if (model_assign(c, h[i].uid, &out[i].a, err, sizeof err) != 0) refused = i;
            else moved++;
        }
        model_node_free(c);
        if (refused < 0) return moved;
        model_hold_result *r = &out[refused];
        char asked[160];
        model_assignment_format(n, &r->a, asked, sizeof asked);
        snprintf(r->why, sizeof r->why, "the kubelet's GPUs (%.80s) cannot be applied: %.120s", asked, err);
        r->verdict = MODEL_HOLD_REFUSED;
        r->a = model_node_find(n, h[refused].uid)->a;
    }
}

int model_holdings_apply(model_node *n, int k, const model_holding *h, const model_hold_result *res, char *err,
                         size_t errlen) {
    model_assignment *before = malloc((size_t)(k > 0 ? k : 1) * sizeof *before);
    bool *released = calloc((size_t)(k > 0 ? k : 1), sizeof *released);
    if (!before || !released) {
        free(before);
        free(released);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < k; i++) {
        released[i] = false;
        if (res[i].verdict != MODEL_HOLD_MOVED) continue;
        const model_alloc *al = model_node_find(n, h[i].uid);
        if (!al) continue;
        before[i] = al->a;
        released[i] = model_release(n, h[i].uid) == 0;
    }
    int failed = -1;
    for (int i = 0; i < k && failed < 0; i++)
        if (released[i] && model_assign(n, h[i].uid, &res[i].a, err, errlen) != 0) failed = i;
    if (failed >= 0) {   /* undo: the moved ones let go, then each gets back what it held (which fitted together) */
        for (int i = 0; i < failed; i++)
            if (released[i]) model_release(n, h[i].uid);
        for (int i = 0; i < k; i++)
            if (released[i]) model_assign(n, h[i].uid, &before[i], NULL, 0);
    }
    free(before);
    free(released);
    return failed < 0 ? 0 : -1;
}
