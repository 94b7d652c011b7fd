/* shim.c -- libtessera-cuda.so: a soft share's GPU memory limit, enforced inside the pod across all its processes,
 * and the share shown as the device's memory.
 *
 * WHAT IT DOES
 * A pod that holds a soft share gets TESSERA_GPU_MEMORY_MIB (its charged memory, per visible GPU) from its
 * delivery ConfigMap, and this library preloaded into every process through /etc/ld.so.preload (tessera-reserve
 * --install-shim; /opt/tessera and the preload file are mounted read-only in the application containers, so no
 * process of the pod can swap the library for the others). Each allocation through the CUDA driver API is checked against the pod's total on that GPU,
 * summed over every process of every container of the pod: within the share it goes to the driver, past it the
 * call returns CUDA_ERROR_OUT_OF_MEMORY (2) with one line on stderr. cuMemGetInfo, cuDeviceTotalMem and NVML's
 * nvmlDeviceGetMemoryInfo/_v2 report the share as the device's total, so frameworks that size their pools from the
 * free memory (TensorFlow, JAX preallocation, PyTorch's caching allocator) size them to the share.
 * Without TESSERA_GPU_MEMORY_MIB the library is a pure pass-through: no lookup is mapped, no file opened but the
 * configuration directory's listing, once.
 *
 * WHERE THE LIMIT COMES FROM (shim/share.h)
 *   1. <libdir>/../config/TESSERA_GPU_MEMORY_MIB when that directory holds anything: in a pod, the delivery
 *      ConfigMap that the webhook mounts read-only at /opt/tessera/config. Then the environment is not read at all:
 *      `env -u TESSERA_GPU_MEMORY_MIB prog`, or a shell that unsets it, changes nothing.
 *   2. Otherwise (the directory empty or absent: tests, the library used outside a pod) the environment's
 *      TESSERA_GPU_MEMORY_MIB, which the same ConfigMap delivers to the containers through envFrom.
 * Whoever may edit ConfigMaps in the pod's namespace can still change the share's ConfigMap; the kubelet then
 * updates the mounted file, which a process reads once, at its first hooked call.
 *
 * MECHANISM, AND WHY THIS ONE
 * An interposer over the driver API (libcuda.so.1), as HAMi-core does, rather than MPS pinned-memory limits alone:
 * it works on every node the GPU operator sets up (no MPS daemon, no hostPath, nothing privileged: the library
 * arrives in an emptyDir from an init container, so it runs under Pod Security baseline and restricted), it limits
 * the pod as a whole rather than each process (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is per client process), and it
 * changes what the device reports. MPS shares get both: the driver-enforced per-process pinned limit and this.
 * Every way a process reaches the driver is covered:
 *   1. symbols bound at load time (a program linked with -lcuda or -lnvidia-ml): the preloaded library's exported
 *      hooks come first in the global scope, so they win;
 *   2. dlopen("libcuda.so.1") + dlsym(handle, name) (TensorFlow, Triton, PyTorch's driver API use, pynvml), which
 *      preloading does not reach: the library exports dlsym (shim/dlsym.S), calls glibc's and maps the answer;
 *   3. cuGetProcAddress / cuGetProcAddress_v2 (NVIDIA's runtime, libcudart: it dlopens libcuda.so.1, takes
 *      cuGetProcAddress with dlsym on that handle, then asks it for every entry point by name, CUDA version and
 *      flags), both signatures: the hooks call the driver's and map its answer.
 * Mapping is by ADDRESS, not by name and version tables (HAMi-core's way): the real functions behind each hook are
 * found once (dlsym on the driver's handle, plus whatever the driver's own cuGetProcAddress hands out for each
 * variant at the version that introduced it), and any answer equal to one of them becomes the hook. Every alias,
 * version number and flag the driver maps to a hooked function is covered without the shim knowing it. An answer
 * that is a variant of an allocation entry point the shim does not know (say a future cuMemAlloc_v3) is refused
 * (CUDA_ERROR_NOT_FOUND / NULL, and a stderr line): the shim fails loudly rather than let memory escape.
 * The dlsym interposer jumps into glibc's dlsym for RTLD_NEXT and RTLD_DEFAULT with the caller's return address
 * intact, since glibc answers those relative to the caller (other interposers that use dlsym(RTLD_NEXT) keep working).
 *
 * ACROSS PROCESSES AND CONTAINERS OF ONE POD
 * The accounting is a file, state/memory.v1 beside the library's lib/ directory (found with dladdr): in a pod
 * /opt/tessera/state/, one emptyDir every container of the pod mounts, never shared with another pod. Containers
 * have their own PID namespaces, so liveness is an OFD lock per process that the kernel drops when the process dies;
 * a killed process's memory is given back by the next process that looks (shim/ledger.h). Check-and-reserve happens
 * under a lock on the file, so two processes never both pass the limit. A fork child starts with nothing: it closes
 * its inherited copy of the parent's file description and empties the allocation table.
 *
 * WHAT IS COUNTED (per device, in bytes as requested)
 *   cuMemAlloc_v2, cuMemAllocPitch_v2 (pitch x height), cuMemAllocManaged (on the current device),
 *   cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz) (on the current device), cuMemCreate on a device
 *   location (VMM, PyTorch's expandable segments), cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate
 *   (elements x channels x element size, every mip level); given back by cuMemFree_v2, cuMemFreeAsync(_ptsz),
 *   cuMemRelease, cuArrayDestroy, cuMipmappedArrayDestroy.
 * WHAT IS NOT COUNTED
 *   - Context memory: each process's CUDA context takes device memory (hundreds of MiB: code, stacks, printf and
 *     malloc heaps) the driver never reports as an allocation. A share must leave room for it; tests/gpu/run.sh
 *     measures it on a real GPU.
 *   - Memory a stream-ordered pool keeps after its allocations are freed (a release threshold above 0), and the
 *     driver's rounding of each allocation to its page size.
 *   - Memory freed by destroying a context (cuCtxDestroy, cuDevicePrimaryCtxReset: cudaDeviceReset) stays counted
 *     until the process exits.
 *   - Host memory (cuMemAllocHost, cuMemHostAlloc, host-located cuMemCreate) is not device memory.
 *   - The CUDA 3.1 entry points with 32-bit sizes: looked up at run time they are refused as unknown variants;
 *     bound at link time, cuMemAlloc and cuMemAllocPitch are refused (CUDA_ERROR_NOT_SUPPORTED), cuArrayCreate and
 *     cuArray3DCreate are not seen.
 * The shim is a guard against frameworks that take the whole GPU, not a security boundary: a static binary, a
 * program that loads its own copy of libcuda.so.1 under another name, or raw ioctls on /dev/nvidia* bypass any
 * preloaded library, read-only mounts or not. Under MPS the driver's pinned-memory limit is the hard bound.
 *
 * COST
 * No constructor, no thread, no file until the first hooked call; the dlsym wrapper adds a compare and a jump.
 * tests/bench/bench_shim.c measures both.
 */
