/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc memory domain: see cux_ipc_md.h.
 */
#include "cux_ipc_md.h"
#include "base/cux_iface.h"
#include "base/cux_ptr.h"
#include "base/cux_sync_memops.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sys.h>
#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static ucs_config_field_t cux_ipc_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(cux_ipc_md_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"CACHE", "y",
     "Keep mappings of other processes' GPU buffers after use (opening one costs about a millisecond).\n"
     "With 'n' a mapping is closed as soon as no operation uses it.",
     ucs_offsetof(cux_ipc_md_config_t, cache_enable), UCS_CONFIG_TYPE_BOOL},

    {"CACHE_MAX_REGIONS", "4096",
     "Most mappings kept; the least recently used unused ones are closed beyond it. Mappings in use are\n"
     "never closed, so the cache can exceed its bounds while they are.",
     ucs_offsetof(cux_ipc_md_config_t, cache_max_regions), UCS_CONFIG_TYPE_ULUNITS},

    {"CACHE_MAX_SIZE", "inf",
     "Most bytes of remote allocations kept mapped, with the same eviction rule.",
     ucs_offsetof(cux_ipc_md_config_t, cache_max_size), UCS_CONFIG_TYPE_MEMUNITS},

    {NULL}
};

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

static void cux_ipc_md_caps(uct_md_h md, cux_md_caps_t *caps)
{
    /* INVALIDATE: UCP selects rendezvous lanes for endpoints with peer error handling only from memory domains
     * that can invalidate (see cux_ipc_mem_dereg); UCX's own cuda_ipc declares it too. */
    caps->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY | UCT_MD_FLAG_INVALIDATE;
    caps->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    /* UCP's rendezvous registers only through memory domains it may cache (1.16+); see mkey_pack */
    caps->cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    caps->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    caps->max_reg          = SIZE_MAX;
    caps->rkey_packed_size = sizeof(cux_ipc_rkey_t);
    caps->reg_cost         = ucs_linear_func_make(2e-6, 0);
}

CUX_MD_QUERY_FUNC(cux_ipc_md_query, cux_ipc_md_caps)

/*
 * Export a cuMemCreate allocation as a POSIX file descriptor, kept open in this process for importers to take
 * with pidfd_getfd. Works only if the allocation was created with that handle type requested.
 */
static ucs_status_t cux_ipc_export_vmm(void *address, int *fd_p, struct stat *st_p)
{
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;
    int fd;

    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemRetainAllocationHandle, &handle, address);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemExportToShareableHandle, &fd, handle,
                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    (void)CUX_DRV_CALL_ERR(cuMemRelease, handle);
    if (status != UCS_OK) {
        return status;
    }
    if (fstat(fd, st_p) != 0) {
        ucs_error("cuda_ipc: fstat of an exported descriptor failed: %m");
        close(fd);
        return UCS_ERR_IO_ERROR;
    }
    *fd_p = fd;
    return UCS_OK;
}

/*
 * What the driver says an allocation can be exported as, asked instead of provoked by export calls that fail
 * (each failure is an error in compute-sanitizer's report of the application). Both are tried when the driver
 * cannot say. The two attributes are booleans and bit masks of driver-chosen width: zeroed 64-bit values hold
 * either.
 */
