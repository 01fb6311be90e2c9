/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.22: what changed since 1.18 (some of it, such as rkey_unpack's parameter structure and mem_alloc's
 * system device, came in 1.20, which is not supported yet). A transport that moves host memory lists it as
 * accessed (UCP takes its memory-type copy lanes from those); mem_query takes uct_md_mem_attr_v2_t; mem_alloc
 * takes the system device; rkey_unpack takes a parameter structure; md ops gain mem_elem_pack; internal iface
 * ops gain iface_query_v2, ep_get_device_ep and ep_put_sgl_zcopy; ep_check may come with a completion; memory
 * queries and the memory-type cache carry memory flags (registrable by a NIC); UCX_PLUGIN_PATH. Included by
 * cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_22_H_
#define CUX_UCX_1_22_H_

#include "cux_ucx_1_18.h"

#undef CUX_UCX_LOADS_PLUGIN_PATH
#define CUX_UCX_LOADS_PLUGIN_PATH   1
#undef CUX_UCX_HAS_MEM_FLAGS
#define CUX_UCX_HAS_MEM_FLAGS       1
#undef CUX_UCX_ALLOCATES_ON_DEVICE
#define CUX_UCX_ALLOCATES_ON_DEVICE 1

#undef CUX_MEMTYPE_CACHE_UPDATE
#define CUX_MEMTYPE_CACHE_UPDATE(_address, _size, _mem_type, _sys_dev, _mem_flags) \
    ucs_memtype_cache_update(_address, _size, _mem_type, _sys_dev, _mem_flags)

/* InfiniBand memory domains register only memory flagged registrable (their required_mem_flags). */
#undef CUX_MEM_FLAG_REGISTRABLE
#define CUX_MEM_FLAG_REGISTRABLE UCS_MEM_FLAG_REGISTRABLE

#undef CUX_UCM_EVENT_ATTRS_UNKNOWN
#define CUX_UCM_EVENT_ATTRS_UNKNOWN(_event) \
    do { \
        (_event)->mem_type.sys_dev   = UCS_SYS_DEVICE_ID_UNKNOWN; \
        (_event)->mem_type.mem_flags = 0; \
    } while (0)

#undef CUX_MEM_ATTR_SET_VERSION_FIELDS
#define CUX_MEM_ATTR_SET_VERSION_FIELDS(_attr, _info) \
    do { \
        if ((_attr)->field_mask & UCT_MD_MEM_ATTR_V2_FIELD_MEM_FLAGS) { \
            (_attr)->mem_flags = (_info)->mem_flags; \
        } \
    } while (0)

/* UCP 1.22 takes memory-type copy lanes from transports that access host memory. */
#undef CUX_MD_HOST_ACCESS
#define CUX_MD_HOST_ACCESS(_caps) ((_caps)->copies_host_memory ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0)

#undef CUX_MEM_ATTR_T
#define CUX_MEM_ATTR_T uct_md_mem_attr_v2_t

/* UCP asks for memory on a given device (its system device). */
#undef CUX_MEM_ALLOC_FUNC
#define CUX_MEM_ALLOC_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, size_t *length_p, void **address_p, ucs_memory_type_t mem_type, \
                              ucs_sys_device_t sys_dev, unsigned flags, const char *alloc_name, uct_mem_h *memh_p) \
    { \
        return _impl(md, length_p, address_p, mem_type, sys_dev, flags, alloc_name, memh_p); \
    }

#undef CUX_RKEY_UNPACK_FUNC
#define CUX_RKEY_UNPACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, \
                              const uct_rkey_unpack_params_t *params, uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }

/* A completion is allowed; uct_ep_keepalive_check takes it. */
#undef CUX_EP_KEEPALIVE_CHECK_PARAM
#define CUX_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags)

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS \
    .mem_attach    = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .mem_elem_pack = (uct_md_mem_elem_pack_func_t)ucs_empty_function_return_unsupported,

#undef CUX_IFACE_INTERNAL_OPS_SINCE_1_22
#define CUX_IFACE_INTERNAL_OPS_SINCE_1_22 \
    .iface_query_v2   = uct_iface_base_query_v2, \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported, \
    .ep_put_sgl_zcopy = (uct_ep_put_sgl_zcopy_func_t)ucs_empty_function_return_unsupported,

#endif