#include "shim/glibc.h"

#include "shim/cuda_api.h"
#include "shim/ledger.h"
#include "shim/resolve.h"
#include "shim/share.h"
#include "shim/track.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MIB (1024ull * 1024ull)
#define MAX_ORDINALS 64

/* ---- enforcement state ------------------------------------------------------------------------------------ */

/* mu serialises this process's threads over the ledger and the allocation table. It is never held across a call
 * into the driver or the loader (a driver that called back into a hook would deadlock). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int state;                       /* atomic: 0 not started, 1 enforcing, -1 cannot enforce */
static char broken[600];
static int said_broken;
static ledger led = {-1, NULL, -1};
static int atfork_registered;
static int ord_dev[MAX_ORDINALS];       /* atomic: ledger device + 1 of a CUdevice, 0 unknown */
static char ord_uuid[MAX_ORDINALS][LEDGER_UUID_LEN];

/* The fork child shares the parent's open file description of the ledger, hence the parent's slot lock: it closes
 * its copy (the parent keeps the description open, so the lock stays) and forgets the parent's allocations. */
static void fork_prepare(void) { pthread_mutex_lock(&mu); }
static void fork_parent(void) { pthread_mutex_unlock(&mu); }
static void fork_child(void) {
    ledger_close(&led);
    track_clear();
    memset(ord_dev, 0, sizeof ord_dev);
    state = 0;
    pthread_mutex_unlock(&mu);
}

/* <directory of this library>/../state/memory.v1 */
static bool state_path(char *out, size_t len) {
    Dl_info info;
    if (!dladdr((void *)shim_enforcing, &info) || !info.dli_fname) return false;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(out, len, "../state/memory.v1");
    else {
        *slash = 0;
        snprintf(out, len, "%s/../state/memory.v1", dir);
    }
    return true;
}

static void mark_broken(const char *why) {
    snprintf(broken, sizeof broken, "%.*s", (int)sizeof broken - 1, why);
    __atomic_store_n(&state, -1, __ATOMIC_RELEASE);
}

