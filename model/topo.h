/* topo.h -- how a node's GPUs are connected, and which sets of them are aligned.
 *
 * A multi-GPU pod whose GPUs talk over NVLink (600 GB/s on an A100 NVSwitch board) runs
 * several times faster than one whose GPUs talk across sockets over PCIe and the CPU
 * interconnect. The kubelet's Topology Manager can only refuse a pod on a node where no
 * aligned set is free; the scheduler, knowing each node's topology and which GPUs are
 * free, can send the pod to a node where one is.
 *
 * The links between two GPUs are named as `nvidia-smi topo -m` names them, which is
 * what NVML reports (nvmlDeviceGetTopologyCommonAncestor, the NVLink queries): the node
 * agent publishes that matrix in the tessera.io/gpus annotation ("topo", README). A node
 * without it but with the older "numa"/"nvlink" keys gets a matrix derived from those;
 * a node with neither has no topology (n->topo == NULL) and every set is judged
 * MODEL_ALIGN_UNKNOWN, which a pod that requires alignment cannot use.
 *
 * A set of GPUs is as aligned as its worst pair:
 *   MODEL_ALIGN_NVLINK  every pair has NVLink;
 *   MODEL_ALIGN_PCIE    every pair at least on one PCIe switch (PIX, PXB) or NVLink;
 *   MODEL_ALIGN_NUMA    every pair at least on one NUMA node (PHB, NODE);
 *   MODEL_ALIGN_NONE    some pair crosses sockets (SYS).
 * A set of one GPU is MODEL_ALIGN_NVLINK (nothing to cross).
 */
#ifndef MODEL_TOPO_H
#define MODEL_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "link.h"

struct model_node;

/* Set the link between GPUs a and b of the node (both directions), allocating n->topo on
 * first use. -1 when a or b is out of range, equal, or out of memory. */
int model_topo_set(struct model_node *n, int a, int b, model_link l, int nvlinks);
model_link model_topo_link(const struct model_node *n, int a, int b);

/* How aligned the set gpus[0..k) of GPU indices is (k >= 1). */
model_align model_topo_align(const struct model_node *n, const int8_t *gpus, int k);

/* The most aligned set of k GPUs among those with candidate[g] true, written in ascending
 * order to out[0..k): among sets of the best alignment, the one that leaves the largest
 * aligned sets of the remaining candidates whole (so a later multi-GPU pod still finds
 * one: the larger room by model_topo_room_cmp below), then the lexicographically smallest.
 * Returns that alignment, or -1 when fewer than k candidates exist. Deterministic; exact for
 * up to 16 GPUs (candidates that link alike to all others are interchangeable, so only one
 * choice per count taken from each such group is tried: a few on real servers). */
int model_topo_best_set(const struct model_node *n, const bool *candidate, int k, int8_t *out);

/* The lexicographically first set of k candidates (ascending indices, written to out) whose
 * alignment is at least min_align: what a policy that does not weigh topology takes when the
 * pod requires alignment (model_fit lists assignments in that order). Returns the set's
 * alignment, or -1 when no such set exists. */
int model_topo_first_set(const struct model_node *n, const bool *candidate, int k, model_align min_align, int8_t *out);

/* The worst link within the set gpus[0..k) (k >= 2), with its NVLink count in *nvlinks when
 * it is NVLink (the smallest count among the NVLink pairs): what "why this node" names. */
model_link model_topo_worst_link(const struct model_node *n, const int8_t *gpus, int k, int *nvlinks);

/* What a set of free GPUs leaves for later multi-GPU pods, per alignment level (indexed by
 * model_align; NUMA..NVLINK filled): the largest aligned set, and how many aligned pairs.
 * best_set's tie-break, and the policies' packing term. All zero without topology. */
typedef struct model_topo_room {
    int8_t largest[MODEL_ALIGN_NVLINK + 1];
    int16_t pairs[MODEL_ALIGN_NVLINK + 1];
} model_topo_room;
/* The room the GPUs of free_set (bit g: GPU g) leave. */
void model_topo_room_of(const struct model_node *n, uint16_t free_set, model_topo_room *out);
/* Which room is larger for multi-GPU pods: the largest NVLink set, then the largest PCIe set,
 * then the largest NUMA set, then the aligned pairs at those levels in the same order. <0, 0, >0. */
int model_topo_room_cmp(const model_topo_room *a, const model_topo_room *b);

/* The node's links as bit masks: adj[L][g] has bit h set when GPUs g and h link at alignment L
 * or better, limited to the node's GPUs (n->topo->adj, which model_topo_set keeps). The functions
 * above take it on every call; a caller that asks many questions of one node (a policy scoring
 * candidates) takes it once. All zero without topology. */
typedef struct model_topo_graph {
    int ngpus;
    uint16_t adj[MODEL_ALIGN_NVLINK + 1][16];
} model_topo_graph;
void model_topo_graph_of(const struct model_node *n, model_topo_graph *g);
/* model_topo_room_of and model_topo_align (a set as bits; one GPU or none: nvlink) on a graph. */
void model_topo_graph_room(const model_topo_graph *g, uint16_t set, model_topo_room *out);
model_align model_topo_graph_align(const model_topo_graph *g, uint16_t set);
/* The aligned pairs within set at the numa, pcie and nvlink levels together (a pair aligned at
 * nvlink counts three times): the sum of model_topo_room's pairs, without its largest sets. */
int model_topo_graph_pairs(const model_topo_graph *g, uint16_t set);
/* model_topo_best_set on a graph. */
int model_topo_graph_best_set(const model_topo_graph *g, const bool *candidate, int k, int8_t *out);

#endif
