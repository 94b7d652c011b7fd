/* cuda_probe.c -- tessera-cuda-probe: a CUDA client for tests, reaching the driver the way a chosen kind of program
 * does and running a small script of memory operations, one parseable line per operation. Built twice by the
 * Makefile: $(BUILD)/fake-cuda/tessera-cuda-probe (the driver dlopen'ed) and tessera-cuda-probe-linked (linked
 * against libcuda.so.1, -DPROBE_LINKED; `--via link` runs it). Both carry RUNPATH $ORIGIN, so beside the fake
 * driver they find it with no LD_LIBRARY_PATH; with the real driver installed they find that one.
 *
 * usage: tessera-cuda-probe [--via runtime|dlsym|link] [--cuda-version N] [--ptsz] [OP ARG...]...
 *   --via runtime  (default) as NVIDIA's runtime (libcudart) does: dlopen("libcuda.so.1"), dlsym(handle,
 *                  "cuGetProcAddress"), then cuGetProcAddress("cuGetProcAddress", version) for cuGetProcAddress_v2
 *                  (CUDA 12 and later), and every entry point by base name, version and flags through it
 *   --via dlsym    as TensorFlow, XLA, Triton and PyTorch's driver calls do: dlsym(handle, "cuMemAlloc_v2") for each
 *                  versioned name
 *   --via link     as a program linked with -lcuda: calls bound at load time
 *   --cuda-version N  the version --via runtime asks for (default 12040: a CUDA 12.4 libcudart)
 *   --ptsz         --via runtime asks with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM (nvcc
 *                  --default-stream per-thread): the _ptsz variants
 * It first initialises (cuInit, device 0's primary context made current) and prints "init ok devices=N" or
 * "init error CODE" (then exits 3). A lookup that fails prints "lookup NAME error CODE". Then each OP in order:
 *   alloc MiB | pitch-alloc MiB | managed-alloc MiB | async-alloc MiB | pool-alloc MiB | vmm-alloc MiB |
 *   array-alloc MiB | alloc-v1 MiB
 *                  allocate (cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemAllocAsync,
 *                  cuMemAllocFromPoolAsync on the device's default pool, cuMemCreate, cuArrayCreate_v2 of floats,
 *                  the CUDA 3.1 cuMemAlloc): "<op> <MiB> ok" or "<op> <MiB> error <CUresult>"
 *   free           free the newest allocation still held, with its kind's free call: "free ok" / "free error N"
 *   free-all       free them all: "free-all ok" / "free-all error N"
 *   meminfo        cuMemGetInfo_v2: "meminfo free=<MiB> total=<MiB>" (MiB rounded down)
 *   total-mem      cuDeviceTotalMem_v2 of the current device: "total-mem <MiB>"
 *   nvml-meminfo [I] | nvml-meminfo-v2 [I]
 *                  NVML's nvmlDeviceGetMemoryInfo(_v2) of device I (default 0), NVML loaded as pynvml does it
 *                  (dlopen libnvidia-ml.so.1, dlsym): "nvml-meminfo total=<MiB> used=<MiB> free=<MiB>"
 *   sm-count       CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: "sm-count <N>"
 *   device N       make device N's primary context current: "device N ok"
 *   hold SECONDS   sleep, allocations kept: "hold SECONDS" printed once the time is up
 *   fork-hold SECONDS
 *                  fork a child that sleeps SECONDS and exits, touching nothing (what a program that forks a helper
 *                  without exec does): "fork-hold <child pid>"
 *   wait-file PATH wait until PATH exists (a start line for processes the test starts together): "wait-file ok"
 *   bench-alloc N MiB
 *                  N cuMemAlloc_v2/cuMemFree_v2 pairs: "bench-alloc N ns-per-pair=<ns>"
 * stdout is line-buffered, so a test reading it sees each line as the operation ends.
 * Exit status: 0 every operation succeeded, 1 some returned an error, 2 bad usage, 3 initialisation failed.
 */
#include "shim/cuda_api.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef PROBE_LINKED
/* the entry points not declared in shim/cuda_api.h, as the fake and the real driver export them */
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev);
#endif

#define MIB (1024ull * 1024ull)

/* The driver's entry points, however they were found. */
static struct api {
    CUresult (*init)(unsigned int);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*attr)(int *, int, CUdevice);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*default_pool)(CUmemoryPool *, CUdevice);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*alloc_v1)(unsigned int *, unsigned int);
    CUresult (*pitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*managed)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
    CUresult (*array)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*free)(CUdeviceptr);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*array_destroy)(CUarray);
    CUresult (*meminfo)(size_t *, size_t *);
    CUresult (*total)(size_t *, CUdevice);
} api;

