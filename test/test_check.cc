/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ucx-cuda-run --check on the mock driver: every line OK in a working set-up, and each failing line made to
 * fail by the set-up it is about (no driver, no GPU, another UCX, no module, a wrong memory-detection setting,
 * GPUs without peer access, no check program), and NVML's word on a multi-node NVLink domain.
 */
#include "cux_test.h"

#include <unistd.h>

using namespace cux_test;

class launcher_check : public ::testing::Test {
protected:
    /* --check of the build tree's launcher and files on the mock driver, with extra variables. */
    command_result check(const std::string &env = "", const std::string &program = "")
    {
        return run_command(launcher_env() + "CUX_DRIVER_PATH=" + build_path("test/.libs/libmockcuda.so") +
                           " UCX_MODULES=^cuda " + env + " " + build_path("ucx-cuda-run") + " --check " + program);
    }

    /* The line of a check, "" if there is none. */
    static std::string line(const command_result &r, const std::string &what)
    {
        size_t at = r.output.find(what);
        if (at == std::string::npos) {
            return "";
        }
        size_t start = r.output.rfind('\n', at);
        start        = (start == std::string::npos) ? 0 : start + 1;
        return r.output.substr(start, r.output.find('\n', at) - start);
    }

    static bool starts(const std::string &s, const std::string &prefix) { return s.rfind(prefix, 0) == 0; }
};

TEST_F(launcher_check, a_working_set_up_is_all_ok)
{
    command_result r = check();
    EXPECT_EQ(0, r.status) << r.output;
    for (const char *what : {"CUDA driver", "UCX version", "module loading", "memory detection", "transports",
                             "NVLink fabric", "peer access"}) {
        EXPECT_TRUE(starts(line(r, what), "OK ")) << what << " in:\n" << r.output;
    }
    EXPECT_NE(std::string::npos, line(r, "CUDA driver").find("2 GPUs")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "transports").find("cuda_ipc: 1 device")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "peer access").find("GPU0 <-> GPU1")) << r.output;
    printf("%s", r.output.c_str());
}

TEST_F(launcher_check, a_gpu_in_a_multi_node_nvlink_domain_is_said_with_whether_other_hosts_are_reached)
{
    const std::string nvml = "CUX_NVML_PATH=" + build_path("test/.libs/libmocknvml.so") + " ";
    const std::string no_channel = "CUX_IMEX_CHANNELS_DIR=/nonexistent ";
    command_result none = check(nvml);
    EXPECT_EQ(0, none.status) << none.output;
    EXPECT_TRUE(starts(line(none, "NVLink fabric"), "OK ")) << none.output;
    EXPECT_NE(std::string::npos, line(none, "NVLink fabric").find("not supported")) << none.output;

    const std::string in_domain = nvml + "MOCK_NVML_FABRIC=completed:3:0123456789abcdef0123456789abcdef ";
    command_result in = check(in_domain + no_channel);
    EXPECT_EQ(0, in.status) << in.output; /* a warning: the host's own transfers still work */
    std::string l = line(in, "NVLink fabric");
    EXPECT_TRUE(starts(l, "WARN")) << in.output;
    EXPECT_NE(std::string::npos, l.find("GPU0 is in a multi-node NVLink domain (cluster "
                                        "0123456789abcdef0123456789abcdef, clique 3)")) << l;
    EXPECT_NE(std::string::npos, l.find("no IMEX channel")) << l;
    EXPECT_NE(std::string::npos, l.find("this host only")) << l;

    /* with a channel, the domain's other hosts are reached */
    char dir[] = "/tmp/cux-check-imex-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    FILE *f = fopen((std::string(dir) + "/channel0").c_str(), "w");
    ASSERT_NE(nullptr, f);
    fclose(f);
    command_result reached = check(in_domain + "CUX_IMEX_CHANNELS_DIR=" + dir + " ");
    l = line(reached, "NVLink fabric");
    EXPECT_TRUE(starts(l, "OK ")) << reached.output;
    EXPECT_NE(std::string::npos, l.find("reaches the domain's other hosts")) << l;
    unlink((std::string(dir) + "/channel0").c_str());
    rmdir(dir);

    command_result pending = check(nvml + "MOCK_NVML_FABRIC=in-progress");
    EXPECT_TRUE(starts(line(pending, "NVLink fabric"), "WARN")) << pending.output;
    EXPECT_NE(std::string::npos, line(pending, "NVLink fabric").find("not finished")) << pending.output;
}

