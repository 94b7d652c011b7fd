/* dra.h -- GPUs published through Dynamic Resource Allocation (resource.k8s.io/v1), in the model's terms.
 *
 * NVIDIA's DRA driver (driver name gpu.nvidia.com; release v0.4.0) publishes each node's GPUs in one ResourceSlice
 * (pool = node name): a device "gpu-<minor>" per whole GPU (MIG off), with attributes type, uuid, productName,
 * brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion and the standard
 * resource.kubernetes.io/pciBusID and resource.kubernetes.io/pcieRoot (no index or minor attribute: the minor is
 * read from the name), capacity memory; with static MIG only MIG devices
 * "gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>" ("gpu-0-mig-1g5gb-19-6"), with attributes type,
 * uuid, parentUUID, profile, ... and capacities multiprocessors, copyEngines, decoders, encoders, jpegEngines,
 * ofaEngines, memory and one memorySlice<i> per memory slice the device covers. The placement comes from the
 * memorySlice<i> capacities, else from the name (and the profile, when the attribute is absent, from the name too).
 * Older releases' forms are accepted as well: "gpu-<minor>-mig-<GI profile id>-<start>-<size>", index/minor and
 * pcieBusID attributes. This module reads those objects, merges the
 * devices into a node built from its Node object (model_node_add_dra: one physical GPU is one model GPU,
 * keyed by UUID), turns a claim's allocation into grants (so claims are accounted like pods) and a claim's
 * device requests into a model_request, when tessera can judge them. Sources: the resource.k8s.io/v1 API
 * reference and NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go, nvlib.go (fixtures under
 * tests/fixtures/dra/ name theirs).
 */
#ifndef MODEL_DRA_H
#define MODEL_DRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "model/catalog.h"
#include "model/node.h"
#include "model/request.h"

#define MODEL_DRA_DRIVER "gpu.nvidia.com"
#define MODEL_DRA_NAME_LEN 128

typedef enum model_dra_type { MODEL_DRA_OTHER = 0, MODEL_DRA_GPU, MODEL_DRA_MIG } model_dra_type;

/* One device of a ResourceSlice of the NVIDIA driver. */
typedef struct model_dra_device {
    char name[MODEL_DRA_NAME_LEN];
    model_dra_type type;
    char uuid[48];
    char parent_uuid[48];          /* MIG: the GPU's UUID */
    char product[MODEL_NAME_LEN];  /* productName as NVML says it ("NVIDIA A100-SXM4-40GB") */
    char profile[32];              /* MIG: "1g.10gb", "1g.10gb+me" */
    int memory_mib;                /* capacity memory; 0 when absent */
    int mig_start, mig_size;       /* MIG: from the memorySlice<i> capacities; -1 when absent */
    int minor;                     /* from the name "gpu-<minor>..."; -1 when it has another form */
    /* Every attribute, for claims' constraints and the topology (model_dra_attr): records "<fully qualified
     * name>\0<type><value>\0" (type 's' string, 'i' int, 'b' bool, 'v' version), then an empty name. Names are
     * qualified as the allocator looks them up: "productName" of driver gpu.nvidia.com is
     * "gpu.nvidia.com/productName". Borrowed from the slice (model_dra_slice.attrs); NULL when none. */
    const char *attrs;
} model_dra_device;

typedef struct model_dra_slice {
    char name[256];
    char driver[MODEL_DRA_NAME_LEN];
    char pool[256];
    char node[256];                /* spec.nodeName; "" for network-attached pools (allNodes, nodeSelector) */
    int64_t generation;            /* spec.pool.generation */
    int count;                     /* spec.pool.resourceSliceCount */
    int ndev;
    model_dra_device *dev;         /* malloc'd; devices of other drivers are kept with type OTHER */
    char *attrs;                   /* malloc'd: the devices' attribute records (model_dra_device.attrs) */
} model_dra_slice;

/* The attributes standard to every DRA driver (k8s.io/dynamic-resource-allocation/deviceattribute): the PCIe root
 * complex a device hangs under ("pci<domain>:<bus>") and its PCI address. */
#define MODEL_DRA_ATTR_PCIE_ROOT "resource.kubernetes.io/pcieRoot"
#define MODEL_DRA_ATTR_PCI_BUS_ID "resource.kubernetes.io/pciBusID"

/* The value of a device's attribute by its fully qualified name, as "<type><value>" ("spci0000:00"); NULL when
 * the device lacks it. */
const char *model_dra_attr(const model_dra_device *d, const char *qualified);

/* Read a ResourceSlice object. 0, or -1 with err (not a ResourceSlice: no name, driver or pool). */
int model_dra_slice_parse(const cJSON *slice, model_dra_slice *out, char *err, size_t errlen);
void model_dra_slice_clear(model_dra_slice *s);

