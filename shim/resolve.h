/* resolve.h -- the real driver's and NVML's entry points behind each hook, and the mapping that hands a hook out
 * wherever a program would have received the real function (dlsym on a handle, cuGetProcAddress/_v2).
 */
#ifndef SHIM_RESOLVE_H
#define SHIM_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>

/* One entry per hooked entry point, plus the few the shim calls itself (hook NULL). */
enum {
    R_cuInit, R_cuGetProcAddress, R_cuGetProcAddress_v2,
    R_cuMemAlloc_v2, R_cuMemAllocPitch_v2, R_cuMemAllocManaged, R_cuMemAllocAsync, R_cuMemAllocAsync_ptsz,
    R_cuMemAllocFromPoolAsync, R_cuMemAllocFromPoolAsync_ptsz, R_cuMemCreate, R_cuArrayCreate_v2,
    R_cuArray3DCreate_v2, R_cuMipmappedArrayCreate,
    R_cuMemFree_v2, R_cuMemFreeAsync, R_cuMemFreeAsync_ptsz, R_cuMemRelease, R_cuArrayDestroy,
    R_cuMipmappedArrayDestroy,
    R_cuMemGetInfo_v2, R_cuDeviceTotalMem_v2,
    R_cuMemAlloc, R_cuMemAllocPitch, R_cuMemGetInfo, R_cuDeviceTotalMem,
    /* called by the shim, not hooked */
    R_cuCtxGetDevice, R_cuDeviceGet, R_cuDeviceGetUuid, R_cuDeviceGetUuid_v2,
    R_CUDA_END,
    R_nvmlDeviceGetMemoryInfo = R_CUDA_END, R_nvmlDeviceGetMemoryInfo_v2, R_nvmlDeviceGetUUID,
    R_END
};

/* The real function for entry e, loading its library (libcuda.so.1 or libnvidia-ml.so.1) if the process has not:
 * a hook can be reached through the shim's own export before the program loaded the library. NULL if the library
 * cannot be loaded or lacks the entry point. */
void *shim_real(int e);

/* Whether libcuda.so.1 could be loaded; why not (dlerror's text) otherwise. */
bool shim_cuda_loaded(char *why, size_t len);

/* What to hand out instead of r, the real answer of a lookup of name (a symbol name for dlsym: cuda_version -1; a
 * base name and the version asked for cuGetProcAddress): the hook if r is a hooked real function (found by address, so every alias and
 * version the driver maps to it is covered), NULL if r is a variant of an allocation entry point this shim does not
 * know (a newer version: handing it out would allocate unaccounted; a line on stderr says so), else r. Only called
 * when the share is enforced. */
void *shim_map(void *r, const char *name, int cuda_version);

#endif
