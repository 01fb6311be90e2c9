/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What test/abi compares between src/driver/cux_cuda.h and a CUDA toolkit's cuda.h, each side compiled on its own
 * (cux_cuda_abi_ours.c, cux_cuda_abi_toolkit.c) into a table of names and numbers: every type's size, every
 * structure field's offset and size, every constant's value. The entry points' signatures are compared in the toolkit's
 * unit alone (cux_cuda_entry_points.h against its declarations).
 */
#ifndef CUX_CUDA_ABI_LIST_H_
#define CUX_CUDA_ABI_LIST_H_

#include <stddef.h>

typedef struct cux_abi_entry {
    const char *name;
    long long   value;
} cux_abi_entry_t;

#define CUX_ABI_SIZES(_s) \
    _s(cuuint32_t) _s(cuuint64_t) _s(CUdevice) _s(CUdeviceptr) _s(CUmemGenericAllocationHandle) _s(CUcontext) \
    _s(CUstream) _s(CUevent) _s(CUmodule) _s(CUfunction) _s(CUmemoryPool) _s(CUhostFn) _s(CUresult) \
    _s(CUctx_flags) _s(CUstream_flags) _s(CUevent_flags) _s(CUipcMem_flags) _s(CUmemAttach_flags) \
    _s(CUdevice_attribute) _s(CUmemorytype) _s(CUpointer_attribute) _s(CUuuid) _s(CUipcMemHandle) \
    _s(CUmemFabricHandle) _s(CUmemAllocationHandleType) _s(CUmemAccess_flags) _s(CUmemLocationType) \
    _s(CUmemAllocationType) _s(CUmemAllocationGranularity_flags) _s(CUmemRangeHandleType) _s(CUmemLocation) _s(CUmemAllocationProp) \
    _s(CUmemAccessDesc) _s(CUmemPoolProps) _s(CUmemPoolPtrExportData) _s(CUmemcpySrcAccessOrder) \
    _s(CUmemcpyAttributes) _s(CUdriverProcAddress_flags) _s(CUdriverProcAddressQueryResult)

#define CUX_ABI_OFFSETS(_o) \
    _o(CUuuid, bytes) _o(CUipcMemHandle, reserved) _o(CUmemFabricHandle, data) \
    _o(CUmemLocation, type) _o(CUmemLocation, id) \
    _o(CUmemAllocationProp, type) _o(CUmemAllocationProp, requestedHandleTypes) _o(CUmemAllocationProp, location) \
    _o(CUmemAllocationProp, win32HandleMetaData) _o(CUmemAllocationProp, allocFlags) \
    _o(CUmemAllocationProp, allocFlags.compressionType) _o(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable) \
    _o(CUmemAllocationProp, allocFlags.usage) _o(CUmemAllocationProp, allocFlags.reserved) \
    _o(CUmemAccessDesc, location) _o(CUmemAccessDesc, flags) \
    _o(CUmemPoolProps, allocType) _o(CUmemPoolProps, handleTypes) _o(CUmemPoolProps, location) \
    _o(CUmemPoolProps, win32SecurityAttributes) _o(CUmemPoolProps, maxSize) _o(CUmemPoolProps, usage) \
    _o(CUmemPoolProps, reserved) _o(CUmemPoolPtrExportData, reserved) \
    _o(CUmemcpyAttributes, srcAccessOrder) _o(CUmemcpyAttributes, srcLocHint) _o(CUmemcpyAttributes, dstLocHint) \
    _o(CUmemcpyAttributes, flags)

