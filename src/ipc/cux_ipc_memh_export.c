/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: an allocation's key. See cux_ipc_memh_export.h.
 */
#include "ipc/cux_ipc_memh_export.h"
#include "ipc/common/cux_ipc_domain.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <string.h>

/* The key goes into the table of keys out, where importers read it back (cux_ipc_key_table.h): the registration's
 * own slot. The secret depends only on the allocation, so a key from the memo keeps its own. A key the table
 * cannot take tells the peer to take another path. */
static void cux_ipc_memh_seal(cux_ipc_memh_t *memh)
{
    if (cux_ipc_key_table_add(&memh->key) != UCS_OK) {
        memh->key.kind   = CUX_IPC_KIND_NONE;
        memh->key.record = UINT64_MAX;
        cux_ipc_rkey_seal(&memh->key);
    }
}

/* What the driver says an allocation can be exported as. */
typedef struct {
    int          legacy;   /* a legacy IPC handle (cuMemAlloc memory) */
    int          fd;       /* a POSIX descriptor: of the allocation (cuMemCreate), or of its pool */
    int          fabric;   /* a fabric handle (cux_ipc_fabric.h) */
    CUmemoryPool pool;     /* the allocation's memory pool, NULL if none */
} cux_ipc_exportable_t;

/*
 * Asked instead of provoked by export calls that fail (each failure is an error in compute-sanitizer's report
 * of the application). Legacy and VMM exports are both tried when the driver cannot say. The attributes are
 * booleans and bit masks of driver-chosen width: zeroed 64-bit values hold each. The pool came with the pointer
 * query.
 */
static void cux_ipc_export_kinds(const cux_ptr_info_t *info, cux_ipc_exportable_t *can)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES};
    uint64_t legacy = 0, handle_types = 0;
    void *data[]    = {&legacy, &handle_types};

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, 2, attrs, data,
                     (CUdeviceptr)(uintptr_t)info->base) != UCS_OK) {
        *can = (cux_ipc_exportable_t){.legacy = 1, .fd = 1, .fabric = 0, .pool = NULL};
        return;
    }
    can->legacy = (legacy != 0);
    can->fd     = !!(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    can->fabric = !!(handle_types & CU_MEM_HANDLE_TYPE_FABRIC);
    can->pool   = info->pool;
}

/* The slot of an allocation in the memos (md->memo, md->pool_ptrs): by its base. */
static unsigned cux_ipc_memo_index(const void *base)
{
    return ((uintptr_t)base >> 12) % CUX_IPC_KEY_MEMO_SIZE;
}

/* The export data of the pool allocation info names: from the memo if this very allocation (base, length, buffer
 * id: unique in the process) was exported before, else from the driver, and kept. */
static ucs_status_t cux_ipc_pool_ptr_export(cux_ipc_md_t *md, const cux_ptr_info_t *info,
                                            CUmemPoolPtrExportData *data)
{
    cux_ipc_pool_ptr_memo_t *slot = &md->pool_ptrs[cux_ipc_memo_index(info->base)];
    cux_ipc_pool_ptr_memo_t made;
    ucs_status_t status;
    int found;

    ucs_spin_lock(&md->memo_lock);
    found = (slot->base == (uintptr_t)info->base) && (slot->length == info->length) &&
            (slot->buffer_id == info->buffer_id);
    if (found) {
        *data = slot->data;
    }
    ucs_spin_unlock(&md->memo_lock);
    if (found) {
        return UCS_OK;
    }
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolExportPointer, data, (CUdeviceptr)(uintptr_t)info->base);
    if (status == UCS_OK) {
        made = (cux_ipc_pool_ptr_memo_t){.base = (uintptr_t)info->base, .length = info->length,
                                         .buffer_id = info->buffer_id, .data = *data};
        ucs_spin_lock(&md->memo_lock);
        *slot = made;
        ucs_spin_unlock(&md->memo_lock);
    }
    return status;
}

/* Pool memory: the pool's descriptor and the allocation's place in the pool. The pointer is exported at the
 * allocation's start, where the pool made it (the driver refuses any other), once the pool is. */
