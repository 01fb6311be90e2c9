/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: see cux_ipc_import.h.
 */
#include "cux_ipc_import.h"
#include "cux_introspection.h"
#include "cux_ipc_proof.h"
#include "base/cux_iface.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sys.h>
#include <inttypes.h>
#include <string.h>
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

/* VMM memory: import the exporter's allocation handle and map it into a fresh range, readable and writable
 * from the local device. */
static ucs_status_t cux_ipc_map_vmm(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, int device,
                                    CUdeviceptr *dptr_p)
{
    CUmemAccessDesc access = {};
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;
    CUdeviceptr dptr;
    int fd;

    fd = cux_ipc_peer_take_fd(peer, key->export_fd);
    if (fd < 0) {
        return UCS_ERR_UNREACHABLE;
    }
    /* The key was proven before; proven again now that the descriptor is ours: the exporter closes a descriptor
     * only after it forgot the key, so the number still named this export when it was taken. */
    status = cux_ipc_peer_check_key(peer, key);
    if (status != UCS_OK) {
        close(fd);
        return status;
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

/* A legacy key claims the length of the exporter's allocation, and a handle opens the whole allocation: the
 * driver's word on the mapping decides. A key that claims more, or a mapping the driver cannot measure, is
 * refused (copies would run past the allocation into whatever this process has mapped there). */
static ucs_status_t cux_ipc_check_mapped_length(const cux_ipc_rkey_t *key, CUdeviceptr dptr)
{
    CUdeviceptr base;
    size_t size;

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemGetAddressRange, &base, &size, dptr) != UCS_OK) {
        ucs_error("cuda_ipc: the driver cannot tell the size of pid %d's allocation at 0x%" PRIx64 ": refused",
                  key->pid, (uint64_t)key->base);
    } else if ((base != dptr) || (size < key->length)) {
        ucs_error("cuda_ipc: pid %d's key claims %" PRIu64 " bytes at 0x%" PRIx64 ", but the allocation it maps "
                  "has %zu: refused", key->pid, (uint64_t)key->length, (uint64_t)key->base, size);
    } else {
        return UCS_OK;
    }
    (void)CUX_DRV_CALL_ERR(cuIpcCloseMemHandle, dptr);
    return UCS_ERR_UNREACHABLE;
}

