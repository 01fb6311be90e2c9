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

void cux_ipc_fd_exports_init(cux_ipc_fd_exports_t *exports, unsigned long max, unsigned kept)
{
    struct rlimit nofile;

    memset(exports, 0, sizeof(*exports));
    ucs_spinlock_init(&exports->lock, 0);
    ucs_list_head_init(&exports->idle);
    if (max == UCS_ULUNITS_AUTO) {
        max = ((getrlimit(RLIMIT_NOFILE, &nofile) == 0) && (nofile.rlim_cur != RLIM_INFINITY)) ?
              ucs_max(nofile.rlim_cur / 4, 16) : 65536;
    }
    exports->max  = max;
    exports->kept = kept;
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

/* Takes an idle descriptor out of the table and the idle list (under the lock); the caller closes it. */
static void cux_ipc_fd_export_unlink_idle(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx)
{
    cux_ipc_fd_export_t **pp;

    for (pp = cux_ipc_fd_export_bucket(exports, fdx); *pp != fdx; pp = &(*pp)->next) {
    }
    *pp = fdx->next;
    ucs_list_del(&fdx->idle_link);
    --exports->nidle;
    --exports->count;
}

static void cux_ipc_fd_export_close(cux_ipc_fd_export_t *fdx)
{
    close(fdx->fd); /* importers hold their own duplicates */
    ucs_free(fdx);
}

void cux_ipc_fd_exports_cleanup(cux_ipc_fd_exports_t *exports)
{
    cux_ipc_fd_export_t *fdx;

    while (!ucs_list_is_empty(&exports->idle)) {
        fdx = ucs_list_head(&exports->idle, cux_ipc_fd_export_t, idle_link);
        cux_ipc_fd_export_unlink_idle(exports, fdx);
        cux_ipc_fd_export_close(fdx);
    }
    ucs_spinlock_destroy(&exports->lock);
}

/* What the driver is asked about an idle descriptor, copied under the lock: another thread may close it while
 * the driver is asked; its sequence number tells, under the lock again, whether it is the same idle one. */
typedef struct {
    const cux_ipc_fd_export_t *fdx;
    uint64_t                  seq, probe, probe_buffer_id;
    CUmemoryPool              pool;
    int                       alive;
} cux_ipc_fd_export_probe_t;

/* Does the driver still have the allocation an idle descriptor was kept for, at its place (and, for a pool's,
 * in that pool)? */
static int cux_ipc_fd_export_still_there(const cux_ipc_fd_export_probe_t *p)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
    unsigned long long buffer_id = 0;
    uint64_t pool                = 0;
    void *data[]                 = {&buffer_id, &pool};

    return (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, (p->pool != NULL) ? 2 : 1, attrs, data,
                         (CUdeviceptr)p->probe) == UCS_OK) &&
           (buffer_id == p->probe_buffer_id) && ((CUmemoryPool)(uintptr_t)pool == p->pool);
}

/* Closes the idle descriptors whose allocation is gone (each would keep its memory alive), and the oldest beyond
 * `kept`. The one that just went idle is not asked about: its registration found its allocation there, and the
 * next deregistration asks (one driver call less per message where UCP registers per message). */
static void cux_ipc_fd_exports_trim(cux_ipc_fd_exports_t *exports, const cux_ipc_fd_export_t *just_idle)
{
    cux_ipc_fd_export_probe_t probe[CUX_IPC_FD_EXPORT_TRIM_MAX];
    cux_ipc_fd_export_t *fdx, *tmp, *gone[CUX_IPC_FD_EXPORT_TRIM_MAX];
    unsigned n = 0, ngone = 0, i;

    ucs_spin_lock(&exports->lock);
    ucs_list_for_each(fdx, &exports->idle, idle_link) {
        if (n == CUX_IPC_FD_EXPORT_TRIM_MAX) {
            break;
        }
        if (fdx == just_idle) {
            continue;
        }
        probe[n++] = (cux_ipc_fd_export_probe_t){.fdx = fdx, .seq = fdx->idle_seq, .pool = fdx->pool,
                                                 .probe = (fdx->pool != NULL) ? fdx->pool_base : fdx->base,
                                                 .probe_buffer_id = (fdx->pool != NULL) ? fdx->pool_buffer_id :
                                                                                          fdx->buffer_id};
    }
    ucs_spin_unlock(&exports->lock);
    for (i = 0; i < n; ++i) {
        probe[i].alive = cux_ipc_fd_export_still_there(&probe[i]);
    }
    ucs_spin_lock(&exports->lock);
    ucs_list_for_each_safe(fdx, tmp, &exports->idle, idle_link) {
        for (i = 0; (i < n) && ((probe[i].fdx != fdx) || (probe[i].seq != fdx->idle_seq)); ++i) {
        }
        if (((i < n) && !probe[i].alive) || (exports->nidle > exports->kept)) {
            cux_ipc_fd_export_unlink_idle(exports, fdx); /* gone, or the oldest beyond `kept` */
            gone[ngone++] = fdx;
            if (ngone == CUX_IPC_FD_EXPORT_TRIM_MAX) {
                break;
            }
        }
    }
    ucs_spin_unlock(&exports->lock);
    for (i = 0; i < ngone; ++i) {
        cux_ipc_fd_export_close(gone[i]);
    }
}

/* One more registration uses fdx (under the lock): an idle one is taken back. For a pool's, id names the
 * allocation of it registered now. */
static void cux_ipc_fd_export_hold(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx,
                                   const cux_ipc_fd_export_t *id)
{
    if (fdx->refcount++ == 0) {
        ucs_list_del(&fdx->idle_link);
        --exports->nidle;
    }
    fdx->pool_base      = id->pool_base;
    fdx->pool_buffer_id = id->pool_buffer_id;
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
        cux_ipc_fd_export_hold(exports, fdx, id);
    }
    ucs_spin_unlock(&exports->lock);
    if (fdx != NULL) {
        *fdx_p = fdx;
        return UCS_OK;
    }

    /* export outside the lock (a driver call), then insert unless another thread did meanwhile; counted from
     * now, so that racing exports stay within the bound */
    ucs_spin_lock(&exports->lock);
    while ((exports->count >= exports->max) && !ucs_list_is_empty(&exports->idle)) {
        /* an idle descriptor makes room first */
        fdx = ucs_list_head(&exports->idle, cux_ipc_fd_export_t, idle_link);
        cux_ipc_fd_export_unlink_idle(exports, fdx);
        ucs_spin_unlock(&exports->lock);
        cux_ipc_fd_export_close(fdx);
        ucs_spin_lock(&exports->lock);
    }
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
        cux_ipc_fd_export_hold(exports, fdx, id);
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

ucs_status_t cux_ipc_fd_export_pool(cux_ipc_fd_exports_t *exports, CUmemoryPool pool, const cux_ptr_info_t *info,
                                    cux_ipc_fd_export_t **fdx_p)
{
    cux_ipc_fd_export_t id = {.pool = pool, .pool_base = (uintptr_t)info->base, .pool_buffer_id = info->buffer_id};

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
    int last;

    if (fdx == NULL) {
        return;
    }
    ucs_spin_lock(&exports->lock);
    last = (--fdx->refcount == 0);
    if (last) {
        fdx->idle_seq = ++exports->idle_seq;
        ucs_list_add_tail(&exports->idle, &fdx->idle_link);
        ++exports->nidle;
    }
    ucs_spin_unlock(&exports->lock);
    if (last) {
        cux_ipc_fd_exports_trim(exports, fdx);
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

