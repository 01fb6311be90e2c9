/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test entry point and shared helpers. With --probe-driver the binary only loads the driver and prints what
 * happened: the loader tests run it as a child process so that each case sees a fresh, once-only load.
 */
#include "cux_test.h"

extern "C" {
#include "driver/cux_nvml.h"
}

#include <dirent.h>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <sys/wait.h>

namespace cux_test {

command_result run_command(const std::string &cmd)
{
    command_result result{-1, ""};
    char buf[4096];
    FILE *f = popen((cmd + " 2>&1").c_str(), "r");

    if (f == nullptr) {
        return result;
    }
    while (fgets(buf, sizeof(buf), f) != nullptr) {
        result.output += buf;
    }
    int st = pclose(f);
    result.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return result;
}

command_result run_test_in_fresh_process(const std::string &env, const std::string &test)
{
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (len <= 0) {
        return command_result{-1, "cannot read /proc/self/exe"};
    }
    self[len] = '\0';
    return run_command(env + " " + self + " --gtest_also_run_disabled_tests --gtest_filter=" + test);
}

bool passed(const command_result &r)
{
    return (r.status == 0) && (r.output.find("[  PASSED  ] 1 test") != std::string::npos);
}

bool using_mock_driver()
{
    const char *path = getenv(CUX_DRIVER_PATH_ENV);
    return (path != nullptr) && (strstr(path, "mockcuda") != nullptr);
}

long mock_live(const char *what)
{
    if (!using_mock_driver()) {
        return -1;
    }
    /* the loader opened it already: the same handle, without loading it again */
    void *handle = dlopen(getenv(CUX_DRIVER_PATH_ENV), RTLD_NOW | RTLD_NOLOAD);
    auto live    = (handle != nullptr) ? (long (*)(const char*))dlsym(handle, "mock_cuda_live") : nullptr;
    long n       = (live != nullptr) ? live(what) : -1;
    if (handle != nullptr) {
        dlclose(handle);
    }
    return n;
}

long open_descriptors()
{
    long n   = 0;
    DIR *dir = opendir("/proc/self/fd");

    while ((dir != nullptr) && (readdir(dir) != nullptr)) {
        ++n;
    }
    if (dir != nullptr) {
        closedir(dir);
    }
    return n;
}

std::string build_path(const std::string &rel)
{
    return std::string(CUX_TEST_BUILDDIR) + "/" + rel;
}

std::string source_path(const std::string &rel)
{
    return std::string(CUX_TEST_SRCDIR) + "/" + rel;
}

const char *buf_kind_name(buf_kind kind)
{
    switch (kind) {
    case buf_kind::host:        return "host";
    case buf_kind::pinned_host: return "pinned";
    case buf_kind::cuda0:       return "cuda0";
    case buf_kind::cuda1:       return "cuda1";
    case buf_kind::managed:     return "managed";
    }
    return "?";
}

/* Runs a driver call in a device's primary context. */
template <typename F> static void in_device_ctx(int device, F f)
{
    CUcontext ctx, prev;

    if (cux_device_ctx(device, &ctx) != UCS_OK) {
        throw std::runtime_error("no context for device " + std::to_string(device));
    }
    cux_drv.cuCtxPushCurrent(ctx);
    CUresult res = f();
    cux_drv.cuCtxPopCurrent(&prev);
    if (res != CUDA_SUCCESS) {
        throw std::runtime_error("driver call failed: " + std::to_string(res));
    }
}

buffer::buffer(buf_kind kind, size_t size) : m_kind(kind), m_size(size), m_ptr(nullptr)
{
    CUdeviceptr dptr = 0;

    switch (kind) {
    case buf_kind::host:
        m_ptr = malloc(size);
        break;
    case buf_kind::pinned_host:
        m_ptr = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
        in_device_ctx(0, [&] { return cux_drv.cuMemHostRegister(m_ptr, size, CU_MEMHOSTREGISTER_PORTABLE); });
        break;
    case buf_kind::cuda0:
    case buf_kind::cuda1:
        in_device_ctx(kind == buf_kind::cuda0 ? 0 : 1, [&] { return cux_drv.cuMemAlloc(&dptr, size); });
        m_ptr = (void*)dptr;
        break;
    case buf_kind::managed:
        in_device_ctx(0, [&] { return cux_drv.cuMemAllocManaged(&dptr, size, CU_MEM_ATTACH_GLOBAL); });
        m_ptr = (void*)dptr;
        break;
    }
    if (m_ptr == nullptr) {
        throw std::runtime_error("allocation failed");
    }
}

buffer::~buffer()
{
    switch (m_kind) {
    case buf_kind::host:
        free(m_ptr);
        break;
    case buf_kind::pinned_host:
        in_device_ctx(0, [&] { return cux_drv.cuMemHostUnregister(m_ptr); });
        free(m_ptr);
        break;
    default:
        in_device_ctx(m_kind == buf_kind::cuda1 ? 1 : 0,
                      [&] { return cux_drv.cuMemFree((CUdeviceptr)m_ptr); });
        break;
    }
}

void buffer::write(const std::vector<uint8_t> &data)
{
    raw_copy(m_ptr, data.data(), std::min(data.size(), m_size));
}

std::vector<uint8_t> buffer::read() const
{
    std::vector<uint8_t> data(m_size);
    raw_copy(data.data(), m_ptr, m_size);
    return data;
}

std::vector<uint8_t> random_bytes(size_t size)
{
    static std::random_device rd;
    std::mt19937_64 gen(((uint64_t)rd() << 32) ^ rd());
    std::vector<uint8_t> data(size);
    size_t i = 0;

    for (; i + 8 <= size; i += 8) {
        uint64_t v = gen();
        memcpy(&data[i], &v, 8);
    }
    for (; i < size; ++i) {
        data[i] = (uint8_t)gen();
    }
    return data;
}

/* A stream of each thread's own for raw_copy, destroyed when the thread ends. */
struct raw_copy_stream {
    CUstream stream = nullptr;
    ~raw_copy_stream()
    {
        if (stream != nullptr) {
            cux_drv.cuStreamDestroy(stream);
        }
    }
};

void raw_copy(void *dst, const void *src, size_t size)
{
    static thread_local raw_copy_stream own;
    CUstream &stream = own.stream;

    in_device_ctx(0, [&] {
        CUresult res = CUDA_SUCCESS;
        if (stream == nullptr) {
            res = cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
        }
        if (res == CUDA_SUCCESS) {
            res = cux_drv.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, size, stream);
        }
        return (res == CUDA_SUCCESS) ? cux_drv.cuStreamSynchronize(stream) : res;
    });
}

