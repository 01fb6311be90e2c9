/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pretends to be a UCP program of the UCX version in PROBE_UCX_VERSION ("MAJOR.MINOR"): the module's
 * constructor finds this ucp_get_version (the program exports its symbols). Prints how many of the module's
 * components were registered.
 *
 * Built with PROBE_NO_UCP it is a program without UCP (as an MPI program is when the module is preloaded,
 * before the MPI library opens UCP): the module must then ask the libucp beside the process's libucs
 * (test/fake_ucp.c stands in for one of another version).
 */
#include <uct/api/uct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From the module: referencing it keeps the linker from dropping the module from this program. */
int cux_driver_version(void);

#ifndef PROBE_NO_UCP
void ucp_get_version(unsigned *major, unsigned *minor, unsigned *release)
{
    const char *v = getenv("PROBE_UCX_VERSION");

    *major   = CUX_UCX_VERNUM / 100; /* the version the module was built for, unless told otherwise */
    *minor   = CUX_UCX_VERNUM % 100;
    *release = 0;
    if (v != NULL) {
        sscanf(v, "%u.%u", major, minor);
    }
}
#endif

int main(void)
{
    uct_component_h *components;
    unsigned num, i, found = 0;

    if (uct_query_components(&components, &num) != UCS_OK) {
        return 1;
    }
    for (i = 0; i < num; ++i) {
        uct_component_attr_t attr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        if ((uct_component_query(components[i], &attr) == UCS_OK) &&
            (!strcmp(attr.name, "cuda_cpy") || !strcmp(attr.name, "cuda_ipc"))) {
            ++found;
        }
    }
    uct_release_component_list(components);
    printf("registered=%u driver=%d\n", found, cux_driver_version());
    return 0;
}