static void start_locked(void) {
    if (shim_share_error()[0]) {
        mark_broken(shim_share_error());
        return;
    }
    char path[PATH_MAX + 32], why[PATH_MAX + 200];
    if (!state_path(path, sizeof path)) {
        mark_broken("the library cannot find its own path (dladdr), hence its state directory");
        return;
    }
    if (ledger_open(&led, path, why, sizeof why) < 0) {
        char msg[sizeof why + 64];
        snprintf(msg, sizeof msg, "the pod's memory ledger is unusable: %s", why);
        mark_broken(msg);
        return;
    }
    if (!atfork_registered) {
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        atfork_registered = 1;
    }
    memset(ord_dev, 0, sizeof ord_dev);
    __atomic_store_n(&state, 1, __ATOMIC_RELEASE);
}

/* CUDA_SUCCESS once the ledger is open; otherwise CUDA_ERROR_SYSTEM_NOT_READY ("the system is not ready to start
 * CUDA work": the closest code to "this pod's enforcement did not start") and, once per process, the reason. */
static CUresult ready(void) {
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        pthread_mutex_lock(&mu);
        if (state == 0) start_locked();
        s = state;
        pthread_mutex_unlock(&mu);
    }
    if (s > 0) return CUDA_SUCCESS;
    if (!__atomic_exchange_n(&said_broken, 1, __ATOMIC_ACQ_REL))
        shim_say("this pod's GPU memory share cannot be enforced: %s; CUDA fails with CUDA_ERROR_SYSTEM_NOT_READY "
                 "(802) rather than run unenforced", broken);
    return CUDA_ERROR_SYSTEM_NOT_READY;
}

/* ready(), and the driver loaded with the entry points the shim itself needs. */
static CUresult ready_cuda(void) {
    CUresult rc = ready();
    if (rc) return rc;
    char why[300];
    if (!shim_cuda_loaded(why, sizeof why)) {
        char msg[sizeof why + 40];
        snprintf(msg, sizeof msg, "the driver did not load: %s", why);
        mark_broken(msg);
        return ready();
    }
    static const int need[] = {R_cuMemAlloc_v2, R_cuMemFree_v2, R_cuMemGetInfo_v2, R_cuCtxGetDevice, R_cuDeviceGet};
    static const char *const names[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2", "cuCtxGetDevice",
                                        "cuDeviceGet"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (shim_real(need[i])) continue;
        char msg[120];
        snprintf(msg, sizeof msg, "the driver (libcuda.so.1) has no %s", names[i]);
        mark_broken(msg);
        return ready();
    }
    if (!shim_real(R_cuDeviceGetUuid_v2) && !shim_real(R_cuDeviceGetUuid)) {
        mark_broken("the driver (libcuda.so.1) has no cuDeviceGetUuid");
        return ready();
    }
    return CUDA_SUCCESS;
}

static void format_uuid(const CUuuid *u, char *out, size_t len) {
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* The ledger's index of CUdevice d (keyed by UUID: CUDA_VISIBLE_DEVICES may renumber devices per process, the UUID
 * is the same in every container), its UUID in uuid; -1 with *rc the error to return. */