TEST_F(launcher_check, no_driver)
{
    command_result r = check("CUX_DRIVER_PATH=/nonexistent/libcuda.so.1");
    EXPECT_NE(0, r.status);
    EXPECT_TRUE(starts(line(r, "CUDA driver"), "FAIL")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "CUDA driver").find("install the NVIDIA driver")) << r.output;
    EXPECT_TRUE(starts(line(r, "transports"), "FAIL")) << r.output;
}

TEST_F(launcher_check, no_gpu)
{
    command_result r = check("MOCK_CUDA_DEVICES=0");
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, line(r, "CUDA driver").find("sees no GPU")) << r.output;
    EXPECT_TRUE(starts(line(r, "transports"), "FAIL")) << r.output;
}

TEST_F(launcher_check, another_ucx)
{
    const std::string dir = fake_ucx_libdir("check");
    ASSERT_FALSE(dir.empty());
    command_result r = check("LD_LIBRARY_PATH=" + dir + " FAKE_UCX_VERSION=1.99");
    EXPECT_NE(0, r.status);
    EXPECT_TRUE(starts(line(r, "UCX version"), "FAIL")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "UCX version").find("loads UCX 1.99.0")) << r.output;
    run_command("rm -rf " + dir);
}

TEST_F(launcher_check, no_module)
{
    command_result r = check("CUX_MODULE=/nonexistent/libuct_cuda.so.0");
    EXPECT_NE(0, r.status);
    EXPECT_NE(std::string::npos, line(r, "FAIL module").find("install uct-cuda-plugin")) << r.output;
}

TEST_F(launcher_check, memory_detection_settings)
{
    command_result cache = check("UCX_MEMTYPE_CACHE=y");
    EXPECT_NE(0, cache.status);
    EXPECT_NE(std::string::npos, line(cache, "memory detection").find("takes GPU buffers for host memory"))
            << cache.output;

    command_result bogus = check("CUX_MEMTYPE=bogus");
    EXPECT_NE(0, bogus.status);
    EXPECT_TRUE(starts(line(bogus, "memory detection"), "FAIL")) << bogus.output;

    command_result hooks = check("CUX_MEMTYPE=hooks CUX_MEMTYPE_LIB=/nonexistent/libcux_memtype.so");
    EXPECT_NE(0, hooks.status);
    EXPECT_TRUE(starts(line(hooks, "/nonexistent/libcux_memtype.so"), "FAIL")) << hooks.output;
}

/* --check PROGRAM (issue 61): a program that carries the CUDA runtime statically is named, with whether the
 * mode chosen sees its allocations; one that does not, and one that is not there. */
TEST_F(launcher_check, a_program_with_the_static_cuda_runtime_is_named)
{
    const std::string static_program = build_path("test/cux_ucp_datacheck_static_cudart");
    if (access(static_program.c_str(), X_OK) != 0) {
        GTEST_SKIP() << "no program built with the static CUDA runtime (no libcudart_static.a at configure)";
    }
    for (const char *mode : {"query", "hooks"}) {
        command_result r = check(std::string("CUX_MEMTYPE=") + mode, static_program);
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_TRUE(starts(line(r, "program   "), "OK ")) << r.output;
        EXPECT_NE(std::string::npos, line(r, "program   ").find("linked statically in: cux_ucp_datacheck_static_cudart"))
                << r.output;
    }
    command_result plain = check("", build_path("test/cux_ucp_datacheck"));
    EXPECT_NE(std::string::npos, line(plain, "program   ").find("no statically linked CUDA runtime")) << plain.output;
    command_result none = check("", "/nonexistent/program");
    EXPECT_NE(0, none.status);
    EXPECT_TRUE(starts(line(none, "program   "), "FAIL")) << none.output;
}

