/* convert.h -- `tessera-sim convert openb`: the openb node and pod CSVs as the
 * simulator's cluster JSON and trace JSON (formats in sim/cluster.h and sim/trace.h).
 *
 * Cluster: nodes with identical (model, GPUs, CPU, memory) form one node group, in the
 * order first seen; every GPU whole ("sharing": "whole"). openb models the catalog
 * knows become its ids (T4 -> T4-16GB, V100M16 -> V100-16GB, V100M32 -> V100-32GB,
 * A10 -> A10-24GB); the others (P100, G2, G3: not in the catalog) keep their names,
 * or all take the product unknown_as when it is not NULL (--unknown-as: the cluster
 * reader accepts catalog products only, so a replay of the whole openb cluster needs a
 * stand-in; say which when reporting results).
 *
 * Trace: one workload per pod, times kept: arrival = creation_time, duration =
 * deletion_time - scheduled_time (- creation_time for a pod never scheduled), in
 * seconds, at least 1 (the trace format needs a positive duration). kind from qos:
 * LS -> inference, BE -> batch, others -> training. priority 0, tenant "openb". openb
 * has no utilisation, so gpuUtil is 1 for GPU pods (always busy, the conservative
 * choice for the slowdown model) and 0 for CPU-only ones. The pod part:
 * requests cpu ("12000m") and memory ("16384Mi"); whole GPUs as nvidia.com/gpu; a share
 * (gpu_milli < 1000) as the annotation tessera.io/gpu-fraction ("0.46"); gpu_spec as
 * tessera.io/gpu-models with the same model names as the cluster.
 */
#ifndef SIM_CONVERT_H
#define SIM_CONVERT_H

#include <stdio.h>

#include "sim/openb.h"

/* The product name a converted cluster and trace use for an openb model. */
const char *sim_openb_product(const char *model, const char *unknown_as);

/* Write cluster / trace JSON to out. 0, or -1 with err (write error, no nodes). */
int sim_convert_openb_cluster(const sim_openb_node *v, int n, const char *unknown_as, FILE *out, char *err,
                              size_t errlen);
int sim_convert_openb_trace(const sim_openb_pod *p, int n, const char *unknown_as, FILE *out, char *err,
                            size_t errlen);

#endif
