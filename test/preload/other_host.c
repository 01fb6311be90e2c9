/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test preload: a process that says it runs on another host. ucs_get_system_id answers CUX_TEST_SYSTEM_ID (hex),
 * as on a host of its own; every other call goes to UCX. The cross-host tests (test/test_ipc_hosts.cc) start
 * their peer with it, so that two "hosts" of one NVLink domain run on one machine. UCX calls the function across
 * libraries from the module, so the preload sees each call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

uint64_t ucs_get_system_id(void)
{
    const char *id = getenv("CUX_TEST_SYSTEM_ID");
    uint64_t (*real)(void);

    if ((id != NULL) && (*id != '\0')) {
        return strtoull(id, NULL, 16);
    }
    real = (uint64_t(*)(void))dlsym(RTLD_NEXT, "ucs_get_system_id");
    return (real != NULL) ? real() : 0;
}
