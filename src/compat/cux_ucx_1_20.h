/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.20: what changed since 1.19. Internal interface ops gain iface_query_v2 (first: every slot moves),
 * iface_mem_element_pack and ep_get_device_ep. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_20_H_
#define CUX_UCX_1_20_H_

#include "cux_ucx_1_19.h"

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER \
    .iface_query_v2         = uct_iface_base_query_v2, \
    .iface_mem_element_pack = (uct_iface_mem_element_pack_func_t)ucs_empty_function_return_unsupported, \
    .ep_get_device_ep       = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported,

#endif
