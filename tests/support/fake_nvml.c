/* fake_nvml.c -- a stand-in for NVIDIA's libnvidia-ml.so.1, built by the Makefile as
 * $(BUILD)/fake-nvml/libnvidia-ml.so.1. Tests put that directory first on LD_LIBRARY_PATH, so the node agent's
 * dlopen("libnvidia-ml.so.1") finds it through the same search order production uses (no test-only flag).
 *
 * It answers the NVML calls agent/nvml.h lists, with nvml.h's symbol versions, types and error codes, for the
 * three reference servers (README.md, "Reference servers") (FAKE_NVML_SERVER, default dgx-a100):
 *   dgx-a100            8 x A100-SXM4-80GB, 12 NVLinks each to NVSwitches; bus ids 07 0F 47 4E 87 90 B7 BD;
 *                       PCIe: (0,1) (2,3) (4,5) (6,7) MULTIPLE (PXB), same socket (0-3, 4-7) NODE, else SYSTEM.
 *   pcie8-nvlink-pairs  8 x A100-80GB-PCIe; bus ids 1B 1C 1D 1E 9B 9C 9D 9E; one PCIe switch per socket
 *                       (0-3, 4-7): SINGLE (PIX) within, SYSTEM across; NVLink bridges join (0,1) (2,3) (4,5)
 *                       (6,7) with 12 links each, remote device type GPU.
 *   2socket-4gpu        4 x L40S, no NVLink (NOT_SUPPORTED); bus ids 17 65 CA E3; each GPU on its own root port:
 *                       NODE on one socket (0,1 / 2,3), SYSTEM across.
 * UUIDs are GPU-<8 hex of the server>-0000-4000-8000-0000000000<index>: fixed, so tests can spell them.
 *
 * Other knobs (environment, read at nvmlInit_v2):
 *   FAKE_NVML_FAIL=init       nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED (a node whose driver is absent)
 *   FAKE_NVML_FAIL=topology   nvmlDeviceGetTopologyCommonAncestor answers NVML_ERROR_UNKNOWN
 *   FAKE_NVML_MIG=0,3         those GPUs report MIG mode enabled (A100s only; the L40S has no MIG: NOT_SUPPORTED)
 *   FAKE_NVML_STATE_FILE=PATH lines "FAIL=..." and "MIG=..." in that file, read at every nvmlInit_v2, override
 *                             the two above: a test changes the machine while the agent runs (a MIG
 *                             reconfiguration, the driver going away and coming back)
 *
 * The node of the fake driver instead (tests/support/fake_gpu.h): with FAKE_CUDA_DEVICES set, NVML shows those GPUs
 * (filtered by NVIDIA_VISIBLE_DEVICES, as in a container) with their UUIDs, no NVLink, no MIG, and memory in use as
 * the fake driver's processes on the node hold it (FAKE_CUDA_STATE): what libtessera-cuda.so's NVML hooks rewrite.
 *
 * Memory: nvmlDeviceGetMemoryInfo and nvmlDeviceGetMemoryInfo_v2 (nvmlMemory_v2 in the version field, else
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH); the reference servers report nothing in use.
 * Every device call before nvmlInit_v2 (or after nvmlShutdown) answers NVML_ERROR_UNINITIALIZED, as NVML does.
 */
#include "shim/cuda_abi.h"
#include "shim/ledger.h"
#include "tests/support/fake_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NVML_ERROR_DRIVER_NOT_LOADED 9
typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

/* Exported with nvml.h's names; the prototypes keep -Wmissing-prototypes quiet. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2, int *pathInfo);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link, int *pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

enum { SINGLE = 10, MULTIPLE = 20, NODE = 40, SYSTEM = 50 };
enum { LINK_NONE, LINK_SWITCH, LINK_PAIR }; /* what a GPU's NVLinks reach */

struct nvmlDevice_st {
    int index;
    unsigned bus;
};

