/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stock UCX without CUDA (issue #4): the distribution's own ucx_perftest, and our data-checking UCP program,
 * moving GPU buffers through ucx-cuda-run, which preloads the module and the perftest CUDA allocator, with GPU
 * memory detected either way (CUX_MEMTYPE=query or hooks). Needs a device (the mock driver in CI); skipped
 * where the UCX has a perftest CUDA allocator of its own.
 */
#include "cux_test.h"
#include "ipc_peer.h"
#include "ipc_transport.h"

#include <sys/stat.h>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <unistd.h>

extern "C" {
#include "compat/cux_ucx_compat.h"
}

using namespace cux_test;

class ucp_programs : public ::testing::Test {
protected:
    void SetUp() override
    {
        CUX_SKIP_WITHOUT_GPU();
        if (ucx_has_perftest_cuda_module()) {
            GTEST_SKIP() << "this UCX has its own perftest CUDA allocator: the launcher is for stock UCX";
        }
        m_env = launcher_env() + "UCX_WARN_UNUSED_ENV_VARS=n ";
        m_run = build_path("ucx-cuda-run");
    }

    /* The perftest CUDA module of a UCX built with CUDA; without ucx_info, looked for in the module directory. */
    static bool ucx_has_perftest_cuda_module()
    {
        if (CUX_TEST_UCX_INFO[0] == '\0') {
            return access((std::string(CUX_TEST_UCX_LIBDIR) + "/ucx/libucx_perftest_cuda.so.0").c_str(), F_OK) == 0;
        }
        command_result b = run_command(std::string("UCX_MODULES=^cuda ") + CUX_TEST_UCX_INFO +
                                       " -b | grep ucx_perftest_MODULES");
        return b.output.find("cuda") != std::string::npos;
    }

    /* A ucx_perftest built with MPI (Debian 13's) starts in MPI mode unless told -P 0. */
    static std::string perftest_mode_args(const std::string &perftest)
    {
        command_result help = run_command(perftest + " -h 2>&1");
        return (help.output.find("-P <0|1>") != std::string::npos) ? " -P 0" : "";
    }

    /* Two processes, server and client, through the launcher; returns the client's output. */
    command_result perftest(const std::string &tls, const std::string &args)
    {
        std::string perftest = std::string(CUX_TEST_UCX_PREFIX) + "/bin/ucx_perftest";
        perftest += perftest_mode_args(perftest);
        std::string port     = std::to_string(20000 + (getpid() + m_runs++ * 7) % 20000);
        std::string env      = m_env + "UCX_TLS=" + tls + " ";
        return run_command("(" + env + "timeout 60 " + m_run + " " + perftest + " -p " + port +
                           " >/dev/null 2>&1 &) ; sleep 0.5; " + env + "timeout 60 " + m_run + " " + perftest +
                           " localhost -p " + port + " " + args);
    }

    /* A two-process run that must finish and print its result line. */
    void expect_completes(const std::string &tls, const std::string &args)
    {
        command_result r = perftest(tls, args);
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("Final:")) << r.output;
    }

    /* test/cux_ucp_datacheck through the launcher: every kind of GPU memory, filled by plain synchronous copies,
     * sent back and forth and checked. */
    command_result ucp_check(const std::string &env, const std::string &args = "8 65539 1048576",
                             const std::string &tls = "self,sm,cuda_copy,cuda_ipc")
    {
        return run_command(m_env + env + " UCX_TLS=" + tls + " timeout 600 " + m_run + " " +
                           build_path("test/cux_ucp_datacheck") + " " + args);
    }

    std::string m_env, m_run;
    int         m_runs = 0;
};

TEST_F(ucp_programs, launcher_prints_the_environment_for_mpi_launchers)
{
    /* the suites run with UCX_MODULES=^cuda (no installed UCX's own module): UCX cannot open ours by name */
    command_result r = run_command(m_env + m_run + " --env");
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("export LD_PRELOAD=" + build_path(".libs/libuct_cuda.so.0")));
    EXPECT_EQ(std::string::npos, r.output.find("UCX_PLUGIN_PATH")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("export UCX_MEMTYPE_CACHE=n"));

    /* UCX 1.22 and later open it from UCX_PLUGIN_PATH when UCX_MODULES allows: a preload as well would
     * register it twice */
    for (const char *modules : {"", "UCX_MODULES=^ib,rdmacm", "UCX_MODULES=cma,cuda"}) {
        r = run_command(m_env + "env -u UCX_MODULES " + modules + " " + m_run + " --env");
        ASSERT_EQ(0, r.status) << r.output;
        if (CUX_UCX_LOADS_PLUGIN_PATH) {
            EXPECT_NE(std::string::npos, r.output.find("export UCX_PLUGIN_PATH=" + build_path(".libs")))
                    << modules << ": " << r.output;
            EXPECT_EQ(std::string::npos, r.output.find("libuct_cuda.so.0")) << modules << ": " << r.output;
        } else {
            EXPECT_NE(std::string::npos, r.output.find("export LD_PRELOAD=" + build_path(".libs/libuct_cuda.so.0")))
                    << modules << ": " << r.output;
        }
    }
}