/* The table of what to find: its base name (cuGetProcAddress), its versioned symbol (dlsym), and where it goes. */
typedef struct want { const char *base, *symbol; void **slot; } want;
#define W(b, s, f) {b, s, (void **)&api.f}
static const want wants[] = {
    W("cuInit", "cuInit", init), W("cuDeviceGetCount", "cuDeviceGetCount", count),
    W("cuDeviceGet", "cuDeviceGet", get), W("cuDeviceGetAttribute", "cuDeviceGetAttribute", attr),
    W("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", retain),
    W("cuCtxSetCurrent", "cuCtxSetCurrent", set_current),
    W("cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", default_pool),
    W("cuMemAlloc", "cuMemAlloc_v2", alloc), W(NULL, "cuMemAlloc", alloc_v1),
    W("cuMemAllocPitch", "cuMemAllocPitch_v2", pitch), W("cuMemAllocManaged", "cuMemAllocManaged", managed),
    W("cuMemAllocAsync", "cuMemAllocAsync", async), W("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", pool),
    W("cuMemCreate", "cuMemCreate", create), W("cuArrayCreate", "cuArrayCreate_v2", array),
    W("cuMemFree", "cuMemFree_v2", free), W("cuMemFreeAsync", "cuMemFreeAsync", free_async),
    W("cuMemRelease", "cuMemRelease", release), W("cuArrayDestroy", "cuArrayDestroy", array_destroy),
    W("cuMemGetInfo", "cuMemGetInfo_v2", meminfo), W("cuDeviceTotalMem", "cuDeviceTotalMem_v2", total),
};

static int find_runtime(int version, bool ptsz) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("init error %d dlopen: %s\n", CUDA_ERROR_NOT_INITIALIZED, dlerror());
        return -1;
    }
    CUresult (*gpa)(const char *, void **, int, cuuint64_t) = (CUresult (*)(const char *, void **, int, cuuint64_t))
        dlsym(h, "cuGetProcAddress");
    if (!gpa) {
        printf("lookup cuGetProcAddress error %d\n", CUDA_ERROR_NOT_FOUND);
        return -1;
    }
    CUresult (*gpa2)(const char *, void **, int, cuuint64_t, int *) = NULL;
    if (version >= 12000) {
        CUresult rc = gpa("cuGetProcAddress", (void **)&gpa2, version, 0);
        if (rc) {
            printf("lookup cuGetProcAddress_v2 error %d\n", rc);
            return -1;
        }
    }
    cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
        if (!wants[i].base) continue;
        int status = 0;
        CUresult rc = gpa2 ? gpa2(wants[i].base, wants[i].slot, version, flags, &status)
                           : gpa(wants[i].base, wants[i].slot, version, flags);
        if (rc) {
            *wants[i].slot = NULL;
            printf("lookup %s error %d\n", wants[i].base, rc);
        }
    }
    return 0;
}

static int find_dlsym(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("init error %d dlopen: %s\n", CUDA_ERROR_NOT_INITIALIZED, dlerror());
        return -1;
    }
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
        *wants[i].slot = dlsym(h, wants[i].symbol);
        if (!*wants[i].slot) printf("lookup %s error %d\n", wants[i].symbol, CUDA_ERROR_NOT_FOUND);
    }
    return 0;
}

#ifdef PROBE_LINKED
static int find_linked(void) {
    api.init = cuInit;
    api.count = cuDeviceGetCount;
    api.get = cuDeviceGet;
    api.attr = cuDeviceGetAttribute;
    api.retain = cuDevicePrimaryCtxRetain;
    api.set_current = cuCtxSetCurrent;
    api.default_pool = cuDeviceGetDefaultMemPool;
    api.alloc = cuMemAlloc_v2;
    api.alloc_v1 = cuMemAlloc;
    api.pitch = cuMemAllocPitch_v2;
    api.managed = cuMemAllocManaged;
    api.async = cuMemAllocAsync;
    api.pool = cuMemAllocFromPoolAsync;
    api.create = cuMemCreate;
    api.array = cuArrayCreate_v2;
    api.free = cuMemFree_v2;
    api.free_async = cuMemFreeAsync;
    api.release = cuMemRelease;
    api.array_destroy = cuArrayDestroy;
    api.meminfo = cuMemGetInfo_v2;
    api.total = cuDeviceTotalMem_v2;
    return 0;
}
#endif

/* Allocations held, newest last. */
enum { A_PTR, A_ASYNC, A_VMM, A_ARRAY };
typedef struct held { int kind; unsigned long long key; } held;
static held holds[4096];
static int nholds;

#define CALL(fn, ...) (api.fn ? api.fn(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

static CUresult free_one(void) {
    held h = holds[--nholds];
    switch (h.kind) {
    case A_ASYNC: return CALL(free_async, h.key, NULL);
    case A_VMM: return CALL(release, h.key);
    case A_ARRAY: return CALL(array_destroy, (CUarray)(uintptr_t)h.key);
    default: return CALL(free, h.key);
    }
}

