/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.16 (Ubuntu 24.04): what changed since 1.15. mkey_pack gets the address and length of the buffer being
 * sent; components compare remote keys; md ops lose is_sockaddr_accessible; the transport's own reachability
 * is the internal iface_is_reachable_v2 (the public op is UCX's, which calls it), and internal ops gain
 * ep_is_connected. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_16_H_
#define CUX_UCX_1_16_H_

#include "cux_ucx_1_15.h"

#undef CUX_UCX_MKEY_PACK_TAKES_ADDRESS
#define CUX_UCX_MKEY_PACK_TAKES_ADDRESS 1

#undef CUX_MKEY_PACK_FUNC
#define CUX_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer) \
    { \
        return _impl(md, memh, address, length, rkey_buffer); \
    }

/* is_sockaddr_accessible is gone */
#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS(_device) \
    .mem_attach = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported,

#undef CUX_COMPONENT_VERSION_FIELDS
#define CUX_COMPONENT_VERSION_FIELDS \
    .rkey_compare = uct_base_rkey_compare,

/* The internal op takes a parameter structure; the public op is UCX's, which calls the internal one. */
#undef CUX_IFACE_REACHABLE_FUNC
#define CUX_IFACE_REACHABLE_FUNC(_name, _impl) \
    static int _name(const uct_iface_h iface, const uct_iface_is_reachable_params_t *params) \
    { \
        const char *why; \
        return _impl(iface, UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, device_addr, DEVICE_ADDR, NULL), \
                     UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR, NULL), SIZE_MAX, \
                     &why) && \
               uct_iface_scope_is_reachable(iface, params); \
    }

#undef CUX_IFACE_OPS_REACHABLE
#define CUX_IFACE_OPS_REACHABLE(_name) .iface_is_reachable = uct_base_iface_is_reachable

#undef CUX_EP_CONNECTED_IF_REACHABLE
#undef CUX_EP_CONNECTED_NEVER
#define CUX_EP_CONNECTED_IF_REACHABLE uct_base_ep_is_connected
#define CUX_EP_CONNECTED_NEVER        (uct_ep_is_connected_func_t)ucs_empty_function_return_zero_int

#undef CUX_IFACE_INTERNAL_OPS_CONNECT
#define CUX_IFACE_INTERNAL_OPS_CONNECT(_reachable, _connected) \
    .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported, \
    .iface_is_reachable_v2 = _reachable, \
    .ep_is_connected       = _connected,

#endif
