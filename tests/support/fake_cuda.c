/* fake_cuda.c -- a stand-in for NVIDIA's driver library, built by the Makefile as $(BUILD)/fake-cuda/libcuda.so.1
 * (soname libcuda.so.1, no sanitizers, linked -Bsymbolic-functions so that, like the real driver, what its
 * cuGetProcAddress hands out are its own functions even when an interposer exports the same names). Programs find
 * it as they find the real one: dlopen("libcuda.so.1") through LD_LIBRARY_PATH, or linked against it.
 *
 * The node and its GPUs: tests/support/fake_gpu.h (FAKE_CUDA_DEVICES, FAKE_CUDA_STATE, NVIDIA_VISIBLE_DEVICES).
 * CUDA_VISIBLE_DEVICES is applied on top, as the driver does: indices into what the container shows, or UUIDs, in
 * the listed order, stopping at the first that matches nothing.
 *
 * Entry points (cuda.h's names, signatures, error codes and symbol versions; calls before cuInit answer
 * CUDA_ERROR_NOT_INITIALIZED except cuDriverGetVersion and cuGetProcAddress, as the real ones):
 *   cuInit, cuDriverGetVersion (13000), cuGetProcAddress (CUDA 11.3) and cuGetProcAddress_v2 (12.0: the status
 *   out-parameter), cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute (SM count, compute
 *   capability 8.0, 0 for the rest), cuDeviceGetUuid(_v2), cuDeviceTotalMem(_v2), cuDevicePrimaryCtxRetain,
 *   cuDevicePrimaryCtxRelease(_v2), cuCtxCreate_v2, cuCtxDestroy_v2, cuCtxSetCurrent, cuCtxGetCurrent,
 *   cuCtxGetDevice, cuMemGetInfo(_v2), cuMemAlloc(_v2), cuMemAllocPitch(_v2) (pitch rounded up to 512 bytes),
 *   cuMemAllocManaged, cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz), cuDeviceGetDefaultMemPool,
 *   cuMemFree_v2, cuMemFreeAsync(_ptsz), cuMemCreate, cuMemRelease, cuArrayCreate_v2, cuArray3DCreate_v2,
 *   cuArrayDestroy, cuMipmappedArrayCreate, cuMipmappedArrayDestroy, and cuMemAlloc_v99: a made-up future variant,
 *   handed out by cuGetProcAddress("cuMemAlloc") at version 99000, so tests can see what an interposer does with a
 *   version it does not know.
 * cuGetProcAddress answers by (name, version, flags) as the real driver: the newest variant introduced at or before
 * the version asked, the _ptsz variant under CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM; a known name asked at
 * too old a version is CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.
 * FAKE_CUDA_PROCADDR=internal makes it hand out internal functions (not the exported ones) for the memory entry
 * points: a driver whose table differs from its exports, which an interposer must still catch.
 *
 * Device memory: an allocation fails with CUDA_ERROR_OUT_OF_MEMORY when the node's GPU has too little left
 * (FAKE_CUDA_STATE, shared with every process of every "pod"); a process's memory returns when it exits or dies.
 *
 * MPS client (/work/plan/fake-mps-protocol.md; the fake daemon is tests/support/fake_mps_control.c): in cuInit, if
 * $CUDA_MPS_PIPE_DIRECTORY/control (default /tmp/nvidia-mps/control) accepts a connection, the process registers
 * ("CLIENT <pid> <uid>", uid = $FAKE_CUDA_UID or geteuid()) and keeps the connection for its life. READY: it is a
 * client; WAIT (a server of another uid has clients): cuInit blocks until READY, as the real one does; REFUSED
 * max-clients: CUDA_ERROR_MPS_MAX_CLIENTS_REACHED (808), other refusals and a daemon gone later:
 * CUDA_ERROR_MPS_CONNECTION_FAILED (805). As a client it obeys CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * ("<dev>=<n>[K|M|G][B],..." with <dev> a device ordinal or UUID; NVIDIA's syntax, e.g. "0=1G,1=512M"): the
 * process's own allocations on that device beyond it fail with CUDA_ERROR_OUT_OF_MEMORY and cuMemGetInfo's free
 * shrinks to it (total stays the device's), the daemon's default limits applying where the variable names no
 * limit; and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: the SM count reported is the device's scaled by
 * min(that, the server's default), rounded up. A malformed variable fails cuInit (CUDA_ERROR_INVALID_VALUE) with
 * a line on stderr.
 */