TEST_F(ucp_programs, launcher_in_hooks_mode_preloads_the_hooks_and_keeps_the_cache)
{
    command_result r = run_command(m_env + "CUX_MEMTYPE=hooks " + m_run + " --env");
    ASSERT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(":" + build_path(".libs/libcux_memtype.so"))) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("UCX_MEMTYPE_CACHE")) << r.output;
}

TEST_F(ucp_programs, launcher_rejects_an_unknown_detection_mode)
{
    command_result r = run_command(m_env + "CUX_MEMTYPE=guess " + m_run + " true");
    EXPECT_EQ(2, r.status);
    EXPECT_NE(std::string::npos, r.output.find("CUX_MEMTYPE must be query or hooks")) << r.output;
}

TEST_F(ucp_programs, launcher_without_the_module_says_so)
{
    command_result r = run_command("CUX_MODULE=/nonexistent/libuct_cuda.so.0 " + m_run + " true");
    EXPECT_EQ(1, r.status);
    EXPECT_NE(std::string::npos, r.output.find("/nonexistent/libuct_cuda.so.0 not found")) << r.output;
}

TEST_F(ucp_programs, perftest_lists_cuda_memory)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    command_result r = run_command(m_env + m_run + " " + CUX_TEST_UCX_PREFIX + "/bin/ucx_perftest -h");
    EXPECT_NE(std::string::npos, r.output.find("cuda - NVIDIA GPU memory")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("cuda-managed")) << r.output;
}

TEST_F(ucp_programs, tag_bw_gpu_to_gpu_over_cuda_ipc)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    expect_completes("self,sm,cuda_copy,cuda_ipc", "-t tag_bw -m cuda -s 1048576 -n 20 -w 2");
}

TEST_F(ucp_programs, tag_bw_host_to_gpu_over_cuda_copy)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    expect_completes("self,sm,cuda_copy", "-t tag_bw -m host,cuda -s 1048576 -n 20 -w 2");
}

TEST_F(ucp_programs, tag_lat_gpu_memory)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    expect_completes("self,sm,cuda_copy,cuda_ipc", "-t tag_lat -m cuda -s 8 -n 200 -w 20");
}

TEST_F(ucp_programs, tag_bw_gpu_to_gpu_with_allocation_hooks)
{
    CUX_SKIP_WITHOUT_UCX_TOOLS();
    m_env += "CUX_MEMTYPE=hooks ";
    expect_completes("self,sm,cuda_copy,cuda_ipc", "-t tag_bw -m cuda -s 1048576 -n 20 -w 2");
}

/* The static CUDA runtime opens the driver itself and asks cuGetProcAddress for every entry point: the hooks
 * see its allocations and releases of every kind all the same (issue 61), hand an ABI they do not know back
 * untouched, and leave dlsym answering for its caller. Without the hooks (query), UCX hears of none. */
TEST_F(ucp_programs, hooks_see_a_driver_reached_through_its_own_handle_and_cuGetProcAddress)
{
    const std::string program = build_path("test/cux_memtype_static_like");
    command_result hooks = run_command(m_env + "CUX_MEMTYPE=hooks timeout 120 " + m_run + " " + program +
                                       " --expect-events");
    EXPECT_EQ(0, hooks.status) << hooks.output;
    EXPECT_NE(std::string::npos, hooks.output.find("PASS")) << hooks.output;
    EXPECT_NE(std::string::npos, hooks.output.find("ok: cuMemMap/cuMemUnmap")) << hooks.output;
    EXPECT_NE(std::string::npos, hooks.output.find("ok: cuMemAllocAsync/cuMemFreeAsync")) << hooks.output;

    command_result query = run_command(m_env + "CUX_MEMTYPE=query timeout 120 " + m_run + " " + program);
    EXPECT_EQ(0, query.status) << query.output;
    EXPECT_NE(std::string::npos, query.output.find("0 allocation and 0 release events heard")) << query.output;
}

TEST_F(ucp_programs, ucp_data_check_with_memory_queries)
{
    command_result r = ucp_check("CUX_MEMTYPE=query");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
}

TEST_F(ucp_programs, ucp_data_check_with_allocation_hooks)
{
    command_result r = ucp_check("CUX_MEMTYPE=hooks");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
}