/* Merge the node's DRA devices (of complete pools, newest generation: the caller picks them) into n, built
 * from the Node object. A GPU both paths know (same UUID; or, when the device plugin's GPUs carry no UUID,
 * same index as the device's minor) stays one GPU, marked dra; a GPU only DRA publishes is added, dra_only.
 * Where the views disagree (product, memory, MIG layout) n->dra_note says so; where a GPU cannot be
 * accounted safely (a GPU the device plugin time-slices that DRA also hands out) n->reason is set and the
 * node takes no GPU pods. Returns the number of GPUs marked dra; -1 on a compacted node (model_node_compact). */
int model_node_add_dra(model_node *n, const model_dra_device *dev, int ndev, const model_catalog *cat);

/* The value ("<type><value>", as model_dra_attr) of the attribute the device that is GPU gpu (position in
 * n->gpus) has, by fully qualified name; NULL when it lacks it or DRA does not publish the GPU. A GPU DRA
 * publishes only as MIG devices has the attributes all of them share. */
const char *model_dra_node_attr(const model_node *n, int gpu, const char *qualified);

/* ---- topology of the GPUs DRA publishes. The driver publishes no link between GPUs; the standard attribute
 * resource.kubernetes.io/pcieRoot names the PCIe root complex a device hangs under. The rule
 * (model_dra_merge_slices applies it to the GPUs it merges):
 *   1. the node agent's matrix (tessera.io/gpus "topo", README) wins where it knows a pair: on a node whose GPUs
 *      the device plugin also hands out it is already the node's (model_node_from_json); on a node whose GPUs
 *      only DRA publishes it is matched to the devices by UUID (their uuid attribute; n->dra_links);
 *   2. two GPUs under one PCIe root complex are at least PHB (their traffic crosses at most that host bridge):
 *      a set of them is NUMA-aligned (topo.h), which is all the attribute can say;
 *   3. GPUs under different roots, or without the attribute, stay unknown (NODE or SYS, it cannot tell). */

/* Of one node's slices, the generation of (driver, pool) that counts: the newest among them (an older one is
 * being replaced, and the scheduler's allocator ignores it too). have: that generation's slices among them;
 * want: its spec.pool.resourceSliceCount. INT64_MIN when no slice is of that pool. */
int64_t model_dra_pool_current(const model_dra_slice *const *slices, int n, const char *driver, const char *pool,
                               int *have, int *want);

/* The device called name in the current generation of (driver, pool) among slices, else in the newest older
 * generation that still has it (a generation replaced slice by slice); NULL if none. */
const model_dra_device *model_dra_find_device(const model_dra_slice *const *slices, int n, const char *driver,
                                              const char *pool, const char *name);

/* Merge the devices of NVIDIA's driver in a node's slices into node m (model_node_add_dra): of each pool the
 * newest generation. A pool whose newest generation is not all there is offered to nothing (the 1.36 allocator
 * takes nothing from it; named in m->dra_note), but its GPUs -- the newest generation's devices, then those only an
 * older generation's slices still have -- stay in the model with dra unset, so that the claims holding them are
 * accounted while the driver replaces a generation slice by slice. Returns the number of GPUs marked; -1 out of
 * memory. */
int model_dra_merge_slices(model_node *m, const model_dra_slice *const *slices, int n, const model_catalog *cat);

/* One entry of a claim's status.allocation.devices.results. */
typedef struct model_dra_result {
    char request[MODEL_DRA_NAME_LEN];
    char driver[MODEL_DRA_NAME_LEN];
    char pool[256];
    char device[MODEL_DRA_NAME_LEN];
    bool admin;                    /* adminAccess: holds nothing */
} model_dra_result;

#define MODEL_DRA_MAX_RESULTS 32

/* The allocation of a ResourceClaim: how many results (0..max), or -1 when the claim is not allocated. */
int model_dra_claim_results(const cJSON *claim, model_dra_result *out, int max);

/* The grant that holding device d takes on n (a whole GPU, or a MIG instance): 0, or -1 with err when n has
 * no such GPU or instance. */
int model_dra_grant(const model_node *n, const model_dra_device *d, model_grant *g, char *err, size_t errlen);

/* Where a claim's result is: its device (NULL: not published) and whether that device is on the node being
 * accounted. */
typedef const model_dra_device *(*model_dra_device_fn)(void *user, const model_dra_result *r, bool *on_node);

