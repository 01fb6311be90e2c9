/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): cuMemCreate memory: handles, reservations, mappings, shareable descriptors, dma-buf.
 */
#include "mock.h"

static CUresult mock_vmm_new(int fd, size_t size, int exportable, int fabric, CUmemGenericAllocationHandle *h);
unsigned long long mock_vmm_handle_types(CUmemGenericAllocationHandle h)
{
    const mock_vmm_t *v = mock_vmm_get(h);

    if (v == NULL) {
        return 0;
    }
    return (v->exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0) | (v->fabric ? CU_MEM_HANDLE_TYPE_FABRIC : 0);
}

static void mock_vmm_put(CUmemGenericAllocationHandle h);

static CUresult mock_vmm_new(int fd, size_t size, int exportable, int fabric, CUmemGenericAllocationHandle *h)
{
    unsigned i;
    pthread_mutex_lock(&mock_lock);
    for (i = 1; i < MOCK_MAX_VMM; ++i) {
        if (mock_vmm[i].refs == 0) {
            mock_vmm[i] = (mock_vmm_t){fd, size, 1, exportable, fabric};
            *h = i;
            pthread_mutex_unlock(&mock_lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

mock_vmm_t *mock_vmm_get(CUmemGenericAllocationHandle h)
{
    return ((h > 0) && (h < MOCK_MAX_VMM) && mock_vmm[h].refs) ? &mock_vmm[h] : NULL;
}

static void mock_vmm_put(CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&mock_lock);
    if (--mock_vmm[h].refs == 0) {
        close(mock_vmm[h].fd);
    }
    pthread_mutex_unlock(&mock_lock);
}

/*
 * Fabric handles, as the driver answers on a host without an IMEX channel (one H200, driver 580:
 * bench/results/2026-12-03-h200x1-fabric-probe/): cuMemCreate with the fabric type is CUDA_ERROR_NOT_PERMITTED,
 * and so is every export or import of that type. With a channel (the mock's: a file "channelN" this process may
 * read and write in $CUX_IMEX_CHANNELS_DIR, the directory the module is told to look in), an allocation made
 * with the fabric type exports 64 bytes that name the exporter's memfd, and any process with a channel imports
 * them while the allocation lives (no ptrace check: IMEX, not the kernel, decides). Every call of the fabric
 * type is counted ("fabric calls").
 */
int mock_imex_channel(void)
{
    const char *dir = getenv("CUX_IMEX_CHANNELS_DIR");
    char path[4096];

    snprintf(path, sizeof(path), "%s/channel0", (dir != NULL) ? dir : "");
    return (dir != NULL) && (*dir != '\0') && (access(path, R_OK | W_OK) == 0);
}

#define MOCK_FABRIC_MAGIC 0x4241464b434f4dull /* "MOCKFAB" */

typedef struct {
    uint64_t magic, pid_ns, broker, ino, size;
    int32_t  pid, fd;
} mock_fabric_handle_t;

CUresult m_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                              unsigned long long flags)
{
    int fabric = !!(prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC);
    int fd;

    if (fabric) {
        __atomic_add_fetch(&mock_fabric_calls, 1, __ATOMIC_RELAXED);
        if (!mock_imex_channel()) {
            return CUDA_ERROR_NOT_PERMITTED;
        }
    }
    fd = memfd_create("mockcuda-vmm", MFD_CLOEXEC);
    if ((fd < 0) || ftruncate(fd, size)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return mock_vmm_new(fd, size, !!(prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                        fabric, h);
}

static CUresult mock_export_fabric(const mock_vmm_t *v, void *out)
{
    mock_fabric_handle_t f = {MOCK_FABRIC_MAGIC, mock_pid_namespace(), mock_broker_token(), 0, v->size,
                              getpid(), v->fd};
    struct stat st;

    if (!v->fabric || !mock_imex_channel() || fstat(v->fd, &st)) {
        return CUDA_ERROR_NOT_PERMITTED;
    }
    f.ino = st.st_ino;
    memset(out, 0, sizeof(CUmemFabricHandle));
    memcpy(out, &f, sizeof(f));
    return CUDA_SUCCESS;
}

/* The allocation 64 fabric bytes name, opened here: CUDA_ERROR_INVALID_VALUE if they name none (made up, or
 * freed since). */
static CUresult mock_import_fabric(const void *bytes, CUmemGenericAllocationHandle *h)
{
    mock_fabric_handle_t f;
    struct stat st;
    int fd;

    memcpy(&f, bytes, sizeof(f));
    if (!mock_imex_channel()) {
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if (f.magic != MOCK_FABRIC_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    fd = mock_open_exporter_fd(f.pid, f.pid_ns, f.broker, f.fd);
    if ((fd < 0) || fstat(fd, &st) || (st.st_ino != f.ino) || ((uint64_t)st.st_size != f.size)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_INVALID_VALUE;
    }
    return mock_vmm_new(fd, f.size, 0, 1, h);
}

CUresult m_cuMemRelease(CUmemGenericAllocationHandle h)
{
    if (mock_vmm_get(h) == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    mock_vmm_put(h);
    return CUDA_SUCCESS;
}

CUresult m_cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                      unsigned long long flags)
{
    void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int i;

    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = (CUdeviceptr)m;
    pthread_mutex_lock(&mock_lock);
    for (i = 0; (i < MOCK_MAX_RESERVED) && (mock_reserved[i].size != 0); ++i) {
    }
    if (i < MOCK_MAX_RESERVED) {
        mock_reserved[i] = (mock_range_t){(uintptr_t)m, size};
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult m_cuMemAddressFree(CUdeviceptr p, size_t size)
{
    int i;

    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_RESERVED; ++i) {
        if (mock_reserved[i].start == p) {
            mock_reserved[i].size = 0;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return munmap((void*)p, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult m_cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                           unsigned long long flags)
{
    mock_vmm_t *v = mock_vmm_get(h);
    mock_alloc_t *a;
    CUresult r;

    if ((v == NULL) || (mock_current == NULL) || (offset + size > v->size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (mmap((void*)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v->fd, offset) == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = mock_track(p, size, mock_current_device(), 0, 0, -1, 0);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        a = mock_find(p);
        a->vmm    = 1;
        a->handle = h;
        v->refs++;
        pthread_mutex_unlock(&mock_lock);
    }
    return r;
}

CUresult m_cuMemUnmap(CUdeviceptr p, size_t size)
{
    unsigned long long h;
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || !a->vmm || (a->start != p)) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    h       = a->handle;
    a->size = 0;
    pthread_mutex_unlock(&mock_lock);
    /* back to a reserved, inaccessible range */
    mmap((void*)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    mock_vmm_put(h);
    return CUDA_SUCCESS;
}

CUresult m_cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    return CUDA_SUCCESS;
}

CUresult m_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *p)
{
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find((uintptr_t)p);
    if ((a == NULL) || !a->vmm) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *h = a->handle;
    mock_vmm[a->handle].refs++;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/*
 * VMM exports as the driver makes them: every exported descriptor is a descriptor of one control file (the
 * driver's is /dev/nvidiactl: one device and inode for every export), so a descriptor's inode tells nothing
 * about the allocation. Each export is a new open of this process's control file whose file offset names the
 * exporting pid and the allocation's memfd (a pool's: mock_pools.c); a duplicate taken with pidfd_getfd or
 * passed over a socket shares the offset, and the import opens that memfd as cuIpcOpenMemHandle does (the control
 * file's first bytes say the exporter's PID namespace and broker: mock_broker.c). (The allocation must still be
 * alive at the import: the driver's export would keep it alive.)
 */
#define MOCK_EXPORT_FD_BITS 24

typedef struct {
    uint64_t pid_ns, broker;
} mock_ctl_header_t;

static int   mock_ctl_fd = -1;
static pid_t mock_ctl_pid;

/* A new exported descriptor naming this process's descriptor target, written to *(int*)out. */
CUresult mock_export_fd(int target, void *out)
{
    mock_ctl_header_t hdr = {mock_pid_namespace(), mock_broker_token()};
    char path[64];
    int fd;

    pthread_mutex_lock(&mock_lock);
    if ((mock_ctl_fd < 0) || (mock_ctl_pid != getpid())) { /* one per process, a forked child's its own */
        mock_ctl_fd  = memfd_create("mock-nvidiactl", MFD_CLOEXEC);
        mock_ctl_pid = getpid();
        if ((mock_ctl_fd >= 0) && (pwrite(mock_ctl_fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))) {
            close(mock_ctl_fd);
            mock_ctl_fd = -1;
        }
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", mock_ctl_fd);
    pthread_mutex_unlock(&mock_lock);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if ((fd < 0) || (lseek(fd, ((off_t)getpid() << MOCK_EXPORT_FD_BITS) | target, SEEK_SET) < 0)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int*)out = fd;
    return CUDA_SUCCESS;
}

/* The exporter's descriptor an exported one names, opened here (-1: not an export, or the exporter is gone); the
 * exporter's pid, PID namespace and broker into what is not NULL. */
int mock_import_fd(int exported, pid_t *pid_p, uint64_t *pid_ns_p, uint64_t *broker_p)
{
    off_t tag             = lseek(exported, 0, SEEK_CUR);
    mock_ctl_header_t hdr = {0, 0};

    if ((tag <= 0) || (pread(exported, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))) {
        return -1;
    }
    if (pid_p != NULL) {
        *pid_p = (pid_t)(tag >> MOCK_EXPORT_FD_BITS);
    }
    if (pid_ns_p != NULL) {
        *pid_ns_p = hdr.pid_ns;
    }
    if (broker_p != NULL) {
        *broker_p = hdr.broker;
    }
    return mock_open_exporter_fd((pid_t)(tag >> MOCK_EXPORT_FD_BITS), hdr.pid_ns, hdr.broker,
                                 (int)(tag & ((1 << MOCK_EXPORT_FD_BITS) - 1)));
}

CUresult m_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                               CUmemAllocationHandleType type, unsigned long long flags)
{
    mock_vmm_t *v = mock_vmm_get(h);

    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        __atomic_add_fetch(&mock_fabric_calls, 1, __ATOMIC_RELAXED);
        if ((v != NULL) && (mock_export_fabric(v, out) == CUDA_SUCCESS)) {
            return CUDA_SUCCESS;
        }
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return (v == NULL) ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_PERMITTED;
    }
    if ((v == NULL) || (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || !v->exportable) {
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    mock_count(&mock_fd_exports);
    return mock_export_fd(v->fd, out);
}

CUresult m_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle,
                                                 CUmemAllocationHandleType type)
{
    struct stat st;
    int fd;

    mock_count(&mock_imports);
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        __atomic_add_fetch(&mock_fabric_calls, 1, __ATOMIC_RELAXED);
        return mock_import_fabric(os_handle, h);
    }
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    fd = mock_import_fd((int)(uintptr_t)os_handle, NULL, NULL, NULL);
    if ((fd < 0) || fstat(fd, &st) || (st.st_size == 0)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_INVALID_VALUE; /* the allocation is gone */
    }
    return mock_vmm_new(fd, st.st_size, 1, 0, h);
}

CUresult m_cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                CUmemAllocationGranularity_flags option)
{
    *g = 4096;
    return CUDA_SUCCESS;
}

CUresult m_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                CUmemRangeHandleType type, unsigned long long flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    mock_alloc_t *a = mock_find(dptr);
    int fd;

    if ((type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) || (flags != 0) || (dptr % page) || (size % page) ||
        (size == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((a == NULL) || a->managed || a->host_pinned ||
        (dptr + size > ((a->start + a->size + page - 1) / page) * page)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (getenv("MOCK_CUDA_NO_DMABUF")) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    fd = memfd_create("mock-dmabuf", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, (off_t)size) != 0)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}
