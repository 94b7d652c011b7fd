/* demo.h -- `tessera-sim demo`: the model and a policy at work on a built-in cluster.
 *
 * The cluster (data/demo-cluster.json: whole-GPU, MIG mixed, MIG single, time-sliced,
 * MPS and CPU-only nodes, as the GPU operator labels them) and the pods
 * (data/demo-pods.json: one per request form) are compiled into the binary.
 */
#ifndef SIM_DEMO_H
#define SIM_DEMO_H

#include <stdio.h>

/* Run the demo with the named policy, writing the report to out. 0 on success. */
int sim_demo_run(const char *policy_name, FILE *out);

#endif
