/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Registration through the real libuct: the component, its transport and configuration tables, seen by
 * this process and by the installed UCX's own ucx_info with the module preloaded.
 */
#include "cux_test.h"

#include <cstring>

using namespace cux_test;

static uct_component_h find_component(const char *name, uct_component_attr_t *attr)
{
    uct_component_h *components, found = nullptr;
    unsigned num;

    if (uct_query_components(&components, &num) != UCS_OK) {
        return nullptr;
    }
    for (unsigned i = 0; i < num; ++i) {
        attr->field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT |
                           UCT_COMPONENT_ATTR_FIELD_FLAGS;
        if ((uct_component_query(components[i], attr) == UCS_OK) && !strcmp(attr->name, name)) {
            found = components[i];
            break;
        }
    }
    uct_release_component_list(components);
    return found;
}

TEST(registration, component_is_listed_with_one_md_per_gpu_host)
{
    uct_component_attr_t attr = {};
    ASSERT_NE(nullptr, find_component("cuda_cpy", &attr));
    /* No GPU (or no driver): the component is there but offers no memory domain. */
    EXPECT_EQ(cux_device_count() > 0 ? 1u : 0u, attr.md_resource_count);
}

TEST(registration, md_config_defaults_and_environment)
{
    uct_component_attr_t attr = {};
    uct_component_h component = find_component("cuda_cpy", &attr);
    uct_md_config_t *config;
    char value[64];

    ASSERT_NE(nullptr, component);
    ASSERT_EQ(UCS_OK, uct_md_config_read(component, NULL, NULL, &config));
    ASSERT_EQ(UCS_OK, uct_config_get(config, "PIN_HOST", value, sizeof(value)));
    EXPECT_STREQ("y", value);
    uct_config_release(config);

    setenv("UCX_CUDA_COPY_PIN_HOST", "n", 1);
    ASSERT_EQ(UCS_OK, uct_md_config_read(component, NULL, NULL, &config));
    unsetenv("UCX_CUDA_COPY_PIN_HOST");
    ASSERT_EQ(UCS_OK, uct_config_get(config, "PIN_HOST", value, sizeof(value)));
    EXPECT_STREQ("n", value);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, config_modify(config, "cuda_copy", "PIN_HOST", "maybe"));
    uct_config_release(config);
}

TEST(registration, bad_config_value_is_an_error_not_a_crash)
{
    uct_component_attr_t attr = {};
    uct_component_h component = find_component("cuda_cpy", &attr);
    uct_md_config_t *config   = nullptr;

    ASSERT_NE(nullptr, component);
    setenv("UCX_CUDA_COPY_PIN_HOST", "perhaps", 1);
    ucs_status_t status = uct_md_config_read(component, NULL, NULL, &config);
    unsetenv("UCX_CUDA_COPY_PIN_HOST");
    EXPECT_NE(UCS_OK, status);
    if (status == UCS_OK) {
        uct_config_release(config);
    }
}

static command_result ucx_info(const std::string &args, const std::string &env = "")
{
    return run_command(env + " UCX_MODULES=^cuda LD_PRELOAD=" + build_path(".libs/libuct_cuda.so.0") + " " +
                       CUX_TEST_UCX_INFO + " " + args);
}

TEST(registration, stock_ucx_info_shows_every_variable)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    command_result r = ucx_info("-c -f");
    ASSERT_EQ(0, r.status) << r.output;
    for (const char *var : {"UCX_CUDA_COPY_PIN_HOST=y", "UCX_CUDA_COPY_MAX_POLL=16",
                            "UCX_CUDA_COPY_MAX_INFLIGHT=inf", "UCX_CUDA_COPY_BW=", "UCX_CUDA_COPY_LAT=",
                            "UCX_CUDA_COPY_OVERHEAD=", "UCX_CUDA_IPC_CACHE=y", "UCX_CUDA_IPC_CACHE_MAX_REGIONS=",
                            "UCX_CUDA_IPC_CACHE_MAX_SIZE=", "UCX_CUDA_IPC_CACHE_MAX_IDLE=10", "UCX_CUDA_IPC_MAX_POLL=",
                            "UCX_CUDA_IPC_BW=",
                            "UCX_CUDA_IPC_LAT="}) {
        EXPECT_NE(std::string::npos, r.output.find(var)) << var << " missing in:\n" << r.output;
    }
}

TEST(registration, stock_ucx_info_without_gpu_lists_no_cuda_transport)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    command_result r = ucx_info("-d", "CUX_DRIVER_PATH=/nonexistent/libcuda.so.1");
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("cuda_copy")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("Transport: cuda_ipc")) << r.output;
}

TEST(registration, stock_ucx_info_with_mock_gpu_lists_cuda_copy)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    command_result r = ucx_info("-d", "CUX_DRIVER_PATH=" + build_path("test/.libs/libmockcuda.so"));
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Component: cuda_cpy")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Transport: cuda_copy")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Component: cuda_ipc")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Transport: cuda_ipc")) << r.output;
}

