/* topo.c -- links between a node's GPUs, how aligned a set of them is, and which set of k
 * free GPUs to take (topo.h).
 *
 * Sets are bit masks over GPU indices (at most 16 GPUs). For each alignment level the
 * pairs that meet it form a graph; a set is aligned at a level when it is a clique there.
 * Real servers are very regular (an NVSwitch board links everything; a PCIe server has a
 * few identical switches), so best_set first groups the candidates into twin classes --
 * GPUs that link the same way to every other candidate, and hence to each other -- and
 * only tries, per count of GPUs taken from each class, the lowest indices of each class:
 * any other choice with the same counts is the same set up to a swap of twins, so it has
 * the same alignment and leaves the same room, and is lexicographically larger. A DGX
 * has one class, a PCIe server with bridged pairs four: a handful of tries instead of
 * C(16, k). A server with no twins at all falls back to the plain enumeration, still
 * exact.
 *
 * What a policy asks of a node repeats: the same node, unchanged since the last pod, scored for
 * pods of a few sizes (issue 30 measured the search at several times the rest of a node's score).
 * So what readers work out is kept for the next one, in the matrix's own struct (topo.h):
 *   - its shape: at each level, whether the links form groups linked all to all (an NVSwitch
 *     board, NVLink pairs, PCIe switches, sockets: every real server). The largest aligned set
 *     within any set of GPUs is then its largest share of one group, and the aligned pairs are
 *     counted per group, without searching (and what taking one GPU does, per GPU, in one pass:
 *     model_topo_graph_room_without); an odd matrix is searched as before;
 *   - the aligned pairs of all the node's GPUs (the packing term's scale);
 *   - per k, the last model_topo_pick_idle answer, and a few model_topo_pick_one answers, each
 *     with the idle set it answers for: a node that changed is asked again.
 */
#include "model/topo.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/node.h"

#define NLEVELS (MODEL_ALIGN_NVLINK + 1)

/* ------------------------------------------------------------ matrix ---- */

int model_topo_set(model_node *n, int a, int b, model_link l, int nvlinks) {
    return n ? model_link_set(&n->topo, a, b, l, nvlinks) : -1;
}

model_link model_topo_link(const model_node *n, int a, int b) {
    if (!n || !n->topo || a < 0 || b < 0 || a >= MODEL_MAX_GPUS || b >= MODEL_MAX_GPUS || a == b)
        return MODEL_LINK_UNKNOWN;
    return (model_link)n->topo->link[a][b];
}

model_align model_topo_align(const model_node *n, const int8_t *gpus, int k) {
    if (!n || !gpus || k <= 0) return MODEL_ALIGN_UNKNOWN;
    if (k == 1) return MODEL_ALIGN_NVLINK;
    if (!n->topo) return MODEL_ALIGN_UNKNOWN;
    model_align worst = MODEL_ALIGN_NVLINK;
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++) {
            model_align a = model_align_of_link(model_topo_link(n, gpus[i], gpus[j]));
            if (a < worst) worst = a;
        }
    return worst;
}

/* ---------------------------------------------------- sets as masks ---- */

typedef model_topo_graph graph;

#define SHAPE_KNOWN (1u << 31)

static const uint16_t no_links[NLEVELS][16];

/* Set bits of a 16-bit set (a table: the build targets no popcnt instruction, and libgcc's
 * __popcountdi2 was a sixth of the policies' time on topology nodes). */
#define P2(n) n, n + 1, n + 1, n + 2
#define P4(n) P2(n), P2(n + 1), P2(n + 1), P2(n + 2)
#define P6(n) P4(n), P4(n + 1), P4(n + 1), P4(n + 2)
static const uint8_t pop8[256] = {P6(0), P6(1), P6(1), P6(2)};
static inline int popcount16(unsigned m) { return pop8[m & 0xffu] + pop8[(m >> 8) & 0xffu]; }

/* Whether the links at this level form groups linked all to all: every GPU's neighbours have
 * the same neighbourhood as it (itself included). Then so does every subset of the GPUs. */