#include "shim/cuda_api.h"
#include "shim/ledger.h"
#include "tests/support/fake_gpu.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The entry points beyond those the shim hooks (shim/cuda_api.h declares those). */
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *device);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
CUresult cuMemAlloc_v99(CUdeviceptr *dptr, size_t bytesize);

#define MIB (1024ull * 1024ull)
#define MAX_ALLOCS 4096

struct CUctx_st { int device; int primary; };
struct CUmemPoolHandle_st { int device; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static fake_gpu gpus[FAKE_GPU_MAX];
static int ngpus;
static struct CUctx_st primary[FAKE_GPU_MAX];
static struct CUmemPoolHandle_st pools[FAKE_GPU_MAX];
static __thread CUcontext current;
static ledger node;                     /* the node's memory, when FAKE_CUDA_STATE is set */
static int node_open;
static int ldev[FAKE_GPU_MAX];          /* ledger index of each visible GPU */
static unsigned long long own[FAKE_GPU_MAX]; /* this process's bytes per GPU (MPS pinned limits are per process) */

/* MPS client state */
static int mps_fd = -1;
static double mps_percent = 100.0;
static unsigned long long pinned[FAKE_GPU_MAX]; /* bytes; 0: no limit */

typedef struct alloc_rec { unsigned long long key; unsigned long long bytes; int dev, kind; } alloc_rec;
static alloc_rec allocs[MAX_ALLOCS];
static int nallocs;
static unsigned long long next_addr = 0x7f0000000000ull, next_handle = 1;

static CUresult say(CUresult rc, const char *fmt, const char *arg) {
    fprintf(stderr, "fake CUDA: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return rc;
}

/* ---- MPS client ------------------------------------------------------------------------------------------- */

/* "1G", "512M", "1024MB", "2048" (bytes): bytes, or 0 if malformed. */
static unsigned long long parse_size(const char *s, size_t n) {
    char buf[32];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf) return 0;
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024ull, end++;
    else if (*end == 'M' || *end == 'm') mult = MIB, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024ull * MIB, end++;
    else if (*end == 'T' || *end == 't') mult = 1024ull * 1024ull * MIB, end++;
    if (mult > 1 && (*end == 'B' || *end == 'b')) end++;
    return *end ? 0 : v * mult;
}

/* The visible device named by dev ("0", or a UUID); -1 if none. */
static int device_named(const char *dev, size_t n) {
    for (int i = 0; i < ngpus; i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        if ((strlen(idx) == n && !strncmp(idx, dev, n)) || (strlen(gpus[i].uuid) == n && !strncmp(gpus[i].uuid, dev, n)))
            return i;
    }
    return -1;
}

/* "<dev>=<size>,..." into pinned[]; units as parse_size, default unit M for the daemon's <MiB> list. */
static int apply_limits(const char *list, unsigned long long unit_if_bare) {
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ","), eq = strcspn(p, "=");
        if (eq >= n) return -1;
        const char *val = p + eq + 1;
        size_t vn = n - eq - 1;
        int bare = vn > 0 && val[vn - 1] >= '0' && val[vn - 1] <= '9';
        unsigned long long bytes = parse_size(val, vn);
        if (!bytes) return -1;
        if (bare) bytes *= unit_if_bare;
        int d = device_named(p, eq);
        if (d >= 0) pinned[d] = bytes;
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

static int read_line(int fd, char *buf, size_t len) {
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        if (buf[n] == '\n') break;
        n++;
    }
    buf[n] = 0;
    return 0;
}

