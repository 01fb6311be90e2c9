/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): stream-ordered memory pools. A device's default pool has no shareable
 * handle type: like the driver, cuIpcGetMemHandle refuses its memory and it cannot be exported. A pool made
 * with cuMemPoolCreate and the POSIX descriptor handle type exports itself as a descriptor (a marker memfd,
 * named through the control file as VMM exports are: mock_vmm.c) and each allocation as export data; another
 * process imports the pool, must give its device access to it (cuMemPoolSetAccess, as with the driver), and
 * imports the allocation, which it frees with cuMemFree. As the driver does (HACKING.md), a process that imports
 * one pool again gets the same handle and one more import to destroy, and cuMemPoolDestroy of an imported pool
 * is refused while any allocation imported from it lives. A pool made with the fabric type exports 64 bytes
 * naming its marker where the process has an IMEX channel (mock_vmm.c), which any process with one imports; without
 * one the export is refused (the H200's driver then also corrupts the caller's heap). The mock's streams are
 * synchronous: allocations are made and freed at once.
 */
#include "mock.h"

#define MOCK_MAX_POOLS   64
#define MOCK_POOL_HANDLE 0x1000 /* created and imported pools: MOCK_POOL_HANDLE + slot; default pools: device + 1 */
#define MOCK_POOL_MAGIC  0x4c4f4f50

typedef struct {
    int                used;
    int                device;
    unsigned long long handle_types;
    int                marker;    /* a created pool's identity: a memfd, exported through the control file */
    ino_t              ino;       /* the marker's inode (an imported pool: the exporter's) */
    pid_t              pid;       /* an imported pool's exporter; 0 for a pool of this process */
    uint64_t           pid_ns;    /* an imported pool: its exporter's PID namespace and broker (mock_broker.c), */
    uint64_t           broker;    /* through which its pointers open from another namespace, as the driver's do */
    unsigned           imports;   /* an imported pool: imports not destroyed yet */
    unsigned           access;    /* devices with read-write access (bit per device) */
} mock_pool_t;

/* What cuMemPoolExportToShareableHandle writes for the fabric type (in 64 bytes). */
#define MOCK_POOL_FABRIC_MAGIC 0x4c4f4f50424146ull /* "FABPOOL" */
typedef struct {
    uint64_t magic, pid_ns, broker, ino;
    int32_t  pid, fd; /* the exporter and its pool's marker */
} mock_pool_fabric_t;

/* What cuMemPoolExportPointer writes (64 bytes). */
typedef struct {
    uint32_t magic;
    int32_t  pid;
    int32_t  fd;        /* the allocation's memfd in the exporter */
    int32_t  reserved;
    uint64_t size;
    uint64_t ino;       /* the allocation's memfd's inode */
    uint64_t pool_ino;  /* its pool's marker's inode */
} mock_pool_ptr_t;

static mock_pool_t mock_pools[MOCK_MAX_POOLS];

static mock_pool_t *mock_pool_get(CUmemoryPool pool)
{
    uintptr_t slot = (uintptr_t)pool - MOCK_POOL_HANDLE;

    return ((uintptr_t)pool >= MOCK_POOL_HANDLE) && (slot < MOCK_MAX_POOLS) && mock_pools[slot].used ?
           &mock_pools[slot] : NULL;
}

/* Called with mock_lock held. */
static CUresult mock_pool_new_locked(const mock_pool_t *init, CUmemoryPool *pool)
{
    int i;

    for (i = 0; (i < MOCK_MAX_POOLS) && mock_pools[i].used; ++i) {
    }
    if (i == MOCK_MAX_POOLS) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    mock_pools[i]      = *init;
    mock_pools[i].used = 1;
    *pool              = (CUmemoryPool)(uintptr_t)(MOCK_POOL_HANDLE + i);
    return CUDA_SUCCESS;
}

static CUresult mock_pool_new(const mock_pool_t *init, CUmemoryPool *pool)
{
    CUresult res;

    pthread_mutex_lock(&mock_lock);
    res = mock_pool_new_locked(init, pool);
    pthread_mutex_unlock(&mock_lock);
    return res;
}

