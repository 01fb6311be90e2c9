/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.14: what changed since 1.13. The md query fills uct_md_attr_v2_t, which lists the registrations UCP may
 * cache (UCP's registration cache uses it from now on) and the memory types with DMA-BUF export; memory
 * attributes may ask for a DMA-BUF descriptor; "auto" bandwidth is UCS_CONFIG_DBL_IS_AUTO; mem_reg takes a
 * parameter structure; md ops gain mem_attach (is_sockaddr_accessible stays until 1.16); internal iface ops gain
 * ep_connect_to_ep_v2. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_14_H_
#define CUX_UCX_1_14_H_

#include "cux_ucx_1_13.h"

#undef CUX_UCX_CACHES_IPC_REGISTRATIONS
#define CUX_UCX_CACHES_IPC_REGISTRATIONS 1
#undef CUX_UCX_QUERIES_DMABUF
#define CUX_UCX_QUERIES_DMABUF           1

#undef CUX_CONFIG_BW_IS_AUTO
#define CUX_CONFIG_BW_IS_AUTO(_value) UCS_CONFIG_DBL_IS_AUTO(_value)

/* The defaults UCX fills before a transport's own query (1.17 has a function for them). */
#define CUX_MD_ATTR_DEFAULTS(_attr) \
    memset(&(_attr)->local_cpus, 0xff, sizeof((_attr)->local_cpus))

/* A transport that moves host memory too is not listed as accessing it (1.22 does list it). */
#define CUX_MD_HOST_ACCESS(_caps) 0

/* Invalidation flags per access kind (1.15), and v2 attribute fields of later releases only. */
#define CUX_MD_INVALIDATE_FLAGS(_flags) 0
#define CUX_MD_ATTR_SET_RELEASE_FIELDS(_attr)

#undef CUX_MD_QUERY_FUNC
#define CUX_MD_QUERY_FUNC(_name, _caps) \
    static ucs_status_t _name(uct_md_h md, uct_md_attr_v2_t *attr) \
    { \
        cux_md_caps_t caps = {0}; \
        _caps(md, &caps); \
        CUX_MD_ATTR_DEFAULTS(attr); \
        attr->flags                  = caps.flags | CUX_MD_INVALIDATE_FLAGS(caps.flags); \
        attr->reg_mem_types          = caps.reg_mem_types; \
        CUX_MD_ATTR_SET_RELEASE_FIELDS(attr); \
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

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS(_device) \
    .mem_attach             = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .is_sockaddr_accessible = ucs_empty_function_return_zero_int,

#undef CUX_IFACE_INTERNAL_OPS_CONNECT
#define CUX_IFACE_INTERNAL_OPS_CONNECT(_reachable, _connected) \
    .ep_connect_to_ep_v2 = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported,

#endif
