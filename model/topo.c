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
 */
#include "model/topo.h"

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

static void graph_build(const model_node *n, graph *gr) {
    memset(gr, 0, sizeof *gr);
    gr->ngpus = n->ngpus < MODEL_MAX_GPUS ? n->ngpus : MODEL_MAX_GPUS;
    if (!n->topo) return;
    /* the masks model_topo_set keeps, limited to the node's GPUs: this runs once per node a
     * policy scores, so it copies rather than walking the matrix */
    uint16_t mine = (uint16_t)((1u << gr->ngpus) - 1);
    for (int L = 1; L <= MODEL_ALIGN_NVLINK; L++)
        for (int g = 0; g < gr->ngpus; g++) gr->adj[L][g] = n->topo->adj[L][g] & mine;
}

/* Set bits of a 16-bit set (SWAR: the build targets no popcnt instruction, and libgcc's
 * __popcountdi2 was a sixth of the policies' time on topology nodes). */
static inline int popcount16(unsigned m) {
    m &= 0xffffu;
    m = m - ((m >> 1) & 0x5555u);
    m = (m & 0x3333u) + ((m >> 2) & 0x3333u);
    m = (m + (m >> 4)) & 0x0f0fu;
    return (int)((m + (m >> 8)) & 0x1fu);
}

/* The alignment of the set mask (two GPUs or more). */
static model_align mask_align(const graph *gr, unsigned set) {
    for (int L = MODEL_ALIGN_NVLINK; L >= MODEL_ALIGN_NONE; L--) {
        bool clique = true;
        for (unsigned m = set; m && clique; m &= m - 1) {
            int g = __builtin_ctz(m);
            clique = (set & ~(1u << g) & ~(unsigned)gr->adj[L][g]) == 0;
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
    /* The common case on real servers: at each level the GPUs fall into groups linked all to
     * all (NVLink pairs or an NVSwitch, PCIe switches, sockets), so the largest clique is the
     * largest group. Each GPU's group is itself plus its neighbours; the graph is such a union
     * of cliques when every neighbour has the same group. */
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
        out->largest[L] = (int8_t)max_clique(gr, L, set);
        out->pairs[L] = (int16_t)pairs_at(gr, L, set);
    }
}

void model_topo_room_of(const model_node *n, uint16_t free_set, model_topo_room *out) {
    memset(out, 0, sizeof *out);
    if (!n || !n->topo) return;
    graph gr;
    graph_build(n, &gr);
    room_of_mask(&gr, free_set & (unsigned)((1u << gr.ngpus) - 1), out);
}

void model_topo_graph_of(const model_node *n, model_topo_graph *g) {
    if (n) graph_build(n, g);
    else memset(g, 0, sizeof *g);
}

void model_topo_graph_room(const model_topo_graph *g, uint16_t set, model_topo_room *out) {
    room_of_mask(g, set & (unsigned)((1u << g->ngpus) - 1), out);
}

model_align model_topo_graph_align(const model_topo_graph *g, uint16_t set) {
    return popcount16(set) < 2 ? MODEL_ALIGN_NVLINK : mask_align(g, set);
}

int model_topo_graph_pairs(const model_topo_graph *g, uint16_t set) {
    int p = 0;
    for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) p += pairs_at(g, L, set & (unsigned)((1u << g->ngpus) - 1));
    return p;
}

int model_topo_room_cmp(const model_topo_room *a, const model_topo_room *b) {
    for (int L = MODEL_ALIGN_NVLINK; L >= MODEL_ALIGN_NUMA; L--)
        if (a->largest[L] != b->largest[L]) return a->largest[L] < b->largest[L] ? -1 : 1;
    for (int L = MODEL_ALIGN_NVLINK; L >= MODEL_ALIGN_NUMA; L--)
        if (a->pairs[L] != b->pairs[L]) return a->pairs[L] < b->pairs[L] ? -1 : 1;
    return 0;
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

int model_topo_graph_best_set(const model_topo_graph *tg, const bool *candidate, int k, int8_t *out) {
    if (!tg || !candidate || !out || k <= 0) return -1;
    const graph *gr = tg;
    unsigned cand = 0;
    for (int g = 0; g < gr->ngpus; g++)
        if (candidate[g]) cand |= 1u << g;
    if (popcount16(cand) < k) return -1;
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
    if (s.best_align < 0) return -1;
    int i = 0;
    for (unsigned m = s.best_set; m; m &= m - 1) out[i++] = (int8_t)__builtin_ctz(m);
    return s.best_align;
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
