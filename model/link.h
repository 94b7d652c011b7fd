/* link.h -- the words for how two GPUs are connected (model_link, as `nvidia-smi topo -m` names them) and how
 * aligned a set of them is (model_align), and the matrix of a node's links (model_topo). model/topo.h says what
 * they mean and judges sets of a node's GPUs; this is the part below model/node.h, which keeps a node's matrix:
 * link <- node <- topo, so that the node can read its matrix from the Node object without calling topo.
 */
#ifndef MODEL_LINK_H
#define MODEL_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_LINK_MAX_GPUS 16   /* the matrix's size: MODEL_MAX_GPUS (request.h) */

/* The link between two GPUs, worst to best (the order is used: larger is better). */
typedef enum model_link {
    MODEL_LINK_UNKNOWN = 0,
    MODEL_LINK_SYS,     /* across the CPU interconnect between sockets (SMP, UPI, xGMI) */
    MODEL_LINK_NODE,    /* within one NUMA node, across PCIe host bridges */
    MODEL_LINK_PHB,     /* through one PCIe host bridge (the CPU's root complex) */
    MODEL_LINK_PXB,     /* through several PCIe bridges, no host bridge */
    MODEL_LINK_PIX,     /* through at most one PCIe bridge: one switch */
    MODEL_LINK_NVLINK   /* NVLink, with a count of links (NV12: 12) */
} model_link;

typedef enum model_align {
    MODEL_ALIGN_UNKNOWN = 0,  /* the node's topology is not known */
    MODEL_ALIGN_NONE,
    MODEL_ALIGN_NUMA,
    MODEL_ALIGN_PCIE,
    MODEL_ALIGN_NVLINK
} model_align;

/* The matrix. Allocated only for nodes whose topology is known (most nodes of a big
 * cluster carry none, and the extender keeps thousands of nodes). */
typedef struct model_topo {
    uint8_t link[MODEL_LINK_MAX_GPUS][MODEL_LINK_MAX_GPUS];     /* model_link of (a, b), symmetric; the diagonal unused */
    uint8_t nvlinks[MODEL_LINK_MAX_GPUS][MODEL_LINK_MAX_GPUS];  /* NVLink count of (a, b) when link is MODEL_LINK_NVLINK */
    /* adj[L][a] bit b: a and b link at alignment L or better; kept by model_link_set so that a
     * policy scoring the node copies the masks (model_topo_graph_of) instead of rebuilding them
     * from the matrix on every decision. */
    uint16_t adj[MODEL_ALIGN_NVLINK + 1][MODEL_LINK_MAX_GPUS];
} model_topo;

/* Names as nvidia-smi prints them: "SYS", "NODE", "PHB", "PXB", "PIX", "NV12"; parse
 * accepts those (NV1..NV63) and "X" for the diagonal (returns MODEL_LINK_UNKNOWN with
 * *nvlinks 0 and true). false on anything else. */
bool model_link_parse(const char *s, model_link *out, int *nvlinks);
/* Writes the nvidia-smi name ("NV12" needs nvlinks). */
void model_link_format(model_link l, int nvlinks, char *buf, size_t len);

const char *model_align_name(model_align a);   /* "nvlink", "pcie", "numa", "none", "unknown" */
/* The alignment a set whose worst pair has this link gets. */
model_align model_align_of_link(model_link l);

/* Set the link between GPUs a and b (both directions) in *t, allocating the matrix on first use, and keep its
 * adjacency masks. -1 when a or b is out of range, equal, the link or count is not one, or out of memory. */
int model_link_set(model_topo **t, int a, int b, model_link l, int nvlinks);

#endif
