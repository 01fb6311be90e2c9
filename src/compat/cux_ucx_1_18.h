/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.18 (Debian 13's release): what changed since 1.17. The memory domain's attribute structure gained
 * gva_mem_types (uct_md_base_md_query fills it); the interface reachability parameters gained the address
 * lengths; configuration tables grew a field that the table macros fill. Nothing this module implements changed
 * its form. Included by cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_18_H_
#define CUX_UCX_1_18_H_

#include "cux_ucx_1_17.h"

#endif