/* Every size across UCP's protocol thresholds (short, bcopy, zcopy, rendezvous), messages inside larger
 * allocations, one buffer sent back and forth: both ways of recognising GPU memory. */
TEST_F(ucp_programs, ucp_data_check_across_protocol_thresholds)
{
    for (const char *mode : {"query", "hooks"}) {
        command_result r = ucp_check(std::string("CUX_MEMTYPE=") + mode, "--sweep");
        EXPECT_EQ(0, r.status) << mode << ":\n" << r.output;
        EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
    }
}

/* Settings of UCX's own module that deployments carry (UCX 1.19+'s BW list for cuda_copy, inference servers'
 * ENABLE_GET_ZCOPY=on) keep UCP working with this module in its place; with reads turned off UCP sends the
 * same data by other paths. The list used to fail UCP's initialisation. */
TEST_F(ucp_programs, settings_of_ucx_modules_keep_ucp_working)
{
    const std::string list = "UCX_CUDA_COPY_BW=10000MBs,h2d:8300MBs,d2h:11660MBs,d2d:320GBs ";
    for (const char *get : {"on", "off"}) {
        SCOPED_TRACE(get);
        command_result r = ucp_check("CUX_MEMTYPE=query " + list + "UCX_CUDA_IPC_ENABLE_GET_ZCOPY=" + get,
                                     "--only 0,1,2,3 8 65539 1048576");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
    }
}

/* The regression test of synchronous fills: without synchronous memory operations (CUX_SYNC_MEMOPS=n) the mock
 * lands a pageable fill late, as the GPU may, and the data check sees stale data; the application-side remedy
 * (--fill-sync) passes without the module's help; the 12.0-driver path (the pointer attribute) passes too. */
TEST_F(ucp_programs, synchronous_fills_arrive_stale_without_synchronous_memory_operations)
{
    for (const char *mode : {"query", "hooks"}) {
        SCOPED_TRACE(mode);
        std::string env = std::string("CUX_MEMTYPE=") + mode;
        command_result off = ucp_check(env + " CUX_SYNC_MEMOPS=n");
        if (using_mock_driver()) {
            /* the mock lands a late DMA for certain; on a GPU it is a race the run may or may not lose */
            EXPECT_NE(0, off.status) << off.output;
            EXPECT_NE(std::string::npos, off.output.find("stale")) << off.output;
        } else {
            std::string last = off.output.substr(off.output.rfind('\n', off.output.size() - 2) + 1);
            std::cout << mode << ", CUX_SYNC_MEMOPS=n on a GPU: " << last;
        }

        command_result synced = ucp_check(env + " CUX_SYNC_MEMOPS=n", "--fill-sync 8 65539 1048576");
        EXPECT_EQ(0, synced.status) << synced.output;

        /* VMM memory (cases 9 and 10) takes no pointer attribute, and a 12.0 driver has no context flag: there
         * neither module can make a synchronous fill safe (UCX 1.13's own module delivers it stale on the GPU host) */
        command_result pointer = ucp_check(env + " MOCK_CUDA_MODE=nosetflags", "--only 0,1,2,3,4,5,6,7,8");
        EXPECT_EQ(0, pointer.status) << pointer.output;
        EXPECT_NE(std::string::npos, pointer.output.find(" 0 failed")) << pointer.output;
    }
}

/* Peer error handling (UCP_ERR_HANDLING_MODE_PEER, as Python's UCX bindings ask; tcp for active messages:
 * UCP 1.13's shared-memory transports have none): UCP still puts cuda_ipc on the endpoint, the data check
 * passes, and a rendezvous send to a peer that was killed ends in an error instead of hanging. */
/* Issue 36: the sending side runs as pid 1 of a PID namespace of its own (a container without a shared one), and
 * with UCX_CUDA_IPC_SOCKET_DIR set on both sides cuda_ipc carries every kind of GPU memory between the two. */
TEST_F(ucp_programs, ucp_data_check_with_the_sender_in_a_pid_namespace_of_its_own)
{
    if (!can_make_pid_namespace()) {
        GTEST_SKIP() << "makes a PID namespace for the sender (unshare: root)";
    }
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    /* the mock driver imports across namespaces through its broker (the GPU host's driver needs nothing) */
    command_result r = ucp_check(std::string("MOCK_CUDA_BROKER=1 CUX_MEMTYPE=query UCX_CUDA_IPC_SOCKET_DIR=") + dir,
                                 "--pid-namespace --peer-errors 8 65539 1048576",
                                 "self,tcp,cuda_copy,cuda_ipc");
    run_command(std::string("rm -rf ") + dir);
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("cuda_ipc/cuda")) << "cuda_ipc not chosen:\n" << r.output;
}

