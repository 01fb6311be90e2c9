/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.20: what changed since 1.19. Internal interface ops gain iface_query_v2 (first: every slot moves),
 * iface_mem_element_pack and ep_get_device_ep; a transport that moves host memory lists it as accessed (UCP
 * takes its memory-type copy lanes from those). Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_20_H_
#define CUX_UCX_1_20_H_

#include "cux_ucx_1_19.h"

/* UCP takes its memory-type copy lanes from transports that access host memory (a mem-type endpoint with none
 * fails: "no copy across memory types transport"). */
#undef CUX_MD_HOST_ACCESS
#define CUX_MD_HOST_ACCESS(_caps) ((_caps)->copies_host_memory ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0)

#undef CUX_IFACE_INTERNAL_OPS_LATER
#define CUX_IFACE_INTERNAL_OPS_LATER \
    .iface_query_v2         = uct_iface_base_query_v2, \
    .iface_mem_element_pack = (uct_iface_mem_element_pack_func_t)ucs_empty_function_return_unsupported, \
    .ep_get_device_ep       = (uct_ep_get_device_ep_func_t)ucs_empty_function_return_unsupported,

#endif
