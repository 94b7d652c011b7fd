/* cuda_abi.h -- the few types, constants and struct layouts of NVIDIA's driver API (cuda.h) and NVML (nvml.h)
 * that libtessera-cuda.so, the fake driver and the probe use, written out so that building them needs no CUDA
 * toolkit. Every value is the one cuda.h / nvml.h define (CUDA 13 headers; these have not changed since the
 * versions named beside them); names keep NVIDIA's spelling so a reader can grep the real headers.
 */
#ifndef SHIM_CUDA_ABI_H
#define SHIM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUuuid_st { char bytes[16]; } CUuuid;

#define CUDA_SUCCESS                       0
#define CUDA_ERROR_INVALID_VALUE           1
#define CUDA_ERROR_OUT_OF_MEMORY           2
#define CUDA_ERROR_NOT_INITIALIZED         3
#define CUDA_ERROR_NO_DEVICE               100
#define CUDA_ERROR_INVALID_DEVICE          101
#define CUDA_ERROR_INVALID_CONTEXT         201
#define CUDA_ERROR_INVALID_HANDLE          400
#define CUDA_ERROR_NOT_FOUND               500
#define CUDA_ERROR_NOT_SUPPORTED           801
#define CUDA_ERROR_SYSTEM_NOT_READY        802
#define CUDA_ERROR_MPS_CONNECTION_FAILED   805
#define CUDA_ERROR_MPS_SERVER_NOT_READY    807
#define CUDA_ERROR_MPS_MAX_CLIENTS_REACHED 808

/* cuGetProcAddress flags (CUdriverProcAddress_flags) and the _v2 status out-parameter
 * (CUdriverProcAddressQueryResult, CUDA 12.0). */
#define CU_GET_PROC_ADDRESS_DEFAULT                   0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM             1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 2
#define CU_GET_PROC_ADDRESS_SUCCESS                   0
#define CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND          1
#define CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT    2

/* CUdevice_attribute values the fake answers */
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* cuMemAllocManaged flags */
#define CU_MEM_ATTACH_GLOBAL 1

/* CUmemAllocationProp (CUDA 10.2): only location matters here; the real struct continues with
 * win32HandleMetaData and allocFlags, which the shim never reads (it only reads through a pointer). */
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_MEM_ALLOCATION_TYPE_PINNED 1
typedef struct CUmemLocation_st { int type; int id; } CUmemLocation;
typedef struct CUmemAllocationProp_st {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; }
        allocFlags;
} CUmemAllocationProp;

/* Array descriptors (the _v2 layouts, CUDA 3.2) and the element formats whose size is known. */
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width, Height;
    int Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width, Height, Depth;
    int Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
#define CU_AD_FORMAT_UNSIGNED_INT8  0x01
#define CU_AD_FORMAT_UNSIGNED_INT16 0x02
#define CU_AD_FORMAT_UNSIGNED_INT32 0x03
#define CU_AD_FORMAT_SIGNED_INT8    0x08
#define CU_AD_FORMAT_SIGNED_INT16   0x09
#define CU_AD_FORMAT_SIGNED_INT32   0x0a
#define CU_AD_FORMAT_HALF           0x10
#define CU_AD_FORMAT_FLOAT          0x20

/* NVML (nvml.h): nvmlMemory_t and nvmlMemory_v2_t; nvmlMemory_v2 is NVML_STRUCT_VERSION(Memory, 2). */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ERROR_UNKNOWN 999
typedef struct nvmlMemory_st { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

#endif