/* UCX 1.22 and later load every libuct_<name>.so.0 in UCX_PLUGIN_PATH (and in their module directory): the
 * module is found there with no preload. Older releases open only the modules compiled into libuct. */
TEST(registration, ucx_loads_the_module_from_its_plugin_path)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    if (!CUX_UCX_LOADS_PLUGIN_PATH) {
        GTEST_SKIP() << "UCX " << CUX_UCX_VERNUM / 100 << "." << CUX_UCX_VERNUM % 100
                     << " opens only the modules compiled into libuct (use LD_PRELOAD or ucx-cuda-run)";
    }
    char dir[] = "/tmp/cux-plugin-path-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(0, run_command(std::string("cp ") + build_path(".libs/libuct_cuda.so.0") + " " + dir).status);
    /* no UCX_MODULES=^cuda here: it would filter out our module by its name; the plugin path is searched before
     * the module directory, so ours wins over a libuct_cuda.so.0 there */
    command_result r = run_command(std::string("env -u UCX_MODULES UCX_PLUGIN_PATH=") + dir + " CUX_DRIVER_PATH=" +
                                   build_path("test/.libs/libmockcuda.so") + " " + CUX_TEST_UCX_INFO + " -d");
    run_command(std::string("rm -rf ") + dir);
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Transport: cuda_copy")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("Transport: cuda_ipc")) << r.output;
}

/* Issue 20: UCX's other CUDA modules (gdr_copy; UCX 1.22's GPU-initiated InfiniBand module) link against
 * libuct_cuda and call its uct_cuda_* functions; installed in place of UCX's own module, ours is that library.
 * A fake submodule linked against our module with every name resolved at link time (test/submodule/) is
 * loaded through UCX's module framework, as UCX's module loads its build's list of them, and calls each. */
TEST(registration, a_uct_cuda_submodule_links_against_the_module_and_calls_each_function)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "the expected answers are the mock driver's";
    }
    char dir[] = "/tmp/cux-submodule-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(0, run_command(std::string("cp -L ") + build_path("test/.libs/libuct_cuda_fake.so.0") + " " + dir)
                         .status);
    command_result r = run_command(std::string("UCX_MODULE_DIR=") + dir + " LD_LIBRARY_PATH=" +
                                   build_path(".libs") + " " + build_path("test/submodule_host") + " :fake");
    run_command(std::string("rm -rf ") + dir);
    ASSERT_EQ(0, r.status) << r.output;
    for (const char *line : {"uct_cuda_base_query_md_resources -> Success, 1 resource(s) named cuda_fake",
                             "uct_cuda_base_query_devices -> Success, 1 device(s) named cuda",
                             "uct_cuda_base_check_device_name cuda -> Success",
                             "uct_cuda_base_check_device_name mlx5_0 -> No such device",
                             "uct_cuda_base_check_device_name without a device -> Invalid parameter",
                             "uct_cuda_ctx_primary_push(0, retain inactive) -> Success",
                             "uct_cuda_ctx_primary_pop_and_release -> returned",
                             "uct_cuda_ctx_primary_push_first_active -> Success, device 0",
                             "uct_cuda_get_sys_dev(0) -> ",
                             "uct_cuda_copy_md_is_dmabuf_supported -> 1",
                             "uct_cuda_copy_md_get_dmabuf of no GPU memory -> fd invalid, offset 0"}) {
        EXPECT_NE(std::string::npos, r.output.find(std::string("fake: ") + line)) << line << "\n" << r.output;
    }
}

/* UCX 1.22 loads the uct_cuda framework's modules from UCX_PLUGIN_PATH too: with ours and the fake there, UCX
 * opens ours by itself, ours loads the framework (ucs_module_global_init), and the framework the fake. */
TEST(registration, the_module_loads_uct_cuda_submodules_from_the_plugin_path)
{
    if (!CUX_UCX_LOADS_PLUGIN_PATH) {
        GTEST_SKIP() << "UCX " << CUX_UCX_VERNUM / 100 << "." << CUX_UCX_VERNUM % 100
                     << " loads only the submodules compiled into its list (uct_cuda_MODULES)";
    }
    if (!using_mock_driver()) {
        GTEST_SKIP() << "the expected answers are the mock driver's";
    }
    char dir[] = "/tmp/cux-plugin-sub-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(0, run_command(std::string("cp -L ") + build_path(".libs/libuct_cuda.so.0") + " " +
                             build_path("test/.libs/libuct_cuda_fake.so.0") + " " + dir).status);
    command_result r = run_command(std::string("env -u UCX_MODULES UCX_PLUGIN_PATH=") + dir + " LD_LIBRARY_PATH=" +
                                   dir + " " + build_path("test/submodule_host"));
    run_command(std::string("rm -rf ") + dir);
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("fake: uct_cuda_base_query_md_resources -> Success")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("fake: uct_cuda_copy_md_get_dmabuf")) << r.output;
}
