/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Module registration: one constructor that first checks that the UCX in this process is the version the
 * module was built for, and only then hands the components, their configuration tables and transports to
 * UCX. A module built for another UCX would read and write UCX's structures with the wrong layout; refusing
 * with a clear message beats a crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "copy/cux_copy_md.h"
#include "ipc/cux_ipc_md.h"

#include <ucs/config/parser.h>
#include <ucs/debug/log.h>
#include <ucs/sys/module.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

extern uct_tl_t cux_copy_tl;
extern uct_tl_t cux_ipc_tl;

static struct {
    uct_component_t *component;
    uct_tl_t        *tl;
} cux_module_entries[] = {
    {&cux_copy_component, &cux_copy_tl},
    {&cux_ipc_component, &cux_ipc_tl}
};

static int cux_module_registered;

/* The UCX release this module is built for, readable from the file without loading it (strings; the route into
 * NIXL's pip wheel checks it against the wheel's UCX: contrib/nixl-pip-module.sh) */
__attribute__((used)) static const char cux_module_built_for[] =
    "uct-cuda-plugin built for UCX " CUX_UCX_STR(CUX_UCX_RELEASE);

/* The uct_cuda framework's submodules of this UCX build (gdrcopy), as its configure listed them */
#ifndef uct_cuda_MODULES
#define uct_cuda_MODULES "" /* a UCX configured with --with-ucx-build-config=detect: built without CUDA */
#endif

typedef void (*cux_ucp_get_version_fn_t)(unsigned*, unsigned*, unsigned*);

/*
 * libuct and libucs export no version; UCP does. In a UCP program it is there already; a module preloaded
 * into an MPI program is loaded before the MPI library opens UCP, so then the libucp beside the libucs this
 * process loaded is opened to ask it (it stays loaded: the program will open the same file anyway).
 */
static cux_ucp_get_version_fn_t cux_module_ucp_version_func(char *where, size_t max)
{
    cux_ucp_get_version_fn_t func;
    char path[PATH_MAX], *name;
    Dl_info info;
    void *handle;

    func = (cux_ucp_get_version_fn_t)dlsym(RTLD_DEFAULT, "ucp_get_version");
    if (func != NULL) {
        snprintf(where, max, "this process's UCP");
        return func;
    }
    if (!dladdr((void*)&ucs_config_global_list, &info) || (info.dli_fname == NULL) ||
        (strlen(info.dli_fname) >= sizeof(path)) || ((name = strstr(strcpy(path, info.dli_fname), "libucs")) == NULL)) {
        snprintf(where, max, "no libucs found in this process");
        return NULL;
    }
    name[5] = 'p'; /* libucs.so.0 -> libucp.so.0, in the same directory */
    snprintf(where, max, "%s", path);
    handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    return (handle == NULL) ? NULL : (cux_ucp_get_version_fn_t)dlsym(handle, "ucp_get_version");
}

static int cux_module_version_matches(void)
{
    cux_ucp_get_version_fn_t get_version;
    unsigned major, minor, release;
    char where[PATH_MAX + 32];

    get_version = cux_module_ucp_version_func(where, sizeof(where));
    if (get_version == NULL) {
        ucs_warn("uct-cuda-plugin: cannot tell which UCX this process runs (%s has no ucp_get_version): its "
                 "CUDA transports are registered for UCX %d.%d unchecked", where, CUX_UCX_VERNUM / 100,
                 CUX_UCX_VERNUM % 100);
        return 1;
    }
    get_version(&major, &minor, &release);
    if ((major * 100 + minor) != CUX_UCX_VERNUM) {
        ucs_error("uct-cuda-plugin was built for UCX %d.%d but this process runs UCX %u.%u.%u (%s): its CUDA "
                  "transports are not registered (rebuild the plugin against this UCX)", CUX_UCX_VERNUM / 100,
                  CUX_UCX_VERNUM % 100, major, minor, release, where);
        return 0;
    }
    return 1;
}

static void __attribute__((constructor)) cux_module_register(void)
{
    unsigned i;

    if (!cux_module_version_matches()) {
        return;
    }
    for (i = 0; i < sizeof(cux_module_entries) / sizeof(cux_module_entries[0]); ++i) {
        uct_component_t *component = cux_module_entries[i].component;
        uct_tl_t *tl               = cux_module_entries[i].tl;

        ucs_list_add_tail(&ucs_config_global_list, &component->md_config.list);
        ucs_list_add_tail(&ucs_config_global_list, &component->cm_config.list);
        ucs_list_add_tail(&ucs_config_global_list, &tl->config.list);
        ucs_list_add_tail(&component->tl_list, &tl->list);
        ucs_list_add_tail(&uct_components_list, &component->list);
    }
    cux_module_registered = 1;
}

static void __attribute__((destructor)) cux_module_unregister(void)
{
    unsigned i;

    if (!cux_module_registered) {
        return;
    }
    for (i = 0; i < sizeof(cux_module_entries) / sizeof(cux_module_entries[0]); ++i) {
        ucs_list_del(&cux_module_entries[i].component->list);
        ucs_list_del(&cux_module_entries[i].tl->list);
        ucs_list_del(&cux_module_entries[i].tl->config.list);
        ucs_list_del(&cux_module_entries[i].component->cm_config.list);
        ucs_list_del(&cux_module_entries[i].component->md_config.list);
    }
}

/*
 * UCX calls this after it opened the module by name: in place of its own CUDA module, or from UCX 1.22's
 * plugin path. UCX's own module loads the uct_cuda framework's submodules (gdr_copy) here, and so does this
 * one; they link against this library and call the uct_cuda_* functions of cux_uct_cuda_exports.c. A preloaded
 * module is not opened by UCX, and such a UCX has no CUDA submodules built for it.
 */
UCS_MODULE_INIT()
{
    UCS_MODULE_FRAMEWORK_DECLARE(uct_cuda);

    if (cux_module_registered) {
        UCS_MODULE_FRAMEWORK_LOAD(uct_cuda, 0);
    }
    return UCS_OK;
}
