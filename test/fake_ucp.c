/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in libucp.so.0 of another UCX version (FAKE_UCX_VERSION, "MAJOR.MINOR", default 1.99), for the
 * loader test of a module preloaded before UCP is loaded: test_loader.cc puts it beside links to the real
 * libucs and libuct.
 */
#include <stdio.h>
#include <stdlib.h>

void ucp_get_version(unsigned *major, unsigned *minor, unsigned *release)
{
    const char *v = getenv("FAKE_UCX_VERSION");

    *major   = 1;
    *minor   = 99;
    *release = 0;
    if (v != NULL) {
        sscanf(v, "%u.%u", major, minor);
    }
}
