/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: the descriptors this process keeps open for importers to take with pidfd_getfd.
 * One per cuMemCreate allocation (CUX_IPC_KIND_VMM_FD) or per memory pool (CUX_IPC_KIND_POOL_FD) with a live
 * registration, shared by all registrations of it: UCP 1.16+ caches registrations, one per registered range,
 * so many buffers of one allocation or pool would otherwise hold a descriptor each. A descriptor is closed when
 * the last registration that uses it is deregistered (or renewed by mkey_pack); importers hold their own
 * duplicates by then. They are close-on-exec, and at most `max` are open at once (UCX_CUDA_IPC_MAX_EXPORTED_FDS,
 * by default a quarter of the process's descriptor limit): beyond, a registration's key says "not shareable"
 * and UCP takes another path, so that the module never takes the application's last descriptors.
 *
 * UCP before 1.16 registers per message: every message of cuMemCreate or pool memory would export a descriptor
 * and close it again (issue 59). So the last `kept` descriptors whose registrations all ended stay open, idle,
 * and the next registration of the same allocation or pool takes one back without asking the driver. An idle
 * descriptor keeps its allocation's memory alive, so each deregistration asks the driver whether the other idle
 * ones still name live allocations (their address and buffer id), closes those that do not, and closes the oldest
 * beyond `kept`; a new export that finds `max` open closes idle ones first.
 */
#ifndef CUX_IPC_FD_EXPORT_H_
#define CUX_IPC_FD_EXPORT_H_

#include "base/cux_ptr.h"

#include "driver/cux_cuda.h"
#include <ucs/datastruct/list.h>
#include <ucs/type/spinlock.h>
#include <ucs/type/status.h>
#include <stdint.h>

typedef struct cux_ipc_fd_export {
    struct cux_ipc_fd_export *next;
    CUmemoryPool             pool;                     /* a pool's descriptor; NULL for an allocation's */
    uint64_t                 base, length, buffer_id;  /* an allocation's descriptor: which allocation */
    int                      fd;
    unsigned                 refcount;                 /* registrations using it; 0: idle */
    ucs_list_link_t          idle_link;                /* in the idle list while refcount is 0 */
    uint64_t                 idle_seq;                 /* when it last went idle (exports->idle_seq) */
    uint64_t                 pool_base, pool_buffer_id; /* a pool's: the allocation of it registered last (an
                                                           allocation's descriptor: base and buffer_id); while
                                                           the driver has it there, an idle one may be kept */
    int                      fabric_asked;             /* fabric below was asked of the driver (under the lock) */
    CUmemFabricHandle        fabric;                   /* its fabric handle too, zero if it has none */
} cux_ipc_fd_export_t;

#define CUX_IPC_FD_EXPORT_BUCKETS  64
#define CUX_IPC_FD_EXPORT_TRIM_MAX 64 /* idle descriptors asked about per deregistration, and the most kept */

typedef struct cux_ipc_fd_exports {
    ucs_spinlock_t      lock;
    cux_ipc_fd_export_t *buckets[CUX_IPC_FD_EXPORT_BUCKETS];
    unsigned            count;     /* open (idle ones included), or being exported */
    unsigned long       max;
    ucs_list_link_t     idle;      /* idle descriptors, the oldest first */
    unsigned            nidle, kept;
    uint64_t            idle_seq;
    int                 logged;    /* the bound was reached once: said at warning level */
} cux_ipc_fd_exports_t;

/* max: the most descriptors open at once; UCS_ULUNITS_AUTO for a quarter of RLIMIT_NOFILE's soft limit. kept:
 * the most idle ones kept open (0: each closed when its last registration ends). */
void cux_ipc_fd_exports_init(cux_ipc_fd_exports_t *exports, unsigned long max, unsigned kept);
/* Closes the idle descriptors (every registration has ended by now). */
void cux_ipc_fd_exports_cleanup(cux_ipc_fd_exports_t *exports);

/* A reference to the descriptor of the cuMemCreate allocation info describes, exported on first use (the
 * allocation must have been created with the POSIX descriptor handle type). Called in the allocation's
 * device context. UCS_ERR_EXCEEDS_LIMIT when `max` descriptors are open already. */
ucs_status_t cux_ipc_fd_export_vmm(cux_ipc_fd_exports_t *exports, const cux_ptr_info_t *info,
                                   cux_ipc_fd_export_t **fdx_p);

/* A reference to the descriptor of a memory pool, exported on first use (the pool must have been created with
 * the POSIX descriptor handle type); info: the allocation of it being registered. */
ucs_status_t cux_ipc_fd_export_pool(cux_ipc_fd_exports_t *exports, CUmemoryPool pool, const cux_ptr_info_t *info,
                                    cux_ipc_fd_export_t **fdx_p);

/* The fabric handle of what fdx exports, where it was made with the fabric type as well (a multi-node NVLink
 * domain's importers on other hosts take it): asked of the driver once per export, in the allocation's device
 * context; zero where the driver gives none. */
void cux_ipc_fd_export_fabric(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx, CUmemFabricHandle *fabric);

/* Gives a reference back (NULL: none); after the last one the descriptor is idle (or closed, beyond `kept`). */
void cux_ipc_fd_export_put(cux_ipc_fd_exports_t *exports, cux_ipc_fd_export_t *fdx);

/* Descriptors open now (idle ones included). */
unsigned cux_ipc_fd_exports_count(cux_ipc_fd_exports_t *exports);

#endif