static CUresult mps_connect(void) {
    const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (!dir || !*dir) dir = "/tmp/nvidia-mps";
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control", dir) >= sizeof sa.sun_path) return CUDA_SUCCESS;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return CUDA_SUCCESS;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd); /* no daemon: run without MPS, as the real driver does */
        return CUDA_SUCCESS;
    }
    const char *uid_env = getenv("FAKE_CUDA_UID");
    char hello[96], line[4096];
    snprintf(hello, sizeof hello, "CLIENT %d %s\n", (int)getpid(), uid_env && *uid_env ? uid_env : "");
    if (!(uid_env && *uid_env)) snprintf(hello, sizeof hello, "CLIENT %d %u\n", (int)getpid(), (unsigned)geteuid());
    if (write(fd, hello, strlen(hello)) != (ssize_t)strlen(hello)) {
        close(fd);
        return say(CUDA_ERROR_MPS_CONNECTION_FAILED, "%s", "the MPS control daemon closed the connection");
    }
    for (;;) {
        if (read_line(fd, line, sizeof line) < 0) {
            close(fd);
            return say(CUDA_ERROR_MPS_CONNECTION_FAILED, "%s", "the MPS control daemon closed the connection");
        }
        if (!strncmp(line, "WAIT ", 5)) continue; /* a server of another uid: block until ours starts */
        if (!strncmp(line, "REFUSED ", 8)) {
            close(fd);
            return say(!strncmp(line + 8, "max-clients", 11) ? CUDA_ERROR_MPS_MAX_CLIENTS_REACHED
                                                              : CUDA_ERROR_MPS_CONNECTION_FAILED,
                       "MPS refused this client: %s", line + 8);
        }
        if (!strncmp(line, "READY ", 6)) break;
        close(fd);
        return say(CUDA_ERROR_MPS_CONNECTION_FAILED, "unexpected answer from the MPS control daemon: %s", line);
    }
    int server;
    char pct[32], limits[3900];
    if (sscanf(line, "READY %d %31s %3899s", &server, pct, limits) != 3) {
        close(fd);
        return say(CUDA_ERROR_MPS_CONNECTION_FAILED, "malformed READY from the MPS control daemon: %s", line);
    }
    mps_percent = strtod(pct, NULL);
    if (strcmp(limits, "-") != 0 && apply_limits(limits, MIB) < 0) {
        close(fd);
        return say(CUDA_ERROR_MPS_CONNECTION_FAILED, "malformed pinned limits from the MPS control daemon: %s", limits);
    }
    const char *own_pct = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    if (own_pct && *own_pct) {
        char *end;
        double v = strtod(own_pct, &end);
        if (*end || v <= 0 || v > 100) {
            close(fd);
            return say(CUDA_ERROR_INVALID_VALUE, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is not in (0, 100]", own_pct);
        }
        if (v < mps_percent) mps_percent = v;
    }
    const char *own_lim = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    if (own_lim && *own_lim && apply_limits(own_lim, 1) < 0) {
        close(fd);
        return say(CUDA_ERROR_INVALID_VALUE, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s is not <dev>=<n>[K|M|G],...",
                   own_lim);
    }
    mps_fd = fd;
    return CUDA_SUCCESS;
}

/* A client whose daemon closed the connection has lost its server. */
static CUresult mps_check(void) {
    if (mps_fd < 0) return CUDA_SUCCESS;
    struct pollfd p = {mps_fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
        char c;
        if (recv(mps_fd, &c, 1, MSG_DONTWAIT) <= 0) return CUDA_ERROR_MPS_CONNECTION_FAILED;
    }
    return CUDA_SUCCESS;
}

/* ---- init, devices, contexts ----------------------------------------------------------------------------- */