static bool level_groups(const uint16_t *adj) {
    for (int g = 0; g < MODEL_MAX_GPUS; g++) {
        unsigned grp = adj[g] | 1u << g;
        for (unsigned m = adj[g]; m; m &= m - 1) {
            int h = __builtin_ctz(m);
            if ((adj[h] | 1u << h) != grp) return false;
        }
    }
    return true;
}

/* The matrix's shape: bit L set when level L forms groups; worked out once after each change. */
static unsigned topo_shape(model_topo *t) {
    unsigned v = atomic_load_explicit(&t->shape, memory_order_relaxed);
    if (v & SHAPE_KNOWN) return v;
    v = SHAPE_KNOWN;
    for (int L = 1; L <= MODEL_ALIGN_NVLINK; L++)
        if (level_groups(t->adj[L])) v |= 1u << L;
    atomic_store_explicit(&t->shape, v, memory_order_relaxed);
    return v;
}

static unsigned node_mask(const graph *gr) { return (1u << gr->ngpus) - 1; }

static int pairs_all_levels(const graph *gr, unsigned set);

#define PAIRS_KNOWN (1u << 31)

static void graph_build(const model_node *n, graph *gr) {
    gr->ngpus = n->ngpus < 0 ? 0 : n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    gr->shape = n->topo ? topo_shape(n->topo) : SHAPE_KNOWN | 0x1eu;   /* no links: every group is one GPU */
    gr->all_pairs = 0;
    if (!n->topo) {
        gr->adj = no_links;
    } else if (!(n->topo->named & ~node_mask(gr))) {
        /* this runs once per node a policy scores: the masks are read where model_topo_set
         * keeps them */
        gr->adj = (const uint16_t (*)[16])n->topo->adj;
    } else {
        /* the matrix names GPUs the node does not have: limited to its own (the shape read of the
         * whole matrix still holds: groups stay groups in a subset) */
        unsigned mine = node_mask(gr);
        memset(gr->own_adj, 0, sizeof gr->own_adj);
        for (int L = 1; L <= MODEL_ALIGN_NVLINK; L++)
            for (int g = 0; g < gr->ngpus; g++) gr->own_adj[L][g] = (uint16_t)(n->topo->adj[L][g] & mine);
        gr->adj = (const uint16_t (*)[16])gr->own_adj;
    }
    if (n->topo) {
        /* the pairs of all the node's GPUs: a property of the matrix and the GPU count, kept with them
         * (value in bits 0..15, the count it is for in 16..20) */
        unsigned w = atomic_load_explicit(&n->topo->all_pairs, memory_order_relaxed);
        unsigned question = PAIRS_KNOWN | (unsigned)gr->ngpus << 16;
        if ((w & ~0xffffu) != question) {
            w = question | (unsigned)pairs_all_levels(gr, node_mask(gr));
            atomic_store_explicit(&n->topo->all_pairs, w, memory_order_relaxed);
        }
        gr->all_pairs = (int)(w & 0xffffu);
    }
}

/* The alignment of the set mask (two GPUs or more). */
static model_align mask_align(const graph *gr, unsigned set) {
    for (int L = MODEL_ALIGN_NVLINK; L >= MODEL_ALIGN_NONE; L--) {
        bool clique = true;
        if ((gr->shape >> L) & 1u) {   /* in groups: a clique lies within its lowest GPU's group */
            int g = __builtin_ctz(set);
            clique = (set & ~(1u << g) & ~(unsigned)gr->adj[L][g]) == 0;
        } else {
            for (unsigned m = set; m && clique; m &= m - 1) {
                int g = __builtin_ctz(m);
                clique = (set & ~(1u << g) & ~(unsigned)gr->adj[L][g]) == 0;
            }
        }
        if (clique) return (model_align)L;
    }
    return MODEL_ALIGN_UNKNOWN;
}

/* The size of the largest clique of level L within cand (branch and bound; cand is 16 bits). */
static int max_clique_rec(const graph *gr, int L, unsigned cand, int size, int best) {
    if (!cand) return size > best ? size : best;
    while (cand) {
        if (size + popcount16(cand) <= best) return best;
        int g = __builtin_ctz(cand);
        cand &= cand - 1;
        best = max_clique_rec(gr, L, cand & gr->adj[L][g], size + 1, best);
    }
    return best;
}

