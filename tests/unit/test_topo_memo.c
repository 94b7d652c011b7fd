/* test_topo_memo.c -- what model/topo.c keeps for the next reader (issue 30): the shape of the
 * matrix (levels whose links form groups, where the room of a set is counted per group rather than
 * searched) and model_topo_pick_idle's answer per k. Every answer is checked against brute force
 * over every subset, before and after the memo is filled, after the matrix or the idle set
 * changes, on copies, on a matrix naming GPUs the node does not have, and with several threads
 * reading one node at once. */
#include "harness.h"
#include "model/topo.h"
#include "policy/policy.h"
#include "policy_helpers.h"
#include "topo_helpers.h"

#include <pthread.h>
#include <stdlib.h>

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static int bits(unsigned m) { return __builtin_popcount(m); }

/* Aligned pairs within set at level L, by brute force. */
static int pairs_brute(const model_node *n, unsigned set, int L) {
    int p = 0;
    for (int a = 0; a < 16; a++)
        for (int b = a + 1; b < 16; b++)
            if ((set >> a & 1) && (set >> b & 1) && (int)model_align_of_link(model_topo_link(n, a, b)) >= L) p++;
    return p;
}

/* The largest subset of set aligned at level L, by brute force. */
static int largest_brute(const model_node *n, unsigned set, int L) {
    int largest = 0;
    for (unsigned s = set;; s = (s - 1) & set) {
        if (bits(s) > largest) {
            int8_t g[16];
            int m = 0;
            for (int i = 0; i < 16; i++)
                if (s >> i & 1) g[m++] = (int8_t)i;
            if (m == 1 || (int)model_topo_align(n, g, m) >= L) largest = m;
        }
        if (!s) break;
    }
    return largest;
}

static bool same_room(const model_topo_room *a, const model_topo_room *b) {
    for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++)
        if (a->largest[L] != b->largest[L] || a->pairs[L] != b->pairs[L]) return false;
    return true;
}

static int pairs_all_brute(const model_node *n, unsigned set) {
    return pairs_brute(n, set, MODEL_ALIGN_NUMA) + pairs_brute(n, set, MODEL_ALIGN_PCIE) +
           pairs_brute(n, set, MODEL_ALIGN_NVLINK);
}

/* A node of ng A100s with links: 0 the PCIe server's pattern (groups at every level), 1 groups of random
 * sizes per level, nested, 2 random links (no groups, no twins). */
static model_node *random_node(unsigned *seed, int ng, int kind) {
    const model_gpu_product *pr = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    model_node *n = model_node_new("r");
    for (int i = 0; i < ng; i++) model_node_add_gpu(n, pr, MODEL_GPU_WHOLE, 1, 0);
    int sock = 1 + (int)(next_rand(seed) % 8), sw = 1 + (int)(next_rand(seed) % 4), nv = 1 + (int)(next_rand(seed) % 3);
    for (int a = 0; a < ng; a++)
        for (int b = a + 1; b < ng; b++) {
            model_link l;
            if (kind == 0) {
                l = test_server_link(TEST_PCIE8, a % 8, b % 8);
            } else if (kind == 1) {
                l = a / nv == b / nv ? MODEL_LINK_NVLINK : a / sw == b / sw ? MODEL_LINK_PXB
                    : a / sock == b / sock ? MODEL_LINK_PHB : MODEL_LINK_SYS;
                if (a / nv == b / nv && a / sw != b / sw) l = MODEL_LINK_SYS;   /* NVLink across switches: no groups */
            } else {
                static const model_link any[] = {MODEL_LINK_NVLINK, MODEL_LINK_PIX, MODEL_LINK_NODE, MODEL_LINK_SYS,
                                                 MODEL_LINK_UNKNOWN};
                l = any[next_rand(seed) % 5];
            }
            model_topo_set(n, a, b, l, 4);
        }
    return n;
}

static model_node *node_of_round(unsigned *seed, int round, int *ng) {
    if (round < 4) {
        static const test_server sv[] = {TEST_DGX_A100, TEST_PCIE8, TEST_NUMA8, TEST_2SOCKET};
        *ng = test_server_gpus(sv[round]);
        return test_server_node("s", sv[round], MODEL_GPU_WHOLE, 1);
    }
    *ng = 2 + (int)(next_rand(seed) % 9);
    return random_node(seed, *ng, round % 3);
}

