/* topo_helpers.h -- the three reference servers (README, Topology) (docs: README "Topology"), built by hand:
 * dgx-a100 (8 GPUs, every pair NV12), pcie8-nvlink-pairs (two switches of four, NVLink
 * bridges on (0,1),(2,3),(4,5),(6,7)), 2socket-4gpu (NODE within a socket, SYS across).
 * The JSON fixtures tests/fixtures/nodes/topo-*.json describe the same machines. A fourth,
 * numa8, is the PCIe server without its bridges and switches: 8 GPUs, NODE within a socket of
 * four, SYS across (a set of 4 is at best numa). */
#ifndef TEST_TOPO_HELPERS_H
#define TEST_TOPO_HELPERS_H

#include "model/catalog.h"
#include "model/node.h"
#include "model/topo.h"

typedef enum test_server { TEST_DGX_A100, TEST_PCIE8, TEST_2SOCKET, TEST_NUMA8 } test_server;

static inline model_link test_server_link(test_server s, int a, int b) {
    switch (s) {
    case TEST_DGX_A100: return MODEL_LINK_NVLINK;
    case TEST_PCIE8:
        if (a / 2 == b / 2) return MODEL_LINK_NVLINK;
        return a / 4 == b / 4 ? MODEL_LINK_PIX : MODEL_LINK_SYS;
    case TEST_NUMA8: return a / 4 == b / 4 ? MODEL_LINK_NODE : MODEL_LINK_SYS;
    default: return a / 2 == b / 2 ? MODEL_LINK_NODE : MODEL_LINK_SYS;
    }
}

static inline int test_server_gpus(test_server s) { return s == TEST_2SOCKET ? 4 : 8; }

/* Set the server's links on n (whose GPUs must already be there). 0, or -1. */
static inline int test_server_topo(model_node *n, test_server s) {
    int k = test_server_gpus(s);
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++) {
            model_link l = test_server_link(s, a, b);
            if (model_topo_set(n, a, b, l, l == MODEL_LINK_NVLINK ? 12 : 0) != 0) return -1;
        }
    return 0;
}

/* A node of the server, whole GPUs (mode) with its topology. */
static inline model_node *test_server_node(const char *name, test_server s, model_gpu_mode mode, int replicas) {
    const char *prod = s == TEST_2SOCKET ? "NVIDIA-L40S" : s == TEST_DGX_A100 ? "NVIDIA-A100-SXM4-80GB"
                                                                             : "NVIDIA-A100-80GB-PCIe";
    const model_gpu_product *p = model_catalog_find(model_catalog_default(), prod);
    model_node *n = model_node_new(name);
    if (!n || !p) {
        model_node_free(n);
        return NULL;
    }
    for (int i = 0; i < test_server_gpus(s); i++) model_node_add_gpu(n, p, mode, replicas, 0);
    if (mode == MODEL_GPU_TIMESLICE || mode == MODEL_GPU_MPS) {
        n->sharing = mode;
        n->replicas = replicas;
    }
    if (test_server_topo(n, s) != 0) {
        model_node_free(n);
        return NULL;
    }
    return n;
}

#endif