static int max_clique(const graph *gr, int L, unsigned cand) {
    if (!cand) return 0;
    /* The common case on real servers: the GPUs of cand fall into groups linked all to all at
     * this level, so the largest clique is the largest group. Each GPU's group is itself plus its
     * neighbours; the graph is such a union of cliques when every neighbour has the same group
     * (known of the whole matrix when its shape says so, else checked within cand). */
    int best = 0;
    bool groups = true;
    for (unsigned left = cand; left && groups;) {
        int g = __builtin_ctz(left);
        unsigned grp = (cand & gr->adj[L][g]) | (1u << g);
        for (unsigned k = grp & ~(1u << g); k && groups; k &= k - 1) {
            int h = __builtin_ctz(k);
            groups = ((cand & gr->adj[L][h]) | (1u << h)) == grp;
        }
        int size = popcount16(grp);
        if (size > best) best = size;
        left &= ~grp;   /* each group is checked once: the work is linear in the GPUs */
    }
    return groups ? best : max_clique_rec(gr, L, cand, 0, 0);
}

static int pairs_at(const graph *gr, int L, unsigned set) {
    int p = 0;
    for (unsigned m = set; m; m &= m - 1) p += popcount16(set & gr->adj[L][__builtin_ctz(m)]);
    return p / 2;
}

static void room_of_mask(const graph *gr, unsigned set, model_topo_room *out) {
    memset(out, 0, sizeof *out);
    for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) {
        if ((gr->shape >> L) & 1u) {
            /* in groups: the largest share of one group, and each group's pairs */
            int largest = 0, pairs = 0;
            for (unsigned left = set; left;) {
                int g = __builtin_ctz(left);
                unsigned grp = set & (gr->adj[L][g] | 1u << g);
                int c = popcount16(grp);
                if (c > largest) largest = c;
                pairs += c * (c - 1) / 2;
                left &= ~grp;
            }
            out->largest[L] = (int8_t)largest;
            out->pairs[L] = (int16_t)pairs;
        } else {
            out->largest[L] = (int8_t)max_clique(gr, L, set);
            out->pairs[L] = (int16_t)pairs_at(gr, L, set);
        }
    }
}

/* The aligned pairs within set at the numa, pcie and nvlink levels together. */
static int pairs_all_levels(const graph *gr, unsigned set) {
    int p = 0;
    for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) {
        if ((gr->shape >> L) & 1u) {
            for (unsigned left = set; left;) {
                int g = __builtin_ctz(left);
                unsigned grp = set & (gr->adj[L][g] | 1u << g);
                int c = popcount16(grp);
                p += c * (c - 1) / 2;
                left &= ~grp;
            }
        } else {
            p += pairs_at(gr, L, set);
        }
    }
    return p;
}

void model_topo_room_of(const model_node *n, uint16_t free_set, model_topo_room *out) {
    memset(out, 0, sizeof *out);
    if (!n || !n->topo) return;
    graph gr;
    graph_build(n, &gr);
    room_of_mask(&gr, free_set & node_mask(&gr), out);
}

void model_topo_graph_of(const model_node *n, model_topo_graph *g) {
    if (n) {
        graph_build(n, g);
    } else {
        g->ngpus = 0;
        g->adj = no_links;
        g->shape = SHAPE_KNOWN | 0x1eu;
    }
}

void model_topo_graph_room(const model_topo_graph *g, uint16_t set, model_topo_room *out) {
    room_of_mask(g, set & node_mask(g), out);
}

model_align model_topo_graph_align(const model_topo_graph *g, uint16_t set) {
    return popcount16(set) < 2 ? MODEL_ALIGN_NVLINK : mask_align(g, set);
}

int model_topo_graph_pairs(const model_topo_graph *g, uint16_t set) { return pairs_all_levels(g, set & node_mask(g)); }

