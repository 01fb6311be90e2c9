/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for libcuda.so.1 so that CI, which has no GPU, runs the transport's whole data path through the
 * real libuct: "device memory" is host memory the mock tracks, copies are memcpy, events become ready after
 * MOCK_CUDA_EVENT_DELAY queries (default 2), so progress, flush, pending and arming are exercised.
 *
 * MOCK_CUDA_MODE selects a failure to test the loader: "nodevice" (cuInit fails), "old" (driver version
 * 11.8), "nosym" (one entry point missing). Built with MOCK_PRE12 it lacks cuGetProcAddress_v2, like a
 * driver older than CUDA 12.
 * MOCK_CUDA_DEVICES sets the number of devices (default 2); MOCK_CUDA_NO_PEER=1 denies peer access.
 * CUDA_VISIBLE_DEVICES selects and orders them like the driver does (indices only): a device's UUID and peer
 * access follow its physical index, so two processes can see the same device under different ordinals.
 *
 * Device memory lives in memfd files, so IPC works between processes: a handle names the exporter's pid,
 * file descriptor and inode, and the importer maps the same file through /proc/<pid>/fd.
 *
 * Late DMA, as the driver documents it: a synchronous copy from pageable host memory to device memory may
 * return before its DMA has landed. Unless the allocation has CU_POINTER_ATTRIBUTE_SYNC_MEMOPS or the current
 * context CU_CTX_SYNC_MEMOPS, the mock writes the first MOCK_CUDA_DMA_EAGER bytes (default 4096) at once and
 * the rest only at the next synchronising call (a synchronous copy, cuCtxSynchronize, cuStreamSynchronize of
 * the NULL stream): copies on other streams read what was there before. MOCK_CUDA_LATE_DMA=0 turns it off.
 * MOCK_CUDA_MODE=nosetflags hides cuCtxSetFlags (a 12.0 driver). MOCK_CUDA_EVENT_ERROR makes every
 * cuEventQuery fail with CUDA_ERROR_ILLEGAL_ADDRESS.
 *
 * Asynchronous copies: with MOCK_CUDA_ASYNC=1 a copy on a stream (cuMemcpyAsync, cuMemcpyDtoDAsync,
 * cuMemcpyBatchAsync) is only queued; it is done when an event recorded after it completes, or at cuStreamSynchronize, cuStreamQuery,
 * cuCtxSynchronize, cuLaunchHostFunc or cuStreamDestroy. A queued copy whose memory was freed or unmapped before
 * it ran fails its stream with CUDA_ERROR_ILLEGAL_ADDRESS instead of writing.
 *
 * DMA-BUF: cuMemGetHandleForAddressRange checks the range as the driver documents it (page-aligned, device
 * memory of one allocation) and returns a memfd of the range's size, so a test can check the size with
 * lseek(SEEK_END) as it would on a real dma-buf. MOCK_CUDA_NO_DMABUF=1: devices do not support dma-buf.
 * Memory of a device's default pool (cuMemAllocFromPoolAsync) has no IPC handle, as with the driver.
 * MOCK_CUDA_PCI=1 gives devices PCI addresses (0000:c0:00.0 on), so that UCX's topology knows them.
 * MOCK_CUDA_BROKER=1: the process's legacy handles and exported descriptors open in processes of other PID
 * namespaces too, as the driver's do (mock_broker.c; the tests' peers in a namespace of their own set it).
 */
#include "mock.h"

static int mock_num_devices(void);
static int mock_visible(int *phys, int max);
static int mock_physical(CUdevice d);

const char *mock_mode(void)
{
    const char *mode = getenv("MOCK_CUDA_MODE");
    return mode ? mode : "";
}

static int mock_num_devices(void)
{
    const char *n = getenv("MOCK_CUDA_DEVICES");
    return n ? atoi(n) : 2;
}

/* Physical indices of the visible devices, in ordinal order; returns how many. */
static int mock_visible(int *phys, int max)
{
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0, total = mock_num_devices();
    char *end;
    long v;

    if (list == NULL) {
        for (n = 0; (n < total) && (n < max); ++n) {
            phys[n] = n;
        }
        return n;
    }
    while ((*list != '\0') && (n < max)) {
        v = strtol(list, &end, 10);
        if ((end == list) || (v < 0) || (v >= total)) {
            break; /* like the driver: the list ends at the first invalid entry */
        }
        phys[n++] = (int)v;
        list = (*end == ',') ? end + 1 : end;
    }
    return n;
}

static int mock_physical(CUdevice d)
{
    int phys[16];
    return (d < mock_visible(phys, 16)) ? phys[d] : -1;
}

int mock_event_delay(void)
{
    const char *n = getenv("MOCK_CUDA_EVENT_DELAY");
    return n ? atoi(n) : 2;
}

int mock_current_device(void)
{
    return mock_current ? mock_current->device : -1;
}

