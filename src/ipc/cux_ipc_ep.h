/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc endpoint: put/get zero-copy between this process's GPU memory and the peer process's, through a
 * cached mapping of the remote allocation. The endpoint exists only for a peer that proved its address
 * (cux_ipc_proof.h) and holds a pidfd of it; keys of any other process are refused on it. A peer that died
 * (or whose pid was reused) is reported by ep_check.
 */
#ifndef CUX_IPC_EP_H_
#define CUX_IPC_EP_H_

#include "ipc/import/cux_ipc_cache.h"
#include "ipc/cux_ipc_iface.h"

typedef struct cux_ipc_ep {
    cux_ep_t             super;
    cux_ipc_peer_t       peer;
    uct_keepalive_info_t keepalive;
} cux_ipc_ep_t;

UCS_CLASS_DECLARE(cux_ipc_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_NEW_FUNC(cux_ipc_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(cux_ipc_ep_t, uct_ep_t);

ucs_status_t cux_ipc_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t cux_ipc_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                  uct_rkey_t rkey, uct_completion_t *comp);
ucs_status_t cux_ipc_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);

/* The local side of a copy: the device whose context maps the peer's allocation and drives the copy, and the
 * local allocation (0 for host memory), from the memory handle or else a pointer query. */
typedef struct cux_ipc_local {
    int       device;
    uintptr_t alloc;
    size_t    length; /* the allocation's (0 for host memory) */
} cux_ipc_local_t;

ucs_status_t cux_ipc_ep_local(const void *buffer, uct_mem_h memh, cux_ipc_local_t *local);

#endif
