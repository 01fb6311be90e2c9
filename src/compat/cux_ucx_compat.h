/*
 * The one place where differences between UCX versions live.
 *
 * The transports are written against version-neutral functions; the macros below wrap them into the ops
 * tables and signatures that the UCX version we build against expects. CUX_UCX_VERNUM is major*100+minor of
 * the installed UCX, set by configure (which also refuses versions not handled here).
 *
 * Supported: 1.13 (Debian 12). Next: 1.16 (Ubuntu 24.04: uct_md_attr_v2_t query, mem_reg params, mkey_pack
 * with address/length, rkey_compare in the component, config field flags), then 1.22.
 */
#ifndef CUX_UCX_COMPAT_H_
#define CUX_UCX_COMPAT_H_

#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/sys/stubs.h>

#if !defined(CUX_UCX_VERNUM)
#  error "CUX_UCX_VERNUM must be set by configure"
#endif

#if CUX_UCX_VERNUM == 113

/* MD attributes as the md_query op receives them. */
typedef uct_md_attr_t cux_md_attr_t;

/* md ops slots that exist only in some versions. */
#define CUX_MD_OPS_VERSION_FIELDS \
    .is_sockaddr_accessible = ucs_empty_function_return_zero_int,

/* component slots that exist only in some versions. */
#define CUX_COMPONENT_VERSION_FIELDS

/* Memory registration: the version's op wrapping cux-style (md, address, length, flags, memh_p). */
#define CUX_MEM_REG_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, void *address, size_t length, unsigned flags, \
                              uct_mem_h *memh_p) \
    { \
        return _impl(md, address, length, flags, memh_p); \
    }

/* Key packing: the version's op wrapping cux-style (md, memh, rkey_buffer). */
#define CUX_MKEY_PACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *params, \
                              void *rkey_buffer) \
    { \
        return _impl(md, memh, rkey_buffer); \
    }

/* Remote key unpacking, as the component calls it. */
#define CUX_RKEY_UNPACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p, \
                              void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }

/* Internal iface ops with the base implementations for what we do not specialise. */
#define CUX_IFACE_INTERNAL_OPS_INIT(_estimate_perf) \
    { \
        .iface_estimate_perf = _estimate_perf, \
        .iface_vfs_refresh   = (uct_iface_vfs_refresh_func_t)ucs_empty_function, \
        .ep_query            = (uct_ep_query_func_t)ucs_empty_function_return_unsupported, \
        .ep_invalidate       = (uct_ep_invalidate_func_t)ucs_empty_function_return_unsupported, \
    }

#else
#  error "unsupported UCX version: add it to cux_ucx_compat.h"
#endif

#endif