static CUresult do_alloc(const char *op, unsigned long long mib) {
    unsigned long long bytes = mib * MIB, key = 0;
    int kind = A_PTR;
    CUresult rc;
    if (!strcmp(op, "alloc")) {
        rc = CALL(alloc, &key, bytes);
    } else if (!strcmp(op, "alloc-v1")) {
        unsigned int p = 0;
        rc = CALL(alloc_v1, &p, (unsigned int)bytes);
        key = p;
    } else if (!strcmp(op, "pitch-alloc")) {
        size_t pitch;
        rc = CALL(pitch, &key, &pitch, 4096, bytes / 4096, 4);
    } else if (!strcmp(op, "managed-alloc")) {
        rc = CALL(managed, &key, bytes, CU_MEM_ATTACH_GLOBAL);
    } else if (!strcmp(op, "async-alloc")) {
        rc = CALL(async, &key, bytes, NULL);
        kind = A_ASYNC;
    } else if (!strcmp(op, "pool-alloc")) {
        CUmemoryPool pool = NULL;
        rc = CALL(default_pool, &pool, 0);
        if (!rc) rc = CALL(pool, &key, bytes, pool, NULL);
        kind = A_ASYNC;
    } else if (!strcmp(op, "vmm-alloc")) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        rc = CALL(create, &key, bytes, &prop, 0);
        kind = A_VMM;
    } else { /* array-alloc: floats, 256 x 1024 per MiB */
        CUDA_ARRAY_DESCRIPTOR d = {(size_t)mib * 256, 1024, CU_AD_FORMAT_FLOAT, 1};
        CUarray a = NULL;
        rc = CALL(array, &a, &d);
        key = (uintptr_t)a;
        kind = A_ARRAY;
    }
    if (rc == CUDA_SUCCESS && nholds < (int)(sizeof holds / sizeof holds[0])) holds[nholds++] = (held){kind, key};
    return rc;
}

static nvmlReturn_t nvml_meminfo(unsigned index, bool v2, unsigned long long out[3]) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t (*init)(void) = (nvmlReturn_t (*)(void))dlsym(h, "nvmlInit_v2");
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *) = (nvmlReturn_t (*)(unsigned, nvmlDevice_t *))dlsym(
        h, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*m1)(nvmlDevice_t, nvmlMemory_t *) =
        (nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvmlReturn_t (*m2)(nvmlDevice_t, nvmlMemory_v2_t *) =
        (nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t *))dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    if (!init || !handle || !(v2 ? (void *)m2 : (void *)m1)) return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t rc = init();
    nvmlDevice_t d;
    if (!rc) rc = handle(index, &d);
    if (rc) return rc;
    if (v2) {
        nvmlMemory_v2_t m = {nvmlMemory_v2, 0, 0, 0, 0};
        rc = m2(d, &m);
        out[0] = m.total, out[1] = m.used, out[2] = m.free;
    } else {
        nvmlMemory_t m = {0, 0, 0};
        rc = m1(d, &m);
        out[0] = m.total, out[1] = m.used, out[2] = m.free;
    }
    return rc;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr, "usage: tessera-cuda-probe [--via runtime|dlsym|link] [--cuda-version N] [--ptsz] [OP ARG...]...\n"
                    "(the operations are listed in tests/support/cuda_probe.c)\n");
    return 2;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *via = "runtime";
    int version = 12040, i = 1;
    bool ptsz = false;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        if (!strcmp(argv[i], "--via") && i + 1 < argc) via = argv[++i];
        else if (!strcmp(argv[i], "--cuda-version") && i + 1 < argc) version = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ptsz")) ptsz = true;
        else return usage();
    }
    int found;
    if (!strcmp(via, "runtime")) {
        found = find_runtime(version, ptsz);
    } else if (!strcmp(via, "dlsym")) {
        found = find_dlsym();
    } else if (!strcmp(via, "link")) {
#ifdef PROBE_LINKED
        found = find_linked();
#else
        /* the linked build beside this one */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 20);
        if (n <= 0) return usage();
        self[n] = 0;
        strcat(self, "-linked");
        fflush(stdout);
        execv(self, argv);
        printf("init error %d cannot run %s\n", CUDA_ERROR_NOT_INITIALIZED, self);
        return 3;