/* Apply CUDA_VISIBLE_DEVICES to gpus[] */
static void cuda_visible(void) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (!v) return;
    fake_gpu keep[FAKE_GPU_MAX];
    int n = 0;
    for (const char *p = v; *p && n < FAKE_GPU_MAX;) {
        size_t l = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < ngpus && found < 0; i++) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", i);
            if ((strlen(idx) == l && !strncmp(p, idx, l)) || (l >= 8 && !strncmp(gpus[i].uuid, p, l))) found = i;
        }
        if (found < 0) break;
        keep[n++] = gpus[found];
        p += l;
        if (*p == ',') p++;
    }
    memcpy(gpus, keep, sizeof keep);
    ngpus = n;
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    CUresult rc = CUDA_SUCCESS;
    if (!initialized) {
        char why[300];
        ngpus = fake_gpus(gpus, why, sizeof why);
        if (ngpus < 0) {
            rc = say(CUDA_ERROR_NO_DEVICE, "%s", why);
            ngpus = 0;
        } else {
            cuda_visible();
            if (ngpus == 0) rc = CUDA_ERROR_NO_DEVICE;
        }
        const char *state = getenv("FAKE_CUDA_STATE");
        if (!rc && state && *state) {
            if (ledger_open(&node, state, why, sizeof why) < 0) rc = say(CUDA_ERROR_NOT_INITIALIZED, "%s", why);
            else node_open = 1;
            for (int i = 0; !rc && i < ngpus; i++) ldev[i] = ledger_device(&node, gpus[i].uuid);
        }
        for (int i = 0; i < ngpus; i++) {
            primary[i] = (struct CUctx_st){i, 1};
            pools[i].device = i;
        }
        if (!rc) rc = mps_connect();
        if (!rc) initialized = 1;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

#define NEED_INIT() do { if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define NEED_DEV(d) do { NEED_INIT(); if ((d) < 0 || (d) >= ngpus) return CUDA_ERROR_INVALID_DEVICE; } while (0)

CUresult cuDeviceGetCount(int *count) {
    NEED_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = ngpus;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    NEED_DEV(ordinal);
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    NEED_DEV(dev);
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "Tessera Fake GPU %llu MiB", gpus[dev].mib);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    NEED_DEV(dev);
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
        double sms = gpus[dev].sms * (mps_fd >= 0 ? mps_percent : 100.0) / 100.0;
        int n = (int)sms;
        *pi = n < sms ? n + 1 : n < 1 ? 1 : n;
    } else if (attrib == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) {
        *pi = 8;
    } else {
        *pi = 0;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    NEED_DEV(dev);
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    fake_gpu_uuid_bytes(gpus[dev].uuid, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    NEED_DEV(dev);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)(gpus[dev].mib * MIB);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    size_t b;
    CUresult rc = cuDeviceTotalMem_v2(&b, dev);
    if (!rc && bytes) *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
    return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    NEED_DEV(dev);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = &primary[dev];
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    NEED_DEV(dev);
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    NEED_DEV(dev);
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = malloc(sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct CUctx_st){dev, 0};
    *pctx = current = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
    NEED_INIT();
    if (!ctx || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
    if (current == ctx) current = NULL;
    free(ctx);
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    NEED_INIT();
    current = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
    NEED_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = current;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
    NEED_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *device = current->device;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    NEED_DEV(dev);
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    *pool = &pools[dev];
    return CUDA_SUCCESS;
}

/* ---- memory ----------------------------------------------------------------------------------------------- */

enum { K_PTR = 1, K_VMM, K_ARRAY, K_MIPMAP };

static unsigned long long node_used(int d) {
    if (!node_open) return own[d];
    return ledger_used(&node, ldev[d]).used;
}

/* Take bytes on device d for this process; the key to remember the allocation by is chosen here. */
static CUresult take(int d, unsigned long long bytes, int kind, unsigned long long *key) {
    CUresult rc = mps_check();
    if (rc) return rc;
    if (d < 0 || d >= ngpus) return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    unsigned long long total = gpus[d].mib * MIB;
    bool ok = nallocs < MAX_ALLOCS && (!pinned[d] || (own[d] <= pinned[d] && bytes <= pinned[d] - own[d]));
    if (ok) {
        if (node_open) ok = ledger_reserve(&node, ldev[d], bytes, total, NULL);
        else ok = own[d] <= total && bytes <= total - own[d];
    }
    if (ok) {
        own[d] += bytes;
        *key = kind == K_PTR ? next_addr : next_handle++;
        if (kind == K_PTR) next_addr += (bytes + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
        allocs[nallocs++] = (alloc_rec){*key, bytes, d, kind};
    }
    pthread_mutex_unlock(&mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult give(unsigned long long key, int kind) {
    NEED_INIT();
    pthread_mutex_lock(&mu);
    CUresult rc = kind == K_PTR ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < nallocs; i++) {
        if (allocs[i].key != key || allocs[i].kind != kind) continue;
        own[allocs[i].dev] -= allocs[i].bytes;
        if (node_open) ledger_release(&node, ldev[allocs[i].dev], allocs[i].bytes);
        allocs[i] = allocs[--nallocs];
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

static CUresult current_dev(int *d) {
    NEED_INIT();
    if (!current) return CUDA_ERROR_INVALID_CONTEXT;
    *d = current->device;
    return CUDA_SUCCESS;
}

static CUresult alloc_ptr(CUdeviceptr *dptr, unsigned long long bytes) {
    int d;
    CUresult rc = current_dev(&d);
    if (rc) return rc;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    unsigned long long key;
    rc = take(d, bytes, K_PTR, &key);
    if (!rc) *dptr = key;
    return rc;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) { return alloc_ptr(dptr, bytesize); }
CUresult cuMemAlloc_v99(CUdeviceptr *dptr, size_t bytesize) { return alloc_ptr(dptr, bytesize); }

CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize) {
    CUdeviceptr p;
    CUresult rc = alloc_ptr(&p, bytesize);
    if (!rc && dptr) *dptr = (unsigned int)(p >> 20); /* a 32-bit stand-in: nobody dereferences it */
    return rc;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
    if (!pPitch || !WidthInBytes || !Height || (ElementSizeBytes != 4 && ElementSizeBytes != 8 &&
                                                ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) / 512 * 512;
    CUresult rc = alloc_ptr(dptr, (unsigned long long)pitch * Height);
    if (!rc) *pPitch = pitch;
    return rc;
}

CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes) {
    CUdeviceptr p;
    size_t pitch;
    CUresult rc = cuMemAllocPitch_v2(&p, &pitch, WidthInBytes, Height, ElementSizeBytes);
    if (!rc) {
        if (dptr) *dptr = (unsigned int)(p >> 20);
        if (pPitch) *pPitch = (unsigned int)pitch;
    }
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != 2 /* CU_MEM_ATTACH_HOST */) return CUDA_ERROR_INVALID_VALUE;
    return alloc_ptr(dptr, bytesize);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) { return alloc_ptr(dptr, bytesize); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return alloc_ptr(dptr, bytesize);
}

static CUresult alloc_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool) {
    NEED_INIT();
    if (!pool || !dptr) return CUDA_ERROR_INVALID_VALUE;
    unsigned long long key;
    CUresult rc = take(pool->device, bytesize, K_PTR, &key);
    if (!rc) *dptr = key;
    return rc;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return alloc_pool(dptr, bytesize, pool);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return alloc_pool(dptr, bytesize, pool);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { return give(dptr, K_PTR); }
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return give(dptr, K_PTR); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return give(dptr, K_PTR); }

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
    NEED_INIT();
    if (!handle || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || size % (2 * MIB))
        return CUDA_ERROR_INVALID_VALUE; /* the granularity of device memory is 2 MiB */
    unsigned long long key;
    CUresult rc = take(prop->location.id, size, K_VMM, &key);
    if (!rc) *handle = key;
    return rc;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return give(handle, K_VMM); }

static unsigned format_size(int format) {
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static CUresult alloc_array(void **handle, size_t w, size_t h, size_t depth, int format, unsigned ch, unsigned levels,
                            int kind) {
    int d;
    CUresult rc = current_dev(&d);
    if (rc) return rc;
    unsigned elem = format_size(format);
    if (!handle || !w || !elem || (ch != 1 && ch != 2 && ch != 4)) return CUDA_ERROR_INVALID_VALUE;
    unsigned long long bytes = 0;
    for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
        unsigned long long lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = depth >> l ? depth >> l : 1;
        bytes += lw * (h ? lh : 1) * (depth ? ld : 1) * elem * ch;
    }
    unsigned long long key;
    rc = take(d, bytes, kind, &key);
    if (!rc) *handle = (void *)(uintptr_t)key;
    return rc;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
    if (!desc) return CUDA_ERROR_INVALID_VALUE;
    return alloc_array((void **)pHandle, desc->Width, desc->Height, 0, desc->Format, desc->NumChannels, 1, K_ARRAY);
}
CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
    if (!desc) return CUDA_ERROR_INVALID_VALUE;
    return alloc_array((void **)pHandle, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, 1,
                       K_ARRAY);
}
CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels) {
    if (!desc || !levels) return CUDA_ERROR_INVALID_VALUE;
    return alloc_array((void **)pHandle, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels,
                       levels, K_MIPMAP);
}
CUresult cuArrayDestroy(CUarray h) { return give((uintptr_t)h, K_ARRAY); }
CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) { return give((uintptr_t)h, K_MIPMAP); }

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    int d;
    CUresult rc = current_dev(&d);
    if (rc) return rc;
    if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    unsigned long long t = gpus[d].mib * MIB, used = node_used(d), f = used < t ? t - used : 0;
    if (pinned[d]) {
        unsigned long long left = own[d] < pinned[d] ? pinned[d] - own[d] : 0;
        if (f > left) f = left;
    }
    pthread_mutex_unlock(&mu);
    *free = (size_t)f;
    *total = (size_t)t;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
    size_t f, t;
    CUresult rc = cuMemGetInfo_v2(&f, &t);
    if (!rc) {
        if (free) *free = f > 0xffffffffu ? 0xffffffffu : (unsigned int)f;
        if (total) *total = t > 0xffffffffu ? 0xffffffffu : (unsigned int)t;
    }
    return rc;
}

