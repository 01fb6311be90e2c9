/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run-time CUDA driver loader.
 *
 * libcuda.so.1 is opened with dlopen() and every entry point is looked up with cuGetProcAddress() at the API
 * version of the headers we were built with, so the module has no link-time dependency on the driver, runs on
 * hosts without one (reporting no devices), and always gets the ABI its prototypes describe.
 */
#ifndef CUX_DRIVER_H_
#define CUX_DRIVER_H_

#include "driver/cux_cuda.h"

#include <ucs/type/status.h>
#include <ucs/debug/log_def.h>

/*
 * Every driver function the plugin calls, with the CUDA version whose ABI we use. The same base name can
 * change its signature between versions (CUDA 13's cuCtxGetDevice_v2 takes a context argument), so each entry
 * point is typed with PFN_<name>_v<version> (cux_cuda.h) and requested from cuGetProcAddress at exactly that
 * version. The fields take the names cux_cuda.h maps them to (cuMemAlloc -> cuMemAlloc_v2), so
 * cux_drv.cuMemAlloc(...) reads like the plain API.
 */
#define CUX_DRIVER_FUNCS(_f) \
    _f(cuDriverGetVersion, 2020) \
    _f(cuGetErrorName, 6000) \
    _f(cuGetErrorString, 6000) \
    _f(cuDeviceGetCount, 2000) \
    _f(cuDeviceGet, 2000) \
    _f(cuDeviceGetName, 2000) \
    _f(cuDeviceGetAttribute, 2000) \
    _f(cuDeviceGetPCIBusId, 4010) \
    _f(cuDeviceGetUuid, 11040) \
    _f(cuDeviceCanAccessPeer, 4000) \
    _f(cuDevicePrimaryCtxRetain, 7000) \
    _f(cuDevicePrimaryCtxGetState, 7000) \
    _f(cuDevicePrimaryCtxRelease, 11000) \
    _f(cuCtxGetCurrent, 4000) \
    _f(cuCtxSetCurrent, 4000) \
    _f(cuCtxPushCurrent, 4000) \
    _f(cuCtxPopCurrent, 4000) \
    _f(cuCtxGetDevice, 2000) \
    _f(cuCtxGetFlags, 7000) \
    _f(cuCtxSynchronize, 2000) \
    _f(cuCtxEnablePeerAccess, 4000) \
    _f(cuStreamCreate, 2000) \
    _f(cuStreamDestroy, 4000) \
    _f(cuStreamSynchronize, 2000) \
    _f(cuStreamQuery, 2000) \
    _f(cuEventCreate, 2000) \
    _f(cuEventDestroy, 4000) \
    _f(cuEventRecord, 2000) \
    _f(cuEventQuery, 2000) \
    _f(cuLaunchHostFunc, 10000) \
    _f(cuMemcpyAsync, 4000) \
    _f(cuMemcpyDtoDAsync, 3020) \
    _f(cuMemAlloc, 3020) \
    _f(cuMemGetAddressRange, 3020) \
    _f(cuMemAllocManaged, 6000) \
    _f(cuMemFree, 3020) \
    _f(cuMemHostRegister, 6050) \
    _f(cuMemHostAlloc, 2020) \
    _f(cuMemFreeHost, 2000) \
    _f(cuMemHostUnregister, 4000) \
    _f(cuPointerGetAttributes, 7000) \
    _f(cuPointerSetAttribute, 6000) \
    _f(cuIpcGetMemHandle, 4010) \
    _f(cuIpcOpenMemHandle, 11000) \
    _f(cuIpcCloseMemHandle, 4010) \
    _f(cuMemCreate, 10020) \
    _f(cuMemRelease, 10020) \
    _f(cuMemRetainAllocationHandle, 11000) \
    _f(cuMemExportToShareableHandle, 10020) \
    _f(cuMemImportFromShareableHandle, 10020) \
    _f(cuMemAddressReserve, 10020) \
    _f(cuMemAddressFree, 10020) \
    _f(cuMemMap, 10020) \
    _f(cuMemUnmap, 10020) \
    _f(cuMemSetAccess, 10020) \
    _f(cuMemGetAllocationGranularity, 10020)

