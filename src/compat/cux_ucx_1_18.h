/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.18 (Debian 13's release): what changed since 1.16. The memory domain's attribute structure gained
 * fields (gva_mem_types) and UCX fills its defaults with uct_md_base_md_query before a transport's own query;
 * the rest of what this module implements kept its form (configuration tables grew a field that the table
 * macros fill). Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_18_H_
#define CUX_UCX_1_18_H_

#include "cux_ucx_1_16.h"

#undef CUX_MD_ATTR_DEFAULTS
#define CUX_MD_ATTR_DEFAULTS(_attr) uct_md_base_md_query(_attr)

#endif
