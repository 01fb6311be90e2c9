/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.17: what changed since 1.16. UCX fills a memory domain's attribute defaults with uct_md_base_md_query
 * before the transport's own query. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_17_H_
#define CUX_UCX_1_17_H_

#include "cux_ucx_1_16.h"

#undef CUX_MD_ATTR_DEFAULTS
#define CUX_MD_ATTR_DEFAULTS(_attr) uct_md_base_md_query(_attr)

#endif
