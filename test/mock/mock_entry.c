/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): The driver's entry points: cuGetProcAddress's table and the exported names.
 */
#include "mock.h"

#define MOCK_SYM(_name) {#_name, (void*)m_##_name}

/* Synchronous copies, as applications fill and read their buffers (also exported below). */
static CUresult m_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n)
{
    return mock_sync_copy(dst, (CUdeviceptr)src, n);
}
static CUresult m_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) { return mock_sync_copy((CUdeviceptr)dst, src, n); }

static const struct {
    const char *name;
    void       *fn;
} mock_syms[] __attribute__((used)) = {
    MOCK_SYM(cuDriverGetVersion), MOCK_SYM(cuGetErrorName), MOCK_SYM(cuGetErrorString),
    MOCK_SYM(cuDeviceGetCount), MOCK_SYM(cuDeviceGet), MOCK_SYM(cuDeviceGetName),
    MOCK_SYM(cuDeviceGetAttribute), MOCK_SYM(cuDeviceGetPCIBusId), MOCK_SYM(cuDeviceGetUuid),
    MOCK_SYM(cuDeviceCanAccessPeer), MOCK_SYM(cuDevicePrimaryCtxRetain), MOCK_SYM(cuDevicePrimaryCtxGetState),
    MOCK_SYM(cuDevicePrimaryCtxRelease), MOCK_SYM(cuCtxGetCurrent),
    MOCK_SYM(cuCtxSetCurrent), MOCK_SYM(cuCtxPushCurrent), MOCK_SYM(cuCtxPopCurrent),
    MOCK_SYM(cuCtxGetDevice), MOCK_SYM(cuCtxGetFlags), MOCK_SYM(cuCtxSetFlags), MOCK_SYM(cuCtxSynchronize),
    MOCK_SYM(cuPointerSetAttribute), MOCK_SYM(cuStreamCreate), MOCK_SYM(cuStreamDestroy),
    MOCK_SYM(cuStreamSynchronize), MOCK_SYM(cuStreamQuery), MOCK_SYM(cuEventCreate), MOCK_SYM(cuEventDestroy),
    MOCK_SYM(cuEventRecord), MOCK_SYM(cuEventQuery), MOCK_SYM(cuLaunchHostFunc), MOCK_SYM(cuMemcpyAsync), MOCK_SYM(cuMemcpyDtoDAsync), MOCK_SYM(cuMemcpyBatchAsync),
    MOCK_SYM(cuMemAlloc), MOCK_SYM(cuMemAllocManaged), MOCK_SYM(cuMemFree), MOCK_SYM(cuMemHostRegister),
    MOCK_SYM(cuMemHostUnregister), MOCK_SYM(cuMemHostAlloc), MOCK_SYM(cuMemFreeHost),
    MOCK_SYM(cuCtxEnablePeerAccess), MOCK_SYM(cuCtxDisablePeerAccess), MOCK_SYM(cuPointerGetAttributes), MOCK_SYM(cuIpcGetMemHandle),
    MOCK_SYM(cuIpcOpenMemHandle), MOCK_SYM(cuIpcCloseMemHandle), MOCK_SYM(cuMemCreate), MOCK_SYM(cuMemRelease),
    MOCK_SYM(cuMemRetainAllocationHandle), MOCK_SYM(cuMemExportToShareableHandle),
    MOCK_SYM(cuMemImportFromShareableHandle), MOCK_SYM(cuMemAddressReserve), MOCK_SYM(cuMemAddressFree),
    MOCK_SYM(cuMemMap), MOCK_SYM(cuMemUnmap), MOCK_SYM(cuMemSetAccess), MOCK_SYM(cuMemGetAllocationGranularity),
    MOCK_SYM(cuMemGetHandleForAddressRange), MOCK_SYM(cuMemGetAddressRange), MOCK_SYM(cuMemGetInfo),
    MOCK_SYM(cuMemPoolExportToShareableHandle), MOCK_SYM(cuMemPoolExportPointer),
    MOCK_SYM(cuMemPoolImportFromShareableHandle), MOCK_SYM(cuMemPoolImportPointer), MOCK_SYM(cuMemPoolGetAccess),
    MOCK_SYM(cuMemPoolSetAccess), MOCK_SYM(cuMemPoolDestroy), MOCK_SYM(cuModuleLoadData),
    MOCK_SYM(cuModuleGetFunction), MOCK_SYM(cuLaunchKernel),
    MOCK_SYM(cuDeviceGetDefaultMemPool), MOCK_SYM(cuMemAllocAsync), MOCK_SYM(cuMemAllocFromPoolAsync),
    MOCK_SYM(cuMemFreeAsync), MOCK_SYM(cuMemcpyHtoD), MOCK_SYM(cuMemcpyDtoH),
};

/* What the driver returns instead for the per-thread default stream (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM). */
static const struct {
    const char *name;
    void       *fn;
} mock_ptsz_syms[] = {
    {"cuMemAllocAsync", (void*)m_cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", (void*)m_cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", (void*)m_cuMemFreeAsync_ptsz},
};

/* The older ABIs the driver still returns for a version below the current one's (cudaTypedefs.h): not
 * modelled, they refuse every call, so that a caller that takes one for the current ABI fails visibly. */
static CUresult mock_old_abi(void) { return CUDA_ERROR_NOT_SUPPORTED; }
static CUresult mock_get_proc_v1(const char *symbol, void **pfn, int version, cuuint64_t flags);
#ifndef MOCK_PRE12
static CUresult mock_get_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status);
#endif

