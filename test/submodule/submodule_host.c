/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loads the uct_cuda framework as UCX's CUDA module does, with the names given on the command line (UCX's own
 * list of its build, uct_cuda_MODULES, is empty without CUDA): from UCX_MODULE_DIR, libuct_cuda_NAME.so.0.
 * Then lists UCT's components, which on UCX 1.22 loads modules from UCX_PLUGIN_PATH (ours, which loads the
 * framework itself). For test_registration.cc's submodule tests.
 */
#include <uct/api/uct.h>
#include <ucs/sys/module.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    static ucs_init_once_t once = UCS_INIT_ONCE_INITIALIZER;
    uct_component_h *components;
    unsigned num;

    if (argc > 1) {
        ucs_load_modules("uct_cuda", argv[1], &once, 0);
    }
    if (uct_query_components(&components, &num) == UCS_OK) {
        printf("host: %u components\n", num);
        uct_release_component_list(components);
    }
    return 0;
}
