/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: see cux_ipc_import.h.
 */
#include "cux_ipc_import.h"
#include "base/cux_iface.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sys.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Can the local device reach the device that owns the remote buffer? Devices are matched by UUID, so the two
 * processes may number them differently. A device this process cannot see is left to the driver to judge.
 */
static ucs_status_t cux_ipc_check_peer_access(const cux_ipc_rkey_t *key, int device)
{
    int peer = cux_device_by_uuid(&key->dev_uuid);
    int can_access;

    if ((peer < 0) || (peer == device)) {
        return UCS_OK;
    }
    if ((cux_drv.cuDeviceCanAccessPeer(&can_access, cux_device_get(device)->cu_dev,
                                       cux_device_get(peer)->cu_dev) != CUDA_SUCCESS) || !can_access) {
        ucs_error("cuda_ipc: GPU %d has no peer access to GPU %d, which holds pid %d's buffer at 0x%" PRIx64
                  ": leave cuda_ipc out of UCX_TLS for such GPU pairs", device, peer, key->pid,
                  (uint64_t)key->base);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

/*
 * Take the exporter's file descriptor with pidfd_getfd. Needs Linux 5.6 and the right to ptrace the exporter
 * (same user; with Yama's ptrace_scope=1 only an ancestor): "where the OS allows".
 */
static int cux_ipc_take_fd(const cux_ipc_rkey_t *key)
{
    char proc[32];
    struct stat st;
    int pidfd, fd;

    /* key->pid is the endpoint's peer (checked by the endpoint); take descriptors only from our own user */
    snprintf(proc, sizeof(proc), "/proc/%d", key->pid);
    if (stat(proc, &st) != 0) {
        ucs_error("cuda_ipc: pid %d is gone: %m", key->pid);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        ucs_error("cuda_ipc: pid %d runs as user %u, not as this process's user %u: its descriptors are not "
                  "taken", key->pid, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    pidfd = syscall(SYS_pidfd_open, key->pid, 0);
    if (pidfd < 0) {
        ucs_error("cuda_ipc: pidfd_open(%d) failed: %m (has the process exited?)", key->pid);
        return -1;
    }
    fd = syscall(SYS_pidfd_getfd, pidfd, key->export_fd, 0);
    if (fd < 0) {
        ucs_error("cuda_ipc: pidfd_getfd(pid %d, fd %d) failed: %m%s", key->pid, key->export_fd,
                  (errno == EPERM) ? " (the OS does not let this process take the exporter's descriptor)" : "");
    }
    close(pidfd);
    if ((fd >= 0) && ((fstat(fd, &st) != 0) || (st.st_dev != key->export_dev) || (st.st_ino != key->export_ino))) {
        ucs_error("cuda_ipc: descriptor %d of pid %d is not the one exported for 0x%" PRIx64 " (closed and its "
                  "number reused?)", key->export_fd, key->pid, (uint64_t)key->base);
        close(fd);
        return -1;
    }
    return fd;
}

/* VMM memory: import the exporter's allocation handle and map it into a fresh range, readable and writable
 * from the local device. */
static ucs_status_t cux_ipc_map_vmm(const cux_ipc_rkey_t *key, int device, CUdeviceptr *dptr_p)
{
    CUmemAccessDesc access = {};
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;
    CUdeviceptr dptr;
    int fd;

    fd = cux_ipc_take_fd(key);
    if (fd < 0) {
        return UCS_ERR_UNREACHABLE;
    }
    status = CUX_DRV_CALL_ERR(cuMemImportFromShareableHandle, &handle, (void*)(uintptr_t)fd,
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (status != UCS_OK) {
        return status;
    }

    status = CUX_DRV_CALL_ERR(cuMemAddressReserve, &dptr, key->length, 0, 0, 0);
    if (status != UCS_OK) {
        goto out_release;
    }
    status = CUX_DRV_CALL_ERR(cuMemMap, dptr, key->length, 0, handle, 0);
    if (status != UCS_OK) {
        goto err_free_range;
    }
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = cux_device_get(device)->cu_dev;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = CUX_DRV_CALL_ERR(cuMemSetAccess, dptr, key->length, &access, 1);
    if (status != UCS_OK) {
        (void)CUX_DRV_CALL_ERR(cuMemUnmap, dptr, key->length);
        goto err_free_range;
    }
    *dptr_p = dptr;
    goto out_release; /* the mapping holds the allocation now */

err_free_range:
    (void)CUX_DRV_CALL_ERR(cuMemAddressFree, dptr, key->length);
out_release:
    (void)CUX_DRV_CALL_ERR(cuMemRelease, handle);
    return status;
}

/* A key claims the length of the exporter's allocation: the mapping the driver opened says what it really is,
 * and a key that claims more is refused (it would let copies run past the allocation). */
static ucs_status_t cux_ipc_check_mapped_length(const cux_ipc_rkey_t *key, CUdeviceptr dptr)
{
    CUdeviceptr base;
    size_t size;

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemGetAddressRange, &base, &size, dptr) != UCS_OK) {
        /* a driver that does not report imported mappings: the mapping itself is still bounded by the driver */
        return UCS_OK;
    }
    if (size >= key->length) {
        return UCS_OK;
    }
    ucs_error("cuda_ipc: pid %d's key claims %" PRIu64 " bytes at 0x%" PRIx64 ", but the allocation it maps is "
              "shorter: refused", key->pid, (uint64_t)key->length, (uint64_t)key->base);
    (void)CUX_DRV_CALL_ERR(cuIpcCloseMemHandle, dptr);
    return UCS_ERR_INVALID_PARAM;
}

/* Mapping callbacks of the cache: open and close a remote allocation in a local device's context. */
static ucs_status_t cux_ipc_map(void *arg, const cux_ipc_rkey_t *key, int device, void **mapped_p)
{
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUdeviceptr dptr;

    status = cux_ipc_check_peer_access(key, device);
    if (status != UCS_OK) {
        return status;
    }

    status = cux_device_ctx_enter(device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    if (key->kind == CUX_IPC_KIND_VMM_FD) {
        status = cux_ipc_map_vmm(key, device, &dptr); /* maps key->length: the driver refuses more */
    } else {
        status = CUX_DRV_CALL_ERR(cuIpcOpenMemHandle, &dptr, key->handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (status == UCS_OK) {
            status = cux_ipc_check_mapped_length(key, dptr);
        }
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        ucs_error("cuda_ipc: cannot map %" PRIu64 " bytes at 0x%" PRIx64 " of pid %d on device %d (exited, "
                  "freed the buffer, or no peer access?)", (uint64_t)key->length, (uint64_t)key->base, key->pid,
                  device);
        return status;
    }
    ucs_debug("cuda_ipc: mapped pid %d 0x%" PRIx64 "+%" PRIu64 " at 0x%llx on device %d", key->pid,
              (uint64_t)key->base, (uint64_t)key->length, (unsigned long long)dptr, device);
    *mapped_p = (void*)(uintptr_t)dptr;
    return UCS_OK;
}

static void cux_ipc_unmap(void *arg, const cux_ipc_region_t *region)
{
    CUdeviceptr dptr = (uintptr_t)region->mapped;
    cux_ctx_guard_t guard;

    if (cux_device_ctx_enter(region->device, &guard) != UCS_OK) {
        return;
    }
    if (region->kind == CUX_IPC_KIND_VMM_FD) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemUnmap, dptr, region->length);
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemAddressFree, dptr, region->length);
    } else {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuIpcCloseMemHandle, dptr);
    }
    cux_ctx_leave(&guard);
}

static const cux_ipc_cache_ops_t cux_ipc_cache_ops = {
    .map   = cux_ipc_map,
    .unmap = cux_ipc_unmap
};

cux_ipc_cache_t cux_ipc_cache;
static pthread_once_t cux_ipc_cache_once = PTHREAD_ONCE_INIT;
static unsigned cux_ipc_md_count; /* open memory domains; the last to close empties the cache */

static void cux_ipc_cache_do_init(void)
{
    cux_ipc_cache_init(&cux_ipc_cache, &cux_ipc_cache_ops, NULL);
}

void cux_ipc_cache_counters(unsigned long *num_regions, size_t *total_size, unsigned long *hits,
                            unsigned long *misses, unsigned long *stale, unsigned long *evictions)
{
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    *num_regions = cux_ipc_cache.num_regions;
    *total_size  = cux_ipc_cache.total_size;
    *hits        = cux_ipc_cache.stats.hits;
    *misses      = cux_ipc_cache.stats.misses;
    *stale       = cux_ipc_cache.stats.stale;
    *evictions   = cux_ipc_cache.stats.evictions;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
}

void cux_ipc_import_attach(int cache_enable, unsigned long max_regions, size_t max_size)
{
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    ++cux_ipc_md_count;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    cux_ipc_cache_configure(&cux_ipc_cache, cache_enable, max_regions, max_size);
}

void cux_ipc_import_detach(void)
{
    int last;

    /* Interfaces close before their memory domain, so no mapping is in use by now. */
    pthread_mutex_lock(&cux_ipc_cache.lock);
    last = (--cux_ipc_md_count == 0);
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    if (last) {
        cux_ipc_cache_purge(&cux_ipc_cache);
    }
}

ucs_status_t cux_ipc_import_get(const cux_ipc_unpacked_rkey_t *ukey, int device, cux_ipc_region_t **region_p)
{
    return cux_ipc_cache_get(&cux_ipc_cache, &ukey->key, device, region_p);
}

void cux_ipc_import_put(cux_ipc_region_t *region)
{
    cux_ipc_cache_put(&cux_ipc_cache, region);
}

void cux_ipc_import_forget_peer(int32_t pid)
{
    cux_ipc_cache_purge_pid(&cux_ipc_cache, pid);
}

/* This host's id, asked once: rkey_unpack runs for every rendezvous message. */
static uint64_t cux_ipc_system_id(void)
{
    static uint64_t system_id;

    if (system_id == 0) {
        system_id = ucs_get_system_id();
    }
    return system_id;
}

/* The unpacked key is a checked copy of the packed one; the endpoint maps it on first use. */
ucs_status_t cux_ipc_import_rkey_unpack(uct_component_t *component, const void *rkey_buffer,
                                             uct_rkey_t *rkey_p, void **handle_p)
{
    cux_ipc_unpacked_rkey_t *ukey;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_ipc key unpacking");
    if (status != UCS_OK) {
        return status;
    }
    ukey = ucs_malloc(sizeof(*ukey), "cux_ipc_rkey");
    if (ukey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(&ukey->key, rkey_buffer, sizeof(ukey->key));
    status = cux_ipc_rkey_check(&ukey->key, cux_ipc_system_id(), getpid());
    if (status != UCS_OK) {
        ucs_free(ukey);
        return status;
    }
    ukey->peer_device = cux_device_by_uuid(&ukey->key.dev_uuid);
    *rkey_p   = (uintptr_t)ukey;
    *handle_p = NULL;
    return UCS_OK;
}


ucs_status_t cux_ipc_import_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle)
{
    ucs_free((void*)rkey);
    return UCS_OK;
}