/* Issue 59: UCP 1.13 registers GPU memory per message, and every message of VMM or pool memory exported the
 * allocation again (and closed it): 1.3 ms a message on the H200. Counted in both processes with the mock driver,
 * more messages of the same buffers make no more descriptor exports and no more imports (hence no more
 * descriptor transfers, which only an import follows): two runs of each case, 1 and 4 round trips per size, the
 * second with the timed round trips gpu-host/run vmm-cost measures (20 per size, unchecked between checked ones). */
TEST_F(ucp_programs, more_messages_of_the_same_buffer_make_no_more_exports_or_imports)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "counts the mock driver's exports and imports (MOCK_CUDA_COUNTS_DIR)";
    }
    struct counted {
        long exports, imports, pointer_exports;
    };
    auto counts = [&](const std::string &only, const std::string &rounds, const std::string &sizes, counted *c) {
        char dir[] = "/tmp/cux-counts-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        command_result r = ucp_check(std::string("CUX_MEMTYPE=query MOCK_CUDA_COUNTS_DIR=") + dir,
                                     "--only " + only + " --rounds " + rounds + " " + sizes,
                                     "self,tcp,cuda_copy,cuda_ipc");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
        if (rounds.find("--timed") != std::string::npos) {
            EXPECT_NE(std::string::npos, r.output.find("timed ")) << r.output;
        }
        command_result sum = run_command(std::string("cat ") + dir + "/counts-* 2>/dev/null | awk "
                                         "'/^descriptor exports/ {e += $3} /^imports/ {i += $2} "
                                         "/^pointer exports/ {p += $3} END {print e + 0, i + 0, p + 0}'");
        run_command(std::string("rm -rf ") + dir);
        ASSERT_EQ(3, sscanf(sum.output.c_str(), "%ld %ld %ld", &c->exports, &c->imports, &c->pointer_exports))
            << sum.output;
    };
    auto index_of = [&](const std::string &name) {
        return run_command(build_path("test/cux_ucp_datacheck") + " --list | awk -F '\t' '$2 == \"" + name +
                           "\" {printf \"%s\", $1}'").output;
    };
    for (const char *name : {"GPU0 -> GPU0, two processes", "VMM GPU0 -> VMM GPU0, two processes",
                             "VMM across two allocations GPU0 -> GPU0, two processes",
                             "shareable pool GPU0 -> GPU0, two processes"}) {
        SCOPED_TRACE(name);
        const std::string index = index_of(name);
        ASSERT_FALSE(index.empty()) << "no such case in cux_ucp_datacheck --list";
        counted one, more;
        counts(index, "1", "65539 1048576", &one);
        counts(index, "4 --timed 20", "65539 1048576", &more);
        EXPECT_GT(one.imports, 0) << "cuda_ipc carried nothing";
        EXPECT_EQ(one.exports, more.exports) << "descriptor exports grew with the messages";
        EXPECT_EQ(one.imports, more.imports) << "imports grew with the messages";
        /* a pool allocation's export data costs 100 us a call on the GPU host (UCP before 1.16 registers per
         * message) */
        EXPECT_EQ(one.pointer_exports, more.pointer_exports) << "pool pointer exports grew with the messages";
    }
    /* A pool allocation larger than the pool's chunk (32 MB, the mapping the driver names for pool memory) is one
     * allocation to export and import: cuda_ipc carries a message that crosses a chunk. */
    const std::string pool = index_of("shareable pool GPU0 -> GPU0, two processes");
    counted crossing;
    counts(pool, "1", std::to_string((34u << 20) + 3), &crossing);
    EXPECT_GT(crossing.imports, 0) << "a pool message past the pool's first chunk went another way than cuda_ipc";
}

/* Issue 57: two containers whose programs are both pid 1 (docker run twice, two pods: sibling PID namespaces, each
 * with its own IPC and UTS namespaces too). The driver takes a legacy handle that carries the importer's own pid
 * number for one of the importer's own (the mock refuses it as the driver does); the module opens such handles
 * with their pid bytes cleared, so cuMemAlloc memory crosses over cuda_ipc as VMM memory does. Where a driver also
 * refuses that (MOCK_CUDA_IPC_STRICT_PID), the keys are refused at unpack with one warning, before anything is
 * copied, and the data goes over tcp: the job lives either way. */
