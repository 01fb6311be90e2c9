/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What both memory domains (cuda_cpy, cuda_ipc) do the same way: their resources, and the check before one opens.
 */
#ifndef CUX_MD_H_
#define CUX_MD_H_

#include <uct/base/uct_md.h>

/* Memory-domain resources of a component: one when the driver and a GPU are there, none otherwise. */
ucs_status_t cux_query_md_resources(uct_component_t *component, uct_md_resource_desc_t **resources_p,
                                    unsigned *num_resources_p);

/* For md_open: UCS_OK when devices are there, else logs why the MD cannot open. */
ucs_status_t cux_md_open_check(const char *md_name);

#endif
