/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.20: what changed since 1.19. Internal interface ops gain iface_query_v2 (first: every slot moves),
 * iface_mem_element_pack and ep_get_device_ep: the device API (GPU-initiated transfers), whose memory elements
 * the interface packs into GPU memory. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_20_H_
#define CUX_UCX_1_20_H_

#include "cux_ucx_1_19.h"

#undef CUX_UCX_HAS_DEVICE_API
#define CUX_UCX_HAS_DEVICE_API 1
#undef CUX_IFACE_FLAG_DEVICE_EP
#define CUX_IFACE_FLAG_DEVICE_EP UCT_IFACE_FLAG_DEVICE_EP

#undef CUX_GET_DEVICE_EP_FUNC
#define CUX_GET_DEVICE_EP_FUNC(_name, _impl) \
    ucs_status_t _name(uct_ep_h tl_ep, uct_device_ep_h *device_ep_p) \
    { \
        return _impl(tl_ep, (void**)device_ep_p); \
    }

/* The element is in GPU memory: the offset goes there with a copy in the element's context. */
#undef CUX_MEM_ELEM_PACK_FUNC
#define CUX_MEM_ELEM_PACK_FUNC(_name, _impl) \
    ucs_status_t _name(uct_iface_h tl_iface, uct_mem_h memh, uct_rkey_t rkey, uct_device_mem_element_t *elem) \
    { \
        ptrdiff_t offset; \
        ucs_status_t status = _impl(memh, rkey, &offset, NULL); \
        return (status == UCS_OK) ? cux_device_store(elem, &offset, sizeof(offset)) : status; \
    }

#undef CUX_DEVICE_API_DECLS
#define CUX_DEVICE_API_DECLS(_device) \
    ucs_status_t _device##_get_device_ep(uct_ep_h tl_ep, uct_device_ep_h *device_ep_p); \
    ucs_status_t _device##_mem_elem_pack(uct_iface_h tl_iface, uct_mem_h memh, uct_rkey_t rkey, \
                                         uct_device_mem_element_t *elem);

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) \
    .iface_query_v2         = uct_iface_base_query_v2, \
    .iface_mem_element_pack = (uct_iface_mem_element_pack_func_t)_device##_mem_elem_pack, \
    .ep_get_device_ep       = (uct_ep_get_device_ep_func_t)_device##_get_device_ep,

#endif
