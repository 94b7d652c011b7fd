/* cuda_api.h -- prototypes of the driver (libcuda.so.1) and NVML (libnvidia-ml.so.1) entry points that
 * libtessera-cuda.so hooks, with NVIDIA's names and signatures (cuda.h, cudaTypedefs.h, nvml.h). The shim defines
 * them as its hooks; the fake driver (tests/support/fake_cuda.c) defines them as the driver. The version in each
 * comment is the CUDA version that introduced the entry point, the number cuGetProcAddress is asked with.
 */
#ifndef SHIM_CUDA_API_H
#define SHIM_CUDA_API_H

#include "shim/cuda_abi.h"

CUresult cuInit(unsigned int flags);                                                               /* 2000 */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);      /* 11030 */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             int *symbolStatus);                                                   /* 12000 */

/* allocations */
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);                                        /* 3020 */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes);                                        /* 3020 */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);                /* 6000 */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);                    /* 11020 */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);               /* 11020 */
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);                                           /* 11020 */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags);                                                    /* 10020 */
CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);          /* 3020 */
CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);      /* 3020 */
CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                unsigned int numMipmapLevels);                                     /* 5000 */

/* frees */
CUresult cuMemFree_v2(CUdeviceptr dptr);                                                           /* 3020 */
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);                                       /* 11020 */
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);                                  /* 11020 */
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);                                        /* 10020 */
CUresult cuArrayDestroy(CUarray hArray);                                                           /* 2000 */
CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);                                /* 5000 */

/* what the device reports */
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);                                             /* 3020 */
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);                                         /* 3020 */

/* The CUDA 3.1 entry points with 32-bit sizes, still exported by the driver. */
CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize);                                    /* 2000 */
CUresult cuMemAllocPitch(unsigned int *dptr, unsigned int *pPitch, unsigned int WidthInBytes, unsigned int Height,
                         unsigned int ElementSizeBytes);                                           /* 2000 */
CUresult cuMemGetInfo(unsigned int *free, unsigned int *total);                                    /* 2000 */
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);                                      /* 2000 */

/* NVML */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);

#endif
