/* test_topo.c -- model/topo.c: link names, the alignment of sets, and which set of k free
 * GPUs best_set takes on the three reference servers (README, Topology) (topo_helpers.h), whole and partly
 * taken, including the tie-break that keeps aligned sets whole. */
#include "harness.h"
#include "model/topo.h"
#include "topo_helpers.h"

#include <stdlib.h>

TEST(topo_link_parse_accepts_nvidia_smi_names) {
    model_link l;
    int nv = -1;
    CHECK(model_link_parse("X", &l, &nv));
    CHECK_INT(l, MODEL_LINK_UNKNOWN);
    CHECK_INT(nv, 0);
    const char *names[] = {"SYS", "NODE", "PHB", "PXB", "PIX"};
    model_link want[] = {MODEL_LINK_SYS, MODEL_LINK_NODE, MODEL_LINK_PHB, MODEL_LINK_PXB, MODEL_LINK_PIX};
    for (int i = 0; i < 5; i++) {
        CHECK(model_link_parse(names[i], &l, &nv));
        CHECK_INT(l, want[i]);
        CHECK_INT(nv, 0);
    }
    CHECK(model_link_parse("NV12", &l, &nv));
    CHECK_INT(l, MODEL_LINK_NVLINK);
    CHECK_INT(nv, 12);
    CHECK(model_link_parse("NV1", &l, &nv));
    CHECK_INT(nv, 1);
    CHECK(model_link_parse("NV63", &l, &nv));
    CHECK_INT(nv, 63);
}

TEST(topo_link_parse_refuses_everything_else) {
    const char *bad[] = {"", "x", "sys", "NV", "NV0", "NV64", "NV012", "NV-1", "NV1a", "NV123", "PIX ", " PIX",
                         "SOC", "NVLINK", "XX"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        model_link l = MODEL_LINK_PIX;
        int nv = 7;
        CHECK_MSG(!model_link_parse(bad[i], &l, &nv), "\"%s\" parsed", bad[i]);
    }
    model_link l;
    int nv;
    CHECK(!model_link_parse(NULL, &l, &nv));
}

TEST(topo_link_format_round_trips) {
    char buf[16];
    model_link all[] = {MODEL_LINK_SYS, MODEL_LINK_NODE, MODEL_LINK_PHB, MODEL_LINK_PXB, MODEL_LINK_PIX};
    for (int i = 0; i < 5; i++) {
        model_link_format(all[i], 0, buf, sizeof buf);
        model_link l;
        int nv;
        CHECK(model_link_parse(buf, &l, &nv));
        CHECK_INT(l, all[i]);
    }
    model_link_format(MODEL_LINK_NVLINK, 12, buf, sizeof buf);
    CHECK_STR(buf, "NV12");
    model_link_format(MODEL_LINK_UNKNOWN, 0, buf, sizeof buf);
    CHECK_STR(buf, "X");
    model_link_format(MODEL_LINK_NVLINK, 18, buf, 3);   /* truncated, still terminated */
    CHECK_STR(buf, "NV");
}

TEST(topo_align_names_and_levels) {
    CHECK_STR(model_align_name(MODEL_ALIGN_NVLINK), "nvlink");
    CHECK_STR(model_align_name(MODEL_ALIGN_PCIE), "pcie");
    CHECK_STR(model_align_name(MODEL_ALIGN_NUMA), "numa");
    CHECK_STR(model_align_name(MODEL_ALIGN_NONE), "none");
    CHECK_STR(model_align_name(MODEL_ALIGN_UNKNOWN), "unknown");
    CHECK_INT(model_align_of_link(MODEL_LINK_NVLINK), MODEL_ALIGN_NVLINK);
    CHECK_INT(model_align_of_link(MODEL_LINK_PIX), MODEL_ALIGN_PCIE);
    CHECK_INT(model_align_of_link(MODEL_LINK_PXB), MODEL_ALIGN_PCIE);
    CHECK_INT(model_align_of_link(MODEL_LINK_PHB), MODEL_ALIGN_NUMA);
    CHECK_INT(model_align_of_link(MODEL_LINK_NODE), MODEL_ALIGN_NUMA);
    CHECK_INT(model_align_of_link(MODEL_LINK_SYS), MODEL_ALIGN_NONE);
    CHECK_INT(model_align_of_link(MODEL_LINK_UNKNOWN), MODEL_ALIGN_UNKNOWN);
}

