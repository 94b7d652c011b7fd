/* trace.h -- workload traces for the simulator.
 *
 *   {"workloads": [{"id": "inf-1", "kind": "inference", "arrival": 12.5, "duration": 600,
 *                   "priority": 100, "tenant": "search", "gpuUtil": 0.3,
 *                   "pod": {"resources": {"requests": {"nvidia.com/gpu.shared": "1"}},
 *                           "annotations": {"tessera.io/isolation": "any"}}}]}
 *
 * arrival: seconds from the start; duration: seconds on a dedicated GPU (the replay
 * stretches it by the sharing slowdown); gpuUtil: mean GPU utilisation in [0, 1] when
 * running alone; commShare (optional, 0..1): for a pod on several GPUs, the share of a step
 * spent communicating when its GPUs are NVLink-connected (sim/slowdown.h; default the
 * replay's --comm-share); memBandwidth (optional, 0..1): the share of the GPU's memory bandwidth it
 * uses alone, which MPS clients contend for (sim/slowdown.h; default gpuUtil). The pod part is a
 * container's resources plus the pod's annotations and securityContext (or a whole Pod object
 * with "spec"); it becomes a Pod and is read by model_request_from_pod, exactly as the extender
 * reads pods: an MPS share is "annotations": {"tessera.io/compute-sharing": "mps", ...} with
 * "securityContext": {"runAsUser": 1000}. Schema: sim/schema/trace.schema.json.
 *
 * A pod part may carry "claim": the spec of a ResourceClaim (DRA), e.g.
 *   "claim": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com",
 *             "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}
 * with NVIDIA's DeviceClasses gpu.nvidia.com and mig.nvidia.com, count, and the selectors model/dra.h
 * understands (product, memory, MIG profile); config sharing TimeSlicing|MPS is checked. It is read by
 * model_dra_request, as the extender reads claims, and places on GPUs DRA publishes ("dra": true groups).
 *
 * Workloads with the same pod share one "shape" (one parsed request), which keeps a
 * million-workload trace small and lets the replay reason per shape.
 */
#ifndef SIM_TRACE_H
#define SIM_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/request.h"

typedef enum sim_kind { SIM_TRAINING = 0, SIM_INFERENCE, SIM_NOTEBOOK, SIM_BATCH, SIM_NKINDS } sim_kind;

const char *sim_kind_name(int kind);
int sim_kind_parse(const char *s);   /* -1 if unknown */

typedef struct sim_shape {
    model_request req;
    char *pod_json;          /* the pod part as written to trace files (compact JSON) */
} sim_shape;

typedef struct sim_workload {
    double arrival;          /* s */
    double duration;         /* s on a dedicated GPU */
    float util;              /* 0..1 */
    int32_t priority;
    int32_t shape;           /* index into shapes */
    uint32_t id;             /* offset of the id in trace->ids */
    uint16_t tenant;         /* index into tenants */
    uint8_t kind;            /* sim_kind */
    bool comm_given;         /* "commShare" given: comm_share overrides the replay's default */
    float comm_share;        /* multi-GPU communication share of a step at NVLink speed (slowdown.h) */
    bool bw_given;           /* "memBandwidth" given; else the replay takes util for it */
    float mem_bw;            /* memory-bandwidth share alone, 0..1 (slowdown.h, MPS) */
} sim_workload;

typedef struct sim_trace {
    int n, cap;
    sim_workload *w;
    int nshapes, shapes_cap;
    sim_shape *shapes;
    int ntenants;
    char **tenants;
    char *ids;               /* NUL-separated workload ids */
    size_t ids_len, ids_cap;
    int *shape_hash;         /* open addressing over shapes (index + 1, 0 = empty) */
    int hash_cap;
} sim_trace;

sim_trace *sim_trace_new(void);
void sim_trace_free(sim_trace *t);

/* The shape for a pod part ({"resources", "annotations"} or a Pod with "spec"): its
 * index, or -1 with err (the model's message: field and rule). */
int sim_trace_shape(sim_trace *t, const cJSON *pod, char *err, size_t errlen);
int sim_trace_tenant(sim_trace *t, const char *name);   /* index, added if new; -1 if too many */

/* Append a workload (w->id is set from id). 0, or -1 when out of memory. */
int sim_trace_add(sim_trace *t, const sim_workload *w, const char *id);
const char *sim_trace_id(const sim_trace *t, int i);

/* Read trace JSON; NULL with err naming the field ("workloads[3].gpuUtil: ..."). */
sim_trace *sim_trace_from_json(const char *json, size_t len, char *err, size_t errlen);
sim_trace *sim_trace_from_file(const char *path, char *err, size_t errlen);

/* Write as trace JSON (one workload per line). 0, or -1 on a write error. */
int sim_trace_write(const sim_trace *t, FILE *f);

/* How the replay runs the trace's soft shares (replay and plan --compute-sharing, plan's soft:
 * sharing options). */
typedef enum sim_compute {
    SIM_COMPUTE_TRACE = 0,   /* as each workload's pod says */
    SIM_COMPUTE_TIMESLICE,   /* every soft share time-sliced (tessera.io/compute-sharing removed) */
    SIM_COMPUTE_MPS,         /* every soft share an MPS share, all of one uid (SIM_MPS_UID) */
    SIM_COMPUTE_MPS_TENANT   /* every soft share an MPS share of its tenant's own uid (SIM_MPS_UID + tenant) */
} sim_compute;
#define SIM_MPS_UID 1000

/* "trace", "timeslice", "mps", "mps:tenant"; -1 with err otherwise. */
int sim_compute_parse(const char *s, sim_compute *out, char *err, size_t errlen);
const char *sim_compute_name(sim_compute c);

/* A copy of t whose soft shares use compute sharing c: every workload whose request is a fraction
 * that model_fit may place as a soft share (default isolation, or any) gets tessera.io/compute-
 * sharing: mps with its uid in securityContext.runAsUser and loses tessera.io/isolation (an MPS
 * share has that one route), or (timeslice) loses tessera.io/compute-sharing. The pods are read
 * again by model_request_from_pod. NULL with err on a pod that cannot be rewritten. */
sim_trace *sim_trace_compute_sharing(const sim_trace *t, sim_compute c, char *err, size_t errlen);

#endif