static void cux_ipc_export_kinds(const cux_ptr_info_t *info, int *legacy_p, int *vmm_fd_p)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES};
    uint64_t legacy = 0, handle_types = 0;
    void *data[]    = {&legacy, &handle_types};

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, 2, attrs, data,
                     (CUdeviceptr)(uintptr_t)info->base) != UCS_OK) {
        *legacy_p = *vmm_fd_p = 1;
        return;
    }
    *legacy_p = (legacy != 0);
    *vmm_fd_p = !!(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

static cux_ipc_memh_t *cux_ipc_memo_slot(cux_ipc_md_t *md, const void *base)
{
    return &md->memo[((uintptr_t)base >> 12) % CUX_IPC_KEY_MEMO_SIZE];
}

/* A key made earlier for this very allocation, copied into memh; 0 if there is none. */
static int cux_ipc_memo_find(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *slot = cux_ipc_memo_slot(md, info->base);
    int found;

    ucs_spin_lock(&md->memo_lock);
    found = (slot->key.magic != 0) && (slot->key.base == (uintptr_t)info->base) &&
            (slot->key.length == info->length) && (slot->key.buffer_id == info->buffer_id);
    if (found) {
        *memh = *slot;
    }
    ucs_spin_unlock(&md->memo_lock);
    return found;
}

static void cux_ipc_memo_store(cux_ipc_md_t *md, const cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *slot = cux_ipc_memo_slot(md, (void*)(uintptr_t)memh->key.base);

    ucs_spin_lock(&md->memo_lock);
    *slot = *memh;
    ucs_spin_unlock(&md->memo_lock);
}

/* Fill memh->key for the allocation info describes: from the memo, or by exporting a handle (a key of kind
 * NONE when the allocation cannot be shared). */
static ucs_status_t cux_ipc_memh_export(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh)
{
    cux_ctx_guard_t guard;
    ucs_status_t status;
    int export_fd = -1, legacy, vmm_fd;
    struct stat st;

    if (cux_ipc_memo_find(md, info, memh)) {
        return UCS_OK;
    }

    status = cux_device_ctx_enter(info->device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    cux_ipc_export_kinds(info, &legacy, &vmm_fd);
    memh->key.kind      = CUX_IPC_KIND_LEGACY;
    memh->key.export_fd = -1;
    status = !legacy ? UCS_ERR_UNSUPPORTED :
             CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuIpcGetMemHandle, &memh->key.handle,
                          (CUdeviceptr)(uintptr_t)info->base);
    if (status != UCS_OK) {
        /* No legacy handle: cuMemCreate memory, exportable as a file descriptor if it was created so. */
        status = !vmm_fd ? UCS_ERR_UNSUPPORTED : cux_ipc_export_vmm(info->base, &export_fd, &st);
        memh->key.kind      = CUX_IPC_KIND_VMM_FD;
        memh->key.export_fd = export_fd;
        if (status == UCS_OK) {
            memh->key.export_dev = st.st_dev;
            memh->key.export_ino = st.st_ino;
        }
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc: allocation %p+%zu has neither a legacy IPC handle nor an exportable file "
                  "descriptor (%s): its key tells peers to take another path", info->base, info->length,
                  ucs_status_string(status));
        memh->key.kind      = CUX_IPC_KIND_NONE;
        memh->key.export_fd = -1;
        memset(&memh->key.handle, 0, sizeof(memh->key.handle));
    }

    memh->device         = info->device;
    memh->key.system_id  = md->system_id;
    memh->key.pid        = md->pid;
    memh->key.dev_uuid   = cux_device_get(info->device)->uuid;
    memh->key.base       = (uintptr_t)info->base;
    memh->key.length     = info->length;
    memh->key.buffer_id  = info->buffer_id;
    cux_ipc_rkey_seal(&memh->key);
    /* A VMM key owns a descriptor: one per registration. A NONE key is remembered too, so that a buffer that
     * cannot be shared costs its two failed exports once, not on every rendezvous. */
    if (memh->key.kind != CUX_IPC_KIND_VMM_FD) {
        cux_ipc_memo_store(md, memh);
    }
    return UCS_OK;
}