static ucs_status_t cux_ipc_memh_export_pool(cux_ipc_md_t *md, const cux_ptr_info_t *info, CUmemoryPool pool,
                                             cux_ipc_memh_t *memh)
{
    ucs_status_t status;

    if (cux_drv.cuMemPoolExportPointer == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = cux_ipc_fd_export_pool(&md->fd_exports, pool, info, &memh->fdx);
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ipc_pool_ptr_export(md, info, &memh->key.pool_ptr);
    if (status != UCS_OK) {
        cux_ipc_fd_export_put(&md->fd_exports, memh->fdx);
        memh->fdx = NULL;
        return status;
    }
    memh->key.export_fd = memh->fdx->fd;
    return UCS_OK;
}

/* Memory of a pool made with the fabric handle type alone: the pool's fabric handle and the allocation's place in
 * the pool. */
static ucs_status_t cux_ipc_memh_export_fabric_pool(const cux_ptr_info_t *info, CUmemoryPool pool,
                                                    cux_ipc_memh_t *memh)
{
    ucs_status_t status;

    if (cux_drv.cuMemPoolExportPointer == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = cux_ipc_fabric_export_pool(pool, &memh->key.pool_fabric);
    if (status != UCS_OK) {
        return status;
    }
    return CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolExportPointer, &memh->key.pool_ptr,
                        (CUdeviceptr)(uintptr_t)info->base);
}

static cux_ipc_memh_t *cux_ipc_memo_slot(cux_ipc_md_t *md, const void *base)
{
    return &md->memo[cux_ipc_memo_index(base)];
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

ucs_status_t cux_ipc_memh_export(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh)
{
    cux_ipc_exportable_t can;
    cux_ctx_guard_t guard;
    ucs_status_t status;

    if (cux_ipc_memo_find(md, info, memh)) {
        memh->spans     = NULL; /* the memo keeps keys without descriptors: no spans, nothing served */
        memh->served    = NULL;
        memh->withdrawn = 0;
        cux_ipc_memh_seal(memh); /* the memo's key, kept here now */
        return UCS_OK;
    }

    status = cux_device_ctx_enter(info->device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    cux_ipc_export_kinds(info, &can);
    memh->key.export_fd = -1;
    if ((can.pool != NULL) && !can.fd && can.fabric && cux_imex_channel_present()) {
        /* a pool with the fabric handle type alone: its fabric handle, where an IMEX channel is (the driver
         * corrupts the heap of a process without one that asks) */
        memh->key.kind = CUX_IPC_KIND_POOL_FABRIC;
        status         = cux_ipc_memh_export_fabric_pool(info, can.pool, memh);
    } else if (can.pool != NULL) {
        /* Pool memory: shareable if its pool was created with the descriptor handle type (not the default
         * pool's). */
        memh->key.kind = CUX_IPC_KIND_POOL_FD;
        status = !can.fd ? UCS_ERR_UNSUPPORTED : cux_ipc_memh_export_pool(md, info, can.pool, memh);
        if (!can.fd && can.fabric) {
            cux_ipc_fabric_pool_said();
        }
        if ((status == UCS_OK) && can.fabric && cux_ipc_domain_on()) {
            cux_ipc_fd_export_fabric(&md->fd_exports, memh->fdx, &memh->key.pool_fabric);
        }
    } else {
        memh->key.kind = CUX_IPC_KIND_LEGACY;
        status = !can.legacy ? UCS_ERR_UNSUPPORTED :
                 CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuIpcGetMemHandle, &memh->key.handle,
                              (CUdeviceptr)(uintptr_t)info->base);
        if ((status != UCS_OK) && (can.fd || !can.fabric)) {
            /* No legacy handle: cuMemCreate memory, exportable as a file descriptor if it was created so. */
            status = !can.fd ? UCS_ERR_UNSUPPORTED : cux_ipc_fd_export_vmm(&md->fd_exports, info, &memh->fdx);
            memh->key.kind      = CUX_IPC_KIND_VMM_FD;
            memh->key.export_fd = (status == UCS_OK) ? memh->fdx->fd : -1;
            if ((status == UCS_OK) && can.fabric && cux_ipc_domain_on()) {
                /* for peers on other hosts; those of this host go by the descriptor */
                cux_ipc_fd_export_fabric(&md->fd_exports, memh->fdx, &memh->key.fabric);
            }
        } else if (status != UCS_OK) {
            /* cuMemCreate memory with a fabric handle and no descriptor: nothing else carries it */
            memh->key.kind = CUX_IPC_KIND_VMM_FABRIC;
            status         = cux_ipc_fabric_export((uintptr_t)info->base, &memh->key.fabric);
        }
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc: allocation %p+%zu (%s) has no legacy IPC handle, exportable file descriptor or "
                  "fabric handle (%s): its key tells peers to take another path", info->base, info->length,
                  (can.pool != NULL) ? "from a memory pool" : "no memory pool", ucs_status_string(status));
        memh->key.kind      = CUX_IPC_KIND_NONE;
        memh->key.export_fd = -1;
        memset(&memh->key.handle, 0, sizeof(memh->key.handle));
        memset(&memh->key.pool_fabric, 0, sizeof(memh->key.pool_fabric));
    }

    memh->device         = info->device;
    memh->key.system_id  = md->system_id;
    memh->key.pid        = md->pid;
    memh->key.pid_ns     = md->pid_ns;
    memh->key.dev_uuid   = cux_device_get(info->device)->uuid;
    memh->key.base       = (uintptr_t)info->base;
    memh->key.length     = info->length;
    memh->key.buffer_id  = info->buffer_id;
    memh->key.secret     = cux_ipc_proof_key_secret(&memh->key);
    cux_ipc_memh_seal(memh);
    /* A VMM or pool key holds a reference to a descriptor. A NONE key is remembered too, so that a buffer
     * that cannot be shared is asked about once, not on every rendezvous. */
    if (memh->fdx == NULL) {
        cux_ipc_memo_store(md, memh);
    }
    return UCS_OK;
}
