/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA driver API as this project uses it: the types, constants and entry points that the module, the mock
 * driver and the test programs name, declared from the driver's documented ABI (NVIDIA's CUDA Driver API
 * reference), and nothing more. The module opens the driver at run time (cux_driver.h), so with this header no
 * CUDA toolkit is needed to build it. Where a toolkit is installed, a test holds every size, field offset,
 * value and signature here to its cuda.h and cudaTypedefs.h (test/abi/).
 *
 * Adding a driver function: one line in CUX_CUDA_ENTRY_POINTS (the API version of the signature used, the
 * exported symbol a direct caller links to, the parameters), a rename below if the driver exports the name with
 * a suffix; any type it takes, declared after the documentation; and its line in test/abi/cux_cuda_abi_list.h.
 */
#ifndef CUX_CUDA_H_
#define CUX_CUDA_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API version these declarations follow: entry points are asked for at the versions listed below. */
#define CUDA_VERSION 13000

/* --- scalars and handles --- */

typedef unsigned int       cuuint32_t;
typedef unsigned long long cuuint64_t;
typedef int                CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st           *CUcontext;
typedef struct CUstream_st        *CUstream;
typedef struct CUevent_st         *CUevent;
typedef struct CUmod_st           *CUmodule;
typedef struct CUfunc_st          *CUfunction;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

/* The calling convention of callbacks the driver calls (the platform's own on Linux). */
#define CUDA_CB

typedef void (CUDA_CB *CUhostFn)(void *userData);

#define CU_DEVICE_INVALID ((CUdevice)-2)

/* --- results --- */

typedef enum cudaError_enum {
    CUDA_SUCCESS                              = 0,
    CUDA_ERROR_INVALID_VALUE                  = 1,
    CUDA_ERROR_OUT_OF_MEMORY                  = 2,
    CUDA_ERROR_NOT_INITIALIZED                = 3,
    CUDA_ERROR_NO_DEVICE                      = 100,
    CUDA_ERROR_INVALID_DEVICE                 = 101,
    CUDA_ERROR_INVALID_CONTEXT                = 201,
    CUDA_ERROR_MAP_FAILED                     = 205,
    CUDA_ERROR_ALREADY_MAPPED                 = 208,
    CUDA_ERROR_INVALID_PTX                    = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION        = 222,
    CUDA_ERROR_OPERATING_SYSTEM               = 304,
    CUDA_ERROR_INVALID_HANDLE                 = 400,
    CUDA_ERROR_NOT_FOUND                      = 500,
    CUDA_ERROR_NOT_READY                      = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS                = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED    = 704,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED        = 705,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED     = 713,
    CUDA_ERROR_LAUNCH_FAILED                  = 719,
    CUDA_ERROR_NOT_PERMITTED                  = 800,
    CUDA_ERROR_NOT_SUPPORTED                  = 801,
    CUDA_ERROR_UNKNOWN                        = 999
} CUresult;

/* --- flags --- */

typedef enum CUctx_flags_enum {
    CU_CTX_SYNC_MEMOPS = 0x80 /* synchronous memory operations: a copy from pageable memory has landed on return */
} CUctx_flags;

typedef enum CUstream_flags_enum {
    CU_STREAM_DEFAULT      = 0x0,
    CU_STREAM_NON_BLOCKING = 0x1
} CUstream_flags;

typedef enum CUevent_flags_enum {
    CU_EVENT_DEFAULT        = 0x0,
    CU_EVENT_DISABLE_TIMING = 0x2
} CUevent_flags;

typedef enum CUipcMem_flags_enum {
    CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1
} CUipcMem_flags;

typedef enum CUmemAttach_flags_enum {
    CU_MEM_ATTACH_GLOBAL = 0x1
} CUmemAttach_flags;

#define CU_MEMHOSTALLOC_PORTABLE    0x01
#define CU_MEMHOSTALLOC_DEVICEMAP   0x02
#define CU_MEMHOSTREGISTER_PORTABLE 0x01

/* --- devices and pointers --- */

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
} CUdevice_attribute;

typedef enum CUmemorytype_enum {
    CU_MEMORYTYPE_HOST   = 0x01,
    CU_MEMORYTYPE_DEVICE = 0x02
} CUmemorytype;

typedef enum CUpointer_attribute_enum {
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE                = 2,
    CU_POINTER_ATTRIBUTE_SYNC_MEMOPS                = 6,
    CU_POINTER_ATTRIBUTE_BUFFER_ID                  = 7,
    CU_POINTER_ATTRIBUTE_IS_MANAGED                 = 8,
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL             = 9,
    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR           = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE                 = 12,
    CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES       = 14,
    CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE             = 17,
    CU_POINTER_ATTRIBUTE_MAPPING_SIZE               = 18,
    CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR          = 19
} CUpointer_attribute;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* --- legacy IPC --- */

