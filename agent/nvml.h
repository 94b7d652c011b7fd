/* nvml.h -- what the node agent reads from NVIDIA's management library about the node's GPUs.
 *
 * libnvidia-ml.so.1 is loaded with dlopen at run time, never linked: the image runs on nodes without a driver
 * (the library is mounted by the NVIDIA container runtime when the container asks for the "utility" driver
 * capability), and a missing library or driver must be a clear, reported state, not a failed exec. dlopen's
 * own search order (LD_LIBRARY_PATH, the ld.so cache, the default directories) finds it, in production as in
 * the tests, which put their fake library (tests/support/fake_nvml.c) first on LD_LIBRARY_PATH.
 *
 * NVML calls used (names, symbol versions and types as nvml.h declares them):
 *   nvmlInit_v2, nvmlShutdown, nvmlErrorString,
 *   nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 *   nvmlDeviceGetUUID                         (char[NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96]),
 *   nvmlDeviceGetPciInfo_v3                   (nvmlPciInfo_t: busIdLegacy[16], domain, bus, device,
 *                                              pciDeviceId, pciSubSystemId, busId[32]),
 *   nvmlDeviceGetTopologyCommonAncestor       (nvmlGpuTopologyLevel_t: INTERNAL 0, SINGLE 10, MULTIPLE 20,
 *                                              HOSTBRIDGE 30, NODE 40, SYSTEM 50),
 *   nvmlDeviceGetNvLinkState                  (per link 0..NVML_NVLINK_MAX_LINKS-1 = 17; NVML_FEATURE_ENABLED),
 *   nvmlDeviceGetNvLinkRemoteDeviceType       (nvmlIntNvLinkDeviceType_t: GPU 0, IBMNPU 1, SWITCH 2),
 *   nvmlDeviceGetNvLinkRemotePciInfo_v2       (the peer GPU's bus id, for links whose remote is a GPU),
 *   nvmlDeviceGetMigMode                      (current/pending; NVML_ERROR_NOT_SUPPORTED = no MIG on this GPU).
 * The NVLink and MIG queries answer NVML_ERROR_NOT_SUPPORTED on GPUs without NVLink or MIG: that is "none",
 * not an error. The optional ones (the remote device type needs driver 450+) are looked up one by one, so an
 * older library still gives the PCIe topology.
 */
#ifndef AGENT_NVML_H
#define AGENT_NVML_H

#include <stddef.h>

#define AGENT_MAX_GPUS 16  /* model/topo.h's matrix size; a node with more is refused with a clear error */

/* How two GPUs meet on PCIe (nvmlGpuTopologyLevel_t's values, which sort best to worst). */
typedef enum agent_pcie_level {
    AGENT_PCIE_UNKNOWN = -1,
    AGENT_PCIE_INTERNAL = 0,    /* one board (e.g. a K80's two GPUs) */
    AGENT_PCIE_SINGLE = 10,     /* one PCIe switch:     nvidia-smi PIX */
    AGENT_PCIE_MULTIPLE = 20,   /* several switches:    PXB */
    AGENT_PCIE_HOSTBRIDGE = 30, /* one host bridge:     PHB */
    AGENT_PCIE_NODE = 40,       /* one NUMA node:       NODE */
    AGENT_PCIE_SYSTEM = 50      /* across sockets:      SYS */
} agent_pcie_level;

typedef struct agent_gpu {
    char uuid[96];              /* "GPU-..." */
    char pci[32];               /* nvmlPciInfo_t.busId, "00000000:07:00.0" */
    int mig_enabled;            /* current MIG mode: 1 on, 0 off or not supported */
    int switch_links;           /* active NVLinks whose remote is an NVSwitch */
    int nvlinks[AGENT_MAX_GPUS];/* active NVLinks straight to GPU j (NVLink bridges, direct meshes) */
    int pcie[AGENT_MAX_GPUS];   /* agent_pcie_level to GPU j; the diagonal unused */
} agent_gpu;

typedef struct agent_gpus {
    int n;
    agent_gpu gpu[AGENT_MAX_GPUS];
} agent_gpus;

/* Load the library if needed, nvmlInit_v2, read every GPU in NVML index order, nvmlShutdown. 0, or -1 with
 * err saying what failed ("libnvidia-ml.so.1 not found (...): the container needs the NVIDIA runtime with
 * NVIDIA_DRIVER_CAPABILITIES=utility", "nvmlInit_v2: Driver Not Loaded", ...). Not thread-safe (one caller,
 * the agent's main loop). */
int agent_nvml_read(agent_gpus *out, char *err, size_t errlen);

/* The nvidia-smi name of a PCIe level ("PIX", ...; "SYS" for unknown: the weakest claim). */
const char *agent_pcie_name(int level);

#endif