#endif
    } else {
        return usage();
    }
    if (found < 0) return 3;

    CUresult rc = CALL(init, 0);
    int count = 0;
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    if (!rc) rc = CALL(count, &count);
    if (!rc) rc = CALL(get, &dev, 0);
    if (!rc) rc = CALL(retain, &ctx, dev);
    if (!rc) rc = CALL(set_current, ctx);
    if (rc) {
        printf("init error %d\n", rc);
        return 3;
    }
    printf("init ok devices=%d\n", count);

    int status = 0;
    for (; i < argc; i++) {
        const char *op = argv[i];
        const char *arg = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(op, "alloc") || !strcmp(op, "pitch-alloc") || !strcmp(op, "managed-alloc") ||
            !strcmp(op, "async-alloc") || !strcmp(op, "pool-alloc") || !strcmp(op, "vmm-alloc") ||
            !strcmp(op, "array-alloc") || !strcmp(op, "alloc-v1")) {
            if (!arg) return usage();
            unsigned long long mib = strtoull(arg, NULL, 10);
            i++;
            rc = do_alloc(op, mib);
            if (rc) printf("%s %llu error %d\n", op, mib, rc);
            else printf("%s %llu ok\n", op, mib);
        } else if (!strcmp(op, "free") || !strcmp(op, "free-all")) {
            rc = CUDA_SUCCESS;
            bool all = !strcmp(op, "free-all");
            if (!nholds) rc = CUDA_ERROR_INVALID_VALUE;
            while (nholds && (all || rc == CUDA_SUCCESS)) {
                CUresult r = free_one();
                if (r && !rc) rc = r;
                if (!all) break;
            }
            if (rc) printf("%s error %d\n", op, rc);
            else printf("%s ok\n", op);
        } else if (!strcmp(op, "meminfo")) {
            size_t fr = 0, to = 0;
            rc = CALL(meminfo, &fr, &to);
            if (rc) printf("meminfo error %d\n", rc);
            else printf("meminfo free=%llu total=%llu\n", (unsigned long long)fr / MIB, (unsigned long long)to / MIB);
        } else if (!strcmp(op, "total-mem")) {
            size_t b = 0;
            rc = CALL(total, &b, dev);
            if (rc) printf("total-mem error %d\n", rc);
            else printf("total-mem %llu\n", (unsigned long long)b / MIB);
        } else if (!strcmp(op, "nvml-meminfo") || !strcmp(op, "nvml-meminfo-v2")) {
            unsigned idx = 0;
            if (arg && arg[0] >= '0' && arg[0] <= '9') idx = (unsigned)atoi(argv[++i]);
            unsigned long long m[3] = {0, 0, 0};
            nvmlReturn_t nr = nvml_meminfo(idx, op[12] == '-', m);
            rc = nr ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
            if (nr) printf("%s error %d\n", op, nr);
            else printf("%s total=%llu used=%llu free=%llu\n", op, m[0] / MIB, m[1] / MIB, m[2] / MIB);
        } else if (!strcmp(op, "sm-count")) {
            int n = 0;
            rc = CALL(attr, &n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            if (rc) printf("sm-count error %d\n", rc);
            else printf("sm-count %d\n", n);
        } else if (!strcmp(op, "device")) {
            if (!arg) return usage();
            i++;
            rc = CALL(get, &dev, atoi(arg));
            if (!rc) rc = CALL(retain, &ctx, dev);
            if (!rc) rc = CALL(set_current, ctx);
            if (rc) printf("device %s error %d\n", arg, rc);
            else printf("device %s ok\n", arg);
        } else if (!strcmp(op, "hold")) {
            if (!arg) return usage();
            i++;
            sleep((unsigned)atoi(arg));
            printf("hold %s\n", arg);
            rc = CUDA_SUCCESS;
        } else if (!strcmp(op, "fork-hold")) {
            if (!arg) return usage();
            i++;
            fflush(stdout);
            pid_t child = fork();
            if (child == 0) {
                sleep((unsigned)atoi(arg));
                _exit(0);
            }
            printf("fork-hold %d\n", (int)child);
            rc = child > 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
        } else if (!strcmp(op, "wait-file")) {
            if (!arg) return usage();
            i++;
            while (access(arg, F_OK) != 0) usleep(2000);
            printf("wait-file ok\n");
            rc = CUDA_SUCCESS;
        } else if (!strcmp(op, "bench-alloc")) {
            if (!arg || i + 2 >= argc) return usage();
            long n = atol(arg);
            unsigned long long bytes = strtoull(argv[i + 2], NULL, 10) * MIB;
            i += 2;
            double t0 = now_ns();
            rc = CUDA_SUCCESS;
            for (long k = 0; k < n && !rc; k++) {
                CUdeviceptr p;
                rc = CALL(alloc, &p, bytes);
                if (!rc) rc = CALL(free, p);
            }
            if (rc) printf("bench-alloc error %d\n", rc);
            else printf("bench-alloc %ld ns-per-pair=%.0f\n", n, (now_ns() - t0) / (double)(n > 0 ? n : 1));
        } else {
            return usage();
        }
        if (rc) status = 1;
    }
    return status;
}