void model_topo_graph_room_without(const model_topo_graph *gr, uint16_t set0, model_topo_room *all,
                                   model_topo_room without[16]) {
    unsigned set = set0 & node_mask(gr);
    room_of_mask(gr, set, all);
    for (unsigned m = set; m; m &= m - 1) without[__builtin_ctz(m)] = *all;
    for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) {
        if (!((gr->shape >> L) & 1u)) {
            for (unsigned m = set; m; m &= m - 1) {   /* an odd level: each one worked out */
                int h = __builtin_ctz(m);
                without[h].largest[L] = (int8_t)max_clique(gr, L, set & ~(1u << h));
                without[h].pairs[L] = (int16_t)pairs_at(gr, L, set & ~(1u << h));
            }
            continue;
        }
        /* In groups, a GPU taken from a group of c breaks its c - 1 pairs, and shrinks the largest
         * set only when its group is the one largest (a second as large keeps it). */
        unsigned grp[16];
        int cnt[16], ngrp = 0, nlargest = 0, largest = all->largest[L];
        for (unsigned left = set; left;) {
            int g = __builtin_ctz(left);
            grp[ngrp] = set & (gr->adj[L][g] | 1u << g);
            cnt[ngrp] = popcount16(grp[ngrp]);
            nlargest += cnt[ngrp] == largest;
            left &= ~grp[ngrp++];
        }
        for (int i = 0; i < ngrp; i++)
            for (unsigned m = grp[i]; m; m &= m - 1) {
                model_topo_room *w = &without[__builtin_ctz(m)];
                w->pairs[L] = (int16_t)(w->pairs[L] - (cnt[i] - 1));
                if (cnt[i] == largest && nlargest == 1) w->largest[L] = (int8_t)(largest - 1);
            }
    }
}

/* ---------------------------------------------------------- best set ---- */

typedef struct search {
    const graph *gr;
    unsigned cand;
    int k;
    int nclass;
    uint16_t cls[MODEL_MAX_GPUS];   /* members of each twin class; classes ordered by lowest member */
    int best_align;                 /* -1: nothing found yet */
    model_topo_room best_room;
    unsigned best_set;
} search;

/* Sets compare as their ascending index lists: the lower lowest differing GPU wins. */
static bool lex_less(unsigned a, unsigned b) {
    unsigned d = a ^ b;
    if (!d) return false;
    return (a >> __builtin_ctz(d)) & 1u;
}

static void consider(search *s, unsigned set) {
    int al = s->k == 1 ? MODEL_ALIGN_NVLINK : (int)mask_align(s->gr, set);
    if (al < s->best_align) return;
    model_topo_room room;
    room_of_mask(s->gr, s->cand & ~set, &room);
    if (al == s->best_align) {
        int c = model_topo_room_cmp(&room, &s->best_room);
        if (c < 0 || (c == 0 && !lex_less(set, s->best_set))) return;
    }
    s->best_align = al;
    s->best_room = room;
    s->best_set = set;
}

/* Take 0..all of class i's lowest members, then the classes after it. */
static void choose_counts(search *s, int i, unsigned set, int left) {
    if (left == 0) {
        consider(s, set);
        return;
    }
    if (i == s->nclass) return;
    int room = 0;
    for (int j = i; j < s->nclass; j++) room += popcount16(s->cls[j]);
    if (room < left) return;
    unsigned take = 0, members = s->cls[i];
    choose_counts(s, i + 1, set, left);
    for (int c = 1; c <= left && members; c++) {
        take |= members & -members;
        members &= members - 1;
        choose_counts(s, i + 1, set | take, left - c);
    }
}

int model_topo_best_set(const model_node *n, const bool *candidate, int k, int8_t *out) {
    if (!n) return -1;
    graph gr;
    graph_build(n, &gr);
    return model_topo_graph_best_set(&gr, candidate, k, out);
}

/* The best set of k among the candidates cand (bits), into *set, and what it leaves of them into
 *left (may be NULL); its alignment, or -1. */
