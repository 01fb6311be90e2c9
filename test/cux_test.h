/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared helpers of the gtest suites: paths set by the build, the plugin's internals the tests look at,
 * and a UCT fixture that opens the cuda_copy transport through the real libuct.
 */
#ifndef CUX_TEST_H_
#define CUX_TEST_H_

#include <gtest/gtest.h>
#include <string>
#include <vector>

extern "C" {
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include "driver/cux_driver.h"
#include "compat/cux_ucx_compat.h" /* what the release does: CUX_UCX_* feature macros */
#include "cux_introspection.h"      /* counts of internal objects, for leak checks */

/* Internals of the module under test (exported from libuct_cuda). */
ucs_status_t cux_devices_init(void);
int cux_device_count(void);
ucs_status_t cux_device_ctx(int ordinal, CUcontext *ctx_p);
unsigned cux_iface_num_events(uct_iface_h tl_iface);
unsigned cux_iface_num_streams(uct_iface_h tl_iface);
void cux_ipc_cache_counters(unsigned long *num_regions, size_t *total_size, unsigned long *hits,
                            unsigned long *misses, unsigned long *stale, unsigned long *evictions);
}

namespace cux_test {

/* Output and exit status of a shell command. */
struct command_result {
    int         status;
    std::string output;
};

command_result run_command(const std::string &cmd);

/* One DISABLED_ test of this program, by its full name, in a fresh process with env (VAR=VALUE ...) set before
 * anything loads: for what a process does once (retaining a context, loading a kernel). Its output and status;
 * passed() says whether it ran and passed. */
command_result run_test_in_fresh_process(const std::string &env, const std::string &test);
bool passed(const command_result &r);

/* Which driver this run uses: "mock" when CUX_DRIVER_PATH names the test mock. */
bool using_mock_driver();

/* Live objects of the mock driver ("streams", "events", "allocations", "mappings"); -1 with another driver. */
long mock_live(const char *what);

/* File descriptors this process holds open. */
long open_descriptors();

/* A directory (test/fake-ucx-lib-NAME) with links to this UCX's libucs, libuct and libucm and a libucp of
 * another version (test/fake_ucp.c: FAKE_UCX_VERSION, default 1.99): with LD_LIBRARY_PATH on it, a process runs
 * "another UCX". Empty on failure. */
std::string fake_ucx_libdir(const std::string &name);

/* Variables that point the build tree's ucx-cuda-run at the build tree's module, libraries and check program
 * (its installed paths otherwise), ending in a space. */
std::string launcher_env();

/* Path of a file in the build or source tree. */
std::string build_path(const std::string &rel);
std::string source_path(const std::string &rel);

/* Skip the current test when the installed UCX has no ucx_info or ucx_perftest (package ucx-utils): configure
 * then took the build defines from --with-ucx-build-config. */
#define CUX_SKIP_WITHOUT_UCX_TOOLS() \
    do { \
        if (CUX_TEST_UCX_INFO[0] == '\0') { \
            GTEST_SKIP() << "the installed UCX has no ucx_info or ucx_perftest (package ucx-utils)"; \
        } \
    } while (0)

/* Skip the current test, saying why, when no CUDA device is visible; fail instead where devices are required
 * (CUX_TEST_REQUIRE_GPU=1: the mock runs and the GPU host), so a broken driver set-up cannot pass as skips. */
#define CUX_SKIP_WITHOUT_GPU() \
    do { \
        if (cux_device_count() == 0) { \
            if (getenv("CUX_TEST_REQUIRE_GPU") != nullptr) { \
                FAIL() << "CUX_TEST_REQUIRE_GPU is set but there is no CUDA device: " << cux_driver_error(); \
            } \
            GTEST_SKIP() << "no CUDA device: " << cux_driver_error(); \
        } \
    } while (0)

/* The kinds of buffer the copy tests move data between. */
enum class buf_kind { host, pinned_host, cuda0, cuda1, managed };

const char *buf_kind_name(buf_kind kind);

/* A buffer of some kind, freed at destruction. */
class buffer {
public:
    buffer(buf_kind kind, size_t size);
    ~buffer();
    buffer(const buffer &) = delete;
    buffer &operator=(const buffer &) = delete;

    void *ptr() const { return m_ptr; }
    size_t size() const { return m_size; }
    buf_kind kind() const { return m_kind; }

    /* Host-side access through the driver, whatever the kind. */
    void write(const std::vector<uint8_t> &data);
    std::vector<uint8_t> read() const;

private:
    buf_kind m_kind;
    size_t   m_size;
    void     *m_ptr;
};

/* uct_config_modify by the variable's short name (1.13, 1.16) or with its table prefix (1.22: "CUDA_COPY_BW"). */
ucs_status_t config_modify(void *config, const std::string &tl_name, const std::string &name,
                           const std::string &value);

/* Memory of a type from the memory domain itself (uct_mem_alloc with the MD method). */
ucs_status_t md_alloc(uct_md_h md, ucs_memory_type_t mem_type, size_t size, uct_allocated_memory_t *mem);

/* Random bytes, a new seed every call. */
std::vector<uint8_t> random_bytes(size_t size);

/* Raw synchronous copy through the driver (test-side helper, not the transport). */
void raw_copy(void *dst, const void *src, size_t size);

/* A transport opened through libuct: component, md, worker, iface, and (for cuda_copy) an endpoint to
 * itself. */
class transport_test : public ::testing::Test {
protected:
    transport_test(const char *component, const char *tl, bool self_ep) :
        m_component_name(component), m_tl_name(tl), m_self_ep(self_ep)
    {
    }

    void SetUp() override;
    void TearDown() override;

    /* (Re-)open the memory domain or the interface with extra configuration (name, value) pairs. */
    void open_md(const std::vector<std::pair<std::string, std::string>> &config = {});
    void open_iface(const std::vector<std::pair<std::string, std::string>> &config = {});
    /* What uct_iface_open answers for config, the interface closed again; the fixture's stays as it was. */
    ucs_status_t iface_open_status(const std::vector<std::pair<std::string, std::string>> &config);
    /* An interface of the fixture's transport with config set; on failure, what failed. */
    ucs_status_t open_configured_iface(const std::vector<std::pair<std::string, std::string>> &config,
                                       uct_iface_h *iface_p, std::string *what);
    void close_iface();

    /* Progress until the completion is done or the timeout passes; returns its status. */
    ucs_status_t wait(uct_completion_t *comp, double timeout_s = 30.0);

    /* The interface's error handler: endpoint failures reported by the transport, in order. */
    static ucs_status_t ep_error(void *arg, uct_ep_h ep, ucs_status_t status);
    std::vector<std::pair<uct_ep_h, ucs_status_t>> m_ep_errors;

    const char       *m_component_name;
    const char       *m_tl_name;
    bool             m_self_ep;
    uct_component_h  m_component = nullptr;
    uct_md_h         m_md        = nullptr;
    ucs_async_context_t *m_async = nullptr;
    uct_worker_h     m_worker    = nullptr;
    uct_iface_h      m_iface     = nullptr;
    uct_ep_h         m_ep        = nullptr;
};

class copy_transport : public transport_test {
protected:
    copy_transport() : transport_test("cuda_cpy", "cuda_copy", true) {}
};

/* Seeded pattern, the same in every process. */
std::vector<uint8_t> pattern(uint64_t seed, size_t size);

/* A completion that counts its calls. */
struct counting_completion {
    uct_completion_t comp;
    int              done;
    ucs_status_t     status;

    explicit counting_completion(int count = 1);
    static void callback(uct_completion_t *self);
};

} // namespace cux_test

#endif
