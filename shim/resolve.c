/* resolve.c -- see resolve.h; also the C half of the dlsym interposer (the other half is shim/dlsym.S).
 *
 * No mutex here, on purpose: dlopen and dlsym take glibc's loader lock, and a library's constructor running under
 * that lock may call dlsym, i.e. come back here. Holding a mutex of ours across dlopen/dlsym could deadlock two
 * threads (one in dlopen waiting for our mutex through a constructor, the other holding our mutex waiting for the
 * loader lock). Resolving is idempotent instead: two threads that race compute the same addresses and store the same
 * values. A thread-local flag keeps lookups made while this thread resolves (a constructor's dlsym) unmapped rather
 * than recursing.
 */
#include "shim/glibc.h"
#include "shim/resolve.h"

#include "shim/cuda_api.h"
#include "shim/share.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct entry {
    const char *name;   /* the library's exported symbol */
    const char *family; /* the base name cuGetProcAddress knows it by (NULL: NVML) */
    int version;        /* the CUDA version that introduced this variant */
    int flags;          /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for a _ptsz variant */
    bool alloc;         /* allocates device memory: an unknown variant of the family is refused */
    void *hook;         /* NULL: the shim only calls it */
} entry;

#define HOOK(n, fam, ver, fl, al) [R_##n] = {#n, fam, ver, fl, al, (void *)n}
#define CALL(n, fam, ver) [R_##n] = {#n, fam, ver, 0, false, NULL}
#define PTSZ CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

static const entry table[R_END] = {
    HOOK(cuInit, "cuInit", 2000, 0, false),
    HOOK(cuGetProcAddress, "cuGetProcAddress", 11030, 0, false),
    HOOK(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, false),
    HOOK(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, true),
    HOOK(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, true),
    HOOK(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, true),
    HOOK(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, true),
    HOOK(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, PTSZ, true),
    HOOK(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, true),
    HOOK(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, PTSZ, true),
    HOOK(cuMemCreate, "cuMemCreate", 10020, 0, true),
    HOOK(cuArrayCreate_v2, "cuArrayCreate", 3020, 0, true),
    HOOK(cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0, true),
    HOOK(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 5000, 0, true),
    HOOK(cuMemFree_v2, "cuMemFree", 3020, 0, false),
    HOOK(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, false),
    HOOK(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, PTSZ, false),
    HOOK(cuMemRelease, "cuMemRelease", 10020, 0, false),
    HOOK(cuArrayDestroy, "cuArrayDestroy", 2000, 0, false),
    HOOK(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 5000, 0, false),
    HOOK(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0, false),
    HOOK(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0, false),
    HOOK(cuMemAlloc, "cuMemAlloc", 2000, 0, true),
    HOOK(cuMemAllocPitch, "cuMemAllocPitch", 2000, 0, true),
    HOOK(cuMemGetInfo, "cuMemGetInfo", 2000, 0, false),
    HOOK(cuDeviceTotalMem, "cuDeviceTotalMem", 2000, 0, false),
    CALL(cuCtxGetDevice, "cuCtxGetDevice", 2000),
    CALL(cuDeviceGet, "cuDeviceGet", 2000),
    CALL(cuDeviceGetUuid, "cuDeviceGetUuid", 9020),
    CALL(cuDeviceGetUuid_v2, "cuDeviceGetUuid", 11040),
    HOOK(nvmlDeviceGetMemoryInfo, NULL, 0, 0, false),
    HOOK(nvmlDeviceGetMemoryInfo_v2, NULL, 0, 0, false),
    CALL(nvmlDeviceGetUUID, NULL, 0),
};

enum { LIB_CUDA, LIB_NVML };
static const char *const lib_name[2] = {"libcuda.so.1", "libnvidia-ml.so.1"};
static int lib_done[2];                     /* atomic: real[] of that library is filled */
static int learned;                         /* atomic: alias[] is filled */
static void *real[R_END];                   /* dlsym(library, name) */
static void *alias[R_END];                  /* what the driver's cuGetProcAddress hands out, when not real[] */
static char load_error[256];
static __thread int resolving;              /* this thread is filling the tables */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_fn;

/* Hidden, called by dlsym.S: glibc's dlsym, found with dlvsym (which the shim does not interpose) at the oldest
 * version, so it is the same function on every glibc. */