TEST_F(launcher_check, gpus_without_peer_access_are_a_warning)
{
    command_result r = check("MOCK_CUDA_NO_PEER=1");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_TRUE(starts(line(r, "peer access"), "WARN")) << r.output;
}

TEST_F(launcher_check, no_check_program)
{
    command_result r = check("CUX_CHECK_PROG=/nonexistent/ucx-cuda-check");
    EXPECT_NE(0, r.status);
    EXPECT_TRUE(starts(line(r, "check program"), "FAIL")) << r.output;
}

/* Issue 49, item 2: a driver older than CUDA 12.0 (the mock as an 11.8 driver) is named as the cause in the driver's
 * own line, where it said OK and then "FAIL transports: see the lines above" with nothing failed above. */
TEST_F(launcher_check, a_driver_older_than_cuda_12_is_the_cause_it_names)
{
    command_result r = check("MOCK_CUDA_MODE=old");
    EXPECT_NE(0, r.status);
    EXPECT_TRUE(starts(line(r, "CUDA driver"), "FAIL")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "CUDA driver").find("driver 11.8")) << r.output;
    EXPECT_NE(std::string::npos, line(r, "CUDA driver").find("older than CUDA 12.0")) << r.output;
}

/* Issue 49, item 8: --check says which launcher and module run, and warns when PATH holds another launcher (a hand
 * install in /usr/local/bin goes before the package's in /usr/bin). */
TEST_F(launcher_check, it_says_which_launcher_and_module_run_and_warns_of_another_on_path)
{
    const std::string own = "PATH=/usr/bin:/bin";
    command_result alone  = check(own);
    EXPECT_TRUE(starts(line(alone, "launcher"), "OK")) << alone.output;
    EXPECT_NE(std::string::npos, line(alone, "launcher").find(build_path("ucx-cuda-run"))) << alone.output;
    EXPECT_NE(std::string::npos, line(alone, "launcher").find("libuct_cuda.so.0")) << alone.output;

    const std::string dir = build_path("test/another-launcher");
    ASSERT_EQ(0, run_command("mkdir -p " + dir + " && printf '#!/bin/sh\\n' >" + dir +
                             "/ucx-cuda-run && chmod +x " + dir + "/ucx-cuda-run").status);
    command_result two = check("PATH=" + dir + ":/usr/bin:/bin");
    EXPECT_TRUE(starts(line(two, "launcher"), "WARN")) << two.output;
    EXPECT_NE(std::string::npos, line(two, "launcher").find(dir + "/ucx-cuda-run")) << two.output;
    EXPECT_NE(std::string::npos, line(two, "launcher").find("make uninstall")) << two.output;
    run_command("rm -rf " + dir);
}

/* Issue 49, item 3: --help and -h print the usage, --check in it; no program, or an unknown option, is a usage
 * error. */
TEST_F(launcher_check, help_prints_the_usage_and_a_wrong_call_is_a_usage_error)
{
    for (const char *how : {"--help", "-h"}) {
        command_result r = run_command(launcher_env() + build_path("ucx-cuda-run") + " " + how);
        EXPECT_EQ(0, r.status) << how << ": " << r.output;
        for (const char *word : {"--check", "--env", "PROGRAM"}) {
            EXPECT_NE(std::string::npos, r.output.find(word)) << how << ": " << r.output;
        }
    }
    for (const char *args : {"", "--bogus"}) {
        command_result r = run_command(launcher_env() + build_path("ucx-cuda-run") + " " + args);
        EXPECT_EQ(2, r.status) << "'" << args << "': " << r.output;
        EXPECT_NE(std::string::npos, r.output.find("--check")) << r.output;
    }
}
