/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA driver's entry points this project names, one line each, apart from the types they take
 * (src/driver/cux_cuda.h), so that a test can hold the same list to a toolkit's own declarations
 * (test/abi/cux_cuda_abi_toolkit.c).
 */
#ifndef CUX_CUDA_ENTRY_POINTS_H_
#define CUX_CUDA_ENTRY_POINTS_H_

/*
 * Every entry point named here: _f(name, API version of its signature, the symbol the driver exports for a
 * direct caller of that name, (parameters)). All return CUresult. Makes PFN_<name>_v<version>, as
 * cudaTypedefs.h names it, and the direct caller's prototype.
 */
#define CUX_CUDA_ENTRY_POINTS(_f) \
    _f(cuInit, 2000, cuInit, (unsigned int flags)) \
    _f(cuDriverGetVersion, 2020, cuDriverGetVersion, (int *version)) \
    _f(cuGetProcAddress, 12000, cuGetProcAddress_v2, (const char *symbol, void **pfn, int version, \
       cuuint64_t flags, CUdriverProcAddressQueryResult *status)) \
    _f(cuGetErrorName, 6000, cuGetErrorName, (CUresult error, const char **name)) \
    _f(cuGetErrorString, 6000, cuGetErrorString, (CUresult error, const char **text)) \
    _f(cuDeviceGetCount, 2000, cuDeviceGetCount, (int *count)) \
    _f(cuDeviceGet, 2000, cuDeviceGet, (CUdevice *device, int ordinal)) \
    _f(cuDeviceGetName, 2000, cuDeviceGetName, (char *name, int len, CUdevice device)) \
    _f(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute, (int *value, CUdevice_attribute attribute, \
       CUdevice device)) \
    _f(cuDeviceGetPCIBusId, 4010, cuDeviceGetPCIBusId, (char *bus_id, int len, CUdevice device)) \
    _f(cuDeviceGetByPCIBusId, 4010, cuDeviceGetByPCIBusId, (CUdevice *device, const char *bus_id)) \
    _f(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice device)) \
    _f(cuDeviceCanAccessPeer, 4000, cuDeviceCanAccessPeer, (int *can_access, CUdevice device, CUdevice peer)) \
    _f(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool, (CUmemoryPool *pool, CUdevice device)) \
    _f(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice device)) \
    _f(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState, (CUdevice device, unsigned int *flags, \
       int *active)) \
    _f(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2, (CUdevice device)) \
    _f(cuCtxGetCurrent, 4000, cuCtxGetCurrent, (CUcontext *ctx)) \
    _f(cuCtxSetCurrent, 4000, cuCtxSetCurrent, (CUcontext ctx)) \
    _f(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2, (CUcontext ctx)) \
    _f(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2, (CUcontext *ctx)) \
    _f(cuCtxGetDevice, 2000, cuCtxGetDevice, (CUdevice *device)) \
    _f(cuCtxGetFlags, 7000, cuCtxGetFlags, (unsigned int *flags)) \
    _f(cuCtxSetFlags, 12010, cuCtxSetFlags, (unsigned int flags)) \
    _f(cuCtxSynchronize, 2000, cuCtxSynchronize, (void)) \
    _f(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange, (int *least, int *greatest)) \
    _f(cuCtxEnablePeerAccess, 4000, cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags)) \
    _f(cuCtxDisablePeerAccess, 4000, cuCtxDisablePeerAccess, (CUcontext peer)) \
    _f(cuStreamCreate, 2000, cuStreamCreate, (CUstream *stream, unsigned int flags)) \
    _f(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority, (CUstream *stream, unsigned int flags, \
       int priority)) \
    _f(cuStreamDestroy, 4000, cuStreamDestroy_v2, (CUstream stream)) \
    _f(cuStreamSynchronize, 2000, cuStreamSynchronize, (CUstream stream)) \
    _f(cuStreamQuery, 2000, cuStreamQuery, (CUstream stream)) \
    _f(cuStreamWriteValue64, 11070, cuStreamWriteValue64_v2, (CUstream stream, CUdeviceptr address, \
       cuuint64_t value, unsigned int flags)) \
    _f(cuEventCreate, 2000, cuEventCreate, (CUevent *event, unsigned int flags)) \
    _f(cuEventDestroy, 4000, cuEventDestroy_v2, (CUevent event)) \
    _f(cuEventRecord, 2000, cuEventRecord, (CUevent event, CUstream stream)) \
    _f(cuEventQuery, 2000, cuEventQuery, (CUevent event)) \
    _f(cuLaunchHostFunc, 10000, cuLaunchHostFunc, (CUstream stream, CUhostFn fn, void *arg)) \
    _f(cuModuleLoadData, 2000, cuModuleLoadData, (CUmodule *module, const void *image)) \
    _f(cuModuleGetFunction, 2000, cuModuleGetFunction, (CUfunction *function, CUmodule module, \
       const char *name)) \
    _f(cuLaunchKernel, 4000, cuLaunchKernel, (CUfunction function, unsigned int grid_x, unsigned int grid_y, \
       unsigned int grid_z, unsigned int block_x, unsigned int block_y, unsigned int block_z, \
       unsigned int shared_bytes, CUstream stream, void **params, void **extra)) \
    _f(cuMemcpy, 4000, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t size)) \
    _f(cuMemcpyAsync, 4000, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream)) \
    _f(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t size, \
       CUstream stream)) \
    _f(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t size)) \
    _f(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t size)) \
    _f(cuMemcpyBatchAsync, 13000, cuMemcpyBatchAsync_v2, (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, \
       size_t count, CUmemcpyAttributes *attrs, size_t *attr_indices, size_t num_attrs, CUstream stream)) \
    _f(cuMemAlloc, 3020, cuMemAlloc_v2, (CUdeviceptr *ptr, size_t size)) \
    _f(cuMemAllocPitch, 3020, cuMemAllocPitch_v2, (CUdeviceptr *ptr, size_t *pitch, size_t width, \
       size_t height, unsigned int element_size)) \
    _f(cuMemAllocManaged, 6000, cuMemAllocManaged, (CUdeviceptr *ptr, size_t size, unsigned int flags)) \
    _f(cuMemAllocAsync, 11020, cuMemAllocAsync, (CUdeviceptr *ptr, size_t size, CUstream stream)) \
    _f(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, (CUdeviceptr *ptr, size_t size, \
       CUmemoryPool pool, CUstream stream)) \
    _f(cuMemFree, 3020, cuMemFree_v2, (CUdeviceptr ptr)) \
    _f(cuMemFreeAsync, 11020, cuMemFreeAsync, (CUdeviceptr ptr, CUstream stream)) \
    _f(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2, (CUdeviceptr *base, size_t *size, CUdeviceptr ptr)) \
    _f(cuMemGetInfo, 3020, cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes)) \
    _f(cuMemHostAlloc, 2020, cuMemHostAlloc, (void **ptr, size_t size, unsigned int flags)) \
    _f(cuMemFreeHost, 2000, cuMemFreeHost, (void *ptr)) \
    _f(cuMemHostRegister, 6050, cuMemHostRegister_v2, (void *ptr, size_t size, unsigned int flags)) \
    _f(cuMemHostUnregister, 4000, cuMemHostUnregister, (void *ptr)) \
    _f(cuMemHostGetDevicePointer, 3020, cuMemHostGetDevicePointer_v2, (CUdeviceptr *dptr, void *ptr, \
       unsigned int flags)) \
    _f(cuPointerGetAttribute, 4000, cuPointerGetAttribute, (void *data, CUpointer_attribute attribute, \
       CUdeviceptr ptr)) \
    _f(cuPointerGetAttributes, 7000, cuPointerGetAttributes, (unsigned int count, \
       CUpointer_attribute *attributes, void **data, CUdeviceptr ptr)) \
    _f(cuPointerSetAttribute, 6000, cuPointerSetAttribute, (const void *value, CUpointer_attribute attribute, \
       CUdeviceptr ptr)) \
    _f(cuIpcGetMemHandle, 4010, cuIpcGetMemHandle, (CUipcMemHandle *handle, CUdeviceptr ptr)) \
    _f(cuIpcOpenMemHandle, 11000, cuIpcOpenMemHandle_v2, (CUdeviceptr *ptr, CUipcMemHandle handle, \
       unsigned int flags)) \
    _f(cuIpcCloseMemHandle, 4010, cuIpcCloseMemHandle, (CUdeviceptr ptr)) \
    _f(cuMemCreate, 10020, cuMemCreate, (CUmemGenericAllocationHandle *handle, size_t size, \
       const CUmemAllocationProp *prop, unsigned long long flags)) \
    _f(cuMemRelease, 10020, cuMemRelease, (CUmemGenericAllocationHandle handle)) \
    _f(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *handle, \
       void *ptr)) \
    _f(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle, (void *shareable, \
       CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type, unsigned long long flags)) \
    _f(cuMemImportFromShareableHandle, 10020, cuMemImportFromShareableHandle, \
       (CUmemGenericAllocationHandle *handle, void *shareable, CUmemAllocationHandleType type)) \
    _f(cuMemAddressReserve, 10020, cuMemAddressReserve, (CUdeviceptr *ptr, size_t size, size_t alignment, \
       CUdeviceptr address, unsigned long long flags)) \
    _f(cuMemAddressFree, 10020, cuMemAddressFree, (CUdeviceptr ptr, size_t size)) \
    _f(cuMemMap, 10020, cuMemMap, (CUdeviceptr ptr, size_t size, size_t offset, \
       CUmemGenericAllocationHandle handle, unsigned long long flags)) \
    _f(cuMemUnmap, 10020, cuMemUnmap, (CUdeviceptr ptr, size_t size)) \
    _f(cuMemSetAccess, 10020, cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, \
       size_t count)) \
    _f(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity, (size_t *granularity, \
       const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option)) \
    _f(cuMemGetHandleForAddressRange, 11070, cuMemGetHandleForAddressRange, (void *handle, CUdeviceptr ptr, \
       size_t size, CUmemRangeHandleType type, unsigned long long flags)) \
    _f(cuMemPoolCreate, 11020, cuMemPoolCreate, (CUmemoryPool *pool, const CUmemPoolProps *props)) \
    _f(cuMemPoolDestroy, 11020, cuMemPoolDestroy, (CUmemoryPool pool)) \
    _f(cuMemPoolGetAccess, 11020, cuMemPoolGetAccess, (CUmemAccess_flags *flags, CUmemoryPool pool, \
       CUmemLocation *location)) \
    _f(cuMemPoolSetAccess, 11020, cuMemPoolSetAccess, (CUmemoryPool pool, const CUmemAccessDesc *desc, \
       size_t count)) \
    _f(cuMemPoolExportToShareableHandle, 11020, cuMemPoolExportToShareableHandle, (void *shareable, \
       CUmemoryPool pool, CUmemAllocationHandleType type, unsigned long long flags)) \
    _f(cuMemPoolImportFromShareableHandle, 11020, cuMemPoolImportFromShareableHandle, (CUmemoryPool *pool, \
       void *shareable, CUmemAllocationHandleType type, unsigned long long flags)) \
    _f(cuMemPoolExportPointer, 11020, cuMemPoolExportPointer, (CUmemPoolPtrExportData *data, CUdeviceptr ptr)) \
    _f(cuMemPoolImportPointer, 11020, cuMemPoolImportPointer, (CUdeviceptr *ptr, CUmemoryPool pool, \
       CUmemPoolPtrExportData *data))

#endif
