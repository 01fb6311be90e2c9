/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: see cux_ipc_fd_export.h.
 */
#include "ipc/export/cux_ipc_fd_export.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "driver/cux_driver.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void cux_ipc_fd_exports_init(cux_ipc_fd_exports_t *exports, unsigned long max)
{
    struct rlimit nofile;

    memset(exports, 0, sizeof(*exports));
    ucs_spinlock_init(&exports->lock, 0);
    if (max == UCS_ULUNITS_AUTO) {
        max = ((getrlimit(RLIMIT_NOFILE, &nofile) == 0) && (nofile.rlim_cur != RLIM_INFINITY)) ?
              ucs_max(nofile.rlim_cur / 4, 16) : 65536;
    }
    exports->max = max;
}

void cux_ipc_fd_exports_cleanup(cux_ipc_fd_exports_t *exports)
{
    ucs_spinlock_destroy(&exports->lock);
}

/* Export the cuMemCreate allocation id names as a POSIX file descriptor. */
static ucs_status_t cux_ipc_export_vmm(const cux_ipc_fd_export_t *id, int *fd_p)
{
    return cux_driver_export_allocation(id->base, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, fd_p);
}

/* Export the memory pool id names as a POSIX file descriptor. */
static ucs_status_t cux_ipc_export_pool(const cux_ipc_fd_export_t *id, int *fd_p)
{
    if (cux_drv.cuMemPoolExportToShareableHandle == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    return CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolExportToShareableHandle, fd_p, id->pool,
                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
}

static cux_ipc_fd_export_t **cux_ipc_fd_export_bucket(cux_ipc_fd_exports_t *exports, const cux_ipc_fd_export_t *id)
{
    uintptr_t hash = (id->pool != NULL) ? (uintptr_t)id->pool >> 4 : id->base >> 21;

    return &exports->buckets[hash % CUX_IPC_FD_EXPORT_BUCKETS];
}

static cux_ipc_fd_export_t *cux_ipc_fd_export_find(cux_ipc_fd_exports_t *exports, const cux_ipc_fd_export_t *id)
{
    cux_ipc_fd_export_t *fdx;

    for (fdx = *cux_ipc_fd_export_bucket(exports, id); fdx != NULL; fdx = fdx->next) {
        if ((fdx->pool == id->pool) && (fdx->base == id->base) && (fdx->length == id->length) &&
            (fdx->buffer_id == id->buffer_id)) {
            return fdx;
        }
    }
    return NULL;
}

/* A reference to the descriptor id names: found, or exported by export_fn and inserted. */
static ucs_status_t cux_ipc_fd_export_get(cux_ipc_fd_exports_t *exports, const cux_ipc_fd_export_t *id,
                                          ucs_status_t (*export_fn)(const cux_ipc_fd_export_t *id, int *fd_p),
                                          cux_ipc_fd_export_t **fdx_p)
{
    cux_ipc_fd_export_t *fdx, *made;
    ucs_status_t status;
    int fd;

    ucs_spin_lock(&exports->lock);
    fdx = cux_ipc_fd_export_find(exports, id);
    if (fdx != NULL) {
        ++fdx->refcount;
    }
    ucs_spin_unlock(&exports->lock);
    if (fdx != NULL) {
        *fdx_p = fdx;
        return UCS_OK;
    }

    /* export outside the lock (a driver call), then insert unless another thread did meanwhile; counted from
     * now, so that racing exports stay within the bound */
    ucs_spin_lock(&exports->lock);
    if (exports->count >= exports->max) {
        int first = !exports->logged;
        exports->logged = 1;
        ucs_spin_unlock(&exports->lock);
        ucs_log(first ? UCS_LOG_LEVEL_WARN : UCS_LOG_LEVEL_DEBUG, "cuda_ipc: %lu descriptors are open for peers, "
                "the most UCX_CUDA_IPC_MAX_EXPORTED_FDS allows: memory of further cuMemCreate allocations and "
                "pools is not shared over cuda_ipc (its keys say so) until registrations end", exports->max);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    ++exports->count;
    ucs_spin_unlock(&exports->lock);
    status = export_fn(id, &fd);
    made   = (status == UCS_OK) ? ucs_malloc(sizeof(*made), "cux_ipc_fd_export") : NULL;
    if (made == NULL) {
        if (status == UCS_OK) {
            close(fd);
            status = UCS_ERR_NO_MEMORY;
        }
        ucs_spin_lock(&exports->lock);
        --exports->count;
        ucs_spin_unlock(&exports->lock);
        return status;
    }
    /* the driver's descriptor would otherwise go to every program this one executes */
    (void)fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
    *made          = *id;
    made->fd       = fd;
    made->refcount = 1;
    ucs_spin_lock(&exports->lock);
    fdx = cux_ipc_fd_export_find(exports, made);
    if (fdx != NULL) {
        ++fdx->refcount;
        --exports->count; /* this one is closed below */
    } else {
        made->next = *cux_ipc_fd_export_bucket(exports, made);
        *cux_ipc_fd_export_bucket(exports, made) = made;
        fdx  = made;
        made = NULL;
    }
    ucs_spin_unlock(&exports->lock);
    if (made != NULL) {
        close(made->fd);
        ucs_free(made);
    }
    *fdx_p = fdx;
    return UCS_OK;
}

ucs_status_t cux_ipc_fd_export_vmm(cux_ipc_fd_exports_t *exports, const cux_ptr_info_t *info,
                                   cux_ipc_fd_export_t **fdx_p)
{
    cux_ipc_fd_export_t id = {.base = (uintptr_t)info->base, .length = info->length,
                              .buffer_id = info->buffer_id};

    return cux_ipc_fd_export_get(exports, &id, cux_ipc_export_vmm, fdx_p);
}

ucs_status_t cux_ipc_fd_export_pool(cux_ipc_fd_exports_t *exports, CUmemoryPool pool,
                                    cux_ipc_fd_export_t **fdx_p)
{
    cux_ipc_fd_export_t id = {.pool = pool};

    return cux_ipc_fd_export_get(exports, &id, cux_ipc_export_pool, fdx_p);
}

void cux_ipc_fd_export_fabric(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx, CUmemFabricHandle *fabric)
{
    CUmemFabricHandle made;
    ucs_status_t status;
    int asked;

    ucs_spin_lock(&exports->lock);
    asked = fdx->fabric_asked;
    *fabric = fdx->fabric;
    ucs_spin_unlock(&exports->lock);
    if (asked) {
        return;
    }
    /* two registrations asking at once both ask the driver, and both get the same handle */
    status = (fdx->pool != NULL) ? cux_ipc_fabric_export_pool(fdx->pool, &made) :
                                   cux_ipc_fabric_export(fdx->base, &made);
    if (status != UCS_OK) {
        memset(&made, 0, sizeof(made)); /* peers of other hosts take another path */
    }
    ucs_spin_lock(&exports->lock);
    fdx->fabric       = made;
    fdx->fabric_asked = 1;
    ucs_spin_unlock(&exports->lock);
    *fabric = made;
}

void cux_ipc_fd_export_put(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx)
{
    cux_ipc_fd_export_t **pp;
    int last;

    if (fdx == NULL) {
        return;
    }
    ucs_spin_lock(&exports->lock);
    last = (--fdx->refcount == 0);
    if (last) {
        for (pp = cux_ipc_fd_export_bucket(exports, fdx); *pp != fdx; pp = &(*pp)->next) {
        }
        *pp = fdx->next;
        --exports->count;
    }
    ucs_spin_unlock(&exports->lock);
    if (last) {
        close(fdx->fd); /* importers hold their own duplicates */
        ucs_free(fdx);
    }
}

unsigned cux_ipc_fd_exports_count(cux_ipc_fd_exports_t *exports)
{
    unsigned n;

    ucs_spin_lock(&exports->lock);
    n = exports->count;
    ucs_spin_unlock(&exports->lock);
    return n;
}