TEST_F(ucp_programs, ucp_data_check_between_two_containers_whose_programs_are_both_pid_1)
{
    if (!can_make_pid_namespace()) {
        GTEST_SKIP() << "makes a PID namespace for each side (unshare: root)";
    }
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    /* legacy (1) and VMM (10) memory, each side pid 1; the debug log says what was mapped, filtered to that */
    const std::string env  = std::string("MOCK_CUDA_BROKER=1 CUX_MEMTYPE=query UCX_LOG_LEVEL=debug "
                                         "UCX_CUDA_IPC_SOCKET_DIR=") + dir;
    const std::string args = "--sibling-namespaces --only 1,10 8 65539 1048576 2>&1 | grep -E "
                             "'mapped pid|pid number|cannot map|passed|^(PASS|FAIL)'; echo exit \\${PIPESTATUS[0]}";
    size_t mapped[2] = {0, 0};
    for (int strict = 0; strict <= 1; ++strict) {
        SCOPED_TRACE(strict ? "a driver that refuses cleared pid bytes" : "the driver as measured");
        command_result r = ucp_check(std::string("bash -c \"") + (strict ? "MOCK_CUDA_IPC_STRICT_PID=1 " : "") + env,
                                     args + "\"", "self,tcp,cuda_copy,cuda_ipc");
        EXPECT_NE(std::string::npos, r.output.find("exit 0")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("2 passed, 0 failed")) << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("cannot map")) << r.output;
        for (size_t at = r.output.find("mapped pid 1 "); at != std::string::npos;
             at = r.output.find("mapped pid 1 ", at + 1)) {
            ++mapped[strict];
        }
        if (strict) {
            EXPECT_NE(std::string::npos, r.output.find("has this process's pid number")) << r.output;
        } else {
            EXPECT_EQ(std::string::npos, r.output.find("has this process's pid number")) << r.output;
        }
    }
    run_command(std::string("rm -rf ") + dir);
    /* VMM memory is mapped either way; legacy memory only where the cleared handle opens */
    EXPECT_LT(0u, mapped[1]);
    EXPECT_LT(mapped[1], mapped[0]);
}

/* Issue 60, items 1-2: the Kubernetes recipe of docs/containers.md as far as one machine makes it: each side pid 1
 * of its own PID, mount, IPC and UTS namespaces, running as a non-root user with no capabilities (runAsUser), and
 * making its own 0700 socket directory inside a shared 0777 directory (an emptyDir), no root init container.
 * cuda_ipc carries cuMemAlloc and VMM memory, and the directory is that user's, mode 0700. */
TEST_F(ucp_programs, ucp_data_check_as_the_kubernetes_recipe_runs_it)
{
    if (!can_make_pid_namespace()) {
        GTEST_SKIP() << "makes a PID namespace for each side and changes user (root)";
    }
    char dir[] = "/tmp/cux-emptydir-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(0, chmod(dir, 0777));
    const std::string sockets = std::string(dir) + "/s";
    command_result r = ucp_check(std::string("bash -c \"MOCK_CUDA_BROKER=1 CUX_MEMTYPE=query UCX_LOG_LEVEL=debug "
                                             "UCX_CUDA_IPC_SOCKET_DIR=") + sockets,
                                 "--sibling-namespaces --as-user 4321:4321 --only 1,10 8 65539 1048576 2>&1 | "
                                 "grep -E 'mapped pid|cannot map|passed|^(PASS|FAIL)'; echo exit \\${PIPESTATUS[0]}\"",
                                 "self,tcp,cuda_copy,cuda_ipc");
    struct stat st = {};
    EXPECT_EQ(0, stat(sockets.c_str(), &st)) << "no socket directory made";
    EXPECT_EQ(4321u, st.st_uid);
    EXPECT_EQ(0700u, st.st_mode & 07777);
    run_command(std::string("rm -rf ") + dir);
    EXPECT_NE(std::string::npos, r.output.find("exit 0")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("2 passed, 0 failed")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("mapped pid 1 ")) << "cuda_ipc carried nothing:\n" << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("cannot map")) << r.output;
}

/* Issue 47: memory with the fabric handle type alone, through UCP. Fabric VMM memory and fabric pools' memory go
 * over cuda_ipc through their fabric handles where the process has an IMEX channel (the mock's, here; the GPU host
 * has none, and its driver makes no fabric VMM memory: those cases skip, and its fabric pool's memory goes another
 * path and arrives). */
TEST_F(ucp_programs, ucp_data_check_of_fabric_memory)
{
    std::unique_ptr<imex_channel> channel;
    if (using_mock_driver()) {
        channel.reset(new imex_channel());
    }
    const char *dir = getenv(CUX_IMEX_CHANNELS_DIR_ENV);
    command_result r = ucp_check(std::string("CUX_MEMTYPE=query ") +
                                 ((dir != nullptr) ? std::string(CUX_IMEX_CHANNELS_DIR_ENV) + "=" + dir : ""),
                                 "--only 17,18,19 8 65539 1048576");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
    if (using_mock_driver()) {
        EXPECT_NE(std::string::npos, r.output.find((cux_device_count() > 1) ? "3 passed" : "2 passed")) << r.output;
    }
}

