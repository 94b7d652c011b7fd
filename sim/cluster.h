/* cluster.h -- the simulated cluster: node groups read from cluster JSON, turned into
 * model nodes by way of the Node objects the GPU operator would publish for them (the
 * same labels and status.allocatable), so the simulator reads nodes as the extender does.
 *
 *   {"nodeGroups": [{"name": "a100", "count": 4, "gpuProduct": "NVIDIA-A100-SXM4-80GB",
 *                    "gpusPerNode": 8, "cpuMilli": 64000, "memoryMiB": 524288,
 *                    "sharing": "whole" | "timeslice:N" | "mps:N" | "mig:3g.40gb+2x2g.20gb"
 *                               | "mig:2x3g.40gb+timeslice:4" | "mig:on-demand",
 *                    "dra": false, "topology": "pcie8-nvlink-pairs"}]}
 *
 * "mig:<layout>+timeslice:N" is layered sharing: the layout's instances, each time-sliced
 * into N replicas by the device plugin (every profile of the layout listed in its
 * timeSlicing config, renameByDefault off).
 *
 * "dra": true: the group's GPUs are published by NVIDIA's DRA driver in a ResourceSlice (and the
 * device plugin is off), as the extender reads them (model/dra.h): "whole" gives one device per GPU,
 * "mig:<layout>" the MIG devices of that layout (static MIG), "mig:on-demand" the GPU and its
 * placements (the driver's DynamicMIG). Only claims (trace pods with "claim") can use them;
 * time-slicing and MPS are set on a claim with DRA, not on the node, so they are refused here.
 *
 * "topology" (sim/topology.h): how the group's GPUs are connected, a preset (dgx-a100,
 * pcie8-nvlink-pairs, 2socket-4gpu) or a matrix of nvidia-smi link names; a preset's GPU
 * count and product must be the group's. Without it the nodes have no topology and every
 * multi-GPU set on them is judged "unknown" (the openb nodes).
 *
 * Schema: sim/schema/cluster.schema.json. cpuMilli and memoryMiB go together: with
 * both, the node checks host CPU and memory; with neither, only GPUs count.
 */
#ifndef SIM_CLUSTER_H
#define SIM_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/catalog.h"
#include "model/node.h"
#include "sim/topology.h"

typedef enum sim_share_kind {
    SIM_SHARE_WHOLE = 0,
    SIM_SHARE_TIMESLICE,    /* device-plugin time-slicing, N replicas per GPU */
    SIM_SHARE_MPS,          /* device-plugin MPS, N clients per GPU */
    SIM_SHARE_MIG,          /* a fixed MIG layout on every GPU (mig-parted), strategy mixed */
    SIM_SHARE_MIG_ON_DEMAND /* MIG enabled, instances created and destroyed per pod */
} sim_share_kind;

#define SIM_MIG_MAX_ITEMS 8

typedef struct sim_sharing {
    sim_share_kind kind;
    int replicas;                        /* TIMESLICE, MPS */
    int mig_replicas;                    /* MIG: replicas per instance (layered sharing); 1: plain */
    int nitems;                          /* MIG: profile -> count per GPU */
    char profile[SIM_MIG_MAX_ITEMS][32];
    int count[SIM_MIG_MAX_ITEMS];
} sim_sharing;

typedef struct sim_group {
    char name[64];
    int count;                 /* nodes */
    char product[MODEL_NAME_LEN];   /* as given: GFD product string or catalog id */
    int gpus_per_node;
    int64_t cpu_milli;         /* 0 with memory_mib 0: host resources not tracked */
    int64_t memory_mib;
    sim_sharing sharing;
    bool dra;                  /* GPUs published through DRA (a ResourceSlice), not the device plugin */
    sim_topology topo;         /* topo.ngpus 0: none */
} sim_group;

typedef struct sim_cluster {
    int ngroups;
    sim_group *groups;
} sim_cluster;

/* "whole", "timeslice:4", "mps:8", "mig:3g.40gb+2x2g.20gb" ("+me" profiles keep their
 * suffix: "mig:1g.10gb+me+3g.40gb"), "mig:3g.40gb+4x1g.10gb+timeslice:4" (layered),
 * "mig:on-demand". Syntax only; the product is checked when a node is built. -1 with err
 * on a bad string (also for "+mps:N" on MIG: the device plugin does not share MIG devices
 * by MPS). */
int sim_sharing_parse(const char *s, sim_sharing *out, char *err, size_t errlen);
void sim_sharing_format(const sim_sharing *s, char *buf, size_t len);

/* Parse cluster JSON; NULL with err naming the field (nodeGroups[1].gpusPerNode: ...).
 * Products and MIG layouts are checked against cat (NULL: the built-in catalog). */
sim_cluster *sim_cluster_from_json(const char *json, size_t len, const model_catalog *cat, char *err,
                                   size_t errlen);
sim_cluster *sim_cluster_from_file(const char *path, const model_catalog *cat, char *err, size_t errlen);
sim_cluster *sim_cluster_clone(const sim_cluster *c);
void sim_cluster_free(sim_cluster *c);

/* Write the cluster back as JSON (for plan results). Caller frees. */
char *sim_cluster_to_json(const sim_cluster *c);

int sim_cluster_nodes(const sim_cluster *c);
int sim_cluster_gpus(const sim_cluster *c);

/* One node of group g, named name, built from the Node object the GPU operator would
 * publish. NULL with err if the group cannot be modelled (the node's reason). */
model_node *sim_group_node(const sim_group *g, const model_catalog *cat, const char *name, char *err,
                           size_t errlen);

/* Whether group g's product can be set up with sharing opt (a node of g built that way
 * models without error); g itself is not changed. */
bool sim_group_can_share(const sim_group *g, const sim_sharing *opt, const model_catalog *cat);

/* Sharing option opt on every shared group of c (sharing other than "whole") that can be
 * set up that way; the other groups keep theirs. The one rule `tessera-sim plan` uses to
 * compare sharing options and `tessera-sim sweep --replay-sharing` uses to apply one.
 * Returns how many groups took it (0: none could; c is then unchanged). */
int sim_cluster_apply_sharing(sim_cluster *c, const sim_sharing *opt, const model_catalog *cat);

/* Every node of the cluster ("<group>-<i>"), in group order; group_of[i] is node i's
 * group. Both arrays are malloc'd; free with sim_cluster_free_nodes. -1 with err. */
int sim_cluster_build(const sim_cluster *c, const model_catalog *cat, model_node ***nodes, int **group_of,
                      int *n, char *err, size_t errlen);
void sim_cluster_free_nodes(model_node **nodes, int *group_of, int n);

#endif