/* What a claim asks for. */
typedef enum model_dra_verdict {
    MODEL_DRA_NOTHING = 0,  /* no device tessera accounts (no requests, admin access only) */
    MODEL_DRA_JUDGED,       /* *out says it: GPUs of gpu.nvidia.com, in terms fit understands */
    MODEL_DRA_UNJUDGED      /* devices tessera cannot judge (another driver, a CEL expression beyond the
                             * forms below, allocationMode All, several alternatives): why says which */
} model_dra_verdict;

/* A DeviceClass's selectors, by class name (NULL when unknown). */
typedef const cJSON *(*model_dra_class_fn)(void *user, const char *class_name);

/* The GPUs a ResourceClaim's spec (or a ResourceClaimTemplate's spec.spec) asks for, adding to *out (start
 * with a zeroed request; several claims of one pod add up when they ask for the same shape). CEL forms
 * understood, joined with &&, in a request's or its class's selectors:
 *   device.driver == 'gpu.nvidia.com'
 *   device.attributes['gpu.nvidia.com'].type == 'gpu' | 'mig'
 *   device.attributes['gpu.nvidia.com'].productName == '<name>'
 *   device.attributes['gpu.nvidia.com'].profile == '<MIG profile>'
 *   device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('<q>')) >= 0      (whole GPUs)
 * Sharing (the driver's GpuConfig TimeSlicing / MPS) changes nothing here: the claim holds its device
 * whole, and the pods that share the claim share it. */
model_dra_verdict model_dra_request(const cJSON *claim_spec, model_dra_class_fn classes, void *user,
                                    model_request *out, char *why, size_t whylen);

/* The DeviceClasses NVIDIA's driver chart installs (gpu.nvidia.com: whole GPUs, mig.nvidia.com: MIG devices), as
 * an object keyed by class name (a new tree; the caller deletes it), for inputs that name them without carrying
 * them: the simulator's traces, the extender's workload file. NULL when out of memory. */
cJSON *model_dra_chart_classes(void);

/* A pod's judged claim request dr takes the rest from the pod's own request: priority, CPU and memory
 * count on a node as for any pod. The extender and the simulator build a DRA pod's request this way. */
void model_dra_request_of_pod(model_request *dr, const model_request *pod);

/* Whether n's GPUs reach pods only through DRA (every GPU is published by DRA alone; the device plugin advertises
 * none): where kube-scheduler serves a pod's nvidia.com/gpu from the DeviceClass whose extendedResourceName it is,
 * through a claim it makes for the pod (Kubernetes 1.34+). */
bool model_dra_extended_on(const model_node *n);

/* A device-plugin request (nvidia.com/gpu: N) as DRA serves it when a DeviceClass names that resource in
 * extendedResourceName: the request of the claim kube-scheduler makes for the pod, i.e. the class's request
 * (class_req, from model_dra_request) for N devices, with the pod's priority, host resources and allowed models.
 * false when the pod's request is not N whole GPUs (shares, MIG, isolation, HAMi memory) or both the class and
 * the pod restrict the models (two lists are not combined). */
bool model_dra_extended_request(const model_request *class_req, const model_request *pod_req, model_request *out);

/* ---- a claim's constraints (spec.devices.constraints) on one node. As the scheduler's allocator rules them
 * (k8s.io/dynamic-resource-allocation/structured, matchAttributeConstraint and distinctAttributeConstraint): a
 * device lacking the attribute satisfies neither; matchAttribute wants one value of one type on every device,
 * distinctAttribute pairwise different ones. */
typedef struct model_dra_groups {
    int n;                                                 /* the request's constraints */
    bool distinct[MODEL_DRA_MAX_CONSTRAINTS];
    uint8_t id[MODEL_DRA_MAX_CONSTRAINTS][MODEL_MAX_GPUS];   /* per GPU: 0 its device lacks the attribute, else an
                                                            * id of its value (equal ids: equal type and value) */
} model_dra_groups;

/* Resolve r's constraints on n. */
void model_dra_groups_of(const model_node *n, const model_request *r, model_dra_groups *out);
/* Whether GPU g may join the GPUs chosen[0..k) under every constraint (k 0: whether it has the attributes). */
bool model_dra_groups_admit(const model_dra_groups *gr, const int8_t *chosen, int k, int g);
/* The most GPUs among those with cand[g] (g < ngpus) that meet every constraint together, at most want. */
int model_dra_groups_largest(const model_dra_groups *gr, const bool *cand, int ngpus, int want);
/* Why no r->count of the GPUs with cand[g] meet r's constraints ("no 4 GPUs share resource.kubernetes.io/pcieRoot
 * (matchAttribute); the largest group is 2"); what qualifies the GPUs ("free ", or ""). */
void model_dra_groups_why(const model_dra_groups *gr, const model_request *r, const bool *cand, int ngpus,
                          const char *what, char *why, size_t whylen);

#endif
