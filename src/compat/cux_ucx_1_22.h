/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.22: what changed since 1.21. mem_query takes uct_md_mem_attr_v2_t; internal interface ops have
 * iface_query_v2 again (first: every slot moves), ep_get_device_ep and ep_put_sgl_zcopy; the device API's
 * memory element union is uct_device_mem_elem_t; ep_check may come with a completion; memory queries, the
 * memory-type cache and UCM events carry memory flags (registrable by a NIC) and UCM events the system device;
 * UCX_PLUGIN_PATH. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_22_H_
#define CUX_UCX_1_22_H_

#include "cux_ucx_1_21.h"

#undef CUX_UCX_LOADS_PLUGIN_PATH
#define CUX_UCX_LOADS_PLUGIN_PATH   1
#undef CUX_UCX_HAS_MEM_FLAGS
#define CUX_UCX_HAS_MEM_FLAGS       1

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

#undef CUX_MEM_ATTR_T
#define CUX_MEM_ATTR_T uct_md_mem_attr_v2_t

/* A completion is allowed; uct_ep_keepalive_check takes it. */
#undef CUX_EP_KEEPALIVE_CHECK_PARAM
#define CUX_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags)

/* the device API's element union is renamed */
#undef CUX_DEVICE_MEM_ELEM_T
#define CUX_DEVICE_MEM_ELEM_T uct_device_mem_elem_t

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) \
    .iface_query_v2   = _sgl##_query_v2, \
    .ep_get_device_ep = (uct_ep_get_device_ep_func_t)_device##_get_device_ep, \
    .ep_put_sgl_zcopy = (uct_ep_put_sgl_zcopy_func_t)_sgl##_put_sgl_zcopy,

/* scatter-gather zero-copy put (its count and flag in iface_query_v2) */
#undef CUX_UCX_HAS_PUT_SGL
#define CUX_UCX_HAS_PUT_SGL 1
/* a scatter-gather op's prototype (put and get have the same) */
#define CUX_SGL_OP_DECL(_name) \
    ucs_status_t _name(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths, uct_mem_h const *memhs, \
                       const uint64_t *remote_addrs, uct_rkey_t const *rkeys, const size_t *counts, \
                       const size_t *strides, size_t count, uct_completion_t *comp);
#undef CUX_SGL_DECLS
#define CUX_SGL_DECLS(_sgl) \
    ucs_status_t _sgl##_query_v2(uct_iface_h tl_iface, uct_iface_attr_v2_t *attr); \
    CUX_SGL_OP_DECL(_sgl##_put_sgl_zcopy)

#endif