static int best_set_mask(const graph *gr, unsigned cand, int k, unsigned *set, model_topo_room *left) {
    if (k <= 0 || popcount16(cand) < k) return -1;
    search s = {.gr = gr, .cand = cand, .k = k, .best_align = -1};
    /* Twin classes among the candidates: g and h are twins when each links to every other
     * candidate at the same level (then they link to each other as every pair of their class
     * does, so swapping them changes nothing). Without topology everything is one class. */
    for (unsigned m = cand; m; m &= m - 1) {
        int g = __builtin_ctz(m), c;
        for (c = 0; c < s.nclass; c++) {
            int h = __builtin_ctz(s.cls[c]);
            unsigned others = cand & ~(1u << g) & ~(1u << h);
            bool twin = true;
            for (int L = 1; L < NLEVELS && twin; L++)
                twin = ((gr->adj[L][g] ^ gr->adj[L][h]) & others) == 0;
            if (twin) break;
        }
        if (c == s.nclass) s.cls[s.nclass++] = 0;
        s.cls[c] |= (uint16_t)(1u << g);
    }
    choose_counts(&s, 0, 0, k);
    *set = s.best_set;
    if (left) *left = s.best_room;
    return s.best_align;
}

int model_topo_graph_best_set(const model_topo_graph *gr, const bool *candidate, int k, int8_t *out) {
    if (!gr || !candidate || !out || k <= 0) return -1;
    unsigned cand = 0, set = 0;
    for (int g = 0; g < gr->ngpus; g++)
        if (candidate[g]) cand |= 1u << g;
    int al = best_set_mask(gr, cand, k, &set, NULL);
    if (al < 0) return -1;
    int i = 0;
    for (unsigned m = set; m; m &= m - 1) out[i++] = (int8_t)__builtin_ctz(m);
    return al;
}

static int room_pairs_sum(const model_topo_room *r) {
    return r->pairs[MODEL_ALIGN_NUMA] + r->pairs[MODEL_ALIGN_PCIE] + r->pairs[MODEL_ALIGN_NVLINK];
}

/* model_topo_pick_idle's word: the question (idle set, the node's GPU count; k is the slot) and
 * the answer, with a bit that says the word is filled. */
#define PICK_FILLED (1ull << 63)
#define PICK_QUESTION (PICK_FILLED | 0x1fffffull)   /* idle: bits 0..15, ngpus: 16..20 */

int model_topo_pick_idle(const model_node *n, uint16_t idle, int k, model_topo_pick *out) {
    if (!n || !n->topo || !out || k < 1 || k > MODEL_MAX_GPUS) return -1;
    int ngpus = n->ngpus < 0 ? 0 : n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    unsigned set_idle = idle & ((1u << ngpus) - 1);
    if (popcount16(set_idle) < k) return -1;
    _Atomic uint64_t *slot = &n->topo->pick[k - 1];
    uint64_t question = PICK_FILLED | (uint64_t)set_idle | (uint64_t)ngpus << 16;
    uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
    if ((w & PICK_QUESTION) != question) {   /* not asked since the idle set or the matrix changed */
        graph gr;
        graph_build(n, &gr);
        unsigned set = 0;
        model_topo_room left;
        int al = best_set_mask(&gr, set_idle, k, &set, &left);
        if (al < 0) return -1;   /* (fewer than k idle was answered above) */
        int lost = pairs_all_levels(&gr, set_idle) - room_pairs_sum(&left);
        int total = gr.all_pairs;
        /* set 21..36, align 37..39, lost and total (at most 3 x 120 pairs each) 40..48 and 49..57 */
        w = question | (uint64_t)set << 21 | (uint64_t)al << 37 | (uint64_t)lost << 40 | (uint64_t)total << 49;
        atomic_store_explicit(slot, w, memory_order_relaxed);
    }
    out->set = (uint16_t)(w >> 21);
    out->align = (int8_t)((w >> 37) & 7u);
    out->lost = (int16_t)((w >> 40) & 0x1ffu);
    out->total = (int16_t)((w >> 49) & 0x1ffu);
    return out->align;
}

/* model_topo_pick_one's word: the question (idle 0..15, among 16..31, the GPU count 32..36) and the answer
 * (the GPU 37..40, lost 41..49, total 50..58), with PICK_FILLED. */
#define ONE_QUESTION (PICK_FILLED | 0x1fffffffffull)

