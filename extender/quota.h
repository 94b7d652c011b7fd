/* quota.h -- what each namespace's pods hold, in the units of its GPU quota (model/charge.h:
 * tessera.io/gpu-milli, tessera.io/gpu-memory-mib), for /metrics and /debug/state.
 *
 * Usage only: the quotas' hard limits live in ResourceQuota objects, which tessera does not
 * watch (one more list+watch and RBAC rule to show what `kubectl describe resourcequota` and
 * kube-state-metrics' kube_resourcequota already show). Held means what tessera's model grants
 * the namespace's pods now (binding, assumed or bound, whoever scheduled them); a pod's quota
 * charge (what its admission declared) is at least that.
 */
#ifndef EXT_QUOTA_H
#define EXT_QUOTA_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "extender/mirror/state.h"

typedef struct ext_ns_usage {
    const char *ns;          /* points into the state: valid while its lock is held */
    int64_t gpu_milli;
    int64_t memory_mib;
    int pods;                /* pods holding GPUs */
} ext_ns_usage;

/* Per namespace, sorted by name (lock held). The number of namespaces, *out malloc'd (the caller
 * frees it; NULL when there are none), or -1 when out of memory. */
int ext_quota_usage(const ext_state *st, ext_ns_usage **out);

/* The Prometheus text of tessera_namespace_gpu_milli{namespace} and
 * tessera_namespace_gpu_memory_mib{namespace} (malloc'd; lock held). NULL when out of memory. */
char *ext_quota_metrics(const ext_state *st);

/* {"namespace": {"gpuMilli": .., "gpuMemoryMiB": .., "pods": ..}} (lock held). */
cJSON *ext_quota_debug(const ext_state *st);

#endif