static ucs_status_t cux_ipc_mem_reg_impl(uct_md_h tl_md, void *address, size_t length, unsigned flags,
                                         uct_mem_h *memh_p)
{
    cux_ipc_md_t *md = ucs_derived_of(tl_md, cux_ipc_md_t);
    cux_ipc_memh_t *memh;
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_ipc registration");
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ptr_query(address, &info);
    if (status != UCS_OK) {
        return status;
    }
    if (info.mem_type != UCS_MEMORY_TYPE_CUDA) {
        uct_md_log_mem_reg_error(flags, "cuda_ipc: %p is %s memory, only cuda device memory is exported",
                                 address, ucs_memory_type_names[info.mem_type]);
        return UCS_ERR_UNSUPPORTED;
    }
    cux_sync_memops(address, info.device);

    memh = ucs_calloc(1, sizeof(*memh), "cux_ipc_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = cux_ipc_memh_export(md, &info, memh);
    if (status != UCS_OK) {
        ucs_free(memh);
        return status;
    }
    *memh_p = memh;
    return UCS_OK;
}

CUX_MEM_REG_FUNC(cux_ipc_mem_reg, cux_ipc_mem_reg_impl)

/*
 * UCP invalidates the send buffer of a rendezvous whose endpoint failed, before it hands the buffer back to
 * the application: in that protocol the peer only reads the buffer through its mapping (get), so once we
 * forget the registration nothing the peer does can change the application's data, and the invalidation is
 * complete at once. (A peer's mapping itself cannot be revoked: a peer that is still alive may go on reading
 * until it closes it. UCX's own module declares invalidation and never calls the completion.)
 */
static ucs_status_t cux_ipc_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    unsigned flags         = UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0);
    uct_completion_t *comp = UCT_MD_MEM_DEREG_FIELD_VALUE(params, comp, FIELD_COMPLETION, NULL);
    cux_ipc_memh_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 1);
    if ((flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) && (comp == NULL)) {
        ucs_error("cuda_ipc: invalidation without a completion");
        return UCS_ERR_INVALID_PARAM;
    }
    memh = params->memh;
    if (memh->key.export_fd >= 0) {
        close(memh->key.export_fd); /* importers hold their own duplicate */
    }
    ucs_free(memh);
    if (flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) {
        uct_invoke_completion(comp, UCS_OK);
    }
    return UCS_OK;
}

/*
 * UCP 1.16 and later cache these registrations (cache_mem_types: its rendezvous registers only through memory
 * domains it may cache) and learn of freed GPU memory only from allocation hooks, which a stock UCX lacks. A
 * cached registration can so outlive its allocation while a new one takes the address: before a key goes to
 * a peer, it is checked against the allocation at the buffer now, and made again if that is another one.
 */
/* Whether the key describes the allocation info describes. */
static int cux_ipc_key_is_of(const cux_ipc_rkey_t *key, const cux_ptr_info_t *info)
{
    return (key->base == (uintptr_t)info->base) && (key->length == info->length) &&
           (key->buffer_id == info->buffer_id);
}

static ucs_status_t cux_ipc_mkey_pack_impl(uct_md_h tl_md, uct_mem_h tl_memh, const void *address,
                                           void *rkey_buffer)
{
    cux_ipc_md_t *md       = ucs_derived_of(tl_md, cux_ipc_md_t);
    cux_ipc_memh_t *memh   = tl_memh;
    cux_ipc_memh_t renewed = {};
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_ipc key packing"); /* the key names the parent */
    if (status != UCS_OK) {
        return status;
    }
    if (address == NULL) {
        memcpy(rkey_buffer, &memh->key, sizeof(cux_ipc_rkey_t));
        return UCS_OK;
    }
    status = cux_ptr_query(address, &info);
    if (status != UCS_OK) {
        return status;
    }
    if (info.mem_type != UCS_MEMORY_TYPE_CUDA) {
        ucs_error("cuda_ipc: %p is %s memory now, not the GPU memory registered there", address,
                  ucs_memory_type_names[info.mem_type]);
        return UCS_ERR_INVALID_ADDR;
    }

    /* memh may be UCP's cached registration, packed by several workers at once: read and swap it locked */
    ucs_spin_lock(&md->memo_lock);
    if (cux_ipc_key_is_of(&memh->key, &info)) {
        memcpy(rkey_buffer, &memh->key, sizeof(cux_ipc_rkey_t));
        ucs_spin_unlock(&md->memo_lock);
        return UCS_OK;
    }
    ucs_spin_unlock(&md->memo_lock);

    ucs_debug("cuda_ipc: registration of %p+%zu (id %llu) outlived its allocation; %p is in %p+%zu (id %llu) now",
              (void*)memh->key.base, memh->key.length, (unsigned long long)memh->key.buffer_id, address,
              info.base, info.length, info.buffer_id);
    status = cux_ipc_memh_export(md, &info, &renewed);
    if (status != UCS_OK) {
        return status;
    }
    ucs_spin_lock(&md->memo_lock);
    if (!cux_ipc_key_is_of(&memh->key, &info)) {
        cux_ipc_memh_t old = *memh;
        *memh              = renewed;
        renewed            = old; /* its descriptor, if any, is closed below */
    }
    memcpy(rkey_buffer, &memh->key, sizeof(cux_ipc_rkey_t));
    ucs_spin_unlock(&md->memo_lock);
    if (renewed.key.export_fd >= 0) {
        close(renewed.key.export_fd);
    }
    return UCS_OK;
}

