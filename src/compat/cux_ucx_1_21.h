/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.21: what changed since 1.20. Internal interface ops lose iface_query_v2 and iface_mem_element_pack
 * again (ep_get_device_ep stays); memory domain ops gain mem_elem_pack, which fills an element in host memory
 * (a union with cuda_ipc's member); cuda_ipc flags RKEY_PTR. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_21_H_
#define CUX_UCX_1_21_H_

#include "cux_ucx_1_20.h"

/* cuda_ipc offers rkey_ptr (ucp_rkey_ptr maps a peer's GPU memory); UCP 1.21 keeps such transports out of its
 * in-process memory-type endpoints */
#undef CUX_UCX_IPC_MD_FLAGS
#define CUX_UCX_IPC_MD_FLAGS (UCT_MD_FLAG_MEMTYPE_COPY | UCT_MD_FLAG_RKEY_PTR)

#undef CUX_DEVICE_MEM_ELEM_T
#define CUX_DEVICE_MEM_ELEM_T uct_device_mem_element_t

#undef CUX_MEM_ELEM_PACK_FUNC
#define CUX_MEM_ELEM_PACK_FUNC(_name, _impl) \
    ucs_status_t _name(uct_md_h md, uct_mem_h memh, uct_rkey_t rkey, CUX_DEVICE_MEM_ELEM_T *elem) \
    { \
        return _impl(memh, rkey, &elem->cuda_ipc_md_mem_element.mapped_offset, NULL); \
    }

#undef CUX_DEVICE_API_DECLS
#define CUX_DEVICE_API_DECLS(_device) \
    ucs_status_t _device##_get_device_ep(uct_ep_h tl_ep, uct_device_ep_h *device_ep_p); \
    ucs_status_t _device##_mem_elem_pack(uct_md_h md, uct_mem_h memh, uct_rkey_t rkey, CUX_DEVICE_MEM_ELEM_T *elem);

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t)_device##_get_device_ep,

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS(_device) \
    .mem_attach    = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t)_device##_mem_elem_pack,

#endif
