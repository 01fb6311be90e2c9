/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's scatter-gather zero-copy ops (UCX 1.22+ put, 1.23+ get): a list of (local buffer, remote address,
 * key) elements, each possibly repeated at a stride, as one operation with one completion.
 */
#ifndef CUX_IPC_SGL_H_
#define CUX_IPC_SGL_H_

#include "compat/cux_ucx_compat.h"

/* The ops the release's tables take (cux_ucx_compat.h): cux_ipc_sgl_query_v2, ..._put_sgl_zcopy and
 * ..._get_sgl_zcopy, as the release has slots for them. */
CUX_SGL_DECLS(cux_ipc_sgl)

#endif
