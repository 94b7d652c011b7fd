/* quota.h -- per-namespace GPU quotas for `tessera-sim replay`, `plan` and sweep's replay
 * cells, in the units tessera's webhook declares and Kubernetes' ResourceQuota counts
 * (model/charge.h: tessera.io/gpu-milli, tessera.io/gpu-memory-mib; README "Quotas").
 *
 * A trace's tenants map to namespaces (a tenant is its own namespace unless mapped). A
 * workload is charged model_charge_request of its pod, from its arrival (the pod is created)
 * until it departs; a workload whose namespace has no room left for its charge:
 *   wait     waits and is admitted as soon as its charge fits (every pod retried on its own,
 *            as a controller re-creating pods refused by ResourceQuota does), in queue order
 *            (priority, then arrival);
 *   fifo     waits, and nobody of its namespace is admitted before it (Kueue's StrictFIFO);
 *   refuse   is refused, as ResourceQuota refuses a bare pod, and never runs.
 * A charge larger than the namespace's whole quota is refused in every mode (it could never run).
 *
 * Spec of one quota:   NAMESPACE=gpu-milli:N[,gpu-memory-mib:M]   (either unit, or both)
 * several, separated by ';'.  Tenant mapping:  TENANT=NAMESPACE.
 */
#ifndef SIM_QUOTA_H
#define SIM_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_QUOTA_MAX 64
#define SIM_QUOTA_NAME 64

typedef enum sim_quota_mode { SIM_QUOTA_WAIT = 0, SIM_QUOTA_FIFO, SIM_QUOTA_REFUSE } sim_quota_mode;

typedef struct sim_quota {
    char ns[SIM_QUOTA_NAME];
    int64_t gpu_milli;       /* hard limit; -1: none on this unit */
    int64_t memory_mib;      /* hard limit; -1: none */
} sim_quota;

typedef struct sim_quotas {
    int n;
    sim_quota q[SIM_QUOTA_MAX];
    int nmap;
    char map_tenant[SIM_QUOTA_MAX][SIM_QUOTA_NAME], map_ns[SIM_QUOTA_MAX][SIM_QUOTA_NAME];
    sim_quota_mode mode;
} sim_quotas;

/* Add the quotas of spec ("a=gpu-milli:2000;b=gpu-memory-mib:81920"). A namespace given twice
 * keeps the last. 0, or -1 with err naming the bad part. */
int sim_quotas_parse(sim_quotas *qs, const char *spec, char *err, size_t errlen);
/* Add "TENANT=NAMESPACE" mappings (several separated by ','). 0, or -1 with err. */
int sim_quotas_map(sim_quotas *qs, const char *spec, char *err, size_t errlen);
/* "wait", "fifo" or "refuse". 0, or -1 with err. */
int sim_quotas_mode(sim_quotas *qs, const char *s, char *err, size_t errlen);
const char *sim_quota_mode_name(sim_quota_mode m);

/* The namespace of a tenant (its mapping, else its own name). */
const char *sim_quotas_namespace(const sim_quotas *qs, const char *tenant);
/* The quota of a namespace, or NULL when it has none. */
const sim_quota *sim_quotas_find(const sim_quotas *qs, const char *ns);

/* The spec text back ("a=gpu-milli:2000,gpu-memory-mib:81920;b=..."), for reports and keys. */
void sim_quotas_format(const sim_quotas *qs, char *buf, size_t len);

#endif