/* Pools imported from other processes and not destroyed yet. */
long mock_imported_pools(void)
{
    long n = 0;
    int i;

    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_POOLS; ++i) {
        n += mock_pools[i].used && (mock_pools[i].pid != 0);
    }
    pthread_mutex_unlock(&mock_lock);
    return n;
}

/* The handle types of the pool memory came from (0 for a default pool). */
unsigned long long mock_pool_handle_types(uintptr_t pool)
{
    mock_pool_t *p = mock_pool_get((CUmemoryPool)pool);

    return (p != NULL) ? p->handle_types : 0;
}

CUresult m_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d)
{
    *pool = (CUmemoryPool)(uintptr_t)(d + 1);
    return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d)
{
    return m_cuDeviceGetDefaultMemPool(pool, d);
}

MOCK_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    mock_pool_t init = {.device = props->location.id, .handle_types = props->handleTypes, .marker = -1,
                        .access = 1u << props->location.id};
    struct stat st;

    if ((props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) ||
        (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (props->handleTypes & (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC)) {
        init.marker = memfd_create("mockcuda-pool", MFD_CLOEXEC);
        if ((init.marker < 0) || fstat(init.marker, &st)) {
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        init.ino = st.st_ino;
    }
    return mock_pool_new(&init, pool);
}

/* Like the H200's driver, an imported pool is not destroyed while an allocation imported from it lives, and
 * goes with the destruction of its last import. */
CUresult m_cuMemPoolDestroy(CUmemoryPool pool)
{
    mock_pool_t *p;
    int i;

    pthread_mutex_lock(&mock_lock);
    p = mock_pool_get(pool);
    for (i = 0; (p != NULL) && (p->pid != 0) && (i < MOCK_MAX_ALLOCS); ++i) {
        if (mock_allocs[i].size && mock_allocs[i].pool_import && (mock_allocs[i].pool == (uintptr_t)pool)) {
            pthread_mutex_unlock(&mock_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if ((p != NULL) && (p->pid != 0) && (--p->imports > 0)) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_SUCCESS;
    }
    if (p != NULL) {
        if (p->marker >= 0) {
            close(p->marker);
        }
        memset(p, 0, sizeof(*p)); /* its allocations stay until freed */
    }
    pthread_mutex_unlock(&mock_lock);
    return (p != NULL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Calls between the driver's exported functions stay inside it (a preload interposing one must not see them). */
static CUresult mock_alloc_from_pool(CUdeviceptr *p, size_t n, CUmemoryPool pool)
{
    mock_pool_t *mp = mock_pool_get(pool);
    CUresult res;

    if (((mp == NULL) && ((uintptr_t)pool > MOCK_MAX_DEVICES)) || ((mp != NULL) && (mp->pid != 0))) {
        return CUDA_ERROR_INVALID_VALUE; /* unknown, or imported: no allocations from those */
    }
    res = mock_alloc(p, n, 0);
    if (res == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        mock_find(*p)->pool = (uintptr_t)pool;
        pthread_mutex_unlock(&mock_lock);
    }
    return res;
}

/* From the current device's default pool, as the driver's cuMemAllocAsync. */
static CUresult mock_alloc_async(CUdeviceptr *p, size_t n)
{
    CUdevice d;

    return (m_cuCtxGetDevice(&d) == CUDA_SUCCESS) ? mock_alloc_from_pool(p, n, (CUmemoryPool)(uintptr_t)(d + 1))
                                                   : CUDA_ERROR_INVALID_CONTEXT;
}

/* The stream-ordered allocator; the mock has one stream order, so the per-thread default stream twins
 * (_ptsz, which cuGetProcAddress returns for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) do the same. */
CUresult m_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { return mock_alloc_async(p, n); }
CUresult m_cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) { return mock_alloc_async(p, n); }
CUresult m_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return mock_alloc_from_pool(p, n, pool);
}
CUresult m_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return mock_alloc_from_pool(p, n, pool);
}
CUresult m_cuMemFreeAsync(CUdeviceptr p, CUstream s) { return m_cuMemFree(p); }
CUresult m_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return m_cuMemFree(p); }

MOCK_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) { return m_cuMemAllocAsync(p, n, s); }
MOCK_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
    return m_cuMemAllocAsync_ptsz(p, n, s);
}
MOCK_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return m_cuMemAllocFromPoolAsync(p, n, pool, s);
}
MOCK_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    return m_cuMemAllocFromPoolAsync_ptsz(p, n, pool, s);
}
MOCK_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { return m_cuMemFreeAsync(p, s); }
MOCK_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { return m_cuMemFreeAsync_ptsz(p, s); }

