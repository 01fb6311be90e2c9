/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.15: what changed since 1.14. Memory domains declare invalidation per access kind (RMA, AMO) and the
 * memory types they register without blocking; reachability goes through the internal iface_is_reachable_v2
 * (with a scope), which UCX's base implementation answers from the public op. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_15_H_
#define CUX_UCX_1_15_H_

#include "cux_ucx_1_14.h"

/* invalidation is asked per access kind; ours covers what the peer does: RMA */
#undef CUX_MD_INVALIDATE_FLAGS
#define CUX_MD_INVALIDATE_FLAGS(_flags) (((_flags) & UCT_MD_FLAG_INVALIDATE) ? UCT_MD_FLAG_INVALIDATE_RMA : 0)

#undef CUX_MD_ATTR_SET_RELEASE_FIELDS
#define CUX_MD_ATTR_SET_RELEASE_FIELDS(_attr) (_attr)->reg_nonblock_mem_types = 0

#undef CUX_IFACE_INTERNAL_OPS_CONNECT
#define CUX_IFACE_INTERNAL_OPS_CONNECT(_reachable, _connected) \
    .ep_connect_to_ep_v2   = (uct_ep_connect_to_ep_v2_func_t)ucs_empty_function_return_unsupported, \
    .iface_is_reachable_v2 = uct_base_iface_is_reachable_v2,

#endif
