/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's scatter-gather zero-copy ops (UCX 1.22+ put, 1.23+ get): a list of (local buffer, remote address,
 * key) elements, each possibly repeated at a stride, as one operation with one completion.
 */
#ifndef CUX_IPC_SGL_H_
#define CUX_IPC_SGL_H_

#include "compat/cux_ucx_compat.h"

/* The most elements a list may hold: any number a size_t counts, bounded only so that UCP's arithmetic on it
 * stays far from overflowing. */
#define CUX_IPC_SGL_MAX_COUNT ((size_t)UINT32_MAX)

/* A list on an endpoint (put or get), as the ops below take it: UCS_INPROGRESS with comp following, UCS_OK when
 * it moved nothing, or an error with nothing written. Compiled for every release (the tests call it where UCX
 * has no op for it). */
ucs_status_t cux_ipc_sgl_zcopy(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths, uct_mem_h const *memhs,
                               const uint64_t *remote_addrs, uct_rkey_t const *rkeys, const size_t *counts,
                               const size_t *strides, size_t count, uct_completion_t *comp, int put);

/* The ops the release's tables take (cux_ucx_compat.h): cux_ipc_sgl_query_v2, ..._put_sgl_zcopy and
 * ..._get_sgl_zcopy, as the release has slots for them. */
CUX_SGL_DECLS(cux_ipc_sgl)

#endif