TEST(topo_room_pairs_and_largest_agree_with_brute_force_on_every_subset) {
    /* (and the graph's all_pairs, remembered with the matrix) */
    unsigned seed = 30;
    for (int round = 0; round < 60; round++) {
        int ng;
        model_node *n = node_of_round(&seed, round, &ng);
        CHECK(n && n->topo);
        model_topo_graph g;
        model_topo_graph_of(n, &g);
        CHECK_INT(g.all_pairs, pairs_all_brute(n, (1u << ng) - 1));
        for (unsigned set = 0; set < (1u << ng); set++) {
            model_topo_room room;
            model_topo_room_of(n, (uint16_t)set, &room);
            for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) {
                CHECK_MSG(room.pairs[L] == pairs_brute(n, set, L), "round %d set %#x level %d: pairs %d, brute force %d",
                          round, set, L, room.pairs[L], pairs_brute(n, set, L));
                CHECK_MSG(room.largest[L] == largest_brute(n, set, L), "round %d set %#x level %d: largest %d, brute "
                          "force %d", round, set, L, room.largest[L], largest_brute(n, set, L));
            }
            CHECK_INT(model_topo_graph_pairs(&g, (uint16_t)set), pairs_all_brute(n, set));
            /* what taking each one GPU leaves, all at once */
            model_topo_room all, without[16];
            model_topo_graph_room_without(&g, (uint16_t)set, &all, without);
            CHECK(same_room(&all, &room));
            for (unsigned m = set; m; m &= m - 1) {
                int h = __builtin_ctz(m);
                model_topo_room one;
                model_topo_room_of(n, (uint16_t)(set & ~(1u << h)), &one);
                CHECK_MSG(same_room(&without[h], &one), "round %d set %#x without GPU %d differs", round, set, h);
            }
            if (bits(set) >= 2) {
                int8_t list[16];
                int m = 0;
                for (int i = 0; i < ng; i++)
                    if (set >> i & 1) list[m++] = (int8_t)i;
                CHECK_INT(model_topo_graph_align(&g, (uint16_t)set), model_topo_align(n, list, m));
            }
        }
        model_node_free(n);
    }
}

/* What pick must answer: best_set over the idle GPUs and the pair counts, from the functions the brute-force
 * tests of test_topo.c and above vouch for. */
static bool pick_expected(const model_node *n, int ng, unsigned idle, int k, model_topo_pick *want) {
    bool cand[MODEL_MAX_GPUS] = {false};
    for (int g = 0; g < ng; g++) cand[g] = idle >> g & 1;
    int8_t set[MODEL_MAX_GPUS];
    int al = model_topo_best_set(n, cand, k, set);
    if (al < 0) return false;
    want->set = 0;
    for (int i = 0; i < k; i++) want->set |= (uint16_t)(1u << set[i]);
    want->align = (int8_t)al;
    want->lost = (int16_t)(pairs_all_brute(n, idle) - pairs_all_brute(n, idle & ~(unsigned)want->set));
    want->total = (int16_t)pairs_all_brute(n, (1u << ng) - 1);
    return true;
}

#define CHECK_PICK(got, want, what)                                                                             \
    CHECK_MSG((got).set == (want).set && (got).align == (want).align && (got).lost == (want).lost &&            \
                  (got).total == (want).total,                                                                  \
              "%s: pick %#x align %d lost %d total %d, expected %#x %d %d %d", what, (got).set, (got).align,    \
              (got).lost, (got).total, (want).set, (want).align, (want).lost, (want).total)

TEST(topo_pick_idle_is_best_set_with_its_pair_counts_remembered_or_not) {
    unsigned seed = 31;
    for (int round = 0; round < 60; round++) {
        int ng;
        model_node *n = node_of_round(&seed, round, &ng);
        for (int q = 0; q < 40; q++) {
            unsigned idle = next_rand(&seed) & ((1u << ng) - 1);
            if (q == 0) idle = (1u << ng) - 1;
            for (int k = 1; k <= ng; k++) {
                model_topo_pick want, got = {0}, again = {0};
                bool can = pick_expected(n, ng, idle, k, &want);
                int al = model_topo_pick_idle(n, (uint16_t)idle, k, &got);   /* worked out */
                int al2 = model_topo_pick_idle(n, (uint16_t)idle, k, &again);   /* remembered */
                CHECK_MSG((al >= 0) == can && (al2 >= 0) == can, "round %d idle %#x k %d: %d %d, expected %s", round,
                          idle, k, al, al2, can ? "a set" : "none");
                if (!can) continue;
                CHECK_INT(al, want.align);
                CHECK_INT(al2, want.align);
                CHECK_PICK(got, want, "worked out");
                CHECK_PICK(again, want, "remembered");
            }
        }
        model_node_free(n);
    }
}