static int ledger_dev_of(CUdevice d, char uuid[LEDGER_UUID_LEN], CUresult *rc) {
    if (d >= 0 && d < MAX_ORDINALS) {
        int v = __atomic_load_n(&ord_dev[d], __ATOMIC_ACQUIRE);
        if (v) {
            memcpy(uuid, ord_uuid[d], LEDGER_UUID_LEN);
            return v - 1;
        }
    }
    CUresult (*get)(CUuuid *, CUdevice) = shim_real(R_cuDeviceGetUuid_v2);
    if (!get) get = shim_real(R_cuDeviceGetUuid);
    CUuuid u;
    *rc = get(&u, d);
    if (*rc) return -1;
    format_uuid(&u, uuid, LEDGER_UUID_LEN);
    pthread_mutex_lock(&mu);
    int idx = state > 0 ? ledger_device(&led, uuid) : -1;
    if (idx >= 0 && d >= 0 && d < MAX_ORDINALS) {
        memcpy(ord_uuid[d], uuid, LEDGER_UUID_LEN);
        __atomic_store_n(&ord_dev[d], idx + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
    if (idx < 0) {
        shim_say("cannot account for %s: this pod's memory ledger already tracks %d devices", uuid, LEDGER_DEVS);
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    return idx;
}

static CUresult current_device(CUdevice *d) {
    CUresult (*get)(CUdevice *) = shim_real(R_cuCtxGetDevice);
    return get ? get(d) : CUDA_ERROR_NOT_INITIALIZED;
}

static void size_text(unsigned long long bytes, char *out, size_t len) {
    if (bytes >= MIB) snprintf(out, len, "%llu MiB", (bytes + MIB - 1) / MIB);
    else snprintf(out, len, "%llu bytes", bytes);
}

/* Reserve bytes for fn on device d (or the current context's device): CUDA_SUCCESS and *ldev, or the error to
 * return, the refusal said on stderr. */
static CUresult reserve(const char *fn, CUdevice d, bool current, unsigned long long bytes, int *ldev) {
    CUresult rc = ready_cuda();
    if (rc) return rc;
    if (current && (rc = current_device(&d)) != CUDA_SUCCESS) return rc;
    char uuid[LEDGER_UUID_LEN];
    int dev = ledger_dev_of(d, uuid, &rc);
    if (dev < 0) return rc;
    ledger_usage seen = {0, 0};
    pthread_mutex_lock(&mu);
    bool ok = state > 0 && ledger_reserve(&led, dev, bytes, shim_share_mib() * MIB, &seen);
    pthread_mutex_unlock(&mu);
    if (ok) {
        *ldev = dev;
        return CUDA_SUCCESS;
    }
    char want[40];
    size_text(bytes, want, sizeof want);
    if (seen.procs < 0)
        shim_say("%s of %s refused on %s: this pod's memory ledger could not be locked", fn, want, uuid);
    else
        shim_say("%s of %s refused on %s: this pod's share is %llu MiB, %llu MiB in use by %d process%s", fn, want,
                 uuid, shim_share_mib(), (unsigned long long)((seen.used + MIB - 1) / MIB), seen.procs,
                 seen.procs == 1 ? "" : "es");
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void give_back(int dev, unsigned long long bytes) {
    pthread_mutex_lock(&mu);
    if (state > 0) ledger_release(&led, dev, bytes);
    pthread_mutex_unlock(&mu);
}

/* The driver freed what key held: undo the allocation fully (used when remembering it failed). */
static void driver_free(int kind, unsigned long long key) {
    if (kind == TRACK_PTR) {
        CUresult (*f)(CUdeviceptr) = shim_real(R_cuMemFree_v2);
        if (f) f(key);
    } else if (kind == TRACK_VMM) {
        CUresult (*f)(CUmemGenericAllocationHandle) = shim_real(R_cuMemRelease);
        if (f) f(key);
    } else if (kind == TRACK_ARRAY) {
        CUresult (*f)(CUarray) = shim_real(R_cuArrayDestroy);
        if (f) f((CUarray)(uintptr_t)key);
    } else {
        CUresult (*f)(CUmipmappedArray) = shim_real(R_cuMipmappedArrayDestroy);
        if (f) f((CUmipmappedArray)(uintptr_t)key);
    }
}

/* After the driver answered an allocation that reserved bytes on dev: remember it, or give the bytes back. */
static CUresult settle(CUresult rc, int kind, unsigned long long key, int dev, unsigned long long bytes) {
    if (rc != CUDA_SUCCESS) {
        give_back(dev, bytes);
        return rc;
    }
    int odev;
    uint64_t obytes;
    pthread_mutex_lock(&mu);
    /* a key still remembered was freed behind the shim's back (a context destroyed): its bytes go first */
    if (track_take(kind, key, &odev, &obytes) && state > 0) ledger_release(&led, odev, obytes);
    bool ok = track_put(kind, key, dev, bytes);
    pthread_mutex_unlock(&mu);
    if (ok) return CUDA_SUCCESS;
    driver_free(kind, key);
    give_back(dev, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Before a free: take the allocation out of the table (so that a thread that gets the same address back from the
 * driver meanwhile cannot be confused with it). After: give its bytes back, or put it back if the driver refused. */
typedef struct taken { bool held; int dev; uint64_t bytes; } taken;
static taken untrack(int kind, unsigned long long key) {
    taken t = {false, 0, 0};
    pthread_mutex_lock(&mu);
    t.held = track_take(kind, key, &t.dev, &t.bytes);
    pthread_mutex_unlock(&mu);
    return t;
}
static CUresult freed(CUresult rc, int kind, unsigned long long key, taken t) {
    if (!t.held) return rc;
    pthread_mutex_lock(&mu);
    if (rc == CUDA_SUCCESS) {
        if (state > 0) ledger_release(&led, t.dev, t.bytes);
    } else if (!track_put(kind, key, t.dev, t.bytes) && state > 0) {
        ledger_release(&led, t.dev, t.bytes);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

/* What the device reports: total = the share (or the device, if smaller), free = the smaller of the device's free
 * memory and what the share has left. */
static void share_view(unsigned long long used, unsigned long long *free, unsigned long long *total) {
    unsigned long long share = shim_share_mib() * MIB;
    unsigned long long t = *total < share ? *total : share;
    unsigned long long left = t > used ? t - used : 0;
    *total = t;
    if (*free > left) *free = left;
}

static unsigned long long pod_use(int dev) {
    pthread_mutex_lock(&mu);
    ledger_usage u = state > 0 ? ledger_used(&led, dev) : (ledger_usage){0, 0};
    pthread_mutex_unlock(&mu);
    return u.used;
}

/* ---- MPS shares ------------------------------------------------------------------------------------------- */

/* An MPS share (the delivered configuration names CUDA_MPS_PIPE_DIRECTORY) is held to its compute and pinned-memory
 * limits by the driver, which reads them from the process's environment, not from the shim's files: a process that
 * dropped them, or finds no daemon, would run as a plain CUDA process with neither limit. cuInit fails then: 802
 * when a variable differs from the delivered value, CUDA_ERROR_MPS_CONNECTION_FAILED (805) when nothing accepts a
 * connection at $CUDA_MPS_PIPE_DIRECTORY/control (the control daemon's socket; the driver itself connects there to
 * become a client). Only under a delivered configuration: from the environment alone nothing says what was
 * delivered. The pipe directory itself is not compared with the delivered path (the fake kubelet rewrites paths in
 * the environment, not in files); that a process may name another GPU's daemon is a known gap. */
static CUresult mps_ready(void) {
    char want[PATH_MAX], v[256];
    if (!shim_config_delivered() || !shim_config("CUDA_MPS_PIPE_DIRECTORY", want, sizeof want)) return CUDA_SUCCESS;
    static const char *const limits[] = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        if (!shim_config(limits[i], v, sizeof v)) continue;
        const char *e = getenv(limits[i]);
        if (e && !strcmp(e, v)) continue;
        shim_say("this pod's share is an MPS client whose %s is \"%.60s\" (%s), and this process's is %s%.60s%s: the "
                 "driver would not hold it to the share's limits; CUDA fails with CUDA_ERROR_SYSTEM_NOT_READY (802)",
                 limits[i], v, shim_config_source(), e ? "\"" : "unset", e ? e : "", e ? "\"" : "");
        return CUDA_ERROR_SYSTEM_NOT_READY;
    }
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = -1, ok = 0;
    char why[128] = "CUDA_MPS_PIPE_DIRECTORY unset";
    if (pipe && *pipe) {
        errno = ENAMETOOLONG;
        if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control", pipe) < sizeof sa.sun_path &&
            (fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0)
            ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        snprintf(why, sizeof why, "%s", strerror(errno));
    }
    if (fd >= 0) close(fd);
    if (ok) return CUDA_SUCCESS;
    shim_say("this pod's share is an MPS client, and no MPS control daemon answers at %.200s/control (%s); CUDA fails "
             "with CUDA_ERROR_MPS_CONNECTION_FAILED (805) rather than run outside MPS with no compute limit",
             pipe && *pipe ? pipe : want, why);
    return CUDA_ERROR_MPS_CONNECTION_FAILED;
}

/* ---- the hooks -------------------------------------------------------------------------------------------- */

#define REAL(e, type) ((type)shim_real(R_##e))
#define NO_DRIVER CUDA_ERROR_NOT_INITIALIZED

EXPORT CUresult cuInit(unsigned int flags) {
    CUresult (*f)(unsigned int) = REAL(cuInit, CUresult (*)(unsigned int));
    if (shim_enforcing()) {
        CUresult rc = ready_cuda();
        if (!rc) rc = mps_ready();
        if (rc) return rc;
    }
    return f ? f(flags) : NO_DRIVER;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    CUresult (*f)(const char *, void **, int, cuuint64_t) =
        REAL(cuGetProcAddress, CUresult (*)(const char *, void **, int, cuuint64_t));
    if (!f) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = f(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && shim_enforcing()) {
        *pfn = shim_map(*pfn, symbol, cudaVersion);
        if (!*pfn) rc = CUDA_ERROR_NOT_FOUND;
    }
    return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    int *symbolStatus) {
    CUresult (*f)(const char *, void **, int, cuuint64_t, int *) =
        REAL(cuGetProcAddress_v2, CUresult (*)(const char *, void **, int, cuuint64_t, int *));
    if (!f) return CUDA_ERROR_NOT_FOUND;
    CUresult rc = f(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && shim_enforcing()) {
        *pfn = shim_map(*pfn, symbol, cudaVersion);
        if (!*pfn) {
            rc = CUDA_ERROR_NOT_FOUND;
            if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        }
    }
    return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    CUresult (*f)(CUdeviceptr *, size_t) = REAL(cuMemAlloc_v2, CUresult (*)(CUdeviceptr *, size_t));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !dptr || !bytesize) return f(dptr, bytesize); /* bad arguments: the driver's answer */
    int dev;
    CUresult rc = reserve("cuMemAlloc", 0, true, bytesize, &dev);
    if (rc) return rc;
    rc = f(dptr, bytesize);
    return settle(rc, TRACK_PTR, rc ? 0 : *dptr, dev, bytesize);
}

/* The driver rounds the pitch up to its alignment (at most 512 bytes on every GPU so far): reserve for that, then
 * settle on pitch x height. */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                   unsigned int ElementSizeBytes) {
    CUresult (*f)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int) =
        REAL(cuMemAllocPitch_v2, CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !dptr || !pPitch || !WidthInBytes || !Height)
        return f(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    unsigned long long want = ((unsigned long long)WidthInBytes + 511) / 512 * 512 * Height;
    int dev;
    CUresult rc = reserve("cuMemAllocPitch", 0, true, want, &dev);
    if (rc) return rc;
    rc = f(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (rc == CUDA_SUCCESS) {
        unsigned long long got = (unsigned long long)*pPitch * Height;
        if (got < want) give_back(dev, want - got);
        else if (got > want) {
            int extra_dev;
            CUresult more = reserve("cuMemAllocPitch", 0, true, got - want, &extra_dev);
            if (more) {
                driver_free(TRACK_PTR, *dptr);
                give_back(dev, want);
                return more;
            }
        }
        want = got;
    }
    return settle(rc, TRACK_PTR, rc ? 0 : *dptr, dev, want);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    CUresult (*f)(CUdeviceptr *, size_t, unsigned int) =
        REAL(cuMemAllocManaged, CUresult (*)(CUdeviceptr *, size_t, unsigned int));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !dptr || !bytesize) return f(dptr, bytesize, flags);
    int dev;
    CUresult rc = reserve("cuMemAllocManaged", 0, true, bytesize, &dev);
    if (rc) return rc;
    rc = f(dptr, bytesize, flags);
    return settle(rc, TRACK_PTR, rc ? 0 : *dptr, dev, bytesize);
}

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
static CUresult alloc_async(int e, CUdeviceptr *dptr, size_t bytesize, CUstream s) {
    alloc_async_fn f = (alloc_async_fn)shim_real(e);
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !dptr || !bytesize) return f(dptr, bytesize, s);
    int dev;
    CUresult rc = reserve("cuMemAllocAsync", 0, true, bytesize, &dev);
    if (rc) return rc;
    rc = f(dptr, bytesize, s);
    return settle(rc, TRACK_PTR, rc ? 0 : *dptr, dev, bytesize);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return alloc_async(R_cuMemAllocAsync, dptr, bytesize, hStream);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    return alloc_async(R_cuMemAllocAsync_ptsz, dptr, bytesize, hStream);
}

/* A pool's device is not asked: the current context's device is charged (pools are nearly always the current
 * device's; a host-located pool is charged too, erring on the side of the share). */
typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
static CUresult alloc_pool(int e, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream s) {
    alloc_pool_fn f = (alloc_pool_fn)shim_real(e);
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !dptr || !bytesize) return f(dptr, bytesize, pool, s);
    int dev;
    CUresult rc = reserve("cuMemAllocFromPoolAsync", 0, true, bytesize, &dev);
    if (rc) return rc;
    rc = f(dptr, bytesize, pool, s);
    return settle(rc, TRACK_PTR, rc ? 0 : *dptr, dev, bytesize);
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return alloc_pool(R_cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
    return alloc_pool(R_cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    CUresult (*f)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long) =
        REAL(cuMemCreate,
             CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !handle || !size || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return f(handle, size, prop, flags);
    CUresult (*get)(CUdevice *, int) = REAL(cuDeviceGet, CUresult (*)(CUdevice *, int));
    CUdevice d;
    CUresult rc = get ? get(&d, prop->location.id) : NO_DRIVER;
    if (rc) return f(handle, size, prop, flags); /* not a device the driver knows: its own error */
    int dev;
    if ((rc = reserve("cuMemCreate", d, false, size, &dev)) != CUDA_SUCCESS) return rc;
    rc = f(handle, size, prop, flags);
    return settle(rc, TRACK_VMM, rc ? 0 : *handle, dev, size);
}

/* Bytes per element of an array format (cuda.h's CUarray_format); formats not listed count 4 bytes per channel. */
static unsigned format_bytes(int format) {
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static unsigned long long array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels, unsigned levels) {
    unsigned long long total = 0, elem = (unsigned long long)format_bytes(format) * (channels ? channels : 1);
    for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
        unsigned long long lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
        total += lw * (h ? lh : 1) * (d ? ld : 1) * elem;
    }
    return total;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
    CUresult (*f)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *) =
        REAL(cuArrayCreate_v2, CUresult (*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !pHandle || !desc || !desc->Width) return f(pHandle, desc);
    unsigned long long bytes = array_bytes(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels, 1);
    int dev;
    CUresult rc = reserve("cuArrayCreate", 0, true, bytes, &dev);
    if (rc) return rc;
    rc = f(pHandle, desc);
    return settle(rc, TRACK_ARRAY, rc ? 0 : (uintptr_t)*pHandle, dev, bytes);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
    CUresult (*f)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *) =
        REAL(cuArray3DCreate_v2, CUresult (*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !pHandle || !desc || !desc->Width) return f(pHandle, desc);
    unsigned long long bytes =
        array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, 1);
    int dev;
    CUresult rc = reserve("cuArray3DCreate", 0, true, bytes, &dev);
    if (rc) return rc;
    rc = f(pHandle, desc);
    return settle(rc, TRACK_ARRAY, rc ? 0 : (uintptr_t)*pHandle, dev, bytes);
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                       unsigned int numMipmapLevels) {
    CUresult (*f)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int) =
        REAL(cuMipmappedArrayCreate, CUresult (*)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing() || !pHandle || !desc || !desc->Width) return f(pHandle, desc, numMipmapLevels);
    unsigned long long bytes = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels,
                                           numMipmapLevels);
    int dev;
    CUresult rc = reserve("cuMipmappedArrayCreate", 0, true, bytes, &dev);
    if (rc) return rc;
    rc = f(pHandle, desc, numMipmapLevels);
    return settle(rc, TRACK_MIPMAP, rc ? 0 : (uintptr_t)*pHandle, dev, bytes);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    CUresult (*f)(CUdeviceptr) = REAL(cuMemFree_v2, CUresult (*)(CUdeviceptr));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing()) return f(dptr);
    taken t = untrack(TRACK_PTR, dptr);
    return freed(f(dptr), TRACK_PTR, dptr, t);
}

