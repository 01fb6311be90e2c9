/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: see cux_ipc_map.h.
 */
#include "ipc/import/cux_ipc_map.h"
#include "ipc/import/cux_ipc_handle.h"
#include "ipc/import/cux_ipc_pool_refs.h"
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "base/cux_iface.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
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

/* The descriptor export_fd of the key's exporter (the key's own, piece CUX_IPC_CHANNEL_KEY_FD, or a span's
 * piece's), duplicated into this process; -1 if it cannot be taken or the key no longer holds. */
static int cux_ipc_take_key_fd(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, uint32_t piece, int export_fd)
{
    int fd = cux_ipc_peer_take_fd(peer, key, piece, export_fd);

    if (fd < 0) {
        return -1;
    }
    /* The key was proven before; proven again now that the descriptor is ours: the exporter closes a descriptor
     * only after it forgot the key, so the number still named this export when it was taken. */
    if (cux_ipc_peer_check_key(peer, key) != UCS_OK) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Is the key's memory cuMemCreate memory, mapped piece by piece? */
static int cux_ipc_key_is_vmm(const cux_ipc_rkey_t *key)
{
    return (key->kind == CUX_IPC_KIND_VMM_FD) || (key->kind == CUX_IPC_KIND_VMM_SPAN) ||
           (key->kind == CUX_IPC_KIND_VMM_FABRIC);
}

static CUmemAccessDesc cux_ipc_rw_access(int device)
{
    CUmemAccessDesc access = {};

    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = cux_device_get(device)->cu_dev;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return access;
}

/* The allocation of a VMM_FABRIC key, imported from its fabric handle: proven again once imported, as a
 * descriptor is once taken, so that what was imported is what the exporter still hands out. */
static ucs_status_t cux_ipc_import_fabric(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer,
                                          CUmemGenericAllocationHandle *handle_p)
{
    ucs_status_t status = cux_ipc_fabric_import(&key->fabric, handle_p);

    if ((status == UCS_OK) && (cux_ipc_peer_check_key(peer, key) != UCS_OK)) {
        (void)CUX_DRV_CALL_ERR(cuMemRelease, *handle_p);
        return UCS_ERR_UNREACHABLE;
    }
    return status;
}

/* Is the key's allocation (or pool) imported by its fabric handle? A fabric-only key's is, and any key of a peer
 * on another host, which reaches it by nothing else; the rest go by descriptor. */
static int cux_ipc_imports_by_fabric(const cux_ipc_rkey_t *key, const cux_ipc_peer_t *peer)
{
    return (key->kind == CUX_IPC_KIND_VMM_FABRIC) || (key->kind == CUX_IPC_KIND_POOL_FABRIC) ||
           cux_ipc_peer_is_remote(peer);
}

/* One exported cuMemCreate allocation of length bytes, mapped at dptr (reserved): its descriptor export_fd in
 * the key's exporter (piece: which of a span's), or its fabric handle, imported (cux_ipc_imports_by_fabric). */
static ucs_status_t cux_ipc_map_piece(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, uint32_t piece,
                                      int export_fd, CUdeviceptr dptr, size_t length)
{
    CUmemGenericAllocationHandle handle;
    ucs_status_t status;
    int fd;

    if (cux_ipc_imports_by_fabric(key, peer)) {
        status = cux_ipc_import_fabric(key, peer, &handle);
    } else if ((fd = cux_ipc_take_key_fd(key, peer, piece, export_fd)) < 0) {
        return UCS_ERR_UNREACHABLE;
    } else {
        status = CUX_DRV_CALL_ERR(cuMemImportFromShareableHandle, &handle, (void*)(uintptr_t)fd,
                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
    }
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL_ERR(cuMemMap, dptr, length, 0, handle, 0); /* the driver refuses more than it holds */
    (void)CUX_DRV_CALL_ERR(cuMemRelease, handle); /* a mapping holds the allocation */
    return status;
}

/* The pieces of a VMM_SPAN key, as the exporter keeps them: read from its memory, and taken as they are only if
 * the key still holds after the read (the exporter frees the table only after it wiped the key) and they lie
 * one after another over exactly the key's range. */
static ucs_status_t cux_ipc_span_pieces(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer,
                                        cux_ipc_span_piece_t *piece)
{
    uint64_t at = key->base;
    ucs_status_t status;
    unsigned i;

    status = cux_ipc_peer_read_span(peer, key, piece);
    if (status == UCS_OK) {
        status = cux_ipc_peer_check_key(peer, key);
    }
    for (i = 0; (i < key->span.count) && (status == UCS_OK); ++i) {
        if ((piece[i].base != at) || (piece[i].length == 0) || (piece[i].length > key->base + key->length - at)) {
            ucs_error("cuda_ipc: pid %d's span 0x%" PRIx64 "+%" PRIu64 " has a piece 0x%" PRIx64 "+%" PRIu64
                      " out of place: refused", key->pid, key->base, key->length, piece[i].base, piece[i].length);
            return UCS_ERR_UNREACHABLE;
        }
        at += piece[i].length;
    }
    if ((status == UCS_OK) && ((at != key->base + key->length) ||
                               (cux_ipc_span_pieces_id(piece, key->span.count) != key->span.pieces))) {
        ucs_error("cuda_ipc: pid %d's span 0x%" PRIx64 "+%" PRIu64 " has pieces other than its key says: refused",
                  key->pid, key->base, key->length);
        return UCS_ERR_UNREACHABLE;
    }
    return status;
}

/* What a VMM mapping holds until it is unmapped: its pieces' lengths (each is unmapped on its own). */
typedef struct {
    unsigned count;
    uint64_t length[];
} cux_ipc_vmm_layout_t;

static void cux_ipc_unmap_pieces(CUdeviceptr dptr, const cux_ipc_vmm_layout_t *layout, unsigned count)
{
    unsigned i;

    for (i = 0; i < count; dptr += layout->length[i++]) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemUnmap, dptr, layout->length[i]);
    }
}