/* ---- cuGetProcAddress ------------------------------------------------------------------------------------- */

/* FAKE_CUDA_PROCADDR=internal: these (not the exports) are what cuGetProcAddress hands out. */
static CUresult in_cuMemAlloc_v2(CUdeviceptr *p, size_t b) { return cuMemAlloc_v2(p, b); }
static CUresult in_cuMemFree_v2(CUdeviceptr p) { return cuMemFree_v2(p); }
static CUresult in_cuMemGetInfo_v2(size_t *f, size_t *t) { return cuMemGetInfo_v2(f, t); }
static CUresult in_cuMemAllocAsync(CUdeviceptr *p, size_t b, CUstream s) { return cuMemAllocAsync(p, b, s); }
static CUresult in_cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t b, CUstream s) { return cuMemAllocAsync_ptsz(p, b, s); }
static CUresult in_cuMemFreeAsync(CUdeviceptr p, CUstream s) { return cuMemFreeAsync(p, s); }
static CUresult in_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return cuMemFreeAsync_ptsz(p, s); }
static CUresult in_cuMemCreate(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p,
                               unsigned long long f) {
    return cuMemCreate(h, s, p, f);
}
static CUresult in_cuMemRelease(CUmemGenericAllocationHandle h) { return cuMemRelease(h); }
static CUresult in_cuDeviceTotalMem_v2(size_t *b, CUdevice d) { return cuDeviceTotalMem_v2(b, d); }