static CUresult free_async(int e, CUdeviceptr dptr, CUstream s) {
    CUresult (*f)(CUdeviceptr, CUstream) = (CUresult (*)(CUdeviceptr, CUstream))shim_real(e);
    if (!f) return NO_DRIVER;
    if (!shim_enforcing()) return f(dptr, s);
    taken t = untrack(TRACK_PTR, dptr);
    return freed(f(dptr, s), TRACK_PTR, dptr, t);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    return free_async(R_cuMemFreeAsync, dptr, hStream);
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return free_async(R_cuMemFreeAsync_ptsz, dptr, hStream);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    CUresult (*f)(CUmemGenericAllocationHandle) = REAL(cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing()) return f(handle);
    taken t = untrack(TRACK_VMM, handle);
    return freed(f(handle), TRACK_VMM, handle, t);
}

EXPORT CUresult cuArrayDestroy(CUarray hArray) {
    CUresult (*f)(CUarray) = REAL(cuArrayDestroy, CUresult (*)(CUarray));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing()) return f(hArray);
    taken t = untrack(TRACK_ARRAY, (uintptr_t)hArray);
    return freed(f(hArray), TRACK_ARRAY, (uintptr_t)hArray, t);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
    CUresult (*f)(CUmipmappedArray) = REAL(cuMipmappedArrayDestroy, CUresult (*)(CUmipmappedArray));
    if (!f) return NO_DRIVER;
    if (!shim_enforcing()) return f(h);
    taken t = untrack(TRACK_MIPMAP, (uintptr_t)h);
    return freed(f(h), TRACK_MIPMAP, (uintptr_t)h, t);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    CUresult (*f)(size_t *, size_t *) = REAL(cuMemGetInfo_v2, CUresult (*)(size_t *, size_t *));
    if (!f) return NO_DRIVER;
    CUresult rc = f(free, total);
    if (rc != CUDA_SUCCESS || !shim_enforcing() || !free || !total) return rc;
    if ((rc = ready_cuda()) != CUDA_SUCCESS) return rc;
    CUdevice d;
    if ((rc = current_device(&d)) != CUDA_SUCCESS) return rc;
    char uuid[LEDGER_UUID_LEN];
    int dev = ledger_dev_of(d, uuid, &rc);
    if (dev < 0) return rc;
    unsigned long long fr = *free, to = *total;
    share_view(pod_use(dev), &fr, &to);
    *free = (size_t)fr;
    *total = (size_t)to;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    CUresult (*f)(size_t *, CUdevice) = REAL(cuDeviceTotalMem_v2, CUresult (*)(size_t *, CUdevice));
    if (!f) return NO_DRIVER;
    CUresult rc = f(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && shim_enforcing() && shim_share_mib() && *bytes > shim_share_mib() * MIB)
        *bytes = (size_t)(shim_share_mib() * MIB);
    return rc;
}

