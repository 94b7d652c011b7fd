/* workload.h -- the target workload of the extender: the task shapes that fragmentation
 * (policy_frag_*) is measured against, for --policy fgd and the
 * tessera_cluster_fragmentation_ratio metric. Either loaded once from --workload FILE, or,
 * without it, built from the pods in the cache at the time it is needed.
 */
#ifndef EXT_WORKLOAD_H
#define EXT_WORKLOAD_H

#include <stddef.h>

#include "extender/mirror/state.h"
#include "policy/policy.h"

/* A finished workload (95 % coverage, as the FGD paper) from a JSON array of Pod objects
 * or a List/PodList of them: each pod counts once. A pod whose GPUs are ResourceClaims counts
 * as the GPU work its claims ask for (model_dra_request: the same shape as the device-plugin
 * pod asking the same) when the file also holds the ResourceClaims or ResourceClaimTemplates
 * it names (DeviceClasses: the file's, else those of NVIDIA's driver chart, gpu.nvidia.com
 * and mig.nvidia.com); otherwise, and pods that ask for no GPU, count as CPU-only tasks. With reservation_delivery (the extender's default soft-share delivery)
 * fractions are narrowed as filter narrows them (model_request_for_reservation_delivery),
 * so fragmentation is not measured against room on MPS replicas they can never use.
 * NULL with err on malformed input, an invalid pod request, or no pods. */
policy_workload *ext_workload_from_json(const char *json, size_t len, bool reservation_delivery, char *err,
                                        size_t errlen);

/* A finished workload from the GPU pods in the cache (lock held), narrowed the same way, and the
 * claims tessera judges (a pod whose GPUs are claims is GPU work of the same shape as the
 * device-plugin pod asking the same; a shared claim counts once); NULL when there are none. */
policy_workload *ext_workload_from_state(const ext_state *st, bool reservation_delivery);

#endif