TEST(topo_set_is_symmetric_and_refuses_bad_indices) {
    model_node *n = model_node_new("n");
    CHECK(n->topo == NULL);
    CHECK_INT(model_topo_link(n, 0, 1), MODEL_LINK_UNKNOWN);
    CHECK_INT(model_topo_set(n, 0, 0, MODEL_LINK_PIX, 0), -1);
    CHECK_INT(model_topo_set(n, -1, 2, MODEL_LINK_PIX, 0), -1);
    CHECK_INT(model_topo_set(n, 0, MODEL_MAX_GPUS, MODEL_LINK_PIX, 0), -1);
    CHECK(n->topo == NULL);   /* refusals allocate nothing */
    CHECK_INT(model_topo_set(n, 3, 5, MODEL_LINK_NVLINK, 4), 0);
    CHECK(n->topo != NULL);
    CHECK_INT(model_topo_link(n, 5, 3), MODEL_LINK_NVLINK);
    CHECK_INT(n->topo->nvlinks[5][3], 4);
    CHECK_INT(model_topo_link(n, 3, 4), MODEL_LINK_UNKNOWN);
    /* the masks model_topo_set keeps follow a link set again (DRA's pcieRoot links, then the agent's matrix) */
    n->ngpus = 6;
    model_topo_graph g;
    model_topo_graph_of(n, &g);
    CHECK_INT(g.adj[MODEL_ALIGN_NVLINK][3], 1 << 5);
    CHECK_INT(g.adj[MODEL_ALIGN_NUMA][5], 1 << 3);
    CHECK_INT(model_topo_set(n, 3, 5, MODEL_LINK_PHB, 0), 0);
    model_topo_graph_of(n, &g);
    CHECK_INT(g.adj[MODEL_ALIGN_NVLINK][3], 0);
    CHECK_INT(g.adj[MODEL_ALIGN_PCIE][5], 0);
    CHECK_INT(g.adj[MODEL_ALIGN_NUMA][5], 1 << 3);
    CHECK_INT(g.adj[MODEL_ALIGN_NONE][3], 1 << 5);
    n->ngpus = 5;   /* GPUs past the node's count are not in its graph */
    model_topo_graph_of(n, &g);
    CHECK_INT(g.adj[MODEL_ALIGN_NUMA][3], 0);
    n->ngpus = 0;
    model_node_free(n);
}

