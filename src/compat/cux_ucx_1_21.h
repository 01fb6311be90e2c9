/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.21: what changed since 1.20. Internal interface ops lose iface_query_v2 and iface_mem_element_pack
 * again (ep_get_device_ep stays); memory domain ops gain mem_elem_pack; cuda_ipc flags RKEY_PTR. Included by
 * cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_21_H_
#define CUX_UCX_1_21_H_

#include "cux_ucx_1_20.h"

/* cuda_ipc offers rkey_ptr (ucp_rkey_ptr maps a peer's GPU memory); UCP 1.21 keeps such transports out of its
 * in-process memory-type endpoints */
#undef CUX_UCX_IPC_MD_FLAGS
#define CUX_UCX_IPC_MD_FLAGS (UCT_MD_FLAG_MEMTYPE_COPY | UCT_MD_FLAG_RKEY_PTR)

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported,

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS \
    .mem_attach    = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t)ucs_empty_function_return_unsupported,

#endif