#define CU_IPC_HANDLE_SIZE 64

typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

/* --- virtual memory management (cuMemCreate) and memory pools --- */

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE                  = 0x0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
    CU_MEM_HANDLE_TYPE_FABRIC                = 0x8  /* imported by any process of the IMEX domain (CUDA 12.3+) */
} CUmemAllocationHandleType;

/* What cuMemExportToShareableHandle writes for CU_MEM_HANDLE_TYPE_FABRIC. */
typedef struct CUmemFabricHandle_st {
    unsigned char data[64];
} CUmemFabricHandle;

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE      = 0x0,
    CU_MEM_ACCESS_FLAGS_PROT_READ      = 0x1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3
} CUmemAccess_flags;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0x0,
    CU_MEM_LOCATION_TYPE_DEVICE  = 0x1
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
    CU_MEM_ALLOCATION_TYPE_PINNED  = 0x1
} CUmemAllocationType;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM     = 0x0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1
} CUmemAllocationGranularity_flags;

typedef enum CUmemRangeHandleType_enum {
    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1
} CUmemRangeHandleType;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int               id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType       type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation             location;
    void                      *win32HandleMetaData;
    struct {
        unsigned char  compressionType;
        unsigned char  gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char  reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation     location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType       allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation             location;
    void                      *win32SecurityAttributes;
    size_t                    maxSize;
    unsigned short            usage;
    unsigned char             reserved[54];
} CUmemPoolProps;

typedef struct CUmemPoolPtrExportData_st {
    unsigned char reserved[64];
} CUmemPoolPtrExportData;

/* --- batched copies (CUDA 12.8+) --- */

typedef enum CUmemcpySrcAccessOrder_enum {
    CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0x0,
    CU_MEMCPY_SRC_ACCESS_ORDER_STREAM  = 0x1
} CUmemcpySrcAccessOrder;

typedef struct CUmemcpyAttributes_st {
    CUmemcpySrcAccessOrder srcAccessOrder;
    CUmemLocation          srcLocHint;
    CUmemLocation          dstLocHint;
    unsigned int           flags;
} CUmemcpyAttributes;

/* --- entry points by version --- */

typedef enum CUdriverProcAddress_flags_enum {
    CU_GET_PROC_ADDRESS_DEFAULT                   = 0,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM             = 1 << 0,
    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS          = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1
} CUdriverProcAddressQueryResult;

#include "driver/cux_cuda_entry_points.h"

#define CUX_CUDA_PFN(_name, _version, _symbol, _params) typedef CUresult (*PFN_##_name##_v##_version) _params;
#define CUX_CUDA_PROTOTYPE(_name, _version, _symbol, _params) CUresult _symbol _params;

CUX_CUDA_ENTRY_POINTS(CUX_CUDA_PFN)
CUX_CUDA_ENTRY_POINTS(CUX_CUDA_PROTOTYPE)

/* A direct call of these names links to the driver's suffixed symbol (the driver keeps the plain one for
 * programs built against older versions). */
#define cuGetProcAddress          cuGetProcAddress_v2
#define cuDeviceGetUuid           cuDeviceGetUuid_v2
#define cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
#define cuCtxPushCurrent          cuCtxPushCurrent_v2
#define cuCtxPopCurrent           cuCtxPopCurrent_v2
#define cuStreamDestroy           cuStreamDestroy_v2
#define cuStreamWriteValue64      cuStreamWriteValue64_v2
#define cuEventDestroy            cuEventDestroy_v2
#define cuMemcpyHtoD              cuMemcpyHtoD_v2
#define cuMemcpyDtoH              cuMemcpyDtoH_v2
#define cuMemcpyDtoDAsync         cuMemcpyDtoDAsync_v2
#define cuMemcpyBatchAsync        cuMemcpyBatchAsync_v2
#define cuMemAlloc                cuMemAlloc_v2
#define cuMemAllocPitch           cuMemAllocPitch_v2
#define cuMemFree                 cuMemFree_v2
#define cuMemGetAddressRange      cuMemGetAddressRange_v2
#define cuMemGetInfo              cuMemGetInfo_v2
#define cuMemHostRegister         cuMemHostRegister_v2
#define cuMemHostGetDevicePointer cuMemHostGetDevicePointer_v2
#define cuIpcOpenMemHandle        cuIpcOpenMemHandle_v2

#ifdef __cplusplus
}
#endif

#endif