typedef struct fake_server {
    const char *name, *uuid_tag;
    int n;
    unsigned bus[FAKE_GPU_MAX];
    int links;      /* NVLinks per GPU */
    int link_kind;
    int mig_capable;
    unsigned long long mib; /* memory per GPU */
} fake_server;

static const fake_server servers[] = {
    {"dgx-a100", "d9a10000", 8, {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD}, 12, LINK_SWITCH, 1, 81920},
    {"pcie8-nvlink-pairs", "9c1e0000", 8, {0x1B, 0x1C, 0x1D, 0x1E, 0x9B, 0x9C, 0x9D, 0x9E}, 12, LINK_PAIR, 1, 81920},
    {"2socket-4gpu", "2a40c000", 4, {0x17, 0x65, 0xCA, 0xE3}, 0, LINK_NONE, 0, 46068},
};

/* FAKE_CUDA_DEVICES: the fake driver's node, as a server of its own */
static fake_server gpu_server;
static fake_gpu gpu[FAKE_GPU_MAX];
static ledger node = {-1, NULL, -1};
static int node_dev[FAKE_GPU_MAX];

static const fake_server *srv;
static struct nvmlDevice_st devs[FAKE_GPU_MAX];
static int fail_topology;
static int mig_on[8];

static int socket_of(int i) { return i < srv->n / 2 ? 0 : 1; }

static int level(int a, int b) {
    if (socket_of(a) != socket_of(b)) return SYSTEM;
    if (srv->link_kind == LINK_SWITCH) return a / 2 == b / 2 ? MULTIPLE : NODE;
    if (srv->link_kind == LINK_PAIR) return SINGLE;
    return NODE;
}

/* FAKE_NVML_STATE_FILE's value for key ("FAIL", "MIG"), else the environment's FAKE_NVML_<key>. */
static const char *knob(const char *key, char *buf, size_t len) {
    char envname[64];
    snprintf(envname, sizeof envname, "FAKE_NVML_%s", key);
    const char *path = getenv("FAKE_NVML_STATE_FILE");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return getenv(envname);
    const char *v = NULL;
    char line[256];
    size_t kl = strlen(key);
    while (!v && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!strncmp(line, key, kl) && line[kl] == '=') v = snprintf(buf, len, "%s", line + kl + 1) >= 0 ? buf : NULL;
    }
    fclose(f);
    return v;
}

