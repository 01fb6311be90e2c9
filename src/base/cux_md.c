/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What both memory domains do the same way: see cux_md.h.
 */
#include "cux_md.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>

ucs_status_t cux_query_md_resources(uct_component_t *component, uct_md_resource_desc_t **resources_p,
                                    unsigned *num_resources_p)
{
    if (cux_devices_init() != UCS_OK) {
        ucs_debug("%s: no resources: %s", component->name,
                  *cux_driver_error() ? cux_driver_error() : "no cuda devices");
        return uct_md_query_empty_md_resource(resources_p, num_resources_p);
    }
    return uct_md_query_single_md_resource(component, resources_p, num_resources_p);
}

ucs_status_t cux_md_open_check(const char *md_name)
{
    ucs_status_t status = cux_driver_check_fork("opening a memory domain");

    if (status != UCS_OK) {
        return status;
    }
    status = cux_devices_init();
    if (status != UCS_OK) {
        ucs_error("cannot open memory domain %s: %s", md_name,
                  *cux_driver_error() ? cux_driver_error() : "no cuda devices");
    }
    return status;
}
