/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one place where differences between UCX versions live.
 *
 * The transports are written against the version-neutral forms below; one header per supported release
 * (cux_ucx_MAJOR_MINOR.h) wraps them into the ops tables and signatures that release expects. Each header
 * includes the one of the release before and redefines only what changed, so it reads as the list of that
 * release's internal API changes. CUX_UCX_VERNUM is major*100+minor of the installed UCX and CUX_UCX_RELEASE its
 * MAJOR_MINOR, set by configure. Adding a release is one header that includes the nearest older one and
 * redefines what changed, and its line in Makefile.am's source list: configure takes the supported releases
 * from the headers here, and this file includes the installed release's.
 *
 * What a release header provides, for the neutral form a transport writes:
 *
 *   CUX_UCX_LOADS_PLUGIN_PATH, CUX_UCX_CACHES_IPC_REGISTRATIONS, CUX_UCX_QUERIES_DMABUF, CUX_UCX_HAS_MEM_FLAGS,
 *   CUX_UCX_ALLOCATES_ON_DEVICE                 0 or 1: what the release does (tests and code test these,
 *                                               never version numbers)
 *
 *   CUX_CONFIG_BW_IS_AUTO(value)                a bandwidth configured as "auto"
 *   CUX_MEMTYPE_CACHE_UPDATE(addr, size, type, sys_dev, mem_flags)
 *                                               tell UCP's memory-type cache about an allocation
 *   CUX_MEM_FLAG_REGISTRABLE                    memory flag: a NIC's memory domain can register it (1.22+)
 *   CUX_MEM_ATTR_SET_VERSION_FIELDS(attr, info) memory-attribute fields of some releases (1.22: mem_flags)
 *   CUX_UCM_EVENT_ATTRS_UNKNOWN(event)          a UCM memory-type event's device and flags: unknown (1.22)
 *   CUX_MD_QUERY_FUNC(name, caps)               md query op from void caps(uct_md_h, cux_md_caps_t*)
 *   CUX_MEM_REG_FUNC(name, impl)                mem_reg op from impl(md, address, length, flags, memh_p)
 *   CUX_MEM_QUERY_FUNC(name, impl)              mem_query op from impl(md, address, length, cux_mem_info_t*)
 *   CUX_MEM_ALLOC_FUNC(name, impl)              mem_alloc op from impl(md, length_p, address_p, mem_type, sys_dev,
 *                                               flags, alloc_name, memh_p); sys_dev is the device asked for,
 *                                               UCS_SYS_DEVICE_ID_UNKNOWN where the release does not say
 *   CUX_MKEY_PACK_FUNC(name, impl)              mkey_pack op from impl(md, memh, address, length, rkey_buffer);
 *                                               the buffer being sent, NULL and 0 where the release does not say
 *   CUX_RKEY_UNPACK_FUNC(name, impl)            rkey_unpack op from impl(component, buffer, rkey_p, handle_p)
 *   CUX_MD_OPS_VERSION_FIELDS(device)           md op slots that exist only in some releases
 *   CUX_COMPONENT_VERSION_FIELDS                component slots that exist only in some releases
 *   CUX_IFACE_REACHABLE_FUNC(name, impl)        reachability from int impl(iface, dev_addr, iface_addr,
 *                                               iface_addr_len, &why); the length SIZE_MAX where UCT does not
 *                                               tell it (before 1.18); why: a string saying why not (1.18+ pass
 *                                               it to UCP)
 *   CUX_IFACE_OPS_REACHABLE(name)               the public iface op slot for it
 *   CUX_EP_KEEPALIVE_CHECK_PARAM(flags, comp)   ep_check's argument check
 *   CUX_IFACE_INTERNAL_OPS_INIT(perf, reachable, connected, device, sgl)
 *                                               internal iface ops; connected is CUX_EP_CONNECTED_IF_REACHABLE
 *                                               or CUX_EP_CONNECTED_NEVER (releases that ask endpoints)
 *
 * UCX's device API (GPU-initiated transfers, 1.20+). `device` above names a transport's device-API functions
 * by prefix: PREFIX_get_device_ep and PREFIX_mem_elem_pack, made by the two macros below; cux_no_device for a
 * transport without (its slots answer UCS_ERR_UNSUPPORTED).
 *
 *   CUX_EP_PARAM_IFACE_ADDR_LENGTH(params)      the interface address's length an endpoint is made to (SIZE_MAX
 *                                               where UCT does not tell it: before 1.18, or not given)
 *   CUX_IFACE_FLAG_INTER_NODE                   the interface flag for transports that reach other hosts (0
 *                                               before 1.18)
 *   CUX_UCX_HAS_DEVICE_API                      0 or 1
 *   CUX_IFACE_FLAG_DEVICE_EP                    the interface flag (0 before 1.20)
 *   CUX_GET_DEVICE_EP_FUNC(name, impl)          ep_get_device_ep from impl(tl_ep, void **device_ep_p)
 *   CUX_MEM_ELEM_PACK_FUNC(name, impl)          the release's element packing (1.20: an interface op into GPU
 *                                               memory; 1.21+: a memory domain op into host memory) from
 *                                               impl(memh, rkey, ptrdiff_t *mapped_offset_p, void **release_p);
 *                                               release_p is NULL where the release has no element release
 *                                               (before 1.23: the element lives as long as its key)
 *   CUX_MEM_ELEM_RELEASE_FUNC(name, impl)       the element release (1.23+) from void impl(void *release_handle)
 *   CUX_DEVICE_API_DECLS(prefix)                prototypes of PREFIX_get_device_ep, PREFIX_mem_elem_pack and
 *                                               (1.23+) PREFIX_mem_elem_release
 *
 * UCT's scatter-gather zero-copy ops (1.22+ put, 1.23+ get). `sgl` above names a transport's functions by prefix:
 * PREFIX_query_v2 (the interface's v2 attributes: the ops' flags and counts), PREFIX_put_sgl_zcopy and
 * PREFIX_get_sgl_zcopy with UCX's signatures; cux_no_sgl for a transport without.
 *
 *   CUX_UCX_HAS_PUT_SGL, CUX_UCX_HAS_GET_SGL    0 or 1
 *   CUX_SGL_DECLS(prefix)                       prototypes of the functions the release has slots for
 */