CUresult m_cuMemPoolExportToShareableHandle(void *out, CUmemoryPool pool, CUmemAllocationHandleType type,
                                            unsigned long long flags)
{
    mock_pool_t *p = mock_pool_get(pool);

    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        /* The H200's driver without an IMEX channel answers NOT_PERMITTED here and corrupts the caller's heap:
         * a module must not ask (the tests count the calls). With one, a pool made with the fabric type exports
         * 64 bytes naming its marker, which any process with a channel imports. */
        __atomic_add_fetch(&mock_fabric_calls, 1, __ATOMIC_RELAXED);
        if (!mock_imex_channel() || (p == NULL) || (p->pid != 0) || !(p->handle_types & CU_MEM_HANDLE_TYPE_FABRIC)) {
            __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
            return CUDA_ERROR_NOT_PERMITTED;
        }
        mock_pool_fabric_t f = {MOCK_POOL_FABRIC_MAGIC, mock_pid_namespace(), mock_broker_token(), p->ino,
                                getpid(), p->marker};
        memset(out, 0, sizeof(CUmemFabricHandle));
        memcpy(out, &f, sizeof(f));
        return CUDA_SUCCESS;
    }
    if ((p == NULL) || (p->pid != 0) || (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        !(p->handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_INVALID_VALUE;
    }
    mock_count(&mock_fd_exports);
    return mock_export_fd(p->marker, out);
}

CUresult m_cuMemPoolExportPointer(CUmemPoolPtrExportData *data, CUdeviceptr ptr)
{
    mock_pool_ptr_t out = {.magic = MOCK_POOL_MAGIC, .pid = getpid()};
    mock_alloc_t *a;
    mock_pool_t *p;
    struct stat st;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(ptr);
    p = (a != NULL) ? mock_pool_get((CUmemoryPool)a->pool) : NULL;
    if ((a == NULL) || (a->start != ptr) || (p == NULL) || (p->marker < 0) || fstat(a->fd, &st)) {
        pthread_mutex_unlock(&mock_lock);
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_INVALID_VALUE;
    }
    out.fd       = a->fd;
    out.size     = a->size;
    out.ino      = st.st_ino;
    out.pool_ino = p->ino;
    mock_count(&mock_ptr_exports);
    pthread_mutex_unlock(&mock_lock);
    memset(data, 0, sizeof(*data));
    memcpy(data, &out, sizeof(out));
    return CUDA_SUCCESS;
}

CUresult m_cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *os_handle, CUmemAllocationHandleType type,
                                              unsigned long long flags)
{
    mock_pool_t init = {.device = -1, .handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, .marker = -1};
    struct stat st;
    CUresult res;
    int fd;

    mock_count(&mock_imports);
    if ((type == CU_MEM_HANDLE_TYPE_FABRIC) && (flags == 0)) {
        mock_pool_fabric_t f;
        __atomic_add_fetch(&mock_fabric_calls, 1, __ATOMIC_RELAXED);
        memcpy(&f, os_handle, sizeof(f));
        if (!mock_imex_channel()) {
            return CUDA_ERROR_NOT_PERMITTED;
        }
        if (f.magic != MOCK_POOL_FABRIC_MAGIC) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        init.pid    = f.pid;
        init.pid_ns = f.pid_ns;
        init.broker = f.broker;
        fd          = mock_open_exporter_fd(f.pid, f.pid_ns, f.broker, f.fd);
        if ((fd >= 0) && !fstat(fd, &st) && (st.st_ino != f.ino)) {
            close(fd);
            fd = -1; /* another pool's marker by now */
        }
    } else if ((type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || (flags != 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    } else {
        fd = mock_import_fd((int)(uintptr_t)os_handle, &init.pid, &init.pid_ns, &init.broker);
    }
    if ((fd < 0) || fstat(fd, &st)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_INVALID_VALUE; /* not a pool's export, or the exporter is gone */
    }
    close(fd);
    init.ino     = st.st_ino;
    init.imports = 1;
    pthread_mutex_lock(&mock_lock);
    res = CUDA_ERROR_NOT_FOUND;
    for (int i = 0; (i < MOCK_MAX_POOLS) && (res == CUDA_ERROR_NOT_FOUND); ++i) {
        if (mock_pools[i].used && (mock_pools[i].pid == init.pid) && (mock_pools[i].pid_ns == init.pid_ns) &&
            (mock_pools[i].ino == init.ino)) {
            ++mock_pools[i].imports; /* imported before: the same handle */
            *pool = (CUmemoryPool)(uintptr_t)(MOCK_POOL_HANDLE + i);
            res   = CUDA_SUCCESS;
        }
    }
    if (res == CUDA_ERROR_NOT_FOUND) {
        res = mock_pool_new_locked(&init, pool);
    }
    pthread_mutex_unlock(&mock_lock);
    return res;
}

CUresult m_cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *location)
{
    mock_pool_t *p = mock_pool_get(pool);

    if ((p == NULL) || (location->type != CU_MEM_LOCATION_TYPE_DEVICE) || (location->id < 0) ||
        (location->id >= MOCK_MAX_DEVICES)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *flags = (p->access & (1u << location->id)) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return CUDA_SUCCESS;
}

CUresult m_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *desc, size_t count)
{
    mock_pool_t *p = mock_pool_get(pool);
    size_t i;

    if (p == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; i < count; ++i) {
        if ((desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) || (desc[i].location.id < 0) ||
            (desc[i].location.id >= MOCK_MAX_DEVICES)) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
            p->access |= 1u << desc[i].location.id;
        } else {
            p->access &= ~(1u << desc[i].location.id);
        }
    }
    return CUDA_SUCCESS;
}