std::string launcher_env()
{
    return "CUX_MODULE=" + build_path(".libs/libuct_cuda.so.0") +
           " CUX_PERFTEST_LIB=" + build_path(".libs/libcux_perftest.so") +
           " CUX_MEMTYPE_LIB=" + build_path(".libs/libcux_memtype.so") +
           " CUX_CHECK_PROG=" + build_path("ucx-cuda-check") + " ";
}

std::string fake_ucx_libdir(const std::string &name)
{
    const std::string dir = build_path("test/fake-ucx-lib-" + name);
    command_result where  = run_command("ldd " + build_path("test/version_probe_uct") +
                                        " | sed -n 's/.*libucs.so.0 => \\(.*\\)\\/libucs.so.0 .*/\\1/p'");
    std::string libdir = where.output.substr(0, where.output.find('\n'));
    if ((where.status != 0) || libdir.empty() ||
        (run_command("rm -rf " + dir + " && mkdir -p " + dir + " && for l in libucs libuct libucm; do ln -s " +
                     libdir + "/$l.so.0 " + dir + "/; done && cp " + build_path("test/.libs/libfakeucp.so") + " " +
                     dir + "/libucp.so.0").status != 0)) {
        return "";
    }
    return dir;
}

counting_completion::counting_completion(int count) : done(0), status(UCS_OK)
{
    comp.func   = callback;
    comp.count  = count;
    comp.status = UCS_OK;
}

void counting_completion::callback(uct_completion_t *self)
{
    counting_completion *c = ucs_container_of(self, counting_completion, comp);
    c->done++;
    c->status = self->status;
}