#define CUX_ABI_VALUES(_v) \
    _v(CUDA_SUCCESS) _v(CUDA_ERROR_INVALID_VALUE) _v(CUDA_ERROR_OUT_OF_MEMORY) _v(CUDA_ERROR_NOT_INITIALIZED) \
    _v(CUDA_ERROR_NO_DEVICE) _v(CUDA_ERROR_INVALID_DEVICE) _v(CUDA_ERROR_INVALID_CONTEXT) \
    _v(CUDA_ERROR_MAP_FAILED) _v(CUDA_ERROR_ALREADY_MAPPED) _v(CUDA_ERROR_INVALID_PTX) \
    _v(CUDA_ERROR_OPERATING_SYSTEM) _v(CUDA_ERROR_INVALID_HANDLE) _v(CUDA_ERROR_NOT_FOUND) \
    _v(CUDA_ERROR_NOT_READY) _v(CUDA_ERROR_ILLEGAL_ADDRESS) _v(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) \
    _v(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) _v(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) \
    _v(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) _v(CUDA_ERROR_LAUNCH_FAILED) _v(CUDA_ERROR_NOT_PERMITTED) \
    _v(CUDA_ERROR_NOT_SUPPORTED) _v(CUDA_ERROR_UNKNOWN) \
    _v(CU_DEVICE_INVALID) _v(CU_CTX_SYNC_MEMOPS) _v(CU_STREAM_DEFAULT) _v(CU_STREAM_NON_BLOCKING) \
    _v(CU_EVENT_DEFAULT) _v(CU_EVENT_DISABLE_TIMING) _v(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) \
    _v(CU_MEM_ATTACH_GLOBAL) _v(CU_MEMHOSTALLOC_PORTABLE) _v(CU_MEMHOSTALLOC_DEVICEMAP) \
    _v(CU_MEMHOSTREGISTER_PORTABLE) _v(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) _v(CU_MEMORYTYPE_HOST) \
    _v(CU_MEMORYTYPE_DEVICE) _v(CU_POINTER_ATTRIBUTE_MEMORY_TYPE) _v(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) \
    _v(CU_POINTER_ATTRIBUTE_BUFFER_ID) _v(CU_POINTER_ATTRIBUTE_IS_MANAGED) _v(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) \
    _v(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE) _v(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) \
    _v(CU_POINTER_ATTRIBUTE_RANGE_SIZE) _v(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES) \
    _v(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE) _v(CU_POINTER_ATTRIBUTE_MAPPING_SIZE) \
    _v(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR) _v(CU_IPC_HANDLE_SIZE) _v(CU_MEM_HANDLE_TYPE_NONE) \
    _v(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) _v(CU_MEM_HANDLE_TYPE_FABRIC) _v(CU_MEM_ACCESS_FLAGS_PROT_NONE) \
    _v(CU_MEM_ACCESS_FLAGS_PROT_READ) _v(CU_MEM_ACCESS_FLAGS_PROT_READWRITE) _v(CU_MEM_LOCATION_TYPE_INVALID) \
    _v(CU_MEM_LOCATION_TYPE_DEVICE) _v(CU_MEM_ALLOCATION_TYPE_INVALID) _v(CU_MEM_ALLOCATION_TYPE_PINNED) \
    _v(CU_MEM_ALLOC_GRANULARITY_MINIMUM) _v(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) \
    _v(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) _v(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) \
    _v(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) _v(CU_GET_PROC_ADDRESS_DEFAULT) _v(CU_GET_PROC_ADDRESS_LEGACY_STREAM) \
    _v(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) _v(CU_GET_PROC_ADDRESS_SUCCESS) \
    _v(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)

#define CUX_ABI_SIZE(_type)           {"sizeof(" #_type ")", (long long)sizeof(_type)},
#define CUX_ABI_OFFSET(_type, _field) \
    {"offsetof(" #_type ", " #_field ")", (long long)offsetof(_type, _field)}, \
    {"sizeof(" #_type "." #_field ")", (long long)sizeof(((_type*)0)->_field)},
#define CUX_ABI_VALUE(_name)          {#_name, (long long)(_name)},
#define CUX_ABI_TABLE \
    {CUX_ABI_SIZES(CUX_ABI_SIZE) CUX_ABI_OFFSETS(CUX_ABI_OFFSET) CUX_ABI_VALUES(CUX_ABI_VALUE) {NULL, 0}}

#endif