/*
 * VMM memory: import the exporter's allocation handle, or each of a span's (in order, one after another), and
 * map it into a fresh range, readable and writable from the local device. A span's mapping holds its layout.
 */
static ucs_status_t cux_ipc_map_vmm(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, int device,
                                    CUdeviceptr *dptr_p, cux_ipc_vmm_layout_t **layout_p)
{
    CUmemAccessDesc access = cux_ipc_rw_access(device);
    cux_ipc_span_piece_t piece[CUX_IPC_SPAN_MAX];
    unsigned mapped = 0, count = (key->kind == CUX_IPC_KIND_VMM_SPAN) ? key->span.count : 1;
    cux_ipc_vmm_layout_t *layout;
    ucs_status_t status;
    CUdeviceptr dptr;

    layout = ucs_calloc(1, sizeof(*layout) + count * sizeof(layout->length[0]), "cux_ipc_vmm_layout");
    if (layout == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    if (key->kind == CUX_IPC_KIND_VMM_SPAN) {
        status = cux_ipc_span_pieces(key, peer, piece);
    } else {
        piece[0] = (cux_ipc_span_piece_t){.base = key->base, .length = key->length, .fd = key->export_fd};
        status   = UCS_OK;
    }
    if (status != UCS_OK) {
        goto err_free_layout;
    }
    status = CUX_DRV_CALL_ERR(cuMemAddressReserve, &dptr, key->length, 0, 0, 0);
    if (status != UCS_OK) {
        goto err_free_layout;
    }
    for (; (mapped < count) && (status == UCS_OK); ++mapped) {
        status = cux_ipc_map_piece(key, peer, (key->kind == CUX_IPC_KIND_VMM_SPAN) ? mapped : CUX_IPC_CHANNEL_KEY_FD,
                                   piece[mapped].fd, dptr + (piece[mapped].base - key->base), piece[mapped].length);
        layout->length[mapped] = piece[mapped].length;
    }
    if (status != UCS_OK) {
        --mapped; /* the one that failed */
        goto err_unmap;
    }
    status = CUX_DRV_CALL_ERR(cuMemSetAccess, dptr, key->length, &access, 1);
    if (status != UCS_OK) {
        goto err_unmap;
    }
    layout->count = count;
    *dptr_p       = dptr;
    *layout_p     = layout;
    return UCS_OK;

err_unmap:
    cux_ipc_unmap_pieces(dptr, layout, mapped);
    (void)CUX_DRV_CALL_ERR(cuMemAddressFree, dptr, key->length);
err_free_layout:
    ucs_free(layout);
    return status;
}

/* A legacy or pool key claims the length of the exporter's allocation, and the import opens the whole
 * allocation: the driver's word on the mapping decides. A key that claims more, or a mapping the driver cannot
 * measure, is refused (copies would run past the allocation into whatever this process has mapped there); the
 * caller closes the mapping. */
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
    return UCS_ERR_UNREACHABLE;
}

/* A peer whose pid number is ours (two containers whose programs are both pid 1) hands out handles that the
 * driver takes for our own: they are opened with their pid bytes cleared (cux_ipc_handle.h). */
