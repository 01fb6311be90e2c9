/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MPI users: two ranks of Debian's Open MPI exchange GPU buffers through its UCX layer (pml ucx), the module
 * brought in with the README's line, `eval "$(ucx-cuda-run --env)"` and mpirun -x for each variable, on the mock
 * driver; every message is data-checked (test/cux_mpi_datacheck.c). Without the module the same run must fail:
 * UCP then takes the buffers for host memory and reads them before the fill lands.
 */
#include "cux_test.h"

#include <unistd.h>

using namespace cux_test;

class mpi : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (access(build_path("test/cux_mpi_datacheck").c_str(), X_OK) != 0) {
            GTEST_SKIP() << "test/cux_mpi_datacheck was not built (no mpicc: package libopenmpi-dev)";
        }
        if (run_command("command -v mpirun").status != 0) {
            GTEST_SKIP() << "no mpirun (package openmpi-bin)";
        }
    }

    /* mpirun of two ranks; env is set before it and exported to the ranks by -x for each of export_vars. */
    command_result run(const std::string &env, const std::string &export_vars, const std::string &mca = "")
    {
        std::string x;
        for (size_t at = 0, next; at < export_vars.size(); at = next + 1) {
            next = export_vars.find(' ', at);
            next = (next == std::string::npos) ? export_vars.size() : next;
            x += " -x " + export_vars.substr(at, next - at);
        }
        return run_command(env + " CUX_DRIVER_PATH=" + build_path("test/.libs/libmockcuda.so") +
                           " OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun "
                           "--oversubscribe -np 2 --mca pml ucx --mca osc ^ucx " + mca + " -x CUX_DRIVER_PATH -x "
                           "UCX_TLS" + x + " " + build_path("test/cux_mpi_datacheck") + " 2>&1");
    }
};

TEST_F(mpi, two_open_mpi_ranks_exchange_gpu_buffers_with_the_module)
{
    const std::string launcher = launcher_env() + build_path("ucx-cuda-run");
    command_result r = run("eval \"$(" + launcher + " --env)\" && UCX_TLS=self,sm,cuda_copy,cuda_ipc",
                           "LD_PRELOAD UCX_MEMTYPE_CACHE");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("5 passed, 0 failed")) << r.output;
}

TEST_F(mpi, without_the_module_the_check_fails)
{
    /* Open MPI 4.1 selects pml ucx only where one of its listed transports is there (cuda_ipc among them):
     * without the module it is told to take any */
    command_result r = run("UCX_TLS=self,sm UCX_MEMTYPE_CACHE=n", "UCX_MEMTYPE_CACHE",
                           "--mca pml_ucx_tls any --mca pml_ucx_devices any");
    EXPECT_NE(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("FAIL")) << r.output;
}
