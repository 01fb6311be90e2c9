/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc memory domain (component "cuda_ipc"): its settings, and the registration of GPU memory, whose key is
 * the key of the buffer's allocation (cux_ipc_memh_export.h) and is packed, and renewed when the allocation at the
 * buffer changed, by cux_ipc_memh.h. The importing side (unpacking peers' keys, mapping their memory) is
 * cux_ipc_import.h.
 */
#ifndef CUX_IPC_MD_H_
#define CUX_IPC_MD_H_

#include "compat/cux_ucx_compat.h"
#include "ipc/export/cux_ipc_fd_export.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/common/cux_ipc_names.h"
#include "ipc/export/cux_ipc_span.h"

#include <ucs/type/spinlock.h>
#include <sys/types.h>

extern uct_component_t cux_ipc_component;

typedef struct cux_ipc_md_config {
    uct_md_config_t super;
    int             cache_enable;
    unsigned long   cache_max_regions;
    size_t          cache_max_size;
    ucs_time_t      cache_max_idle;
    int             peer_proof;   /* cux_ipc_proof_mode_t */
    ucs_time_t      proof_timeout; /* how long a read of a peer's memory may take */
    unsigned long   max_exported_fds;
    unsigned        exports_kept;
    char            *socket_dir;
    int             enable_mnnvl; /* ucs_ternary_auto_value_t: peers on other hosts (cux_ipc_domain.h) */
} cux_ipc_md_config_t;

/* A registration: the sealed key, ready to pack (importers read it back from the table of keys out, at its slot
 * key.record), the owning device, and for VMM and pool memory the descriptor it refers to. */
typedef struct cux_ipc_memh {
    /* the allocation its current buffer is in */
    cux_ipc_rkey_t      key;
    int                 device;
    cux_ipc_fd_export_t *fdx;
    cux_ipc_span_t      *spans;    /* buffers of it ran on into the next allocations: their spans, newest first,
                                      kept as long as the registration (a peer may hold a key of each) */
    void                *address;  /* the registered buffer */
    size_t              length;
    /* UCP 1.16+ keeps a registration past its buffer (a stock UCX has no CUDA hooks to tell it the buffer went)
     * and hands it buffers in other allocations: the state (key, device, descriptor, spans) of each allocation
     * it served before, kept until it ends, since peers may hold those keys; newest first */
    struct cux_ipc_memh *served;
    int                 withdrawn; /* a served state whose allocation is gone: its key and descriptors too */
} cux_ipc_memh_t;

/* Keys of recently registered allocations, by allocation base: UCP registers the buffer of every rendezvous
 * message, and a legacy key depends only on the allocation (base, length, buffer id). */
#define CUX_IPC_KEY_MEMO_SIZE 64

/* A pool allocation's export data, which depends only on the allocation too, and costs about 100 us a call
 * (an H100, driver 580): kept by allocation base like the memo, so that registering it again asks nothing. */
typedef struct cux_ipc_pool_ptr_memo {
    uintptr_t              base;      /* 0: empty slot */
    size_t                 length;
    unsigned long long     buffer_id;
    CUmemPoolPtrExportData data;
} cux_ipc_pool_ptr_memo_t;

typedef struct cux_ipc_md {
    uct_md_t        super;
    uint64_t        system_id;
    pid_t           pid;
    uint64_t        pid_ns;
    int             listening;                    /* it asked the channel to listen (SOCKET_DIR) */
    cux_ipc_proof_mode_t proof;                   /* what peers must prove, for this domain's interfaces */
    ucs_spinlock_t  memo_lock;                    /* the memo, keys renewed by mkey_pack */
    cux_ipc_memh_t  memo[CUX_IPC_KEY_MEMO_SIZE];  /* key.magic 0: empty slot */
    cux_ipc_pool_ptr_memo_t pool_ptrs[CUX_IPC_KEY_MEMO_SIZE]; /* under memo_lock too */
    cux_ipc_fd_exports_t fd_exports;              /* descriptors kept for importers */
} cux_ipc_md_t;

#endif