#ifndef CUX_UCX_COMPAT_H_
#define CUX_UCX_COMPAT_H_

#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/stubs.h>

#if !defined(CUX_UCX_VERNUM) || !defined(CUX_UCX_RELEASE)
#  error "CUX_UCX_VERNUM and CUX_UCX_RELEASE must be set by configure"
#endif

/* What a memory domain can do, whatever the release's attribute structure looks like. */
typedef struct cux_md_caps {
    uint64_t          flags;             /* UCT_MD_FLAG_* */
    uint64_t          reg_mem_types;     /* bits of ucs_memory_type_t */
    uint64_t          cache_mem_types;   /* registrations UCP may cache (releases that ask) */
    uint64_t          alloc_mem_types;
    uint64_t          access_mem_types;
    uint64_t          detect_mem_types;
    uint64_t          dmabuf_mem_types;  /* memory the query gives DMA-BUF descriptors of (1.16+) */
    int               copies_host_memory; /* moves host memory too (1.22 lists it as host access) */
    size_t            max_alloc;
    size_t            max_reg;
    size_t            rkey_packed_size;
    ucs_linear_func_t reg_cost;
} cux_md_caps_t;

/* What a memory query found; the release header copies what UCP asked for into its attribute structure. */
typedef struct cux_mem_info {
    int               want_dmabuf;   /* in: the caller asked for a DMA-BUF descriptor (1.16+) */
    int               dmabuf_fd;     /* out, when asked: -1 or a descriptor the caller closes */
    size_t            dmabuf_offset; /* out, when asked: the address's offset in it */
    ucs_memory_type_t mem_type;
    ucs_sys_device_t  sys_dev;
    void              *base_address;
    size_t            alloc_length;
    uint8_t           mem_flags;     /* CUX_MEM_FLAG_* */
} cux_mem_info_t;

/* The fields every release's memory attributes have, by the caller's field mask. */
#define CUX_MEM_ATTR_SET_COMMON(_attr, _info) \
    do { \
        if ((_attr)->field_mask & UCT_MD_MEM_ATTR_FIELD_MEM_TYPE) { \
            (_attr)->mem_type = (_info)->mem_type; \
        } \
        if ((_attr)->field_mask & UCT_MD_MEM_ATTR_FIELD_SYS_DEV) { \
            (_attr)->sys_dev = (_info)->sys_dev; \
        } \
        if ((_attr)->field_mask & UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS) { \
            (_attr)->base_address = (_info)->base_address; \
        } \
        if ((_attr)->field_mask & UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH) { \
            (_attr)->alloc_length = (_info)->alloc_length; \
        } \
    } while (0)

/* The installed release's header, cux_ucx_MAJOR_MINOR.h (configure refuses a release that has none). */
#define CUX_UCX_STR_(_x)          #_x
#define CUX_UCX_STR(_x)           CUX_UCX_STR_(_x)
#define CUX_UCX_HEADER_(_release) CUX_UCX_STR(cux_ucx_##_release.h)
#define CUX_UCX_HEADER(_release)  CUX_UCX_HEADER_(_release)
#include CUX_UCX_HEADER(CUX_UCX_RELEASE)

/* The device-API slots of a transport that has no device API (CUX_IFACE_INTERNAL_OPS_INIT(..., cux_no_device)). */
#define cux_no_device_get_device_ep ucs_empty_function_return_unsupported
#define cux_no_device_mem_elem_pack ucs_empty_function_return_unsupported
#define cux_no_device_mem_elem_release ucs_empty_function

/* The scatter-gather slots of a transport without scatter-gather ops (CUX_IFACE_INTERNAL_OPS_INIT(..., cux_no_sgl)). */
#define cux_no_sgl_query_v2      uct_iface_base_query_v2
#define cux_no_sgl_put_sgl_zcopy ucs_empty_function_return_unsupported
#define cux_no_sgl_get_sgl_zcopy ucs_empty_function_return_unsupported

#endif