/* Issue 46: NIXL writes a KV cache as many puts of GPU memory and then flushes the endpoint (peer error handling,
 * tcp for active messages), and closes an endpoint whose peer failed from its error callback. With the peer killed
 * while the copies are still queued on the mock's GPU, the flush ends, with or without an error, in bounded time:
 * a serving system cannot wait on a dead decode peer. On UCX 1.22 it did not end before the interface declared
 * receive events (UCP then stopped progressing it with the endpoint's last lanes); UCX 1.13 fails the endpoint
 * another way and ended it either way. */
TEST_F(ucp_programs, a_flush_after_puts_to_a_killed_peer_ends)
{
    command_result r = run_command(m_env + "CUX_MEMTYPE=query MOCK_CUDA_EVENT_DELAY=2000 "
                                   "UCX_TLS=self,tcp,cuda_copy,cuda_ipc timeout 120 " + m_run + " " +
                                   build_path("test/cux_ucp_put_kill") + " -n 256 -s 1048576 -t 60");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("flush ended")) << r.output;
}

TEST_F(ucp_programs, ucp_data_check_with_peer_error_handling)
{
    command_result r = ucp_check("CUX_MEMTYPE=query", "--kill-peer --only 0,1 8 1048576",
                                 "self,tcp,cuda_copy,cuda_ipc");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("cuda_ipc/cuda")) << "cuda_ipc not chosen:\n" << r.output;
    EXPECT_NE(std::string::npos, r.output.find("send to the killed peer ended")) << r.output;
    /* case 0 needs a second GPU: on a one-GPU host it is skipped and case 1 alone passes */
    EXPECT_NE(std::string::npos, r.output.find((cux_device_count() > 1) ? "2 passed, 0 failed" : "1 passed, 0 failed"))
        << r.output;
}

/* One UCP worker in UCS_THREAD_MODE_MULTI shared by four threads in each process, each thread with buffers and
 * tags of its own, every transfer data-checked: the module under UCP's worker lock from many threads. */
TEST_F(ucp_programs, ucp_data_check_with_threads_sharing_one_worker)
{
    command_result r = ucp_check("CUX_MEMTYPE=query", "--threads 4 --only 0,2,3 8 65539 1048576");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("not thread-safe")) << r.output;
}

/* Issue 45, item 6: a data check ends with a verdict in bounded time, whatever goes wrong. A sending thread that
 * never sends its first message (as a lost message or completion leaves it): both sides' threads give up after
 * the wait limit and the case fails, where before both waited for each other until the suite's time-out. The
 * verdict is a failure on any machine: only how soon it comes depends on the limit. */
TEST_F(ucp_programs, a_data_check_whose_message_is_lost_ends_with_a_failure_in_bounded_time)
{
    command_result r = run_command(m_env + "CUX_MEMTYPE=query CUX_TEST_DATACHECK_DROP=2 UCX_TLS=self,sm,cuda_copy "
                                   "timeout -k 5 300 " + m_run + " " + build_path("test/cux_ucp_datacheck") +
                                   " --threads 4 --only 2 --wait-limit 10 8 65539");
    EXPECT_EQ(1, r.status) << "exit 124 is the time-out's: no verdict\n" << r.output;
    EXPECT_NE(std::string::npos, r.output.find("0 passed, 1 failed")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("no completion after 10 s")) << r.output;
}

/* Every cuda_ipc key UCP packs is spoiled in both processes (test/preload/spoil_keys.c): corrupt, of an older
 * format, or no key at all. UCP 1.13 aborts an importer whose unpack fails with anything but
 * UCS_ERR_UNREACHABLE; the module answers that for every key it cannot use, so the rendezvous carries on
 * another way and the data arrives. */
TEST_F(ucp_programs, ucp_rendezvous_with_spoiled_keys_completes_another_way)
{
    for (const char *how : {"checksum", "version", "zero"}) {
        SCOPED_TRACE(how);
        command_result r = ucp_check(std::string("CUX_MEMTYPE=query TEST_SPOIL_IPC_KEYS=") + how +
                                     " LD_PRELOAD=" + build_path("test/.libs/libcux_spoil_keys.so"),
                                     "--only 0,1 65539 1048576");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find(" 0 failed")) << r.output;
        /* a process that spoils a key says so once */
        if (r.output.find("spoil_keys: spoiling") == std::string::npos) {
            std::cout << how << ": UCP packed no cuda_ipc key for these transfers here (another protocol)\n";
        } else {
            EXPECT_NE(std::string::npos, r.output.find("remote key refused")) << r.output;
        }
    }
}