/* The CUDA 3.1 entry points: 32-bit sizes and device pointers. Under a share, allocating through them is refused
 * (nothing built since CUDA 3.2 calls them); the queries report the share, clamped to 32 bits. */
static CUresult legacy_refused(const char *fn) {
    shim_say("%s (the CUDA 3.1 entry point with 32-bit sizes) is not supported under a GPU memory share; programs "
             "built with CUDA 3.2 or later use %s_v2", fn, fn);
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize) {
    CUresult (*f)(unsigned int *, unsigned int) = REAL(cuMemAlloc, CUresult (*)(unsigned int *, unsigned int));
    if (shim_enforcing()) return legacy_refused("cuMemAlloc");
    return f ? f(dptr, bytesize) : NO_DRIVER;
}

EXPORT CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                unsigned int Height, unsigned int ElementSizeBytes) {
    CUresult (*f)(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int) =
        REAL(cuMemAllocPitch, CUresult (*)(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int));
    if (shim_enforcing()) return legacy_refused("cuMemAllocPitch");
    return f ? f(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes) : NO_DRIVER;
}

static unsigned int clamp32(size_t v) { return v > UINT_MAX ? UINT_MAX : (unsigned int)v; }

EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
    if (!shim_enforcing()) {
        CUresult (*f)(unsigned int *, unsigned int *) = REAL(cuMemGetInfo, CUresult (*)(unsigned int *, unsigned int *));
        return f ? f(free, total) : NO_DRIVER;
    }
    size_t fr, to;
    CUresult rc = cuMemGetInfo_v2(&fr, &to);
    if (rc == CUDA_SUCCESS) {
        if (free) *free = clamp32(fr);
        if (total) *total = clamp32(to);
    }
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    if (!shim_enforcing()) {
        CUresult (*f)(unsigned int *, CUdevice) = REAL(cuDeviceTotalMem, CUresult (*)(unsigned int *, CUdevice));
        return f ? f(bytes, dev) : NO_DRIVER;
    }
    size_t b;
    CUresult rc = cuDeviceTotalMem_v2(&b, dev);
    if (rc == CUDA_SUCCESS && bytes) *bytes = clamp32(b);
    return rc;
}

