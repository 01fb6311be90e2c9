/*
 * Module registration: one constructor that first checks that the UCX in this process is the version the
 * module was built for, and only then hands the components, their configuration tables and transports to
 * UCX. A module built for another UCX would read and write UCX's structures with the wrong layout; refusing
 * with a clear message beats a crash.
 */
#include "copy/cux_copy_md.h"
#include "ipc/cux_ipc_md.h"

#include <ucs/debug/log.h>
#include <dlfcn.h>

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

/* libuct and libucs export no version; UCP does, and is there in every UCP program (ucx_info, ucx_perftest,
 * MPI). A pure UCT program cannot be checked. */
static int cux_module_version_matches(void)
{
    void (*get_version)(unsigned*, unsigned*, unsigned*);
    unsigned major, minor, release;

    get_version = (void (*)(unsigned*, unsigned*, unsigned*))dlsym(RTLD_DEFAULT, "ucp_get_version");
    if (get_version == NULL) {
        ucs_debug("uct-cuda-plugin: no UCP in this process, UCX version not checked");
        return 1;
    }
    get_version(&major, &minor, &release);
    if ((major * 100 + minor) != CUX_UCX_VERNUM) {
        ucs_error("uct-cuda-plugin was built for UCX %d.%d but this process runs UCX %u.%u.%u: its CUDA "
                  "transports are not registered (rebuild the plugin against this UCX)", CUX_UCX_VERNUM / 100,
                  CUX_UCX_VERNUM % 100, major, minor, release);
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