/* Like the driver, an allocation is imported only from the pool it came from, and used only by a device given
 * access to that pool: without access the mock refuses the import (the driver would fault on the first use). */
CUresult m_cuMemPoolImportPointer(CUdeviceptr *ptr, CUmemoryPool pool, CUmemPoolPtrExportData *data)
{
    mock_pool_t *p = mock_pool_get(pool);
    int device     = mock_current_device();
    mock_alloc_t *a;
    mock_pool_ptr_t in;
    CUresult res = mock_injected("cuMemPoolImportPointer", CUDA_ERROR_OUT_OF_MEMORY);

    mock_count(&mock_imports);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    memcpy(&in, data, sizeof(in));
    if ((p == NULL) || (p->pid == 0) || (in.magic != MOCK_POOL_MAGIC) || (in.pid != p->pid) ||
        (in.pool_ino != (uint64_t)p->ino)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((device < 0) || !(p->access & (1u << device))) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    /* As the driver (one H200, driver 580): an allocation imported again from the same pool gives the same
     * pointer, uncounted: the first cuMemFree frees it for both */
    pthread_mutex_lock(&mock_lock);
    a = mock_find_import(in.ino, device, (uintptr_t)pool);
    if (a != NULL) {
        *ptr = a->start;
    }
    pthread_mutex_unlock(&mock_lock);
    if (a != NULL) {
        return CUDA_SUCCESS;
    }
    /* from another PID namespace too, as the driver does (one H200: bench/results/2026-12-02-h200x1-containers/) */
    res = mock_map_peer_memory(in.pid, p->pid_ns, p->broker, in.fd, in.ino, in.size, CUDA_ERROR_INVALID_VALUE, ptr);
    if (res == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        mock_find(*ptr)->pool_import = 1;
        mock_find(*ptr)->pool        = (uintptr_t)pool;
        mock_find(*ptr)->source      = in.ino;
        pthread_mutex_unlock(&mock_lock);
    }
    return res;
}