/* NVML: the same view, the device named by its UUID. If the ledger cannot be opened the call fails
 * (NVML_ERROR_UNKNOWN) rather than show the whole GPU. */
static nvmlReturn_t nvml_share(nvmlDevice_t device, unsigned long long *total, unsigned long long *free,
                               unsigned long long *used) {
    if (ready() != CUDA_SUCCESS) return NVML_ERROR_UNKNOWN;
    nvmlReturn_t (*uuid_of)(nvmlDevice_t, char *, unsigned int) =
        REAL(nvmlDeviceGetUUID, nvmlReturn_t (*)(nvmlDevice_t, char *, unsigned int));
    char uuid[96];
    if (!uuid_of || uuid_of(device, uuid, sizeof uuid) != NVML_SUCCESS) return NVML_SUCCESS; /* the real figures */
    pthread_mutex_lock(&mu);
    int dev = state > 0 ? ledger_device(&led, uuid) : -1;
    pthread_mutex_unlock(&mu);
    if (dev < 0) return NVML_SUCCESS;
    *used = pod_use(dev);
    share_view(*used, free, total);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    nvmlReturn_t (*f)(nvmlDevice_t, nvmlMemory_t *) =
        REAL(nvmlDeviceGetMemoryInfo, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *));
    if (!f) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = f(device, memory);
    if (rc != NVML_SUCCESS || !memory || !shim_enforcing()) return rc;
    return nvml_share(device, &memory->total, &memory->free, &memory->used);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    nvmlReturn_t (*f)(nvmlDevice_t, nvmlMemory_v2_t *) =
        REAL(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t *));
    if (!f) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t rc = f(device, memory);
    if (rc != NVML_SUCCESS || !memory || !shim_enforcing()) return rc;
    memory->reserved = 0; /* the driver's reservation is not the pod's */
    return nvml_share(device, &memory->total, &memory->free, &memory->used);
}