__attribute__((visibility("hidden"))) dlsym_fn shim_real_dlsym(void);
dlsym_fn shim_real_dlsym(void) {
    dlsym_fn f = __atomic_load_n(&real_dlsym_fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", SHIM_GLIBC_BASE);
        __atomic_store_n(&real_dlsym_fn, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* Fill real[] for lib. load: dlopen the library if the process has not (a hook called); otherwise only look at a
 * library already loaded (a lookup being mapped must not load anything). */
static bool load_lib(int lib, bool load) {
    if (__atomic_load_n(&lib_done[lib], __ATOMIC_ACQUIRE)) return true;
    dlsym_fn sym = shim_real_dlsym();
    if (resolving || !sym) return false;
    resolving = 1;
    void *h = dlopen(lib_name[lib], RTLD_LAZY | (load ? 0 : RTLD_NOLOAD));
    if (h) {
        int lo = lib == LIB_CUDA ? 0 : R_CUDA_END, hi = lib == LIB_CUDA ? R_CUDA_END : R_END;
        for (int e = lo; e < hi; e++) __atomic_store_n(&real[e], sym(h, table[e].name), __ATOMIC_RELAXED);
        __atomic_store_n(&lib_done[lib], 1, __ATOMIC_RELEASE);
    } else if (load && lib == LIB_CUDA) {
        const char *m = dlerror();
        snprintf(load_error, sizeof load_error, "%s", m ? m : "libcuda.so.1 not found");
    }
    resolving = 0;
    return h != NULL;
}

/* Ask the driver's cuGetProcAddress for every hooked variant at the version that introduced it: if the driver hands
 * out addresses other than its exports (an internal table), those are recorded too, so they map to the hooks. */
static void learn(void) {
    if (__atomic_load_n(&learned, __ATOMIC_ACQUIRE) || resolving || !load_lib(LIB_CUDA, false)) return;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t) = real[R_cuGetProcAddress];
    CUresult (*gpa2)(const char *, void **, int, cuuint64_t, int *) = real[R_cuGetProcAddress_v2];
    resolving = 1;
    for (int e = 0; e < R_CUDA_END && (gpa || gpa2); e++) {
        void *p = NULL;
        int status;
        CUresult rc = gpa ? gpa(table[e].family, &p, table[e].version, (cuuint64_t)table[e].flags)
                          : gpa2(table[e].family, &p, table[e].version, (cuuint64_t)table[e].flags, &status);
        if (rc == CUDA_SUCCESS && p && p != real[e]) __atomic_store_n(&alias[e], p, __ATOMIC_RELAXED);
    }
    resolving = 0;
    __atomic_store_n(&learned, 1, __ATOMIC_RELEASE);
}

void *shim_real(int e) {
    if (e < 0 || e >= R_END) return NULL;
    if (!load_lib(e < R_CUDA_END ? LIB_CUDA : LIB_NVML, true)) return NULL;
    return __atomic_load_n(&real[e], __ATOMIC_RELAXED);
}

bool shim_cuda_loaded(char *why, size_t len) {
    if (load_lib(LIB_CUDA, true)) return true;
    snprintf(why, len, "%s", load_error[0] ? load_error : "libcuda.so.1 could not be loaded");
    return false;
}

/* The family of a symbol name: "cuMemAllocAsync_ptsz" -> "cuMemAllocAsync", "cuMemAlloc_v2" -> "cuMemAlloc". */
static size_t family_len(const char *name) {
    size_t n = strlen(name);
    if (n > 5 && (!strcmp(name + n - 5, "_ptsz") || !strcmp(name + n - 5, "_ptds"))) n -= 5;
    size_t d = n;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--;
    if (d < n && d >= 2 && name[d - 1] == 'v' && name[d - 2] == '_') n = d - 2;
    return n;
}

void *shim_map(void *r, const char *name, int cuda_version) {
    load_lib(LIB_CUDA, false);
    load_lib(LIB_NVML, false);
    learn();
    for (int e = 0; e < R_END; e++) {
        if (!table[e].hook) continue;
        if (r == __atomic_load_n(&real[e], __ATOMIC_RELAXED) || r == __atomic_load_n(&alias[e], __ATOMIC_RELAXED) ||
            r == table[e].hook)
            return table[e].hook;
    }
    size_t n = cuda_version >= 0 ? strlen(name) : family_len(name);
    for (int e = 0; e < R_END; e++) {
        if (!table[e].alloc || strlen(table[e].family) != n || strncmp(table[e].family, name, n) != 0) continue;
        char what[160];
        if (cuda_version >= 0) snprintf(what, sizeof what, "cuGetProcAddress(\"%.60s\", %d)", name, cuda_version);
        else snprintf(what, sizeof what, "dlsym(\"%.60s\")", name);
        shim_say("%s found a variant of %s this library does not know (a newer CUDA?); refused, so that no "
                 "allocation escapes this pod's GPU memory share of %llu MiB",
                 what, table[e].family, shim_share_mib());
        return NULL;
    }
    return r;
}

/* Hidden, called by dlsym.S for a lookup in a given handle (RTLD_DEFAULT and RTLD_NEXT never come here: their
 * answer depends on the caller, so dlsym.S jumps to glibc's dlsym with the caller's return address intact; they
 * find the shim's exported hooks first anyway, the shim being preloaded). */
__attribute__((visibility("hidden"))) void *shim_dlsym_handle(void *handle, const char *name);
void *shim_dlsym_handle(void *handle, const char *name) {
    dlsym_fn sym = shim_real_dlsym();
    if (!sym) return NULL;
    void *r = sym(handle, name);
    if (!r || !name || resolving) return r;
    /* the driver's names are cu + a capital (cuMemAlloc_v2; not cudaMalloc, cudnnCreate or cublasCreate_v2) */
    bool driver = name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
    if (!driver && strncmp(name, "nvml", 4) != 0) return r;
    if (!shim_enforcing()) return r;
    return shim_map(r, name, -1);
}