std::vector<uint8_t> pattern(uint64_t seed, size_t size)
{
    std::vector<uint8_t> data(size);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

    for (size_t i = 0; i < size; i += 8) {
        /* splitmix64 */
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(&data[i], &z, std::min<size_t>(8, size - i));
    }
    return data;
}

void transport_test::SetUp()
{
    uct_component_h *components;
    unsigned num_components;

    CUX_SKIP_WITHOUT_GPU();

    ASSERT_EQ(UCS_OK, uct_query_components(&components, &num_components));
    for (unsigned i = 0; i < num_components; ++i) {
        uct_component_attr_t attr = {};
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        ASSERT_EQ(UCS_OK, uct_component_query(components[i], &attr));
        if (!strcmp(attr.name, m_component_name)) {
            m_component = components[i];
        }
    }
    uct_release_component_list(components);
    ASSERT_NE(nullptr, m_component) << "component " << m_component_name << " is not registered";

    open_md();
    ASSERT_EQ(UCS_OK, ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &m_async));
    ASSERT_EQ(UCS_OK, uct_worker_create(m_async, UCS_THREAD_MODE_SINGLE, &m_worker));
    open_iface();
}

ucs_status_t md_alloc(uct_md_h md, ucs_memory_type_t mem_type, size_t size, uct_allocated_memory_t *mem)
{
    uct_alloc_method_t method     = UCT_ALLOC_METHOD_MD;
    uct_mem_alloc_params_t params = {};

    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                        UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_NAME;
    params.flags      = UCT_MD_MEM_ACCESS_ALL;
    params.mem_type   = mem_type;
    params.mds.mds    = &md;
    params.mds.count  = 1;
    params.name       = "cux test";
    return uct_mem_alloc(size, &method, 1, &params, mem);
}

ucs_status_t config_modify(void *config, const std::string &tl_name, const std::string &name,
                           const std::string &value)
{
    ucs_status_t status = uct_config_modify(config, name.c_str(), value.c_str());
    std::string full;

    if (status != UCS_ERR_NO_ELEM) {
        return status;
    }
    for (char c : tl_name) {
        full += (char)toupper((unsigned char)c);
    }
    full += "_" + name;
    return uct_config_modify(config, full.c_str(), value.c_str());
}

void transport_test::open_md(const std::vector<std::pair<std::string, std::string>> &config)
{
    uct_md_config_t *md_config;

    close_iface();
    if (m_md != nullptr) {
        uct_md_close(m_md);
        m_md = nullptr;
    }
    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &md_config));
    for (const auto &kv : config) {
        ASSERT_EQ(UCS_OK, config_modify(md_config, m_tl_name, kv.first, kv.second)) << kv.first;
    }
    ucs_status_t status = uct_md_open(m_component, m_component_name, md_config, &m_md);
    uct_config_release(md_config);
    ASSERT_EQ(UCS_OK, status);
    if (m_worker != nullptr) {
        open_iface();
    }
}

ucs_status_t transport_test::ep_error(void *arg, uct_ep_h ep, ucs_status_t status)
{
    transport_test *self = static_cast<transport_test*>(arg);

    self->m_ep_errors.push_back({ep, status});
    return UCS_OK;
}

ucs_status_t transport_test::open_configured_iface(const std::vector<std::pair<std::string, std::string>> &config,
                                                   uct_iface_h *iface_p, std::string *what)
{
    uct_iface_config_t *iface_config;
    uct_iface_params_t params = {};
    ucs_status_t status       = uct_md_iface_config_read(m_md, m_tl_name, NULL, NULL, &iface_config);

    *what = "reading the configuration";
    if (status != UCS_OK) {
        return status;
    }
    for (const auto &kv : config) {
        if (status == UCS_OK) {
            *what  = "setting " + kv.first + "=" + kv.second;
            status = config_modify(iface_config, m_tl_name, kv.first, kv.second);
        }
    }
    if (status == UCS_OK) {
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                                      UCT_IFACE_PARAM_FIELD_ERR_HANDLER | UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG;
        params.err_handler          = ep_error;
        params.err_handler_arg      = this;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = m_tl_name;
        params.mode.device.dev_name = "cuda";
        *what                       = "opening the interface";
        status = uct_iface_open(m_md, m_worker, &params, iface_config, iface_p);
    }
    uct_config_release(iface_config);
    return status;
}