int model_topo_pick_one(const model_node *n, uint16_t idle, uint16_t among, model_topo_pick *out) {
    if (!n || !n->topo || !out) return -1;
    int ngpus = n->ngpus < 0 ? 0 : n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    unsigned mine = (1u << ngpus) - 1, set_idle = idle & mine, set_among = among & mine;
    if (!set_among) return -1;
    _Atomic uint64_t *slot = &n->topo->pick_one[((set_among * 0x9e3779b1u) >> 30) & 3u];
    uint64_t question = PICK_FILLED | (uint64_t)set_idle | (uint64_t)set_among << 16 | (uint64_t)ngpus << 32;
    uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
    if ((w & ONE_QUESTION) != question) {   /* not asked since the idle set or the matrix changed */
        graph gr;
        graph_build(n, &gr);
        model_topo_room all, without[MODEL_MAX_GPUS];
        model_topo_graph_room_without(&gr, (uint16_t)set_idle, &all, without);
        int best = -1;
        const model_topo_room *best_room = NULL;
        for (unsigned m = set_among; m; m &= m - 1) {
            int g = __builtin_ctz(m);
            const model_topo_room *r = (set_idle >> g) & 1u ? &without[g] : &all;
            if (best < 0 || model_topo_room_cmp(r, best_room) > 0) {
                best = g;
                best_room = r;
            }
        }
        int lost = room_pairs_sum(&all) - room_pairs_sum(best_room);
        w = question | (uint64_t)best << 37 | (uint64_t)lost << 41 | (uint64_t)gr.all_pairs << 50;
        atomic_store_explicit(slot, w, memory_order_relaxed);
    }
    int g = (int)((w >> 37) & 15u);
    out->set = (uint16_t)(1u << g);
    out->align = MODEL_ALIGN_NVLINK;
    out->lost = (int16_t)((w >> 41) & 0x1ffu);
    out->total = (int16_t)((w >> 50) & 0x1ffu);
    return g;
}

/* ------------------------------------------------------------ first set ---- */

static bool first_rec(const graph *gr, int L, unsigned cand, int left, unsigned chosen, unsigned *out) {
    if (left == 0) {
        *out = chosen;
        return true;
    }
    while (popcount16(cand) >= left) {
        int g = __builtin_ctz(cand);
        cand &= cand - 1;
        /* the others must link to g at level L or better */
        if (first_rec(gr, L, L ? cand & gr->adj[L][g] : cand, left - 1, chosen | 1u << g, out)) return true;
    }
    return false;
}

int model_topo_first_set(const model_node *n, const bool *candidate, int k, model_align min_align, int8_t *out) {
    if (!n || !candidate || !out || k <= 0) return -1;
    graph gr;
    graph_build(n, &gr);
    unsigned cand = 0, set = 0;
    for (int g = 0; g < gr.ngpus; g++)
        if (candidate[g]) cand |= 1u << g;
    int L = k == 1 ? MODEL_ALIGN_UNKNOWN : (int)min_align;
    if (!first_rec(&gr, L, cand, k, 0, &set)) return -1;
    int i = 0;
    for (unsigned m = set; m; m &= m - 1) out[i++] = (int8_t)__builtin_ctz(m);
    return k == 1 ? MODEL_ALIGN_NVLINK : (int)mask_align(&gr, set);
}

model_link model_topo_worst_link(const model_node *n, const int8_t *gpus, int k, int *nvlinks) {
    model_link worst = MODEL_LINK_NVLINK;
    int nv = 0;
    if (nvlinks) *nvlinks = 0;
    if (!n || !gpus || k < 2 || !n->topo) return MODEL_LINK_UNKNOWN;
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++) {
            model_link l = model_topo_link(n, gpus[i], gpus[j]);
            int c = l == MODEL_LINK_NVLINK ? n->topo->nvlinks[gpus[i]][gpus[j]] : 0;
            /* the order of model_link is worst to best; among NVLink pairs, fewer links is worse */
            if (l < worst || (l == MODEL_LINK_NVLINK && worst == MODEL_LINK_NVLINK && (nv == 0 || c < nv))) {
                worst = l;
                nv = c;
            }
        }
    if (nvlinks && worst == MODEL_LINK_NVLINK) *nvlinks = nv;
    return worst;
}
