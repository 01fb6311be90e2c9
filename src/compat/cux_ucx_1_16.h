/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.16 (Ubuntu 24.04): what changed since 1.13. The md query fills uct_md_attr_v2_t, where invalidation is
 * declared per access kind and registrations UCP may cache are listed; memory attributes have a DMA-BUF
 * descriptor; "auto" bandwidth is UCS_CONFIG_DBL_AUTO; mem_reg takes a parameter structure; mkey_pack gets the
 * address and length of the buffer being sent; components compare remote keys; md ops trade
 * is_sockaddr_accessible for mem_attach; reachability goes through the internal iface_is_reachable_v2, and
 * internal ops gain ep_connect_to_ep_v2 and ep_is_connected.
 * Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_16_H_
#define CUX_UCX_1_16_H_

#include "cux_ucx_1_13.h"

#undef CUX_UCX_CACHES_IPC_REGISTRATIONS
#define CUX_UCX_CACHES_IPC_REGISTRATIONS 1
#undef CUX_UCX_QUERIES_DMABUF
#define CUX_UCX_QUERIES_DMABUF           1

#undef CUX_CONFIG_BW_IS_AUTO
#define CUX_CONFIG_BW_IS_AUTO(_value) UCS_CONFIG_DBL_IS_AUTO(_value)

/* The defaults UCX fills before a transport's own query (1.18 has a function for them). */
#define CUX_MD_ATTR_DEFAULTS(_attr) \
    memset(&(_attr)->local_cpus, 0xff, sizeof((_attr)->local_cpus))

/* A transport that moves host memory too is not listed as accessing it (1.22 does list it). */
#define CUX_MD_HOST_ACCESS(_caps) 0

#undef CUX_MD_QUERY_FUNC
#define CUX_MD_QUERY_FUNC(_name, _caps) \
    static ucs_status_t _name(uct_md_h md, uct_md_attr_v2_t *attr) \
    { \
        cux_md_caps_t caps = {0}; \
        _caps(md, &caps); \
        CUX_MD_ATTR_DEFAULTS(attr); \
        /* invalidation is asked per access kind; ours covers what the peer does: RMA */ \
        attr->flags                  = caps.flags | ((caps.flags & UCT_MD_FLAG_INVALIDATE) ? \
                                                     UCT_MD_FLAG_INVALIDATE_RMA : 0); \
        attr->reg_mem_types          = caps.reg_mem_types; \
        attr->reg_nonblock_mem_types = 0; \
        attr->cache_mem_types        = caps.cache_mem_types; \
        attr->alloc_mem_types        = caps.alloc_mem_types; \
        attr->access_mem_types       = caps.access_mem_types | CUX_MD_HOST_ACCESS(&caps); \
        attr->detect_mem_types       = caps.detect_mem_types; \
        attr->dmabuf_mem_types       = caps.dmabuf_mem_types; \
        attr->max_alloc              = caps.max_alloc; \
        attr->max_reg                = caps.max_reg; \
        attr->rkey_packed_size       = caps.rkey_packed_size; \
        attr->reg_cost               = caps.reg_cost; \
        return UCS_OK; \
    }

#undef CUX_MEM_REG_FUNC
#define CUX_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, const uct_md_mem_reg_params_t *params, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0), memh_p); \
    }

/* The memory attributes mem_query fills (1.22: the v2 structure), with the DMA-BUF descriptor when asked. */
#define CUX_MEM_ATTR_T uct_md_mem_attr_t

#undef CUX_MEM_QUERY_FUNC
#define CUX_MEM_QUERY_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, const void *address, size_t length, CUX_MEM_ATTR_T *attr) \
    { \
        cux_mem_info_t info = {.want_dmabuf   = !!(attr->field_mask & UCT_MD_MEM_ATTR_FIELD_DMABUF_FD), \
                               .dmabuf_fd     = UCT_DMABUF_FD_INVALID, \
                               .dmabuf_offset = 0}; \
        ucs_status_t status = _impl(md, address, length, &info); \
        if (status == UCS_OK) { \
            CUX_MEM_ATTR_SET_COMMON(attr, &info); \
            CUX_MEM_ATTR_SET_VERSION_FIELDS(attr, &info); \
            if (attr->field_mask & UCT_MD_MEM_ATTR_FIELD_DMABUF_FD) { \
                attr->dmabuf_fd = info.dmabuf_fd; \
            } \
            if (attr->field_mask & UCT_MD_MEM_ATTR_FIELD_DMABUF_OFFSET) { \
                attr->dmabuf_offset = info.dmabuf_offset; \
            } \
        } \
        return status; \
    }

#undef CUX_MKEY_PACK_FUNC
#define CUX_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer) \
    { \
        return _impl(md, memh, address, rkey_buffer); \
    }

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS \
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
                     UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR, NULL), &why) && \
               uct_iface_scope_is_reachable(iface, params); \
    }

#undef CUX_IFACE_OPS_REACHABLE
#define CUX_IFACE_OPS_REACHABLE(_name) .iface_is_reachable = uct_base_iface_is_reachable

#undef CUX_EP_CONNECTED_IF_REACHABLE
#undef CUX_EP_CONNECTED_NEVER
#define CUX_EP_CONNECTED_IF_REACHABLE uct_base_ep_is_connected
#define CUX_EP_CONNECTED_NEVER        (uct_ep_is_connected_func_t)ucs_empty_function_return_zero_int

#undef CUX_IFACE_INTERNAL_OPS_SINCE_1_16
#define CUX_IFACE_INTERNAL_OPS_SINCE_1_16(_reachable, _connected) \
    .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported, \
    .iface_is_reachable_v2 = _reachable, \
    .ep_is_connected       = _connected,

#endif