#if CUX_UCX_HAS_MEM_FLAGS
/* Issue 20: UCX 1.22's InfiniBand domains register only memory flagged registrable. With cuda_ipc made to require
 * the flag too (test/preload/require_registrable.c), UCP must still register the GPU buffers it sends with it,
 * whether the flags come from the memory query or from the memory-type cache that our hooks fill. */
TEST_F(ucp_programs, ucp_registers_gpu_memory_with_a_domain_that_requires_registrable_memory)
{
    for (const char *mode : {"query", "hooks"}) {
        SCOPED_TRACE(mode);
        command_result r = ucp_check(std::string("CUX_MEMTYPE=") + mode + " LD_PRELOAD=" +
                                     build_path("test/.libs/libcux_require_registrable.so"),
                                     "--only 1 1048576");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("cuda_ipc requires registrable memory")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("require_registrable: GPU memory registered")) << r.output;
    }
}
#endif

/* bench/cux_blocks (issue 22): many blocks per transfer, put and get, in one allocation and in many, first
 * transfers to new memory, two processes one way and three all to all; every block is checked. */
TEST_F(ucp_programs, many_block_benchmark_checks_every_block)
{
    for (const char *shape : {"-n 2 -p one -k 1,100", "-n 3 -p all -k 1,20"}) {
        SCOPED_TRACE(shape);
        command_result r = run_command(m_env + "UCX_TLS=self,sm,cuda_copy,cuda_ipc timeout 300 " + m_run + " " +
                                       build_path("bench/cux_blocks") + " " + shape + " -s 16k,65539 -r 2 -f 1");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("cux_blocks: done")) << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("BAD")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("RESULT op=get layout=many size=65539")) << r.output;
    }
}

/* UCP's scatter-gather puts (UCX 1.22+, issue 34): each target's blocks as one ucp_put_nbx of the SGL datatype.
 * UCP hands the list to cuda_ipc's scatter-gather put (its protocol table says so), and every block arrives. */
TEST_F(ucp_programs, many_block_benchmark_posts_scatter_gather_lists_that_cuda_ipc_takes)
{
#if !CUX_UCX_HAS_PUT_SGL
    GTEST_SKIP() << "UCP's scatter-gather datatype arrives in UCX 1.22";
#else
    for (const char *shape : {"-n 2 -p one -k 1,100", "-n 3 -p all -k 1,20"}) {
        SCOPED_TRACE(shape);
        command_result r = run_command(m_env + "UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_PROTO_INFO=y timeout 300 " +
                                       m_run + " " + build_path("bench/cux_blocks") + " -G -o put " + shape +
                                       " -s 16k,65539 -r 2 -f 1");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("cux_blocks: done")) << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("BAD")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("RESULT op=put-sgl layout=many size=65539")) << r.output;
        std::istringstream lines(r.output);
        std::string line;
        bool taken = false;
        while (std::getline(lines, line)) {
            taken |= (line.find("| sgl ") != std::string::npos) && (line.find("cuda_ipc/cuda") != std::string::npos);
        }
        EXPECT_TRUE(taken) << "UCP chose cuda_ipc's scatter-gather put:\n" << r.output;
    }
#endif
}

/* UCP's worker flush can return while operations still wait in a transport's pending queue (issue 31: UCP 1.13 to
 * 1.22 over shared memory, when a receiver's FIFO is full of other ranks' traffic; on a busy machine one run in
 * four). The preload makes every flush with an operation outstanding return at once (test/preload/early_flush.c):
 * a benchmark that trusts the flush alone reads stale blocks, or has a late put land in freed memory, on every run.
 * cux_blocks counts every request to its completion, and says how often the flush came first. */
TEST_F(ucp_programs, many_block_benchmark_waits_for_every_request_when_the_flush_comes_first)
{
    for (const char *shape : {"-n 2 -p one -k 1,100", "-n 3 -p all -k 1,20"}) {
        SCOPED_TRACE(shape);
        command_result r = run_command(m_env + "UCX_TLS=self,sm,cuda_copy,cuda_ipc LD_PRELOAD=" +
                                       build_path("test/.libs/libcux_early_flush.so") + " timeout 300 " + m_run +
                                       " " + build_path("bench/cux_blocks") + " " + shape +
                                       " -s 16k,65539 -r 2 -f 1");
        EXPECT_EQ(0, r.status) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("early_flush: a worker flush returns at once")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("UCP's flush came first")) << r.output;
        EXPECT_NE(std::string::npos, r.output.find("cux_blocks: done")) << r.output;
        EXPECT_EQ(std::string::npos, r.output.find("BAD")) << r.output;
    }
}