CUX_MKEY_PACK_FUNC(cux_ipc_mkey_pack, cux_ipc_mkey_pack_impl)

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
static ucs_status_t cux_ipc_rkey_unpack_impl(uct_component_t *component, const void *rkey_buffer,
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

CUX_RKEY_UNPACK_FUNC(cux_ipc_rkey_unpack, cux_ipc_rkey_unpack_impl)

static ucs_status_t cux_ipc_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle)
{
    ucs_free((void*)rkey);
    return UCS_OK;
}

static void cux_ipc_md_close(uct_md_h md)
{
    /* Interfaces close before their memory domain, so no mapping is in use by now. */
    pthread_mutex_lock(&cux_ipc_cache.lock);
    int last = (--cux_ipc_md_count == 0);
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    if (last) {
        cux_ipc_cache_purge(&cux_ipc_cache);
    }
    ucs_spinlock_destroy(&ucs_derived_of(md, cux_ipc_md_t)->memo_lock);
    ucs_free(md);
}

static uct_md_ops_t cux_ipc_md_ops = {
    .close              = cux_ipc_md_close,
    .query              = cux_ipc_md_query,
    .mem_alloc          = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free           = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = cux_ipc_mem_reg,
    .mem_dereg          = cux_ipc_mem_dereg,
    .mem_query          = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack          = cux_ipc_mkey_pack,
    .detect_memory_type = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported,
    CUX_MD_OPS_VERSION_FIELDS
};

static ucs_status_t cux_ipc_md_open(uct_component_t *component, const char *md_name,
                                    const uct_md_config_t *uct_config, uct_md_h *md_p)
{
    const cux_ipc_md_config_t *config = ucs_derived_of(uct_config, cux_ipc_md_config_t);
    unsigned long max_regions;
    cux_ipc_md_t *md;
    ucs_status_t status;

    status = cux_md_open_check(md_name);
    if (status != UCS_OK) {
        return status;
    }

    md = ucs_calloc(1, sizeof(*md), "cux_ipc_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &cux_ipc_md_ops;
    md->super.component = &cux_ipc_component;
    md->system_id       = ucs_get_system_id();
    md->pid             = getpid();
    ucs_spinlock_init(&md->memo_lock, 0);

    /* Process-wide: the last memory domain opened sets the bounds. */
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    ++cux_ipc_md_count;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    max_regions = config->cache_max_regions;
    if (max_regions == 0) {
        /* every mapping would be closed after each use and reopened (about a millisecond) at the next */
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "CACHE_MAX_REGIONS=0 would close every mapping after each use: "
                 "using 1 (UCX_" CUX_IPC_CONFIG_PREFIX "CACHE=n is the way to keep none)");
        max_regions = 1;
    }
    cux_ipc_cache_configure(&cux_ipc_cache, config->cache_enable, max_regions, config->cache_max_size);
    *md_p = &md->super;
    return UCS_OK;
}

uct_component_t cux_ipc_component = {
    .query_md_resources = cux_query_md_resources,
    .md_open            = cux_ipc_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = cux_ipc_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = cux_ipc_rkey_release,
    .name               = CUX_IPC_COMPONENT_NAME,
    .md_config          = {
        .name           = "CUDA IPC memory domain",
        .prefix         = CUX_IPC_CONFIG_PREFIX,
        .table          = cux_ipc_md_config_table,
        .size           = sizeof(cux_ipc_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&cux_ipc_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function,
    CUX_COMPONENT_VERSION_FIELDS
};
