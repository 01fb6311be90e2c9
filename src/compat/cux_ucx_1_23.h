/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.23 (read in master at 9466d104, whose version is 1.23.0; named for the release it will become): what
 * changed since 1.22. The device API's element packing hands back a release handle, and memory domain ops gain
 * mem_elem_release (a device memory list's element may outlive its key); internal interface ops gain
 * ep_get_sgl_zcopy and ep_outstanding_purge. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_23_H_
#define CUX_UCX_1_23_H_

#include "cux_ucx_1_22.h"

#undef CUX_MEM_ELEM_PACK_FUNC
#define CUX_MEM_ELEM_PACK_FUNC(_name, _impl) \
    ucs_status_t _name(uct_md_h md, uct_mem_h memh, uct_rkey_t rkey, CUX_DEVICE_MEM_ELEM_T *elem, \
                       void **release_handle_p) \
    { \
        return _impl(memh, rkey, &elem->cuda_ipc_md_mem_element.mapped_offset, release_handle_p); \
    }

#undef CUX_MEM_ELEM_RELEASE_FUNC
#define CUX_MEM_ELEM_RELEASE_FUNC(_name, _impl) \
    void _name(uct_md_h md, void *release_handle) \
    { \
        _impl(release_handle); \
    }

#undef CUX_DEVICE_API_DECLS
#define CUX_DEVICE_API_DECLS(_device) \
    ucs_status_t _device##_get_device_ep(uct_ep_h tl_ep, uct_device_ep_h *device_ep_p); \
    ucs_status_t _device##_mem_elem_pack(uct_md_h md, uct_mem_h memh, uct_rkey_t rkey, CUX_DEVICE_MEM_ELEM_T *elem, \
                                         void **release_handle_p); \
    void _device##_mem_elem_release(uct_md_h md, void *release_handle);

#undef CUX_MD_OPS_VERSION_FIELDS
#define CUX_MD_OPS_VERSION_FIELDS(_device) \
    .mem_attach       = (uct_md_mem_attach_func_t)ucs_empty_function_return_unsupported, \
    .mem_elem_pack    = (uct_md_mem_elem_pack_func_t)_device##_mem_elem_pack, \
    .mem_elem_release = (uct_md_mem_elem_release_func_t)_device##_mem_elem_release,

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) \
    .iface_query_v2       = _sgl##_query_v2, \
    .ep_get_device_ep     = (uct_ep_get_device_ep_func_t)_device##_get_device_ep, \
    .ep_put_sgl_zcopy     = (uct_ep_put_sgl_zcopy_func_t)_sgl##_put_sgl_zcopy, \
    .ep_get_sgl_zcopy     = (uct_ep_get_sgl_zcopy_func_t)_sgl##_get_sgl_zcopy, \
    .ep_outstanding_purge = (uct_ep_outstanding_purge_func_t)ucs_empty_function_return_unsupported,

/* scatter-gather zero-copy get, beside the put */
#undef CUX_UCX_HAS_GET_SGL
#define CUX_UCX_HAS_GET_SGL 1
#undef CUX_SGL_DECLS
#define CUX_SGL_DECLS(_sgl) \
    ucs_status_t _sgl##_query_v2(uct_iface_h tl_iface, uct_iface_attr_v2_t *attr); \
    CUX_SGL_OP_DECL(_sgl##_put_sgl_zcopy) \
    CUX_SGL_OP_DECL(_sgl##_get_sgl_zcopy)

#endif