/* Entry points used when the driver has them: NULL otherwise, and the caller falls back. (The memory pool
 * functions exist since CUDA 11.2, but a driver without them still serves every other kind of memory.) */
#define CUX_DRIVER_OPTIONAL_FUNCS(_f) \
    _f(cuCtxSetFlags, 12010) \
    _f(cuMemGetHandleForAddressRange, 11070) \
    _f(cuMemcpyBatchAsync, 13000) \
    _f(cuMemPoolExportToShareableHandle, 11020) \
    _f(cuMemPoolExportPointer, 11020) \
    _f(cuMemPoolImportFromShareableHandle, 11020) \
    _f(cuMemPoolImportPointer, 11020) \
    _f(cuMemPoolGetAccess, 11020) \
    _f(cuMemPoolSetAccess, 11020) \
    _f(cuMemPoolDestroy, 11020) \
    _f(cuModuleLoadData, 2000) \
    _f(cuModuleGetFunction, 2000) \
    _f(cuLaunchKernel, 4000)

#define CUX_DRIVER_FIELD(_name, _version) PFN_##_name##_v##_version _name;

typedef struct cux_driver {
    CUX_DRIVER_FUNCS(CUX_DRIVER_FIELD)
    CUX_DRIVER_OPTIONAL_FUNCS(CUX_DRIVER_FIELD)
} cux_driver_t;

/* Filled by cux_driver_load(); read-only afterwards. */
extern cux_driver_t cux_drv;

/* Oldest driver API we accept: the entry points above all exist since 12.0. */
#define CUX_DRIVER_MIN_VERSION 12000

/* Environment variable naming the driver library to open (default libcuda.so.1). */
#define CUX_DRIVER_PATH_ENV "CUX_DRIVER_PATH"

/**
 * Load the driver and initialise it, once per process (thread-safe). Never fatal: without a driver or a GPU
 * it returns an error status, logs the reason at debug level, and keeps returning the same status.
 */
ucs_status_t cux_driver_load(void);

/* Driver version as reported by cuDriverGetVersion(), or 0 when not loaded. */
int cux_driver_version(void);

/* Why the last load failed, for messages ("" when loaded). */
const char *cux_driver_error(void);

/*
 * Set in the child of a fork() once the driver was loaded: CUDA cannot be used there (the driver's state
 * belongs to the parent), and the parent's process identity must not leak into keys. Entry points that would
 * call the driver or hand out an identity fail with UCS_ERR_UNSUPPORTED through cux_driver_check_fork().
 */
extern volatile int cux_driver_forked;

ucs_status_t cux_driver_fork_error(const char *what);

static inline ucs_status_t cux_driver_check_fork(const char *what)
{
    return ucs_likely(!cux_driver_forked) ? UCS_OK : cux_driver_fork_error(what);
}

/* Status code and log line for a failed driver call. */
ucs_status_t cux_driver_status(CUresult res, ucs_log_level_t level, const char *call, const char *file,
                               int line);

/* Call a driver function; on failure log at _level and evaluate to a UCX status, else UCS_OK. */
#define CUX_DRV_CALL(_level, _func, ...) \
    ({ \
        CUresult _cux_res = cux_drv._func(__VA_ARGS__); \
        (_cux_res == CUDA_SUCCESS) ? UCS_OK : \
        cux_driver_status(_cux_res, _level, #_func, __FILE__, __LINE__); \
    })

#define CUX_DRV_CALL_ERR(_func, ...) CUX_DRV_CALL(UCS_LOG_LEVEL_ERROR, _func, __VA_ARGS__)

/* Export the cuMemCreate allocation at base as a shareable handle of type (a descriptor, a fabric handle) into
 * shareable: the driver's handle of it is retained for the export and released after. Failures log at debug
 * level: the caller decides what a refusal means. */
static inline ucs_status_t cux_driver_export_allocation(uintptr_t base, CUmemAllocationHandleType type,
                                                        void *shareable)
{
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;

    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemRetainAllocationHandle, &handle, (void*)base);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemExportToShareableHandle, shareable, handle, type, 0);
    (void)CUX_DRV_CALL_ERR(cuMemRelease, handle);
    return status;
}

#endif
