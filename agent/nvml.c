/* nvml.c -- NVML through dlopen (nvml.h says which calls and why at run time). The few NVML types are
 * restated here with nvml.h's names and layouts, because the image has no CUDA headers to include. */
#include "agent/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* From nvml.h (NVIDIA), the subset used. */
typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];  /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];        /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
} nvmlPciInfo_t;
typedef int nvmlGpuTopologyLevel_t;
typedef int nvmlEnableState_t;           /* NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1 */
typedef int nvmlIntNvLinkDeviceType_t;   /* NVML_NVLINK_DEVICE_TYPE_GPU 0, _IBMNPU 1, _SWITCH 2, _UNKNOWN 0xFF */
#define NVML_FEATURE_ENABLED 1
#define NVML_NVLINK_DEVICE_TYPE_GPU 0
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_DEVICE_MIG_ENABLE 1
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96

#define NVML_LIBRARY "libnvidia-ml.so.1"

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t *);
    /* optional: NULL when the library lacks them (then: no NVLink, no MIG) */
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
    nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned int, nvmlIntNvLinkDeviceType_t *);
    nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int *, unsigned int *);
} nvml_api;

static void *g_lib;
static nvml_api g_api;

const char *agent_pcie_name(int level) {
    switch (level) {
    case AGENT_PCIE_INTERNAL: /* two GPUs of one board sit behind the board's own switch */
    case AGENT_PCIE_SINGLE: return "PIX";
    case AGENT_PCIE_MULTIPLE: return "PXB";
    case AGENT_PCIE_HOSTBRIDGE: return "PHB";
    case AGENT_PCIE_NODE: return "NODE";
    default: return "SYS";
    }
}

/* The library stays loaded once found (a driver upgrade replaces it only with a new container). When it is
 * missing the next read tries again: the GPU operator may install the driver after the agent started. */
static int nvml_load(char *err, size_t errlen) {
    if (g_lib) return 0;
    void *lib = dlopen(NVML_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, errlen,
                 "%s not found (%s): run the agent with the NVIDIA container runtime (runtimeClassName nvidia) and "
                 "NVIDIA_DRIVER_CAPABILITIES=utility, on a node whose NVIDIA driver is installed",
                 NVML_LIBRARY, why ? why : "dlopen failed");
        return -1;
    }
    struct { const char *name; void **fn; int required; } syms[] = {
        {"nvmlInit_v2", (void **)&g_api.init, 1},
        {"nvmlShutdown", (void **)&g_api.shutdown, 1},
        {"nvmlErrorString", (void **)&g_api.error_string, 1},
        {"nvmlDeviceGetCount_v2", (void **)&g_api.count, 1},
        {"nvmlDeviceGetHandleByIndex_v2", (void **)&g_api.by_index, 1},
        {"nvmlDeviceGetUUID", (void **)&g_api.uuid, 1},
        {"nvmlDeviceGetPciInfo_v3", (void **)&g_api.pci, 1},
        {"nvmlDeviceGetTopologyCommonAncestor", (void **)&g_api.ancestor, 1},
        {"nvmlDeviceGetNvLinkState", (void **)&g_api.link_state, 0},
        {"nvmlDeviceGetNvLinkRemoteDeviceType", (void **)&g_api.remote_type, 0},
        {"nvmlDeviceGetNvLinkRemotePciInfo_v2", (void **)&g_api.remote_pci, 0},
        {"nvmlDeviceGetMigMode", (void **)&g_api.mig_mode, 0},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(lib, syms[i].name);
        if (!*syms[i].fn && syms[i].required) {
            snprintf(err, errlen, "%s has no %s: the NVIDIA driver is too old (R450 or later is needed)",
                     NVML_LIBRARY, syms[i].name);
            memset(&g_api, 0, sizeof g_api);
            dlclose(lib);
            return -1;
        }
    }
    g_lib = lib;
    return 0;
}

