/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): Legacy IPC handles between processes.
 */
#include "mock.h"

CUresult m_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr p)
{
    mock_ipc_handle_t *h = (mock_ipc_handle_t*)handle;
    uint64_t broker      = mock_broker_token();
    uint64_t pid_ns      = mock_pid_namespace();
    mock_alloc_t *a;
    struct stat st;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || (a->start != p) || (a->fd < 0) || a->imported || a->pool || fstat(a->fd, &st)) {
        pthread_mutex_unlock(&mock_lock);
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(handle, 0, sizeof(*handle));
    *h = (mock_ipc_handle_t){.magic = MOCK_IPC_MAGIC, .fd = a->fd, .pid = getpid(), .exporter = getpid(),
                             .size = a->size, .ino = st.st_ino, .pid_ns = pid_ns, .broker = broker};
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/*
 * The driver opens a legacy handle through its kernel module, with no ptrace check; the mock opens the
 * exporter's memfd through /proc/PID/fd, which needs one. Where CAP_SYS_PTRACE is permitted but not effective
 * (a test that took it away to make the exporter unreadable, as Yama does to siblings), it is raised for that
 * open only, so that the mock refuses no more than the driver would.
 */
int mock_open_as_driver(const char *path)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    int fd, raised = 0;

    if ((syscall(SYS_capget, &hdr, data) == 0) && (data[0].permitted & (1u << CAP_SYS_PTRACE)) &&
        !(data[0].effective & (1u << CAP_SYS_PTRACE))) {
        data[0].effective |= 1u << CAP_SYS_PTRACE;
        raised = (syscall(SYS_capset, &hdr, data) == 0);
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (raised) {
        data[0].effective &= ~(1u << CAP_SYS_PTRACE);
        syscall(SYS_capset, &hdr, data);
    }
    return fd;
}

/* Maps another process's device memory (its memfd fd, which must still be the allocation of that inode and
 * size) into this one, tracked as imported on the current device: how legacy handles and pool pointers open.
 * gone: what to answer when the memfd is not there or is another file now. */
CUresult mock_map_peer_memory(pid_t pid, uint64_t pid_ns, uint64_t broker, int fd, uint64_t ino, uint64_t size,
                              CUresult gone, CUdeviceptr *p)
{
    struct stat st;
    void *m;
    int local;

    local = mock_open_exporter_fd(pid, pid_ns, broker, fd);
    if (local < 0) {
        return gone; /* exporter exited */
    }
    if (fstat(local, &st) || (st.st_ino != ino) || ((uint64_t)st.st_size != size)) {
        close(local);
        return gone; /* the allocation was freed: the fd now names something else */
    }
    m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
    close(local);
    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = (CUdeviceptr)m;
    return mock_track((uintptr_t)m, size, mock_current_device(), 0, 0, -1, 1);
}

CUresult m_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle handle, unsigned flags)
{
    mock_alloc_t *a;
    mock_ipc_handle_t h;
    CUresult res = mock_injected("cuIpcOpenMemHandle", CUDA_ERROR_MAP_FAILED);

    mock_count(&mock_imports);
    if (res != CUDA_SUCCESS) {
        return res;
    }
    memcpy(&h, &handle, sizeof(h));
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (h.magic != MOCK_IPC_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (h.pid == getpid()) {
        /* like the driver: a handle that names the importer's own pid number is taken for one of its own process,
         * whatever PID namespace either is in (two containers whose programs are both pid 1) */
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((h.pid != h.exporter) && (getenv("MOCK_CUDA_IPC_STRICT_PID") != NULL)) {
        return CUDA_ERROR_INVALID_CONTEXT; /* a driver that checks the pid bytes (driver 580 does not) */
    }
    /* As the driver (one H200, driver 580): a handle opened again in the same context gives the same pointer and
     * counts the opens; each close drops one */
    pthread_mutex_lock(&mock_lock);
    a = mock_find_import(h.ino, mock_current_device(), 0);
    if (a != NULL) {
        ++a->opens;
        *p = a->start;
    }
    pthread_mutex_unlock(&mock_lock);
    if (a != NULL) {
        return CUDA_SUCCESS;
    }
    res = mock_map_peer_memory(h.exporter, h.pid_ns, h.broker, h.fd, h.ino, h.size, CUDA_ERROR_INVALID_HANDLE, p);
    if (res == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        mock_find(*p)->source = h.ino;
        mock_find(*p)->opens  = 1;
        pthread_mutex_unlock(&mock_lock);
    }
    return res;
}

CUresult m_cuIpcCloseMemHandle(CUdeviceptr p)
{
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a != NULL) && (a->start == p) && a->imported && !a->pool_import && (a->opens > 1)) {
        --a->opens;
        pthread_mutex_unlock(&mock_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&mock_lock);
    return mock_untrack(p, 2);
}
