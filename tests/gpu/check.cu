// check.cu -- the CUDA program tests/gpu/run.sh runs on a real NVIDIA GPU, under libtessera-cuda.so or not.
// It uses NVIDIA's runtime (cudart, statically linked by nvcc: the path through cuGetProcAddress that PyTorch,
// TensorFlow and most programs take) and NVML loaded as pynvml loads it (dlopen + dlsym). One line per operation:
//   check info                      "info total=<MiB> free=<MiB> nvml_total=<MiB> nvml_used=<MiB> nvml_free=<MiB>
//                                    sms=<N>" (cudaMemGetInfo, NVML of the same device, the SM count)
//   check alloc MiB... [hold S]     cudaMalloc each size: "alloc <MiB> ok" / "alloc <MiB> error <cudaError>";
//                                   "async <MiB>" instead of a size uses cudaMallocAsync (the stream-ordered pool);
//                                   then sleep S seconds holding everything ("holding" printed first)
//   check context                   device memory in use (NVML) before and after this process creates its CUDA
//                                   context: "context before=<MiB> after=<MiB> delta=<MiB>" (what the shim cannot
//                                   count)
//   check compute N                 a compute-bound kernel (FMA chains, a fixed grid of 4096 blocks of 256 threads,
//                                   whatever the process is shown) N times: "compute ms=<elapsed> sms=<N>"
// Exit status 0 unless the program could not run (an allocation refused is a result, not a failure).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ull * 1024ull)

typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef int (*nvml_init_t)(void);
typedef int (*nvml_handle_by_uuid_t)(const char *, void **);
typedef int (*nvml_meminfo_t)(void *, nvml_memory *);

// NVML's view of the device this process uses (by UUID, as CUDA and NVML may number devices differently)
static bool nvml_memory_of(int dev, nvml_memory *m) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) return false;
    nvml_init_t init = (nvml_init_t)dlsym(h, "nvmlInit_v2");
    nvml_handle_by_uuid_t by_uuid = (nvml_handle_by_uuid_t)dlsym(h, "nvmlDeviceGetHandleByUUID");
    nvml_meminfo_t meminfo = (nvml_meminfo_t)dlsym(h, "nvmlDeviceGetMemoryInfo");
    if (!init || !by_uuid || !meminfo || init() != 0) return false;
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return false;
    char uuid[64];
    const unsigned char *b = (const unsigned char *)p.uuid.bytes;
    snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    void *d;
    return by_uuid(uuid, &d) == 0 && meminfo(d, m) == 0;
}

__global__ void burn(float *out, int iters) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
    for (int i = 0; i < iters; i++) {
        a = a * b + c;
        d = d * c + b;
        b = b * a + d;
        c = c * d + a;
    }
    if (a + b + c + d == 42.0f) out[0] = a + b + c + d; // keeps the loop alive
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: check info | alloc MiB... [hold S] | context | compute N\n");
        return 2;
    }
    int dev = 0;
    if (!strcmp(argv[1], "context")) {
        nvml_memory before, after;
        // NVML first, before this process has a context: cudaGetDeviceProperties alone creates none
        if (!nvml_memory_of(dev, &before)) return 1;
        cudaError_t e = cudaFree(0); // creates the primary context
        if (e != cudaSuccess || !nvml_memory_of(dev, &after)) {
            printf("context error %d\n", (int)e);
            return 1;
        }
        long long delta = (long long)(after.used / MIB) - (long long)(before.used / MIB);
        printf("context before=%llu after=%llu delta=%lld\n", before.used / MIB, after.used / MIB, delta);
        return 0;
    }
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("init error %d %s\n", (int)e, cudaGetErrorString(e));
        return 1;
    }
    if (!strcmp(argv[1], "info")) {
        size_t f = 0, t = 0;
        e = cudaMemGetInfo(&f, &t);
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        nvml_memory m = {0, 0, 0};
        bool nv = nvml_memory_of(dev, &m);
        if (e != cudaSuccess) {
            printf("info error %d\n", (int)e);
            return 1;
        }
        printf("info total=%zu free=%zu nvml_total=%lld nvml_used=%lld nvml_free=%lld sms=%d\n", t / MIB, f / MIB,
               nv ? (long long)(m.total / MIB) : -1LL, nv ? (long long)(m.used / MIB) : -1LL,
               nv ? (long long)(m.free / MIB) : -1LL, sms);
        return 0;
    }
    if (!strcmp(argv[1], "alloc")) {
        for (int i = 2; i < argc; i++) {
            if (!strcmp(argv[i], "hold") && i + 1 < argc) {
                printf("holding\n");
                sleep((unsigned)atoi(argv[i + 1]));
                break;
            }
            bool async = !strcmp(argv[i], "async") && i + 1 < argc;
            if (async) i++;
            unsigned long long mib = strtoull(argv[i], NULL, 10);
            void *p = NULL;
            e = async ? cudaMallocAsync(&p, mib * MIB, 0) : cudaMalloc(&p, mib * MIB);
            if (async && e == cudaSuccess) e = cudaStreamSynchronize(0);
            if (e == cudaSuccess) printf("%s %llu ok\n", async ? "async" : "alloc", mib);
            else printf("%s %llu error %d\n", async ? "async" : "alloc", mib, (int)e);
            cudaGetLastError(); // a refused allocation is not sticky; clear it for the next
        }
        return 0;
    }
    if (!strcmp(argv[1], "compute") && argc > 2) {
        int n = atoi(argv[2]), sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        float *out;
        if (cudaMalloc(&out, sizeof(float)) != cudaSuccess) return 1;
        burn<<<4096, 256>>>(out, 1000); // warm up
        cudaDeviceSynchronize();
        // the same grid whatever the process is shown: under MPS fewer SMs run it, for longer
        double t0 = now_ms();
        for (int i = 0; i < n; i++) burn<<<4096, 256>>>(out, 200000);
        e = cudaDeviceSynchronize();
        double ms = now_ms() - t0;
        if (e != cudaSuccess) {
            printf("compute error %d\n", (int)e);
            return 1;
        }
        printf("compute ms=%.1f sms=%d\n", ms, sms);
        return 0;
    }
    fprintf(stderr, "unknown operation %s\n", argv[1]);
    return 2;
}
