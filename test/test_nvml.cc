/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVML's word on a GPU's NVLink fabric (src/driver/cux_nvml.c) against the mock NVML (test/mock/mock_nvml.c),
 * which answers as NVML's documentation says: no NVML, a GPU in no fabric, a registration pending, failed or
 * complete. NVML is opened once per process, so each case asks in a child process of its own.
 */
#include "cux_test.h"

extern "C" {
#include "driver/cux_nvml.h"
}

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <cstring>

using namespace cux_test;

namespace {

struct asked {
    cux_fabric_info_t info;
    char              uuid[64]; /* what the mock was asked for */
};

/* The fabric of a GPU with this UUID, asked in a child with these variables set. */
asked fabric_in_child(const CUuuid &gpu, const std::vector<std::pair<std::string, std::string>> &env)
{
    asked out{};
    int fds[2];

    if (pipe(fds) != 0) {
        ADD_FAILURE() << "pipe: " << strerror(errno);
        return out;
    }
    pid_t pid = fork();
    if (pid == 0) {
        asked mine{};
        close(fds[0]);
        for (const auto &e : env) {
            setenv(e.first.c_str(), e.second.c_str(), 1);
        }
        cux_nvml_fabric_info(&gpu, &mine.info);
        void *mock = dlopen(getenv(CUX_NVML_PATH_ENV) ? getenv(CUX_NVML_PATH_ENV) : "", RTLD_NOW | RTLD_NOLOAD);
        auto asked_uuid = mock ? (const char *(*)())dlsym(mock, "mock_nvml_asked_uuid") : nullptr;
        if (asked_uuid != nullptr) {
            snprintf(mine.uuid, sizeof(mine.uuid), "%s", asked_uuid());
        }
        _exit((write(fds[1], &mine, sizeof(mine)) == (ssize_t)sizeof(mine)) ? 0 : 1);
    }
    close(fds[1]);
    EXPECT_EQ((ssize_t)sizeof(out), read(fds[0], &out, sizeof(out)));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0));
    return out;
}

CUuuid some_gpu()
{
    CUuuid gpu;
    for (int i = 0; i < 16; ++i) {
        gpu.bytes[i] = (char)(0xa0 + i);
    }
    return gpu;
}

std::string mock_nvml() { return build_path("test/.libs/libmocknvml.so"); }

const char *cluster_hex = "00112233445566778899aabbccddeeff";

} // namespace

TEST(nvml, without_nvml_a_gpu_is_in_no_fabric_and_the_reason_names_the_library)
{
    asked a = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, "/nonexistent/libnvidia-ml.so.1"}});
    EXPECT_EQ(CUX_FABRIC_NONE, a.info.state);
    EXPECT_NE(nullptr, strstr(a.info.why, "/nonexistent/libnvidia-ml.so.1 does not load")) << a.info.why;
}

TEST(nvml, a_gpu_nvml_says_is_in_no_fabric_is_in_none)
{
    asked a = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, mock_nvml()}});
    EXPECT_EQ(CUX_FABRIC_NONE, a.info.state) << a.info.why;
    EXPECT_NE(nullptr, strstr(a.info.why, "not supported")) << a.info.why;
    /* NVML was asked for the GPU as nvidia-smi -L names it (the mock answers only that form) */
    EXPECT_STREQ("GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf", a.uuid);
}

TEST(nvml, a_complete_registration_gives_the_cluster_and_clique)
{
    asked a = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, mock_nvml()},
                                           {"MOCK_NVML_FABRIC", std::string("completed:7:") + cluster_hex}});
    ASSERT_EQ(CUX_FABRIC_COMPLETE, a.info.state) << a.info.why;
    EXPECT_EQ(7u, a.info.clique);
    EXPECT_EQ(0x00, a.info.cluster[0]);
    EXPECT_EQ(0x77, a.info.cluster[7]);
    EXPECT_EQ(0xff, a.info.cluster[15]);
    EXPECT_STREQ("complete", cux_fabric_state_name(a.info.state));
}

TEST(nvml, a_pending_or_failed_registration_is_no_fabric_to_use)
{
    for (const char *state : {"not-started", "in-progress"}) {
        asked a = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, mock_nvml()}, {"MOCK_NVML_FABRIC", state}});
        EXPECT_EQ(CUX_FABRIC_PENDING, a.info.state) << state << ": " << a.info.why;
    }
    asked f = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, mock_nvml()}, {"MOCK_NVML_FABRIC", "failed:999"}});
    EXPECT_EQ(CUX_FABRIC_FAILED, f.info.state) << f.info.why;
    EXPECT_NE(nullptr, strstr(f.info.why, "error 999")) << f.info.why;
    for (uint8_t b : f.info.cluster) {
        EXPECT_EQ(0, b) << "a cluster is given only for a complete registration";
    }
}

TEST(nvml, nvml_failing_to_start_is_said)
{
    asked a = fabric_in_child(some_gpu(), {{CUX_NVML_PATH_ENV, mock_nvml()}, {"MOCK_NVML_INIT_ERROR", "9"},
                                           {"MOCK_NVML_FABRIC", std::string("completed:7:") + cluster_hex}});
    EXPECT_EQ(CUX_FABRIC_NONE, a.info.state);
    EXPECT_NE(nullptr, strstr(a.info.why, "nvmlInit_v2 failed with error 9")) << a.info.why;
}
