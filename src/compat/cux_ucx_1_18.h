/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.18 (Debian 13's release): what changed since 1.17. The memory domain's attribute structure gained
 * gva_mem_types (uct_md_base_md_query fills it); the interface reachability parameters gained the address
 * lengths and a buffer for the reason an address is not reachable (filled here); configuration tables grew a
 * field that the table macros fill. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_18_H_
#define CUX_UCX_1_18_H_

#include "cux_ucx_1_17.h"

/* The reachability parameters may ask why an address is not reachable. */
#undef CUX_IFACE_REACHABLE_FUNC
#define CUX_IFACE_REACHABLE_FUNC(_name, _impl) \
    static int _name(const uct_iface_h iface, const uct_iface_is_reachable_params_t *params) \
    { \
        const char *why = NULL; \
        if (!_impl(iface, UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, device_addr, DEVICE_ADDR, NULL), \
                   UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR, NULL), &why)) { \
            uct_iface_fill_info_str_buf(params, "%s", why); \
            return 0; \
        } \
        return uct_iface_scope_is_reachable(iface, params); \
    }

#endif