/* Every data-checking program in turn beside a busy loop per core (test/stress-datachecks.sh; issue 31): the
 * first CUX_TEST_STRESS_RUNS cases of its rotation (default 16: each program, both operations, one to four
 * ranks). The 1,000-run figure is in bench/results/. */
TEST_F(ucp_programs, data_checks_hold_beside_a_cpu_hog)
{
    const char *runs     = getenv("CUX_TEST_STRESS_RUNS");
    command_result r = run_command("CUX_TEST_STRESS_LOG=" + build_path("test/stress-datachecks.log") + " " +
                                   source_path("test/stress-datachecks.sh") + " " + build_path(".") + " " +
                                   (runs ? runs : "16"));
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(", 0 failed,")) << r.output;
}

/* bench/cux_blocks -F (issue 22, item 5) runs its steps through; the memory figures mean something only on a GPU
 * host, where every process shares the device. */
TEST_F(ucp_programs, freed_memory_check_runs_its_steps)
{
    command_result r = run_command(m_env + "UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_CUDA_IPC_CACHE_MAX_IDLE=0.2s "
                                   "timeout 120 " + m_run + " " + build_path("bench/cux_blocks") + " -F 4m -T 1");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("FREED size_mib=4 ")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("cux_blocks: done")) << r.output;
}

/* The check itself can fail: with UCP's cache on and no hooks, GPU buffers pass for host memory. */
TEST_F(ucp_programs, ucp_data_check_sees_gpu_memory_taken_for_host_memory)
{
    command_result r = ucp_check("CUX_MEMTYPE=query UCX_MEMTYPE_CACHE=y");
    if ((r.status == 0) && (r.output.find("cache says host for cuMemAlloc memory") == std::string::npos)) {
        /* a UCP that asks the memory domains about what its cache has not seen (Debian 13's 1.18) */
        GTEST_SKIP() << "this UCP did not take GPU memory for host memory: nothing for the check to catch";
    }
    EXPECT_NE(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("cache says host for cuMemAlloc memory")) << r.output;
}

/* bench/cux_opcost measures per-operation costs on the GPU host (issue #5); here it only has to run. */
TEST(opcost, measures_every_building_block)
{
    CUX_SKIP_WITHOUT_GPU();
    command_result r = run_command("UCX_MODULES=^cuda " + build_path("bench/cux_opcost") + " 20");
    ASSERT_EQ(0, r.status) << r.output;
    for (const char *line : {"cux_ptr_query", "cuIpcGetMemHandle", "cuda_copy put_short 8 B",
                             "cuda_ipc mem_reg + mem_dereg", "cuda_ipc rkey_unpack",
                             "cuda_ipc 8 B put, first of a pool allocation",
                             "cuda_ipc 16 KB put, after the exporter's own copy"}) {
        EXPECT_NE(std::string::npos, r.output.find(line)) << line << " missing in:\n" << r.output;
    }
}

/* The benchmark harness's protocol summary (bench/perftest_compare.py --summarize, from a trimmed sample of its
 * full tables): for each case, the row covering the case's message size in each table of the case's operation,
 * on both processes; loopback tables and other operations left out, device names dropped, and whether the
 * modules chose differently. */
TEST(perftest_harness, protocol_summary_shows_the_rows_of_each_case_size)
{
    const std::string out = build_path("test/protocol-summary");
    command_result r      = run_command("rm -rf " + out + " && python3 " + source_path("bench/perftest_compare.py") +
                                        " --prefix unused --module reference=- --module ours=- --cases v122"
                                        " --summarize " + source_path("test/data/protocols-full-sample.md") +
                                        " --out " + out + " && cat " + out + "/protocols.md");
    ASSERT_EQ(0, r.status) << r.output;
    for (const char *expected :
         {"| reference | client | tagged message by ucp_tag_send* from host memory | 5029..inf | (?) rendezvous "
          "zero-copy read from remote | cma/memory |",
          "| ours | client | tagged message by ucp_tag_send* from host memory | 4194305..inf | (?) rendezvous "
          "pipeline cuda_copy, flushed write to remote, frag cuda | cuda_ipc/cuda |",
          "| ours | server | rendezvous data fetch(multi) into cuda from host | 4194305..inf |",
          "The modules differ."}) {
        EXPECT_NE(std::string::npos, r.output.find(expected)) << expected << " missing in:\n" << r.output;
    }
    const std::string cases = r.output.substr(std::min(r.output.find("\n## "), r.output.size())); /* not the intro */
    for (const char *absent : {"self/memory", "software emulation", "eager short", "cuda/GPU1", "00:07.0"}) {
        EXPECT_EQ(std::string::npos, cases.find(absent)) << absent << " should not be in:\n" << cases;
    }
}