ucs_status_t transport_test::iface_open_status(const std::vector<std::pair<std::string, std::string>> &config)
{
    std::string what;
    uct_iface_h iface;
    ucs_status_t status = open_configured_iface(config, &iface, &what);

    if (status == UCS_OK) {
        uct_iface_close(iface);
    }
    return status;
}

void transport_test::open_iface(const std::vector<std::pair<std::string, std::string>> &config)
{
    uct_ep_params_t ep_params = {};
    std::vector<char> iface_addr;
    uct_iface_attr_t attr;
    std::string what;

    close_iface();
    ASSERT_EQ(UCS_OK, open_configured_iface(config, &m_iface, &what)) << what;
    uct_iface_progress_enable(m_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    if (!m_self_ep) {
        return;
    }

    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    iface_addr.resize(attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_address(m_iface, (uct_iface_addr_t*)iface_addr.data()));
    ASSERT_TRUE(uct_iface_is_reachable(m_iface, NULL, (uct_iface_addr_t*)iface_addr.data()));

    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                           UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = m_iface;
    ep_params.dev_addr   = NULL;
    ep_params.iface_addr = (uct_iface_addr_t*)iface_addr.data();
    ASSERT_EQ(UCS_OK, uct_ep_create(&ep_params, &m_ep));
}

void transport_test::close_iface()
{
    if (m_ep != nullptr) {
        uct_ep_destroy(m_ep);
        m_ep = nullptr;
    }
    if (m_iface != nullptr) {
        uct_iface_close(m_iface);
        m_iface = nullptr;
    }
}

void transport_test::TearDown()
{
    close_iface();
    if (m_worker != nullptr) {
        uct_worker_destroy(m_worker);
    }
    if (m_async != nullptr) {
        ucs_async_context_destroy(m_async);
    }
    if (m_md != nullptr) {
        uct_md_close(m_md);
    }
}

ucs_status_t transport_test::wait(uct_completion_t *comp, double timeout_s)
{
    counting_completion *c = ucs_container_of(comp, counting_completion, comp);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);

    while (!c->done) {
        uct_worker_progress(m_worker);
        if (std::chrono::steady_clock::now() > deadline) {
            return UCS_ERR_TIMED_OUT;
        }
    }
    return c->status;
}

} // namespace cux_test

int ipc_peer_main(int fd);
int ucp_device_target_main(int fd); /* test_ipc_device_api.cc */

/* test_parity.cc: peer access from GPU0 to GPU1 after a fresh process measured that link. */
int probe_peer_access();

static int probe_driver()
{
    ucs_status_t status = cux_devices_init();

    printf("status=%s devices=%d version=%d error=%s\n", ucs_status_string(status), cux_device_count(),
           cux_driver_version(), cux_driver_error());
    return 0;
}

int main(int argc, char **argv)
{
    /* The mock driver's GPUs are known to the mock NVML alone (in no fabric unless MOCK_NVML_FABRIC says so); its
     * peers inherit it. */
    if (cux_test::using_mock_driver() && (getenv(CUX_NVML_PATH_ENV) == nullptr)) {
        setenv(CUX_NVML_PATH_ENV, cux_test::build_path("test/.libs/libmocknvml.so").c_str(), 1);
    }
    if ((argc > 1) && !strcmp(argv[1], "--probe-driver")) {
        return probe_driver();
    }
    if ((argc > 1) && !strcmp(argv[1], "--probe-peer-access")) {
        return probe_peer_access();
    }
    if ((argc > 2) && !strcmp(argv[1], "--ipc-peer")) {
        return ipc_peer_main(atoi(argv[2]));
    }
    if ((argc > 2) && !strcmp(argv[1], "--ucp-device-target")) {
        return ucp_device_target_main(atoi(argv[2]));
    }

    ::testing::InitGoogleTest(&argc, argv);
    printf("cuda driver for this run: %s (%s)\n",
           cux_test::using_mock_driver() ? "test mock" : "system libcuda.so.1",
           (cux_devices_init() == UCS_OK) ? (std::to_string(cux_device_count()) + " devices").c_str() :
                                            cux_driver_error());
    return RUN_ALL_TESTS();
}