typedef struct proc {
    const char *name;
    int version, ptsz;
    void *fn, *internal;
} proc;

#define P(name, ver, fn) {name, ver, 0, (void *)fn, NULL}
#define PI(name, ver, fn) {name, ver, 0, (void *)fn, (void *)in_##fn}
#define PT(name, ver, fn) {name, ver, 1, (void *)fn, (void *)in_##fn}
static const proc procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    PI("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuMemGetInfo", 2000, cuMemGetInfo),
    PI("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAlloc", 2000, cuMemAlloc),
    PI("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAlloc", 99000, cuMemAlloc_v99),
    P("cuMemAllocPitch", 2000, cuMemAllocPitch),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    PI("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    P("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    {"cuMemAllocFromPoolAsync", 11020, 1, (void *)cuMemAllocFromPoolAsync_ptsz, NULL},
    PI("cuMemFree", 3020, cuMemFree_v2),
    PI("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    PI("cuMemCreate", 10020, cuMemCreate),
    PI("cuMemRelease", 10020, cuMemRelease),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
};

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const char *internal = getenv("FAKE_CUDA_PROCADDR");
    int use_internal = internal && !strcmp(internal, "internal");
    const proc *best = NULL;
    int known = 0;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        const proc *p = &procs[i];
        if (strcmp(p->name, symbol) != 0) continue;
        known = 1;
        if (p->version > version) continue;
        /* the _ptsz variant when asked for per-thread streams, the plain one otherwise */
        if (p->ptsz && !want_ptsz) continue;
        if (!best || p->version > best->version || (p->version == best->version && p->ptsz)) best = p;
    }
    if (!best) {
        if (status) *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = use_internal && best->internal ? best->internal : best->fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, int *symbolStatus) {
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
