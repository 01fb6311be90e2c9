/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.18 (Debian 13's release): what changed since 1.17. The memory domain's attribute structure gained
 * gva_mem_types (uct_md_base_md_query fills it); the interface reachability parameters gained the address
 * lengths and a buffer for the reason an address is not reachable (filled here); interfaces may say they reach
 * other hosts (UCT_IFACE_FLAG_INTER_NODE); configuration tables grew a
 * field that the table macros fill. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_18_H_
#define CUX_UCX_1_18_H_

#include "cux_ucx_1_17.h"

/* An interface may say it reaches other hosts. */
#undef CUX_IFACE_FLAG_INTER_NODE
#define CUX_IFACE_FLAG_INTER_NODE UCT_IFACE_FLAG_INTER_NODE

/* An endpoint's parameters may tell the interface address's length. */
#undef CUX_EP_PARAM_IFACE_ADDR_LENGTH
#define CUX_EP_PARAM_IFACE_ADDR_LENGTH(_params) \
    (((_params)->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR_LENGTH) ? (_params)->iface_addr_length : SIZE_MAX)

/* The reachability parameters may ask why an address is not reachable, and tell the addresses' lengths. */
#undef CUX_IFACE_REACHABLE_FUNC
#define CUX_IFACE_REACHABLE_FUNC(_name, _impl) \
    static int _name(const uct_iface_h iface, const uct_iface_is_reachable_params_t *params) \
    { \
        const char *why = NULL; \
        if (!_impl(iface, UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, device_addr, DEVICE_ADDR, NULL), \
                   UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr, IFACE_ADDR, NULL), \
                   UCS_PARAM_VALUE(UCT_IFACE_IS_REACHABLE_FIELD, params, iface_addr_length, IFACE_ADDR_LENGTH, \
                                   SIZE_MAX), &why)) { \
            uct_iface_fill_info_str_buf(params, "%s", why); \
            return 0; \
        } \
        return uct_iface_scope_is_reachable(iface, params); \
    }

#endif