nvmlReturn_t nvmlInit_v2(void) {
    char fbuf[64], mbuf[64];
    const char *fail = knob("FAIL", fbuf, sizeof fbuf);
    if (fail && !strcmp(fail, "init")) return NVML_ERROR_DRIVER_NOT_LOADED;
    const char *name = getenv("FAKE_NVML_SERVER");
    if (!name || !*name) name = "dgx-a100";
    srv = NULL;
    if (getenv("FAKE_CUDA_DEVICES")) {
        char why[300];
        int n = fake_gpus(gpu, why, sizeof why);
        if (n < 0) {
            fprintf(stderr, "fake NVML: %s\n", why);
            return NVML_ERROR_UNKNOWN;
        }
        gpu_server = (fake_server){"fake-cuda", "", n, {0}, 0, LINK_NONE, 0, 0};
        for (int i = 0; i < n; i++) gpu_server.bus[i] = 0x10u + (unsigned)gpu[i].node_index;
        const char *state = getenv("FAKE_CUDA_STATE");
        if (node.fd < 0 && state && *state && ledger_open(&node, state, why, sizeof why) < 0) {
            fprintf(stderr, "fake NVML: %s\n", why);
            return NVML_ERROR_UNKNOWN;
        }
        for (int i = 0; i < n; i++) node_dev[i] = node.fd >= 0 ? ledger_device(&node, gpu[i].uuid) : -1;
        srv = &gpu_server;
    }
    for (size_t i = 0; !srv && i < sizeof servers / sizeof servers[0]; i++)
        if (!strcmp(servers[i].name, name)) srv = &servers[i];
    if (!srv) {
        fprintf(stderr, "fake NVML: unknown FAKE_NVML_SERVER=%s\n", name);
        return NVML_ERROR_UNKNOWN;
    }
    fail_topology = fail && !strcmp(fail, "topology");
    memset(mig_on, 0, sizeof mig_on);
    const char *mig = knob("MIG", mbuf, sizeof mbuf);
    for (const char *p = mig; p && *p;) {
        char *end;
        long i = strtol(p, &end, 10);
        if (end == p) break;
        if (i >= 0 && i < 8) mig_on[i] = 1;
        p = *end == ',' ? end + 1 : end;
    }
    for (int i = 0; i < srv->n; i++) devs[i] = (struct nvmlDevice_st){i, srv->bus[i]};
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
    if (!srv) return NVML_ERROR_UNINITIALIZED;
    srv = NULL;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

static nvmlReturn_t check(nvmlDevice_t d) {
    if (!srv) return NVML_ERROR_UNINITIALIZED;
    if (!d || d < devs || d >= devs + srv->n) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *pci, unsigned bus) {
    memset(pci, 0, sizeof *pci);
    pci->bus = bus;
    pci->pciDeviceId = 0x20B210DE;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", bus);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!srv) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)srv->n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!srv) return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned)srv->n) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
    char buf[96];
    int n = srv == &gpu_server ? snprintf(buf, sizeof buf, "%s", gpu[d->index].uuid)
                               : snprintf(buf, sizeof buf, "GPU-%s-0000-4000-8000-%012d", srv->uuid_tag, d->index);
    if ((unsigned)n + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, buf, (size_t)n + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, d->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *path) {
    nvmlReturn_t rc = check(a);
    if (rc || (rc = check(b))) return rc;
    if (!path) return NVML_ERROR_INVALID_ARGUMENT;
    if (fail_topology) return NVML_ERROR_UNKNOWN;
    *path = a == b ? 0 : level(a->index, b->index);
    return NVML_SUCCESS;
}

/* GPUs without NVLink answer NOT_SUPPORTED; a link number past the GPU's links INVALID_ARGUMENT. */
static nvmlReturn_t link_check(nvmlDevice_t d, unsigned link) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (srv->link_kind == LINK_NONE) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= (unsigned)srv->links) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *active) {
    nvmlReturn_t rc = link_check(d, link);
    if (rc) return rc;
    if (!active) return NVML_ERROR_INVALID_ARGUMENT;
    *active = 1; /* NVML_FEATURE_ENABLED */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, int *type) {
    nvmlReturn_t rc = link_check(d, link);
    if (rc) return rc;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = srv->link_kind == LINK_SWITCH ? 2 : 0; /* NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU */
    return NVML_SUCCESS;
}

/* For a switch link: the NVSwitch's own bus id (one of six switches, as on a DGX A100's baseboard). */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *pci) {
    nvmlReturn_t rc = link_check(d, link);
    if (rc) return rc;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    if (srv->link_kind == LINK_SWITCH) fill_pci(pci, 0xC4 + link % 6);
    else fill_pci(pci, srv->bus[d->index ^ 1]);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (!srv->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    if (!cur || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *cur = *pending = (unsigned)mig_on[d->index];
    return NVML_SUCCESS;
}

/* total and used of GPU d: the fake driver's node memory, or the reference server's product with nothing in use */
static void memory_of(nvmlDevice_t d, unsigned long long *total, unsigned long long *used) {
    const unsigned long long mib = 1024ull * 1024ull;
    *used = 0;
    if (srv != &gpu_server) {
        *total = srv->mib * mib;
        return;
    }
    *total = gpu[d->index].mib * mib;
    if (node.fd >= 0 && node_dev[d->index] >= 0) *used = ledger_used(&node, node_dev[d->index]).used;
    if (*used > *total) *used = *total;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    memory_of(d, &m->total, &m->used);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    nvmlReturn_t rc = check(d);
    if (rc) return rc;
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory_of(d, &m->total, &m->used);
    m->reserved = 0;
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
