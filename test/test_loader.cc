/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run-time driver loading: each case runs the test binary with --probe-driver in a child process, against
 * no driver, the mock driver and its failure modes.
 */
#include "cux_test.h"

using namespace cux_test;

static command_result probe(const std::string &env)
{
    return run_command(env + " UCX_MODULES=^cuda " + build_path("test/cux_gtest") + " --probe-driver");
}

/* "MAJOR.MINOR" of the UCX the module was built for. */
static std::string built_version()
{
    return std::to_string(CUX_UCX_VERNUM / 100) + "." + std::to_string(CUX_UCX_VERNUM % 100);
}

static std::string mock_lib(const char *name = "libmockcuda.so")
{
    return build_path(std::string("test/.libs/") + name);
}

TEST(driver_loader, missing_library_means_no_device)
{
    command_result r = probe("CUX_DRIVER_PATH=/nonexistent/libcuda.so.1");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("status=No such device")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("devices=0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("dlopen(/nonexistent/libcuda.so.1)")) << r.output;
}

TEST(driver_loader, mock_driver_is_loaded_through_get_proc_address)
{
    command_result r = probe("CUX_DRIVER_PATH=" + mock_lib() + " MOCK_CUDA_DEVICES=3");
    EXPECT_NE(std::string::npos, r.output.find("status=Success devices=3 version=13000")) << r.output;
}

TEST(driver_loader, no_device)
{
    command_result r = probe("CUX_DRIVER_PATH=" + mock_lib() + " MOCK_CUDA_MODE=nodevice");
    EXPECT_NE(std::string::npos, r.output.find("status=No such device devices=0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("no CUDA-capable device")) << r.output;
}

TEST(driver_loader, driver_older_than_cuda12_is_refused)
{
    command_result r = probe("CUX_DRIVER_PATH=" + mock_lib("libmockcuda_pre12.so"));
    EXPECT_NE(std::string::npos, r.output.find("devices=0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("driver older than CUDA 12 is not supported")) << r.output;
}

TEST(driver_loader, old_driver_version_is_refused)
{
    command_result r = probe("CUX_DRIVER_PATH=" + mock_lib() + " MOCK_CUDA_MODE=old");
    EXPECT_NE(std::string::npos, r.output.find("devices=0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("driver API version 11080 is older than the required 12000"))
            << r.output;
}

TEST(driver_loader, missing_entry_point_is_refused)
{
    command_result r = probe("CUX_DRIVER_PATH=" + mock_lib() + " MOCK_CUDA_MODE=nosym");
    EXPECT_NE(std::string::npos, r.output.find("devices=0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("driver has no cuPointerGetAttributes")) << r.output;
}

TEST(driver_loader, module_has_no_link_time_cuda_dependency)
{
    command_result r = run_command("objdump -p " + build_path(".libs/libuct_cuda.so.0") +
                                   " | grep NEEDED");
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("libcuda")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("libcudart")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("libnvidia-ml")) << r.output;
}

/* The module exports exactly the names of src/libuct_cuda.map: UCX's entry point, the functions UCX's other CUDA
 * modules call, and the launcher's marker; every internal name stays inside. */
TEST(driver_loader, module_exports_exactly_its_list)
{
    command_result exported = run_command("nm -D --defined-only " + build_path(".libs/libuct_cuda.so.0") +
                                          " | awk '{print $3}' | sort");
    command_result listed   = run_command("sed -n '/global:/,/local:/p' " + source_path("src/libuct_cuda.map") +
                                          " | grep -o '^ *[a-z_0-9]*;' | tr -d ' ;' | sort");
    ASSERT_EQ(0, exported.status) << exported.output;
    ASSERT_EQ(0, listed.status) << listed.output;
    EXPECT_NE(std::string::npos, listed.output.find("uct_cuda_base_query_md_resources")) << listed.output;
    EXPECT_EQ(listed.output, exported.output);
}

/* A module built for one UCX must not touch another's structures: it refuses to register, and says why. */
TEST(driver_loader, module_refuses_a_ucx_of_another_version)
{
    command_result same = run_command("UCX_MODULES=^cuda " + build_path("test/version_probe"));
    EXPECT_NE(std::string::npos, same.output.find("registered=2")) << same.output;

    command_result other = run_command("UCX_MODULES=^cuda PROBE_UCX_VERSION=1.99 " +
                                       build_path("test/version_probe"));
    EXPECT_NE(std::string::npos, other.output.find("registered=0")) << other.output;
    EXPECT_NE(std::string::npos, other.output.find("built for UCX " + built_version() +
                                                   " but this process runs UCX 1.99.0")) << other.output;
}

/* Preloaded into a program that opens UCP later (an MPI program), the module asks the libucp beside the
 * process's libucs: one of another version is refused before anything is registered. */
TEST(driver_loader, module_refuses_another_version_before_ucp_is_loaded)
{
    const std::string dir = fake_ucx_libdir("loader");
    ASSERT_FALSE(dir.empty()) << "cannot make a UCX library directory with a libucp of another version";

    /* this UCX's own libucp beside it: the module registers */
    command_result same = run_command("UCX_MODULES=^cuda " + build_path("test/version_probe_uct"));
    EXPECT_NE(std::string::npos, same.output.find("registered=2")) << same.output;

    command_result other = run_command("UCX_MODULES=^cuda FAKE_UCX_VERSION=1.99 LD_LIBRARY_PATH=" + dir + " " +
                                       build_path("test/version_probe_uct"));
    EXPECT_NE(std::string::npos, other.output.find("registered=0")) << other.output;
    EXPECT_NE(std::string::npos, other.output.find("built for UCX " + built_version() +
                                                   " but this process runs UCX 1.99.0 (" + dir + "/libucp.so.0)"))
            << other.output;
    run_command("rm -rf " + dir);
}