static const char *nvml_err(nvmlReturn_t rc) {
    const char *s = g_api.error_string ? g_api.error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

/* Lower-case, 8-digit-domain bus ids compare equal whatever case and domain width NVML used. */
static int same_bus(const char *a, const char *b) {
    unsigned da, ba, sa, fa, db, bb, sb, fb;
    if (sscanf(a, "%x:%x:%x.%x", &da, &ba, &sa, &fa) != 4 || sscanf(b, "%x:%x:%x.%x", &db, &bb, &sb, &fb) != 4)
        return 0;
    return da == db && ba == bb && sa == sb && fa == fb;
}

/* The NVLinks of GPU i: per active link, its remote; links to a GPU are counted per peer. */
static int read_links(agent_gpus *g, int i, nvmlDevice_t dev, char *err, size_t errlen) {
    agent_gpu *gp = &g->gpu[i];
    if (!g_api.link_state) return 0;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        nvmlEnableState_t on = 0;
        nvmlReturn_t rc = g_api.link_state(dev, l, &on);
        /* no NVLink on this GPU (NOT_SUPPORTED), or a link number past its links (INVALID_ARGUMENT) */
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
        if (rc != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetNvLinkState(GPU %d, link %u): %s", i, l, nvml_err(rc));
            return -1;
        }
        if (on != NVML_FEATURE_ENABLED) continue;
        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
        if (g_api.remote_type && (rc = g_api.remote_type(dev, l, &type)) != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetNvLinkRemoteDeviceType(GPU %d, link %u): %s", i, l, nvml_err(rc));
            return -1;
        }
        if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
            gp->switch_links++;
            continue;
        }
        if (type != NVML_NVLINK_DEVICE_TYPE_GPU || !g_api.remote_pci) continue; /* an IBM NPU: not a GPU peer */
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof pci);
        if ((rc = g_api.remote_pci(dev, l, &pci)) != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetNvLinkRemotePciInfo_v2(GPU %d, link %u): %s", i, l, nvml_err(rc));
            return -1;
        }
        pci.busId[sizeof pci.busId - 1] = 0;
        for (int j = 0; j < g->n; j++)
            if (j != i && same_bus(pci.busId, g->gpu[j].pci)) gp->nvlinks[j]++;
    }
    return 0;
}

static int read_all(agent_gpus *out, char *err, size_t errlen) {
    unsigned int n = 0;
    nvmlReturn_t rc = g_api.count(&n);
    if (rc != NVML_SUCCESS) {
        snprintf(err, errlen, "nvmlDeviceGetCount_v2: %s", nvml_err(rc));
        return -1;
    }
    if (n > AGENT_MAX_GPUS) {
        snprintf(err, errlen, "NVML reports %u GPUs; tessera's topology holds at most %d per node", n, AGENT_MAX_GPUS);
        return -1;
    }
    out->n = (int)n;
    nvmlDevice_t dev[AGENT_MAX_GPUS];
    for (int i = 0; i < out->n; i++) {
        agent_gpu *gp = &out->gpu[i];
        if ((rc = g_api.by_index((unsigned)i, &dev[i])) != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetHandleByIndex_v2(%d): %s", i, nvml_err(rc));
            return -1;
        }
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        if ((rc = g_api.uuid(dev[i], uuid, sizeof uuid)) != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetUUID(GPU %d): %s", i, nvml_err(rc));
            return -1;
        }
        uuid[sizeof uuid - 1] = 0;
        snprintf(gp->uuid, sizeof gp->uuid, "%s", uuid);
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof pci);
        if ((rc = g_api.pci(dev[i], &pci)) != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetPciInfo_v3(GPU %d): %s", i, nvml_err(rc));
            return -1;
        }
        pci.busId[sizeof pci.busId - 1] = 0;
        snprintf(gp->pci, sizeof gp->pci, "%s", pci.busId);
        unsigned cur = 0, pend = 0;
        gp->mig_enabled = g_api.mig_mode && g_api.mig_mode(dev[i], &cur, &pend) == NVML_SUCCESS &&
                          cur == NVML_DEVICE_MIG_ENABLE;
    }
    for (int i = 0; i < out->n; i++) {
        if (read_links(out, i, dev[i], err, errlen) < 0) return -1;
        for (int j = 0; j < out->n; j++) {
            out->gpu[i].pcie[j] = AGENT_PCIE_UNKNOWN;
            if (j == i) continue;
            nvmlGpuTopologyLevel_t lv = 0;
            if ((rc = g_api.ancestor(dev[i], dev[j], &lv)) != NVML_SUCCESS) {
                snprintf(err, errlen, "nvmlDeviceGetTopologyCommonAncestor(GPU %d, GPU %d): %s", i, j, nvml_err(rc));
                return -1;
            }
            out->gpu[i].pcie[j] = lv;
        }
    }
    return 0;
}

int agent_nvml_read(agent_gpus *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (nvml_load(err, errlen) < 0) return -1;
    nvmlReturn_t rc = g_api.init();
    if (rc != NVML_SUCCESS) {
        snprintf(err, errlen, "nvmlInit_v2: %s (is the NVIDIA driver loaded on this node?)", nvml_err(rc));
        return -1;
    }
    int ret = read_all(out, err, errlen);
    g_api.shutdown();
    if (ret < 0) memset(out, 0, sizeof *out);
    return ret;
}