TEST(topo_clone_and_compact_copy_the_matrix) {
    model_node *n = test_server_node("p", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    CHECK(n != NULL);
    model_node *c = model_node_clone(n), *k = model_node_compact(n);
    CHECK(c && k);
    CHECK(c->topo && k->topo && c->topo != n->topo && k->topo != n->topo);
    model_node_free(n);   /* the copies must not lean on the source */
    CHECK_INT(model_topo_link(c, 0, 1), MODEL_LINK_NVLINK);
    CHECK_INT(model_topo_link(k, 2, 5), MODEL_LINK_SYS);
    CHECK_INT(model_topo_link(k, 2, 0), MODEL_LINK_PIX);
    model_topo_set(c, 2, 5, MODEL_LINK_NODE, 0);
    CHECK_INT(model_topo_link(k, 2, 5), MODEL_LINK_SYS);
    model_node_free(c);
    model_node_free(k);
}

static model_align align_of(const model_node *n, const char *list) {
    int8_t g[16];
    int k = 0;
    for (const char *p = list; *p; p++)
        if (*p >= '0' && *p <= '9') g[k++] = (int8_t)(*p - '0');
    return model_topo_align(n, g, k);
}

TEST(topo_align_is_the_worst_pair_on_the_three_servers) {
    model_node *d = test_server_node("d", TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
    model_node *p = test_server_node("p", TEST_PCIE8, MODEL_GPU_WHOLE, 1);
    model_node *s = test_server_node("s", TEST_2SOCKET, MODEL_GPU_WHOLE, 1);
    CHECK(d && p && s);
    CHECK_INT(align_of(d, "01234567"), MODEL_ALIGN_NVLINK);
    CHECK_INT(align_of(d, "07"), MODEL_ALIGN_NVLINK);
    CHECK_INT(align_of(p, "01"), MODEL_ALIGN_NVLINK);
    CHECK_INT(align_of(p, "02"), MODEL_ALIGN_PCIE);
    CHECK_INT(align_of(p, "0123"), MODEL_ALIGN_PCIE);
    CHECK_INT(align_of(p, "0145"), MODEL_ALIGN_NONE);
    CHECK_INT(align_of(p, "01234567"), MODEL_ALIGN_NONE);
    CHECK_INT(align_of(s, "01"), MODEL_ALIGN_NUMA);
    CHECK_INT(align_of(s, "12"), MODEL_ALIGN_NONE);
    CHECK_INT(align_of(s, "3"), MODEL_ALIGN_NVLINK);   /* one GPU: nothing to cross */
    model_node *u = model_node_new("u");
    CHECK_INT(align_of(u, "01"), MODEL_ALIGN_UNKNOWN);
    /* A matrix with a hole: the pair nobody described makes the set unknown. */
    model_topo_set(u, 0, 1, MODEL_LINK_NVLINK, 1);
    CHECK_INT(align_of(u, "01"), MODEL_ALIGN_NVLINK);
    CHECK_INT(align_of(u, "012"), MODEL_ALIGN_UNKNOWN);
    model_node_free(d);
    model_node_free(p);
    model_node_free(s);
    model_node_free(u);
}

/* best_set over the GPUs of `free_list` ("0234567"): its alignment and the set as digits. */
static int best(const model_node *n, const char *free_list, int k, char *out) {
    bool cand[MODEL_MAX_GPUS] = {false};
    for (const char *p = free_list; *p; p++) cand[*p - '0'] = true;
    int8_t set[MODEL_MAX_GPUS];
    int a = model_topo_best_set(n, cand, k, set);
    out[0] = 0;
    if (a >= 0)
        for (int i = 0; i < k; i++) out[i] = (char)('0' + set[i]), out[i + 1] = 0;
    return a;
}

/* One best_set case: on the server, with these GPUs free, k GPUs: the alignment and set. */
typedef struct best_case {
    test_server server;
    const char *free_list;
    int k;
    int align;
    const char *set;   /* NULL: any set of that alignment */
    const char *why;
} best_case;

static const best_case best_cases[] = {
    {TEST_DGX_A100, "01234567", 4, MODEL_ALIGN_NVLINK, "0123", "NVSwitch: any set is nvlink"},
    {TEST_DGX_A100, "01234567", 8, MODEL_ALIGN_NVLINK, "01234567", "NVSwitch: all eight"},
    {TEST_DGX_A100, "1357", 3, MODEL_ALIGN_NVLINK, "135", "NVSwitch: any free GPUs"},
    {TEST_PCIE8, "01234567", 2, MODEL_ALIGN_NVLINK, "01", "k=2: a bridged pair"},
    {TEST_PCIE8, "01234567", 4, MODEL_ALIGN_PCIE, "0123", "k=4: one switch"},
    {TEST_PCIE8, "01234567", 3, MODEL_ALIGN_PCIE, NULL, "k=3: within one switch"},
    {TEST_PCIE8, "01234567", 8, MODEL_ALIGN_NONE, "01234567", "k=8 crosses sockets"},
    {TEST_2SOCKET, "0123", 2, MODEL_ALIGN_NUMA, "01", "k=2: one socket"},
    {TEST_2SOCKET, "0123", 4, MODEL_ALIGN_NONE, "0123", "k=4 crosses sockets"},
    {TEST_2SOCKET, "0123", 5, -1, "", "more than there are"},
    {TEST_2SOCKET, "013", 3, MODEL_ALIGN_NONE, "013", "only three free"},
    /* partly taken: the set that keeps the largest aligned sets whole */
    {TEST_PCIE8, "0234567", 2, MODEL_ALIGN_NVLINK, "23",
     "GPU 1 taken: the pair (2,3), not (0,2) nor (4,5), which would break the only whole switch"},
    {TEST_PCIE8, "0134567", 1, MODEL_ALIGN_NVLINK, "3", "GPU 2 taken: its orphan partner 3, (0,1) stays whole"},
    {TEST_PCIE8, "01234567", 1, MODEL_ALIGN_NVLINK, "0", "nothing taken: the lowest"},
    {TEST_PCIE8, "1234567", 1, MODEL_ALIGN_NVLINK, "1", "GPU 0 taken: its bridge partner next"},
    {TEST_PCIE8, "1234567", 4, MODEL_ALIGN_PCIE, "4567", "switch 0 broken: the whole switch 1"},
    {TEST_PCIE8, "1234567", 3, MODEL_ALIGN_PCIE, "123", "switch 0 broken: three fill it"},
    {TEST_2SOCKET, "023", 1, MODEL_ALIGN_NVLINK, "0", "socket 1 stays a whole pair"},
    {TEST_2SOCKET, "023", 2, MODEL_ALIGN_NUMA, "23", "the whole socket"},
};

TEST(topo_best_set_picks_the_reference_sets_whole_and_partly_taken) {
    for (size_t i = 0; i < sizeof best_cases / sizeof best_cases[0]; i++) {
        const best_case *c = &best_cases[i];
        model_node *n = test_server_node("s", c->server, MODEL_GPU_WHOLE, 1);
        CHECK(n != NULL);
        char set[20];
        int al = best(n, c->free_list, c->k, set);
        model_node_free(n);
        CHECK_MSG(al == c->align, "%s: alignment %d, expected %d", c->why, al, c->align);
        CHECK_MSG(!c->set || strcmp(set, c->set) == 0, "%s: set %s, expected %s", c->why, set, c->set);
    }
}

TEST(topo_best_set_without_topology_takes_the_lowest) {
    model_node *n = model_node_new("u");
    const model_gpu_product *pr = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    for (int i = 0; i < 8; i++) model_node_add_gpu(n, pr, MODEL_GPU_WHOLE, 1, 0);
    char set[20];
    CHECK_INT(best(n, "1357", 2, set), MODEL_ALIGN_UNKNOWN);
    CHECK_STR(set, "13");
    CHECK_INT(best(n, "1357", 1, set), MODEL_ALIGN_NVLINK);
    CHECK_STR(set, "1");
    model_topo_room room;
    model_topo_room_of(n, 0xff, &room);
    CHECK_INT(room.largest[MODEL_ALIGN_NVLINK], 0);
    model_node_free(n);
}

/* best_set against plain enumeration of every subset, on random matrices (twins rare) and
 * the servers (twins everywhere): same alignment, same room, same set. */
static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

TEST(topo_best_set_agrees_with_brute_force) {
    unsigned seed = 7;
    const model_gpu_product *pr = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    for (int round = 0; round < 120; round++) {
        model_node *n;
        int ng;
        if (round < 90) {
            ng = 2 + (int)(next_rand(&seed) % 9);
            n = model_node_new("r");
            for (int i = 0; i < ng; i++) model_node_add_gpu(n, pr, MODEL_GPU_WHOLE, 1, 0);
            for (int a = 0; a < ng; a++)
                for (int b = a + 1; b < ng; b++) {
                    /* mostly structured (groups), some noise, some holes */
                    unsigned r = next_rand(&seed) % 10;
                    model_link l = r < 3 ? MODEL_LINK_NVLINK : r < 5 ? MODEL_LINK_PIX : r < 7 ? MODEL_LINK_NODE
                                 : r < 9 ? MODEL_LINK_SYS : MODEL_LINK_UNKNOWN;
                    if (round % 3 == 0) l = test_server_link(TEST_PCIE8, a % 8, b % 8);
                    model_topo_set(n, a, b, l, 2);
                }
        } else {
            test_server sv = (test_server)(round % 3);
            n = test_server_node("s", sv, MODEL_GPU_WHOLE, 1);
            ng = test_server_gpus(sv);
        }
        bool cand[MODEL_MAX_GPUS] = {false};
        unsigned cmask = 0;
        for (int g = 0; g < ng; g++)
            if (next_rand(&seed) % 4) cand[g] = true, cmask |= 1u << g;
        int nc = __builtin_popcount(cmask);
        /* the room's largest aligned sets, against every subset */
        model_topo_room whole;
        model_topo_room_of(n, (uint16_t)cmask, &whole);
        for (int L = MODEL_ALIGN_NUMA; L <= MODEL_ALIGN_NVLINK; L++) {
            int largest = 0;
            for (unsigned s = 1; s < (1u << ng); s++) {
                if ((s & ~cmask) || __builtin_popcount(s) <= largest) continue;
                int8_t g[16];
                int m = 0;
                for (int i = 0; i < ng; i++)
                    if (s >> i & 1) g[m++] = (int8_t)i;
                if (m == 1 || (int)model_topo_align(n, g, m) >= L) largest = m;
            }
            CHECK_MSG(whole.largest[L] == largest, "round %d level %d: largest %d, brute force %d", round, L,
                      whole.largest[L], largest);
        }
        for (int k = 1; k <= nc; k++) {
            /* brute force, subsets in ascending lexicographic order of their index lists */
            int best_al = -1;
            model_topo_room best_room;
            unsigned best_set = 0;
            for (unsigned s = 0; s < (1u << ng); s++) {
                if ((s & ~cmask) || __builtin_popcount(s) != k) continue;
                int8_t g[16];
                int m = 0;
                for (int i = 0; i < ng; i++)
                    if (s >> i & 1) g[m++] = (int8_t)i;
                int al = model_topo_align(n, g, k);
                model_topo_room room;
                model_topo_room_of(n, (uint16_t)(cmask & ~s), &room);
                bool better = al > best_al;
                if (al == best_al) {
                    int c = model_topo_room_cmp(&room, &best_room);
                    unsigned d = s ^ best_set;
                    better = c > 0 || (c == 0 && ((s >> __builtin_ctz(d)) & 1u));
                }
                if (better) best_al = al, best_room = room, best_set = s;
            }
            int8_t out[16];
            int al = model_topo_best_set(n, cand, k, out);
            unsigned got = 0;
            for (int i = 0; i < k; i++) got |= 1u << out[i];
            for (int i = 1; i < k; i++) CHECK(out[i - 1] < out[i]);
            CHECK_MSG(al == best_al && got == best_set, "round %d k %d: best_set %d %#x, brute force %d %#x", round, k,
                      al, got, best_al, best_set);
        }
        model_node_free(n);
    }
}