static ucs_status_t cux_ipc_map_legacy(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, CUdeviceptr *dptr_p)
{
    CUipcMemHandle handle;
    ucs_status_t status;
    CUresult res;
    int cleared;

    status = cux_ipc_peer_check_handle(peer, key);
    if (status != UCS_OK) {
        return status;
    }
    cleared = cux_ipc_handle_for_open(&key->handle, &handle);
    res     = cux_drv.cuIpcOpenMemHandle(dptr_p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (res != CUDA_SUCCESS) {
        if (cleared && (res == CUDA_ERROR_INVALID_CONTEXT)) {
            cux_ipc_handle_clear_refused(); /* taken for our own all the same: such keys go another way from now */
        }
        return cux_driver_status(res, UCS_LOG_LEVEL_ERROR, "cuIpcOpenMemHandle", __FILE__, __LINE__);
    }
    status = cux_ipc_check_mapped_length(key, *dptr_p);
    if (status != UCS_OK) {
        (void)CUX_DRV_CALL_ERR(cuIpcCloseMemHandle, *dptr_p);
    }
    return status;
}

/* The key's pool, imported: by its fabric handle (cux_ipc_imports_by_fabric), or by its descriptor taken from the
 * exporter. */
static ucs_status_t cux_ipc_import_key_pool(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, CUmemoryPool *pool_p)
{
    ucs_status_t status;
    int fd;

    if (cux_ipc_imports_by_fabric(key, peer)) {
        return cux_ipc_fabric_import_pool(&key->pool_fabric, pool_p);
    }
    fd = cux_ipc_take_key_fd(key, peer, CUX_IPC_CHANNEL_KEY_FD, key->export_fd);
    if (fd < 0) {
        return UCS_ERR_UNREACHABLE;
    }
    status = CUX_DRV_CALL_ERR(cuMemPoolImportFromShareableHandle, pool_p, (void*)(uintptr_t)fd,
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    close(fd);
    return status;
}

/*
 * Pool memory: import the exporter's pool, let the local device read and write it, and import the allocation
 * from it. A pool imported by its fabric handle is proven again once imported, as a descriptor is once taken.
 * The mapping holds the imported pool; the import is destroyed once no allocation of that pool is mapped any
 * more (cux_ipc_pool_refs.h: the driver refuses it before).
 */
static ucs_status_t cux_ipc_map_pool(const cux_ipc_rkey_t *key, cux_ipc_peer_t *peer, int device,
                                     CUdeviceptr *dptr_p, CUmemoryPool *pool_p)
{
    CUmemAccessDesc access = cux_ipc_rw_access(device);
    CUmemPoolPtrExportData pool_ptr = key->pool_ptr;
    CUmemAccess_flags flags;
    CUmemoryPool pool;
    ucs_status_t status;

    if ((cux_drv.cuMemPoolImportFromShareableHandle == NULL) || (cux_drv.cuMemPoolImportPointer == NULL) ||
        (cux_drv.cuMemPoolGetAccess == NULL) || (cux_drv.cuMemPoolSetAccess == NULL) ||
        (cux_drv.cuMemPoolDestroy == NULL)) {
        ucs_debug("cuda_ipc: this driver cannot import memory pools: pid %d's pool memory goes another path",
                  key->pid);
        return UCS_ERR_UNREACHABLE;
    }
    status = cux_ipc_import_key_pool(key, peer, &pool);
    if (status != UCS_OK) {
        return status;
    }
    if (cux_ipc_imports_by_fabric(key, peer) && (cux_ipc_peer_check_key(peer, key) != UCS_OK)) {
        status = UCS_ERR_UNREACHABLE;
    } else {
        /* an imported pool is not accessible from a device until it is set so */
        status = CUX_DRV_CALL_ERR(cuMemPoolGetAccess, &flags, pool, &access.location);
    }
    if ((status == UCS_OK) && (flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) {
        status = CUX_DRV_CALL_ERR(cuMemPoolSetAccess, pool, &access, 1);
    }
    if (status == UCS_OK) {
        status = CUX_DRV_CALL_ERR(cuMemPoolImportPointer, dptr_p, pool, &pool_ptr);
    }
    if (status == UCS_OK) {
        status = cux_ipc_pool_refs_add(pool, 1, *dptr_p);
        if (status != UCS_OK) {
            (void)CUX_DRV_CALL_ERR(cuMemFree, *dptr_p);
        } else if ((status = cux_ipc_check_mapped_length(key, *dptr_p)) == UCS_OK) {
            *pool_p = pool;
            return UCS_OK;
        } else {
            cux_ipc_pool_refs_free_pointer(pool, *dptr_p); /* and the import, if no other allocation holds it */
            return status;
        }
    }
    /* the import: destroyed now, or with the pool's last mapped allocation */
    if (cux_ipc_pool_refs_add(pool, 1, 0) != UCS_OK) {
        (void)CUX_DRV_CALL_ERR(cuMemPoolDestroy, pool);
    }
    return status;
}

/* Mapping callbacks of the cache: prove the key, then open the remote allocation in a local device's
 * context; close it. */
static ucs_status_t cux_ipc_map(void *arg, const cux_ipc_rkey_t *key, int device, void *peer_arg,
                                void **mapped_p, void **held_p)
{
    cux_ipc_peer_t *peer          = peer_arg;
    CUmemoryPool pool             = NULL;
    cux_ipc_vmm_layout_t *layout = NULL;
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUdeviceptr dptr;

    *held_p = NULL;
    status = cux_ipc_peer_check_key(peer, key);
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ipc_check_peer_access(key, device);
    if (status != UCS_OK) {
        return status;
    }

    if (cux_ipc_proof_key_is_own(key)) {
        /* this process's own allocation, on an endpoint to itself: proven above, used where it is */
        *mapped_p = (void*)(uintptr_t)key->base;
        return UCS_OK;
    }
    status = cux_device_ctx_enter(device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    if (cux_ipc_key_is_vmm(key)) {
        status = cux_ipc_map_vmm(key, peer, device, &dptr, &layout);
    } else if ((key->kind == CUX_IPC_KIND_POOL_FD) || (key->kind == CUX_IPC_KIND_POOL_FABRIC)) {
        status = cux_ipc_map_pool(key, peer, device, &dptr, &pool);
    } else {
        status = cux_ipc_map_legacy(key, peer, &dptr);
    }
    cux_ctx_leave(&guard);
    if (status == UCS_ERR_UNREACHABLE) {
        return status; /* logged where it was found */
    } else if ((status != UCS_OK) && cux_ipc_peer_is_remote(peer)) {
        /* the driver's import is the only check of another host's key: one error line per peer, whatever it sends */
        return cux_ipc_peer_reject(peer, "pid %d of host 0x%" PRIx64 ": the driver refused its fabric handle of "
                                   "0x%" PRIx64 "+%" PRIu64 " (%s; freed, or made up)", key->pid, key->system_id,
                                   (uint64_t)key->base, (uint64_t)key->length, ucs_status_string(status));
    } else if (status != UCS_OK) {
        ucs_error("cuda_ipc: cannot map %" PRIu64 " bytes at 0x%" PRIx64 " of pid %d on device %d (exited, "
                  "freed the buffer, or no peer access?)", (uint64_t)key->length, (uint64_t)key->base, key->pid,
                  device);
        return status;
    }
    ucs_debug("cuda_ipc: mapped pid %d 0x%" PRIx64 "+%" PRIu64 " at 0x%llx on device %d", key->pid,
              (uint64_t)key->base, (uint64_t)key->length, (unsigned long long)dptr, device);
    *mapped_p = (void*)(uintptr_t)dptr;
    *held_p   = (pool != NULL) ? (void*)pool : (void*)layout;
    return UCS_OK;
}

static void cux_ipc_unmap(void *arg, const cux_ipc_region_t *region)
{
    CUdeviceptr dptr = (uintptr_t)region->mapped;
    int vmm          = cux_ipc_key_is_vmm(&region->key);
    cux_ctx_guard_t guard;

    /* a forked child forgets its parent's mappings without touching the parent's driver state; this process's
     * own memory was never mapped */
    if (!cux_driver_forked && !cux_ipc_proof_key_is_own(&region->key) &&
        (cux_device_ctx_enter(region->device, &guard) == UCS_OK)) {
        if (vmm) {
            cux_ipc_unmap_pieces(dptr, region->held, ((const cux_ipc_vmm_layout_t*)region->held)->count);
            (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemAddressFree, dptr, region->key.length);
        } else if ((region->key.kind == CUX_IPC_KIND_POOL_FD) || (region->key.kind == CUX_IPC_KIND_POOL_FABRIC)) {
            cux_ipc_pool_refs_free_pointer((CUmemoryPool)region->held, dptr);
        } else {
            (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuIpcCloseMemHandle, dptr);
        }
        cux_ctx_leave(&guard);
    }
    if (vmm) {
        ucs_free(region->held); /* host memory: freed in a forked child too */
    }
}

const cux_ipc_cache_ops_t cux_ipc_map_ops = {
    .map   = cux_ipc_map,
    .unmap = cux_ipc_unmap
};
