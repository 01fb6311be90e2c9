/*
 * UCX 1.22, against 1.16: the md query starts from UCX's defaults (uct_md_base_md_query: the attribute
 * structure grew fields such as gva_mem_types); mem_query takes uct_md_mem_attr_v2_t; mem_alloc takes the
 * system device; rkey_unpack takes a parameter structure; md ops gain mem_elem_pack; internal iface ops gain
 * iface_query_v2, ep_get_device_ep and ep_put_sgl_zcopy; ep_check may come with a completion. Included by
 * cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_22_H_
#define CUX_UCX_1_22_H_

typedef uct_md_attr_v2_t cux_md_attr_t;

/* A bandwidth configured as "auto". */
#define CUX_CONFIG_BW_IS_AUTO(_value) UCS_CONFIG_DBL_IS_AUTO(_value)

/* UCP's memory-type cache learns an allocation (1.22: with no memory flags). */
#define CUX_MEMTYPE_CACHE_UPDATE(_address, _size, _mem_type, _sys_dev) \
    ucs_memtype_cache_update(_address, _size, _mem_type, _sys_dev, 0)

#define CUX_MD_QUERY_FUNC(_name, _caps) \
    static ucs_status_t _name(uct_md_h md, uct_md_attr_v2_t *attr) \
    { \
        cux_md_caps_t caps = {0}; \
        _caps(md, &caps); \
        uct_md_base_md_query(attr); \
        /* invalidation is asked per access kind; ours covers what the peer does: RMA */ \
        attr->flags            = caps.flags | ((caps.flags & UCT_MD_FLAG_INVALIDATE) ? \
                                               UCT_MD_FLAG_INVALIDATE_RMA : 0); \
        attr->reg_mem_types    = caps.reg_mem_types; \
        attr->cache_mem_types  = caps.cache_mem_types; \
        attr->alloc_mem_types  = caps.alloc_mem_types; \
        attr->access_mem_types = caps.access_mem_types; \
        attr->detect_mem_types = caps.detect_mem_types; \
        attr->max_alloc        = caps.max_alloc; \
        attr->max_reg          = caps.max_reg; \
        attr->rkey_packed_size = caps.rkey_packed_size; \
        attr->reg_cost         = caps.reg_cost; \
        return UCS_OK; \
    }

#define CUX_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, const uct_md_mem_reg_params_t *params, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, UCT_MD_MEM_REG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0), memh_p); \
    }

/* No DMA-BUF descriptor is offered. */
#define CUX_MEM_QUERY_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, const void *address, size_t length, uct_md_mem_attr_v2_t *attr) \
    { \
        cux_mem_info_t info; \
        ucs_status_t status = _impl(md, address, length, &info); \
        if (status == UCS_OK) { \
            CUX_MEM_ATTR_SET_COMMON(attr, &info); \
            if (attr->field_mask & UCT_MD_MEM_ATTR_FIELD_DMABUF_FD) { \
                attr->dmabuf_fd = UCT_DMABUF_FD_INVALID; \
            } \
            if (attr->field_mask & UCT_MD_MEM_ATTR_FIELD_DMABUF_OFFSET) { \
                attr->dmabuf_offset = 0; \
            } \
        } \
        return status; \
    }

/* The system device is not used: memory goes to the caller's GPU, as before. */
#define CUX_MEM_ALLOC_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, size_t *length_p, void **address_p, ucs_memory_type_t mem_type, \
                              ucs_sys_device_t sys_dev, unsigned flags, const char *alloc_name, uct_mem_h *memh_p) \
    { \
        return _impl(md, length_p, address_p, mem_type, flags, alloc_name, memh_p); \
    }

#define CUX_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                              const uct_md_mkey_pack_params_t *params, void *rkey_buffer) \
    { \
        return _impl(md, memh, rkey_buffer); \
    }

#define CUX_RKEY_UNPACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, \
                              const uct_rkey_unpack_params_t *params, uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }

/* A completion is allowed; uct_ep_keepalive_check takes it. */
#define CUX_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags)

#define CUX_MD_OPS_VERSION_FIELDS \
    .mem_attach    = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t)ucs_empty_function_return_unsupported,

#define CUX_COMPONENT_VERSION_FIELDS \
    .rkey_compare = uct_base_rkey_compare,

#define CUX_IFACE_REACHABLE_FUNC(_name, _impl) \
    static int _name(const uct_iface_h iface, const uct_iface_is_reachable_params_t *params) \
    { \
        return _impl(iface, UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, device_addr, DEVICE_ADDR, NULL), \
                     UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR, NULL)) && \
               uct_iface_scope_is_reachable(iface, params); \
    }

#define CUX_IFACE_OPS_REACHABLE(_name) .iface_is_reachable = uct_base_iface_is_reachable

#define CUX_EP_CONNECTED_IF_REACHABLE uct_base_ep_is_connected
#define CUX_EP_CONNECTED_NEVER        (uct_ep_is_connected_func_t)ucs_empty_function_return_zero_int

#define CUX_IFACE_INTERNAL_OPS_INIT(_estimate_perf, _reachable, _connected) \
    { \
        .iface_query_v2        = uct_iface_base_query_v2, \
        .iface_estimate_perf   = _estimate_perf, \
        .iface_vfs_refresh     = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
        .ep_query              = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
        .ep_invalidate         = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
        .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported, \
        .iface_is_reachable_v2 = _reachable, \
        .ep_is_connected       = _connected, \
        .ep_get_device_ep      = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported, \
        .ep_put_sgl_zcopy      = (uct_ep_put_sgl_zcopy_func_t)ucs_empty_function_return_unsupported, \
    }

#endif
