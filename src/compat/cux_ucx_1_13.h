/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.13 (Debian 12): the oldest release, and the base of the others: each later header includes the one
 * before it and redefines only what its release changed. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_13_H_
#define CUX_UCX_1_13_H_

/* What the release does, for code and tests that differ by it (each later header redefines what changed). */
#define CUX_UCX_LOADS_PLUGIN_PATH        0 /* loads every libuct_NAME.so.0 of UCX_PLUGIN_PATH (else: its list) */
#define CUX_UCX_CACHES_IPC_REGISTRATIONS 0 /* UCP caches cuda_ipc registrations (cache_mem_types) */
#define CUX_UCX_QUERIES_DMABUF           0 /* memory queries may ask for a dma-buf descriptor */
#define CUX_UCX_HAS_MEM_FLAGS            0 /* memory attributes and the memory-type cache carry UCS_MEM_FLAG_* */
#define CUX_UCX_ALLOCATES_ON_DEVICE      0 /* mem_alloc is told the system device to allocate on */
#define CUX_UCX_HAS_PATH_BANDWIDTH       0 /* estimate_perf may ask for a path bandwidth */
#define CUX_UCX_IPC_MD_FLAGS             0 /* memory-domain flags cuda_ipc adds in this release, as UCX's does */
#define CUX_UCX_MKEY_PACK_TAKES_ADDRESS  0 /* mkey_pack is told the buffer being sent */

/* A bandwidth configured as "auto". */
#define CUX_CONFIG_BW_IS_AUTO(_value) UCS_CONFIG_BW_IS_AUTO(_value)

/* UCP's memory-type cache learns an allocation; the memory flags (UCS_MEM_FLAG_*) exist from 1.22 on. */
#define CUX_MEMTYPE_CACHE_UPDATE(_address, _size, _mem_type, _sys_dev, _mem_flags) \
    ucs_memtype_cache_update(_address, _size, _mem_type, _sys_dev)

/* Memory a NIC's memory domain can register (1.22's UCS_MEM_FLAG_REGISTRABLE; before, nothing reads it). */
#define CUX_MEM_FLAG_REGISTRABLE 1

/* A memory-type event of UCM whose system device and flags are unknown (1.22's event has both). */
#define CUX_UCM_EVENT_ATTRS_UNKNOWN(_event)

/* Memory-attribute fields of some releases only, set from a cux_mem_info_t. */
#define CUX_MEM_ATTR_SET_VERSION_FIELDS(_attr, _info)

#define CUX_MD_QUERY_FUNC(_name, _caps) \
    static ucs_status_t _name(uct_md_h md, uct_md_attr_t *attr) \
    { \
        cux_md_caps_t caps = {0}; \
        _caps(md, &caps); \
        attr->cap.flags            = caps.flags; \
        attr->cap.reg_mem_types    = caps.reg_mem_types; \
        attr->cap.alloc_mem_types  = caps.alloc_mem_types; \
        attr->cap.access_mem_types = caps.access_mem_types; \
        attr->cap.detect_mem_types = caps.detect_mem_types; \
        attr->cap.max_alloc        = caps.max_alloc; \
        attr->cap.max_reg          = caps.max_reg; \
        attr->rkey_packed_size     = caps.rkey_packed_size; \
        attr->reg_cost             = caps.reg_cost; \
        memset(&attr->local_cpus, 0xff, sizeof(attr->local_cpus)); \
        return UCS_OK; \
    }

#define CUX_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, unsigned flags, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, flags, memh_p); \
    }

#define CUX_MEM_QUERY_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, const void *address, size_t length, uct_md_mem_attr_t *attr) \
    { \
        cux_mem_info_t info = {.want_dmabuf = 0}; \
        ucs_status_t status = _impl(md, address, length, &info); \
        if (status == UCS_OK) { \
            CUX_MEM_ATTR_SET_COMMON(attr, &info); \
            CUX_MEM_ATTR_SET_VERSION_FIELDS(attr, &info); \
        } \
        return status; \
    }

#define CUX_MEM_ALLOC_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, size_t *length_p, void **address_p, ucs_memory_type_t mem_type, \
                              unsigned flags, const char *alloc_name, uct_mem_h *memh_p) \
    { \
        return _impl(md, length_p, address_p, mem_type, UCS_SYS_DEVICE_ID_UNKNOWN, flags, alloc_name, memh_p); \
    }

#define CUX_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *params, \
                              void *rkey_buffer) \
    { \
        return _impl(md, memh, NULL, 0, rkey_buffer); \
    }

#define CUX_RKEY_UNPACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p, \
                              void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }

#define CUX_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp) UCT_EP_KEEPALIVE_CHECK_PARAM(_flags, _comp)

#define CUX_MD_OPS_VERSION_FIELDS(_device) \
    .is_sockaddr_accessible = ucs_empty_function_return_zero_int,

/* UCT tells UCP which interfaces reach other hosts from 1.18 (UCP then packs them into addresses meant for other
 * hosts, and knows an endpoint over them is not within one host): before it, no flag. */
#define CUX_IFACE_FLAG_INTER_NODE 0

/* UCX's device API (GPU-initiated transfers) arrived in 1.20: before it, no flag, no ops. */
#define CUX_UCX_HAS_DEVICE_API 0
#define CUX_IFACE_FLAG_DEVICE_EP 0
#define CUX_GET_DEVICE_EP_FUNC(_name, _impl)
#define CUX_MEM_ELEM_PACK_FUNC(_name, _impl)
#define CUX_MEM_ELEM_RELEASE_FUNC(_name, _impl)
#define CUX_DEVICE_API_DECLS(_device)

/* UCT's scatter-gather zero-copy ops arrived in 1.22 (put) and 1.23 (get). */
#define CUX_UCX_HAS_PUT_SGL 0
#define CUX_UCX_HAS_GET_SGL 0
#define CUX_SGL_DECLS(_sgl)

#define CUX_COMPONENT_VERSION_FIELDS

/* The public iface op is the neutral function itself (which also says why an address is not reachable). UCT
 * tells no address length before 1.18: SIZE_MAX. */
#define CUX_IFACE_REACHABLE_FUNC(_name, _impl) \
    static int _name(const uct_iface_h iface, const uct_device_addr_t *dev_addr, \
                     const uct_iface_addr_t *iface_addr) \
    { \
        const char *why; \
        return _impl(iface, dev_addr, iface_addr, SIZE_MAX, &why); \
    }

/* The length of the interface address an endpoint is made to: told from 1.18. */
#define CUX_EP_PARAM_IFACE_ADDR_LENGTH(_params) SIZE_MAX

#define CUX_IFACE_OPS_REACHABLE(_name) .iface_is_reachable = _name

/* 1.13 never asks whether an endpoint is connected. */
#define CUX_EP_CONNECTED_IF_REACHABLE
#define CUX_EP_CONNECTED_NEVER

/* Internal ops that later releases add: each release header fills its own hook. */
#define CUX_IFACE_INTERNAL_OPS_CONNECT(_reachable, _connected) /* connection and reachability slots (1.14+) */
#define CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) /* slots added after 1.16, as each release has them */

#define CUX_IFACE_INTERNAL_OPS_INIT(_estimate_perf, _reachable, _connected, _device, _sgl) \
    { \
        .iface_estimate_perf = _estimate_perf, \
        .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
        .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
        .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
        CUX_IFACE_INTERNAL_OPS_CONNECT(_reachable, _connected) \
        CUX_IFACE_INTERNAL_OPS_LATER(_device, _sgl) \
    }

#endif