TEST(topo_pick_one_is_the_gpu_that_leaves_the_most_remembered_or_not) {
    unsigned seed = 33;
    for (int round = 0; round < 60; round++) {
        int ng;
        model_node *n = node_of_round(&seed, round, &ng);
        unsigned mine = (1u << ng) - 1;
        for (int q = 0; q < 60; q++) {
            unsigned idle = q == 0 ? mine : next_rand(&seed) & mine, among = q < 2 ? mine : next_rand(&seed) & mine;
            if (!among) continue;
            /* brute force: GPUs in order, the first that leaves the largest room */
            int want = -1;
            model_topo_room best, now;
            model_topo_room_of(n, (uint16_t)idle, &now);
            for (int g = 0; g < ng; g++) {
                if (!(among >> g & 1)) continue;
                model_topo_room r;
                model_topo_room_of(n, (uint16_t)(idle & ~(1u << g)), &r);
                if (want < 0 || model_topo_room_cmp(&r, &best) > 0) want = g, best = r;
            }
            int lost = pairs_all_brute(n, idle) - pairs_all_brute(n, idle & ~(1u << want));
            for (int twice = 0; twice < 2; twice++) {   /* worked out, then remembered */
                model_topo_pick p = {0};
                int g = model_topo_pick_one(n, (uint16_t)idle, (uint16_t)among, &p);
                CHECK_MSG(g == want && p.set == 1u << want && p.lost == lost && p.total == pairs_all_brute(n, mine) &&
                              p.align == MODEL_ALIGN_NVLINK,
                          "round %d idle %#x among %#x (%s): GPU %d lost %d, expected %d lost %d", round, idle, among,
                          twice ? "remembered" : "worked out", g, p.lost, want, lost);
            }
        }
        model_node_free(n);
    }
}

TEST(topo_pick_idle_refuses_what_it_cannot_answer) {
    model_node *d = test_server_node("d", TEST_DGX_A100, MODEL_GPU_WHOLE, 1), *u = model_node_new("u");
    model_topo_pick p = {.set = 0x55, .align = 9};
    CHECK_INT(model_topo_pick_idle(d, 0x07, 4, &p), -1);    /* three idle */
    CHECK_INT(model_topo_pick_idle(d, 0xff, 0, &p), -1);
    CHECK_INT(model_topo_pick_idle(d, 0xff, 17, &p), -1);
    CHECK_INT(model_topo_pick_idle(u, 0xff, 1, &p), -1);    /* no topology */
    CHECK_INT(model_topo_pick_idle(NULL, 0xff, 1, &p), -1);
    CHECK_INT(model_topo_pick_idle(d, 0xff, 1, NULL), -1);
    CHECK(p.set == 0x55 && p.align == 9);                   /* untouched */
    CHECK_INT(model_topo_pick_idle(d, 0xff00, 1, &p), -1);  /* GPUs the node does not have are not idle */
    CHECK_INT(model_topo_pick_one(d, 0xff, 0xff00, &p), -1);
    CHECK_INT(model_topo_pick_one(u, 0xff, 0xff, &p), -1);
    CHECK_INT(model_topo_pick_one(d, 0xff, 0xff, NULL), -1);
    model_node_free(d);
    model_node_free(u);
}