static const struct {
    const char *name;
    int         since;
    void       *older;
} mock_abi_versions[] = {
    {"cuMemAlloc", 3020, (void*)mock_old_abi}, {"cuMemAllocPitch", 3020, (void*)mock_old_abi},
    {"cuMemFree", 3020, (void*)mock_old_abi}, {"cuCtxPushCurrent", 4000, (void*)mock_old_abi},
};

/* Entry points by name, version and flags, as cuGetProcAddress gives them; NULL for none. */
static void *mock_entry_point(const char *symbol, int version, cuuint64_t flags)
{
    unsigned i;

    for (i = 0; i < sizeof(mock_abi_versions) / sizeof(mock_abi_versions[0]); ++i) {
        if (!strcmp(mock_abi_versions[i].name, symbol) && (version < mock_abi_versions[i].since)) {
            return mock_abi_versions[i].older;
        }
    }
    if (!strcmp(symbol, "cuGetProcAddress")) {
#ifndef MOCK_PRE12
        if (version >= 12000) {
            return (void*)mock_get_proc_v2;
        }
#endif
        return (void*)mock_get_proc_v1;
    }
    for (i = 0; (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
                (i < sizeof(mock_ptsz_syms) / sizeof(mock_ptsz_syms[0])); ++i) {
        if (!strcmp(mock_ptsz_syms[i].name, symbol)) {
            return mock_ptsz_syms[i].fn;
        }
    }
    for (i = 0; i < sizeof(mock_syms) / sizeof(mock_syms[0]); ++i) {
        if (!strcmp(mock_syms[i].name, symbol)) {
            return mock_syms[i].fn;
        }
    }
    return NULL;
}

/* A pre-12 driver has no cuGetProcAddress_v2. */
#ifndef MOCK_PRE12
static CUresult mock_get_proc_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                 CUdriverProcAddressQueryResult *status)
{
    *pfn    = NULL;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!mock_initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!strcmp(mock_mode(), "nosym") && !strcmp(symbol, "cuPointerGetAttributes")) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (!strcmp(mock_mode(), "nosetflags") && !strcmp(symbol, "cuCtxSetFlags")) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = mock_entry_point(symbol, version, flags);
    if (*pfn == NULL) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    return mock_get_proc_v2(symbol, pfn, version, flags, status);
}
#endif

/* CUDA 11.3's cuGetProcAddress, which the driver still exports. */
static CUresult mock_get_proc_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    *pfn = NULL;
    if (!mock_initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *pfn = mock_entry_point(symbol, version, flags);
    return (*pfn != NULL) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

MOCK_EXPORT CUresult cuGetProcAddress_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");
MOCK_EXPORT CUresult cuGetProcAddress_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return mock_get_proc_v1(symbol, pfn, version, flags);
}

/* The driver's exported names, for programs that call the driver directly (test/cux_ucp_datacheck.c): through
 * them, interposers such as libcux_memtype.so see the calls as they would with the real libcuda. */
MOCK_EXPORT CUresult cuDeviceGetCount(int *n) { return m_cuDeviceGetCount(n); }
MOCK_EXPORT CUresult cuDriverGetVersion(int *v) { return m_cuDriverGetVersion(v); }
MOCK_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) { return m_cuDeviceGet(d, ordinal); }
MOCK_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) { return m_cuDeviceGetName(name, len, d); }
MOCK_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { return m_cuDeviceGetUuid(u, d); }
MOCK_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) { return m_cuDeviceCanAccessPeer(can, a, b); }
MOCK_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return m_cuDevicePrimaryCtxRetain(c, d); }
MOCK_EXPORT CUresult cuCtxSetCurrent(CUcontext c) { return m_cuCtxSetCurrent(c); }
MOCK_EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t n) { return m_cuMemAlloc(p, n); }
MOCK_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f) { return m_cuMemAllocManaged(p, n, f); }
MOCK_EXPORT CUresult cuMemFree(CUdeviceptr p) { return m_cuMemFree(p); }
MOCK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    return m_cuMemCreate(h, size, prop, flags);
}
MOCK_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return m_cuMemRelease(h); }
MOCK_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long f)
{
    return m_cuMemAddressReserve(p, size, align, addr, f);
}
MOCK_EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size) { return m_cuMemAddressFree(p, size); }
MOCK_EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f)
{
    return m_cuMemMap(p, size, offset, h, f);
}
MOCK_EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size) { return m_cuMemUnmap(p, size); }
MOCK_EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    return m_cuMemSetAccess(p, size, desc, count);
}
MOCK_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    return m_cuMemGetAllocationGranularity(g, prop, option);
}

MOCK_EXPORT CUresult cuCtxSynchronize(void) { return m_cuCtxSynchronize(); }
MOCK_EXPORT CUresult cuCtxGetFlags(unsigned *flags) { return m_cuCtxGetFlags(flags); }
MOCK_EXPORT CUresult cuCtxSetFlags(unsigned flags)
{
    return !strcmp(mock_mode(), "nosetflags") ? CUDA_ERROR_NOT_SUPPORTED : m_cuCtxSetFlags(flags);
}
MOCK_EXPORT CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr p)
{
    return m_cuPointerSetAttribute(value, attr, p);
}

MOCK_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) { return m_cuMemGetInfo(free_bytes, total); }
MOCK_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) { return m_cuMemPoolDestroy(pool); }
MOCK_EXPORT CUresult cuStreamSynchronize(CUstream s) { return m_cuStreamSynchronize(s); }

/* Synchronous copies, as applications fill and read their buffers. */
MOCK_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return mock_sync_copy(dst, src, n); }
MOCK_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return m_cuMemcpyHtoD(dst, src, n); }
MOCK_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return m_cuMemcpyDtoH(dst, src, n); }