static ucs_status_t cux_ipc_map_legacy(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, CUdeviceptr *dptr_p)
{
    ucs_status_t status;

    status = cux_ipc_peer_check_handle(peer, key);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL_ERR(cuIpcOpenMemHandle, dptr_p, key->handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (status != UCS_OK) {
        return status;
    }
    return cux_ipc_check_mapped_length(key, *dptr_p);
}

/* Mapping callbacks of the cache: prove the key, then open the remote allocation in a local device's
 * context; close it. */
static ucs_status_t cux_ipc_map(void *arg, const cux_ipc_rkey_t *key, int device, void *peer_arg,
                                void **mapped_p)
{
    cux_ipc_peer_t *peer = peer_arg;
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUdeviceptr dptr;

    status = cux_ipc_peer_check_key(peer, key);
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ipc_check_peer_access(key, device);
    if (status != UCS_OK) {
        return status;
    }

    if (key->pid == getpid()) {
        /* this process's own allocation, on an endpoint to itself: proven above, used where it is */
        *mapped_p = (void*)(uintptr_t)key->base;
        return UCS_OK;
    }
    status = cux_device_ctx_enter(device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    if (key->kind == CUX_IPC_KIND_VMM_FD) {
        status = cux_ipc_map_vmm(key, peer, device, &dptr); /* maps key->length: the driver refuses more */
    } else {
        status = cux_ipc_map_legacy(key, peer, &dptr);
    }
    cux_ctx_leave(&guard);
    if (status == UCS_ERR_UNREACHABLE) {
        return status; /* logged where it was found */
    } else if (status != UCS_OK) {
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

    /* a forked child forgets its parent's mappings without touching the parent's driver state; this process's
     * own memory was never mapped */
    if (cux_driver_forked || (region->key.pid == getpid()) ||
        (cux_device_ctx_enter(region->device, &guard) != UCS_OK)) {
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

void cux_ipc_import_attach(int cache_enable, unsigned long max_regions, size_t max_size, ucs_time_t max_idle)
{
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    ++cux_ipc_md_count;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    cux_ipc_cache_configure(&cux_ipc_cache, cache_enable, max_regions, max_size, max_idle);
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

ucs_status_t cux_ipc_import_get(const cux_ipc_unpacked_rkey_t *ukey, int device, cux_ipc_peer_t *peer,
                                cux_ipc_region_t **region_p)
{
    return cux_ipc_cache_get(&cux_ipc_cache, &ukey->key, device, peer, peer->start_time, region_p);
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
ucs_status_t cux_ipc_import_rkey_unpack(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p,
                                        void **handle_p)
{
    cux_ipc_unpacked_rkey_t *ukey;
    ucs_status_t status;

    if (cux_driver_forked) {
        ucs_debug("cuda_ipc: key unpacking in the child of a fork(): the driver's state belongs to the parent");
        return UCS_ERR_UNREACHABLE; /* the one status UCP 1.13 does not abort on */
    }
    ukey = ucs_malloc(sizeof(*ukey), "cux_ipc_rkey");
    if (ukey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(&ukey->key, rkey_buffer, sizeof(ukey->key));
    status = cux_ipc_rkey_check(&ukey->key, cux_ipc_system_id());
    if (status != UCS_OK) {
        ucs_free(ukey);
        return status;
    }
    ukey->peer_device = cux_device_by_uuid(&ukey->key.dev_uuid);
    ukey->attached    = NULL;
    *rkey_p   = (uintptr_t)ukey;
    *handle_p = NULL;
    return UCS_OK;
}


ucs_status_t cux_ipc_import_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle)
{
    cux_ipc_unpacked_rkey_t *ukey = (cux_ipc_unpacked_rkey_t*)rkey;
    int device;

    /* UCX's perftest releases a zeroed key when endpoint set-up fails before unpacking (UCX 1.22's gtest
     * test_uct_loopback_cuda): nothing to release */
    if (ukey == NULL) {
        return UCS_OK;
    }
    if (ukey->attached != NULL) {
        for (device = 0; device < CUX_MAX_DEVICES; ++device) {
            if (ukey->attached[device] != NULL) {
                cux_ipc_import_put(ukey->attached[device]);
            }
        }
        ucs_free(ukey->attached);
    }
    ucs_free(ukey);
    return UCS_OK;
}

/* The mapping rkey_ptr hands out on a device, made once per key and device; racing threads keep the first. */
static ucs_status_t cux_ipc_import_attach_device(cux_ipc_unpacked_rkey_t *ukey, int device,
                                                 cux_ipc_region_t **region_p)
{
    cux_ipc_region_t **attached = ukey->attached, *region;
    cux_ipc_peer_t peer;
    ucs_status_t status;

    if (attached == NULL) {
        attached = ucs_calloc(CUX_MAX_DEVICES, sizeof(*attached), "cux_ipc_rkey_ptr");
        if (attached == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        if (!__atomic_compare_exchange_n(&ukey->attached, &(cux_ipc_region_t**){NULL}, attached, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            ucs_free(attached);
            attached = ukey->attached;
        }
    }
    region = __atomic_load_n(&attached[device], __ATOMIC_ACQUIRE);
    if (region == NULL) {
        status = cux_ipc_peer_open_for_key(&peer, &ukey->key);
        if (status != UCS_OK) {
            return status;
        }
        status = cux_ipc_import_get(ukey, device, &peer, &region);
        cux_ipc_peer_close(&peer);
        if (status != UCS_OK) {
            return status;
        }
        if (!__atomic_compare_exchange_n(&attached[device], &(cux_ipc_region_t*){NULL}, region, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            cux_ipc_import_put(region);
            region = attached[device];
        }
    }
    *region_p = region;
    return UCS_OK;
}

ucs_status_t cux_ipc_import_rkey_ptr(uct_component_t *component, uct_rkey_t rkey, void *handle, uint64_t raddr,
                                     void **laddr_p)
{
    cux_ipc_unpacked_rkey_t *ukey = (cux_ipc_unpacked_rkey_t*)rkey;
    int device                    = cux_device_current();
    cux_ipc_region_t *region;
    ucs_status_t status;

    if (!cux_ipc_rkey_covers(&ukey->key, raddr, 1)) {
        ucs_debug("cuda_ipc: rkey_ptr of 0x%" PRIx64 ", outside pid %d's allocation 0x%" PRIx64 "+%" PRIu64,
                  raddr, ukey->key.pid, ukey->key.base, ukey->key.length);
        return UCS_ERR_INVALID_ADDR;
    }
    if (device < 0) {
        device = ukey->peer_device;
    }
    if (device < 0) {
        ucs_debug("cuda_ipc: rkey_ptr with no device context current and pid %d's GPU not visible here",
                  ukey->key.pid);
        return UCS_ERR_UNREACHABLE;
    }
    status = cux_ipc_import_attach_device(ukey, device, &region);
    if (status != UCS_OK) {
        return status;
    }
    *laddr_p = UCS_PTR_BYTE_OFFSET(region->mapped, raddr - ukey->key.base);
    return UCS_OK;
}

