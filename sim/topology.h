/* topology.h -- how a node group's GPUs are connected, in cluster files.
 *
 * A group may carry "topology": the name of one of the three servers issue 22's fake NVML,
 * fit/score fixtures and the simulator share, or a matrix written as the node agent writes
 * the tessera.io/gpus annotation's "topo" arrays (one row per GPU, nvidia-smi's link names):
 *
 *   "topology": "pcie8-nvlink-pairs"
 *   "topology": [["X", "NV4", "SYS", "SYS"], ["NV4", "X", "SYS", "SYS"], ...]
 *
 *   dgx-a100             8 x NVIDIA-A100-SXM4-80GB on NVSwitch: every pair NV12.
 *   pcie8-nvlink-pairs   8 x NVIDIA-A100-80GB-PCIe, one PCIe switch per socket (GPUs 0-3, 4-7):
 *                        NVLink bridges NV12 on (0,1), (2,3), (4,5), (6,7); same switch PIX;
 *                        across sockets SYS.
 *   2socket-4gpu         4 x NVIDIA-L40S, each on its own root port: same socket (0-1, 2-3)
 *                        NODE, across SYS.
 *
 * A group without it has no topology (as the openb nodes): its sets are judged "unknown".
 * The links go into each node through model_topo_set (model/topo.h), as the extender's
 * annotation reader puts them there.
 */
#ifndef SIM_TOPOLOGY_H
#define SIM_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "model/node.h"
#include "model/topo.h"

typedef struct sim_topology {
    int ngpus;                       /* 0: none (alignment unknown) */
    char preset[32];                 /* the preset's name, "" for a matrix */
    uint8_t link[MODEL_MAX_GPUS][MODEL_MAX_GPUS];    /* model_link; the diagonal unused */
    uint8_t nvlinks[MODEL_MAX_GPUS][MODEL_MAX_GPUS];
} sim_topology;

/* The preset called name: 0 and *out filled, its GPU product (GFD name) in *product; -1 if
 * there is no such preset. */
int sim_topology_preset(const char *name, sim_topology *out, const char **product);

/* Read a group's "topology" value (a preset name or a matrix), where names the field for
 * errors. -1 with err on a bad value: unknown preset (the message lists them), a row of
 * the wrong length, an unknown link name, "X" off the diagonal, an asymmetric matrix. */
int sim_topology_parse(const cJSON *v, const char *where, sim_topology *out, char *err, size_t errlen);

/* The value as a cluster file writes it (a string or the matrix). */
cJSON *sim_topology_to_json(const sim_topology *t);

/* Give node n these links (n must have t->ngpus GPUs). -1 with err. */
int sim_topology_apply(const sim_topology *t, model_node *n, char *err, size_t errlen);

#endif