TEST(topo_pick_idle_forgets_when_the_matrix_changes_and_copies_keep_their_own) {
    model_node *n = test_server_node("p", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    model_topo_pick p;
    CHECK_INT(model_topo_pick_idle(n, 0xff, 2, &p), MODEL_ALIGN_NVLINK);
    CHECK_INT(p.set, 0x03);   /* the first bridged pair */
    model_node *c = model_node_clone(n);
    /* the bridge of 0 and 1 goes (the agent republished the matrix): the next pair is 2,3 */
    CHECK_INT(model_topo_set(n, 0, 1, MODEL_LINK_PIX, 0), 0);
    CHECK_INT(model_topo_pick_idle(n, 0xff, 2, &p), MODEL_ALIGN_NVLINK);
    CHECK_INT(p.set, 0x0c);
    model_topo_pick want;
    CHECK(pick_expected(n, 8, 0xff, 2, &want));
    CHECK_PICK(p, want, "after the change");
    /* the copy keeps the matrix it was taken with */
    CHECK_INT(model_topo_pick_idle(c, 0xff, 2, &p), MODEL_ALIGN_NVLINK);
    CHECK_INT(p.set, 0x03);
    model_node_free(n);
    model_node_free(c);
}

TEST(topo_pick_idle_counts_only_the_nodes_gpus) {
    /* a matrix of 8 GPUs on a node that has 6 (as a node whose annotation was read before two GPUs left) */
    model_node *n = test_server_node("d", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    n->ngpus = 6;
    model_topo_pick p;
    CHECK_INT(model_topo_pick_idle(n, 0xff, 6, &p), MODEL_ALIGN_NVLINK);
    CHECK_INT(p.set, 0x3f);
    CHECK_INT(p.total, 3 * 15);   /* 15 pairs of 6 GPUs, aligned at all three levels */
    CHECK_INT(p.lost, 3 * 15);
    CHECK_INT(model_topo_pick_idle(n, 0xff, 7, &p), -1);
    n->ngpus = 8;   /* the same idle GPUs on a node of 8 is another question: the scale counts 28 pairs */
    CHECK_INT(model_topo_pick_idle(n, 0x3f, 6, &p), MODEL_ALIGN_NVLINK);
    CHECK_INT(p.set, 0x3f);
    CHECK_INT(p.total, 3 * 28);
    CHECK_INT(p.lost, 3 * 15);
    model_node_free(n);
}

/* Several threads scoring the same nodes at once, as the extender's workers do: every answer equals the one
 * scored alone (the memos are filled by whichever thread gets there first). */
#define MT_NODES 48
#define MT_THREADS 4
typedef struct mt_job {
    model_node **nodes;
    const policy_ctx *ctx;
    const policy_result (*want)[8];
    int bad;
} mt_job;

static void *mt_run(void *arg) {
    mt_job *j = arg;
    const policy *p = policy_find("binpack");
    for (int rep = 0; rep < 20; rep++)
        for (int k = 1; k <= 8; k++)
            for (int i = 0; i < MT_NODES; i++) {
                model_request r = req_whole(k, 0);
                policy_result res;
                policy_score(p, &r, j->nodes[i], j->ctx, &res, NULL, 0);
                const policy_result *w = &j->want[i][k - 1];
                if (res.feasible != w->feasible || res.score != w->score || res.choice.ngpus != w->choice.ngpus ||
                    memcmp(res.choice.gpu, w->choice.gpu, sizeof res.choice.gpu) != 0)
                    j->bad++;
            }
    return NULL;
}

TEST(topo_memos_filled_by_several_threads_at_once_answer_as_one) {
    model_node *nodes[MT_NODES];
    policy_ctx ctx;
    policy_ctx_init(&ctx, 1);
    unsigned seed = 32;
    char uid[32];
    for (int i = 0; i < MT_NODES; i++) {
        nodes[i] = test_server_node("m", i % 3 == 0 ? TEST_DGX_A100 : i % 3 == 1 ? TEST_PCIE8 : TEST_NUMA8,
                                    MODEL_GPU_WHOLE, 1);
        int pods = (int)(next_rand(&seed) % 4);
        for (int k = 0; k < pods; k++) {
            model_request q = req_whole(1 + (int)(next_rand(&seed) % 2), 0);
            snprintf(uid, sizeof uid, "p%d", k);
            place_on(nodes[i], &q, uid, (int)(next_rand(&seed) % 8));
        }
    }
    /* the answers alone, each node scored on a fresh copy (nothing remembered) */
    static policy_result want[MT_NODES][8];
    const policy *p = policy_find("binpack");
    for (int i = 0; i < MT_NODES; i++)
        for (int k = 1; k <= 8; k++) {
            model_node *c = model_node_clone(nodes[i]);
            model_request r = req_whole(k, 0);
            policy_score(p, &r, c, &ctx, &want[i][k - 1], NULL, 0);
            model_node_free(c);
        }
    mt_job jobs[MT_THREADS];
    pthread_t th[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++) {
        jobs[t] = (mt_job){nodes, &ctx, (const policy_result (*)[8])want, 0};
        CHECK(pthread_create(&th[t], NULL, mt_run, &jobs[t]) == 0);
    }
    int bad = 0;
    for (int t = 0; t < MT_THREADS; t++) {
        pthread_join(th[t], NULL);
        bad += jobs[t].bad;
    }
    for (int i = 0; i < MT_NODES; i++) model_node_free(nodes[i]);
    CHECK_INT(bad, 0);
}