MOCK_EXPORT CUresult cuInit(unsigned flags)
{
    if (!strcmp(mock_mode(), "nodevice") || (mock_num_devices() == 0)) {
        return CUDA_ERROR_NO_DEVICE;
    }
    mock_initialized = 1;
    return CUDA_SUCCESS;
}

CUresult m_cuDriverGetVersion(int *v)
{
    *v = !strcmp(mock_mode(), "old") ? 11080 : 13000;
    return CUDA_SUCCESS;
}

CUresult m_cuGetErrorName(CUresult e, const char **s) { *s = "MOCK_ERROR"; return CUDA_SUCCESS; }
CUresult m_cuGetErrorString(CUresult e, const char **s) { *s = "mock error"; return CUDA_SUCCESS; }
CUresult m_cuDeviceGetCount(int *n)
{
    int phys[16];
    *n = mock_visible(phys, 16);
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceGet(CUdevice *d, int ordinal)
{
    int phys[16];
    if ((ordinal < 0) || (ordinal >= mock_visible(phys, 16))) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceGetName(char *name, int len, CUdevice d)
{
    strncpy(name, "Mock GPU", len);
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    *v = !((a == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) && getenv("MOCK_CUDA_NO_DMABUF"));
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceGetPCIBusId(char *s, int len, CUdevice d)
{
    if (getenv("MOCK_CUDA_PCI") == NULL) {
        return CUDA_ERROR_NOT_SUPPORTED; /* no PCI topology: sys_dev stays unknown */
    }
    snprintf(s, len, "0000:%02x:00.0", 0xc0 + mock_physical(d));
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceGetUuid(CUuuid *u, CUdevice d)
{
    memset(u, 0, sizeof(*u));
    u->bytes[0] = 0x4d;
    u->bytes[15] = (char)mock_physical(d);
    return CUDA_SUCCESS;
}

CUresult m_cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b)
{
    *can = (getenv("MOCK_CUDA_NO_PEER") == NULL) && (mock_physical(a) != mock_physical(b));
    return CUDA_SUCCESS;
}


CUresult m_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    CUresult res = mock_injected("cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    mock_ctx[d].device = d; /* its flags and peers stay as they are: one primary context per device */
    __atomic_add_fetch(&mock_ctx_retained[d], 1, __ATOMIC_RELAXED);
    *c = &mock_ctx[d];
    return CUDA_SUCCESS;
}

/* A primary context is active once retained; the mock never deactivates one (release only counts). */
CUresult m_cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active)
{
    if ((d < 0) || (d >= MOCK_MAX_DEVICES)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *flags  = 0;
    *active = (mock_ctx[d].device == d) && (mock_ctx_retained[d] > 0);
    return CUDA_SUCCESS;
}

CUresult m_cuDevicePrimaryCtxRelease(CUdevice d)
{
    return ((d >= 0) && (d < MOCK_MAX_DEVICES)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult m_cuCtxGetCurrent(CUcontext *c) { *c = mock_current; return CUDA_SUCCESS; }
CUresult m_cuCtxSetCurrent(CUcontext c) { mock_current = c; return CUDA_SUCCESS; }

CUresult m_cuCtxPushCurrent(CUcontext c)
{
    mock_stack[mock_stack_depth++] = mock_current;
    mock_current = c;
    return CUDA_SUCCESS;
}

CUresult m_cuCtxPopCurrent(CUcontext *c)
{
    if (mock_stack_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *c = mock_current;
    mock_current = mock_stack[--mock_stack_depth];
    return CUDA_SUCCESS;
}

CUresult m_cuCtxGetFlags(unsigned *flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *flags = __atomic_load_n(&mock_current->flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult m_cuCtxSetFlags(unsigned flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    __atomic_store_n(&mock_current->flags, flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult m_cuCtxSynchronize(void)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    mock_late_land();
    return mock_ctx_streams_run(mock_current->device);
}

CUresult m_cuCtxGetDevice(CUdevice *d)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *d = mock_current->device;
    return CUDA_SUCCESS;
}

/* Peer access needs no set-up in host memory; the driver's answers, and which pairs have it, are imitated. */
CUresult m_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    } else if ((mock_current == peer) || (peer == NULL)) {
        return CUDA_ERROR_INVALID_DEVICE;
    } else if (__atomic_fetch_or(&mock_current->peers, 1u << peer->device, __ATOMIC_RELAXED) &
               (1u << peer->device)) {
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    }
    return CUDA_SUCCESS;
}

CUresult m_cuCtxDisablePeerAccess(CUcontext peer)
{
    if ((mock_current == NULL) || (peer == NULL) ||
        !(__atomic_fetch_and(&mock_current->peers, ~(1u << peer->device), __ATOMIC_RELAXED) & (1u << peer->device))) {
        return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    }
    return CUDA_SUCCESS;
}
