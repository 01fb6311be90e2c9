/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's host side of UCX's device API (issue 33): what UCP's ucp_device_remote_mem_list_create asks of the
 * transport. The interface flags device endpoints; an endpoint's device endpoint is the transport's id in GPU
 * memory, one per GPU; a remote memory element is the offset from the peer's address to its mapping here, the
 * key proven first and the mapping held until the key is released. The GPU side (kernels putting through them)
 * runs on the GPU host: gpu-host/run device-api.
 */
#include "ipc_transport.h"

#include <cerrno>
#include <chrono>
#include <vector>
#include <sys/socket.h>
#include <sys/wait.h>

extern "C" {
#include "ipc/cux_ipc_device.h"
#include "ipc/import/cux_ipc_import.h"
#include "driver/cux_device.h"
#if CUX_UCX_HAS_DEVICE_API
#  include <uct/api/device/uct_device_types.h>
#endif
}
#if CUX_UCX_VERNUM >= 122
#  include <ucp/api/ucp.h>
#  include <ucp/api/device/ucp_host.h>
#  include <ucp/api/device/ucp_device_types.h>
#endif

using namespace cux_test;

namespace {

/* The calling thread's current context for the scope: the device API works on the GPU of that context. */
class current_device {
public:
    explicit current_device(int device) { m_status = cux_device_ctx_enter(device, &m_guard); }
    ~current_device()
    {
        if (m_status == UCS_OK) {
            cux_ctx_leave(&m_guard);
        }
    }
    ucs_status_t status() const { return m_status; }

private:
    cux_ctx_guard_t m_guard = {};
    ucs_status_t    m_status;
};

/* Peer memory this process holds mapped: the mock counts legacy imports as mappings and VMM maps as allocations;
 * the driver counts nothing (0). */
long mappings_held()
{
    return (mock_live("mappings") < 0) ? 0 : mock_live("mappings") + mock_live("allocations");
}

} // namespace

TEST_F(ipc_transport, device_endpoints_are_offered_where_ucx_has_the_device_api)
{
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
#if CUX_UCX_HAS_DEVICE_API
    EXPECT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_DEVICE_EP) << "UCP selects device lanes by this flag";
#else
    GTEST_SKIP() << "this UCX (" << CUX_UCX_VERNUM << ") has no device API (120+)";
#endif
}

/* Issue 45, item 4: what holds a memory element's mapping, on every release (the transport's own functions, which
 * every release compiles and the releases' ops call): with a release handle (UCX 1.23+) the element holds it past
 * its key's release, until the element is released; without one (1.20 to 1.22 have no element release) the key
 * holds it, as the README says: there an element is valid only while its key is. */
TEST_F(ipc_transport, a_memory_elements_mapping_is_held_by_the_element_where_it_has_a_release_else_by_its_key)
{
    open_md({{"CACHE", "n"}}); /* mappings live only as long as something holds them */
    start_peer();
    current_device gpu0(0);
    ASSERT_EQ(UCS_OK, gpu0.status());
    const size_t size = 1 << 20;
    const auto expect = pattern(68, size);
    std::vector<uint8_t> got(4096);
    for (bool with_release : {true, false}) {
        SCOPED_TRACE(with_release ? "an element with a release (1.23+)" : "an element without (1.20-1.22)");
        const long before = mappings_held();
        remote_buf rb     = remote_alloc(size, 0, 9, alloc_vmm_fd);
        ASSERT_NE(0u, rb.addr);
        ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 68));
        ptrdiff_t offset = 0;
        void *release    = nullptr;
        ASSERT_EQ(UCS_OK, cux_ipc_device_elem_map(nullptr, rb.rkey.rkey, &offset, with_release ? &release : nullptr));
        raw_copy(got.data(), (void*)(uintptr_t)(rb.addr + offset), got.size());
        EXPECT_EQ(0, memcmp(got.data(), expect.data(), got.size())) << "the peer's bytes at address + offset";
        uct_rkey_release(m_component, &rb.rkey); /* the key goes first */
        if (with_release) {
            if (using_mock_driver()) { /* the driver counts no mappings: there the bytes below tell */
                EXPECT_LT(before, mappings_held()) << "the mapping went with the key, under a live element";
            }
            raw_copy(got.data(), (void*)(uintptr_t)(rb.addr + offset), got.size());
            EXPECT_EQ(0, memcmp(got.data(), expect.data(), got.size())) << "the element's mapping outlived the key";
            cux_ipc_device_elem_unmap(release);
        }
        EXPECT_EQ(before, mappings_held()) << "the mapping outlived what holds it";
        peer_msg fr = {};
        fr.op = peer_op::free; fr.a = rb.addr;
        EXPECT_EQ(UCS_OK, m_peer->call(fr).status);
    }
}

#if CUX_UCX_HAS_DEVICE_API

namespace {

/* An element packed by the release's op: 1.20 an interface op filling GPU memory, 1.21+ a memory domain op
 * filling host memory; 1.23+ hands back a release handle, given back here at the end. */
class device_elem {
public:
    device_elem(uct_md_h md, uct_iface_h iface, uct_mem_h memh, uct_rkey_t rkey) : m_md(md)
    {
#if CUX_UCX_VERNUM == 120
        buffer gpu(buf_kind::cuda0, sizeof(offset));
        status = uct_iface_mem_element_pack(iface, memh, rkey, (uct_device_mem_element_t*)gpu.ptr());
        raw_copy(&offset, gpu.ptr(), sizeof(offset));
#elif CUX_UCX_VERNUM >= 121
        CUX_DEVICE_MEM_ELEM_T elem;
        memset(&elem, 0xa5, sizeof(elem));
#  if CUX_UCX_VERNUM >= 123
        status = uct_md_mem_elem_pack(md, memh, rkey, &elem, &m_release);
#  else
        status = uct_md_mem_elem_pack(md, memh, rkey, &elem);
#  endif
        offset = elem.cuda_ipc_md_mem_element.mapped_offset;
#endif
        (void)iface;
    }
    ~device_elem() { release(); }
    device_elem(const device_elem &) = delete;
    device_elem &operator=(const device_elem &) = delete;

    void release()
    {
#if CUX_UCX_VERNUM >= 123
        if ((status == UCS_OK) && (m_release != nullptr)) {
            uct_md_mem_elem_release(m_md, m_release);
        }
#endif
        m_release = nullptr;
    }

    ucs_status_t status = UCS_ERR_UNSUPPORTED;
    ptrdiff_t    offset = 0;

private:
    uct_md_h m_md;
    void     *m_release = nullptr;
};

} // namespace

TEST_F(ipc_transport, a_device_endpoint_is_the_transports_id_in_gpu_memory_one_per_gpu)
{
    uct_device_ep_h dep = nullptr, again = nullptr;
    {
        current_device gpu0(0);
        ASSERT_EQ(UCS_OK, gpu0.status());
        ASSERT_EQ(UCS_OK, uct_ep_get_device_ep(m_ep, &dep));
        ASSERT_NE(nullptr, dep);
        uct_device_ep_t got;
        raw_copy(&got, dep, sizeof(got));
        EXPECT_EQ(UCT_DEVICE_TL_CUDA_IPC, got.uct_tl_id) << "UCX's GPU code dispatches on this id";
        ASSERT_EQ(UCS_OK, uct_ep_get_device_ep(m_ep, &again));
        EXPECT_EQ(dep, again) << "one per interface and GPU, made once";
        if (cux_device_count() > 1) {
            current_device gpu1(1);
            ASSERT_EQ(UCS_OK, uct_ep_get_device_ep(m_ep, &again));
            EXPECT_NE(dep, again) << "another GPU's kernels read their own";
        }
    }
    if (cux_device_current() < 0) { /* no context left current on this thread */
        EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_ep_get_device_ep(m_ep, &again)) << "no GPU to make it for";
    }
}

TEST_F(ipc_transport, a_memory_element_locates_the_peers_allocation_and_keeps_it_mapped_while_in_use)
{
    open_md({{"CACHE", "n"}}); /* mappings live only as long as something holds them */
    start_peer();
    current_device gpu0(0);
    ASSERT_EQ(UCS_OK, gpu0.status());
    for (uint64_t kind : {alloc_legacy, alloc_vmm_fd, alloc_pool_fd}) {
        SCOPED_TRACE(kind);
        const size_t size = 1 << 20;
        const long before = mappings_held();
        remote_buf rb     = remote_alloc(size, 0, 3, kind);
        ASSERT_NE(0u, rb.addr);
        ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 61));

        device_elem elem(m_md, m_iface, nullptr, rb.rkey.rkey);
        ASSERT_EQ(UCS_OK, elem.status);
        const ptrdiff_t offset = elem.offset;
        std::vector<uint8_t> got(4096);
        raw_copy(got.data(), (void*)(uintptr_t)(rb.addr + 8192 + offset), got.size());
        auto expect = pattern(61, size);
        EXPECT_EQ(0, memcmp(got.data(), expect.data() + 8192, got.size())) << "the peer's bytes at address + offset";

        void *ptr = nullptr;
        ASSERT_EQ(UCS_OK, uct_rkey_ptr(m_component, &rb.rkey, rb.addr, &ptr));
        EXPECT_EQ((uintptr_t)rb.addr + offset, (uintptr_t)ptr) << "the same mapping rkey_ptr hands out";
        device_elem again(m_md, m_iface, nullptr, rb.rkey.rkey);
        ASSERT_EQ(UCS_OK, again.status);
        EXPECT_EQ(offset, again.offset);
        cux_ipc_cache_purge(&cux_ipc_cache);
        raw_copy(got.data(), (void*)(uintptr_t)(rb.addr + offset), 64);
        EXPECT_EQ(0, memcmp(got.data(), expect.data(), 64)) << "a purge leaves a mapping an element names";

        elem.release();
        again.release();
        remote_free(rb); /* releases the key: its mappings go */
        EXPECT_EQ(before, mappings_held()) << "the key's release gives the mapping back";
    }
}

TEST_F(ipc_transport, a_memory_element_of_a_key_the_peer_does_not_hold_is_refused)
{
    start_peer();
    current_device gpu0(0);
    ASSERT_EQ(UCS_OK, gpu0.status());
    remote_buf rb = remote_alloc(1 << 20, 0, 4, alloc_legacy);
    ASSERT_NE(0u, rb.addr);
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)rb.rkey.rkey;
    forged.buffer_id ^= 1; /* not a key the peer handed out */
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, device_elem(m_md, m_iface, nullptr, bundle.rkey).status);
    uct_rkey_release(m_component, &bundle);

    EXPECT_EQ(UCS_ERR_INVALID_PARAM, device_elem(m_md, m_iface, nullptr, UCT_INVALID_RKEY).status)
        << "neither a key nor a memory handle";
    buffer local(buf_kind::cuda0, 4096);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), 4096, UCT_MD_MEM_ACCESS_ALL, &memh));
    {
        device_elem elem(m_md, m_iface, memh, UCT_INVALID_RKEY);
        EXPECT_EQ(UCS_OK, elem.status) << "a local element";
        EXPECT_EQ(0, elem.offset) << "a kernel uses its own addresses";
    }
    uct_md_mem_dereg(m_md, memh);
    remote_free(rb);
}


/* nvcc with our include/ and the installed UCX's headers ahead of the rest, or a reason to skip in *skip. */
static std::string device_nvcc(std::string *skip)
{
    const char *cuda_home = getenv("CUDA_HOME");
    std::string nvcc      = std::string(cuda_home ? cuda_home : "/usr/local/cuda") + "/bin/nvcc";
    std::string ucx_inc   = std::string(CUX_TEST_UCX_PREFIX) + "/include";
    if (access(nvcc.c_str(), X_OK) != 0) {
        *skip = "no nvcc at " + nvcc;
    } else if (access((ucx_inc + "/uct/api/device/uct_device_impl.h").c_str(), R_OK) != 0) {
        *skip = "the installed UCX has no device API headers in " + ucx_inc;
    }
    return nvcc + " -std=c++17 -I" + source_path("include") + " -I" + ucx_inc;
}

/* Item 2 of issue 33: kernels built against the installed UCX's headers (a UCX without CUDA has no cuda_ipc.cuh of
 * its own) find ours through UCX's dispatch, with the signatures it calls, at every level. Needs nvcc. */
TEST(ipc_device_header, kernels_built_against_the_installed_ucx_find_ours_through_its_dispatch)
{
#if CUX_UCX_VERNUM < 121
    GTEST_SKIP() << "UCX 1.20's device code has other signatures: our header serves 1.21+";
#else
    std::string skip, nvcc = device_nvcc(&skip);
    if (!skip.empty()) {
        GTEST_SKIP() << skip;
    }
#  define CUX_STRINGIFY_(_x) #_x
#  define CUX_STRINGIFY(_x)  CUX_STRINGIFY_(_x)
    std::string out      = build_path("test/cux_device_header_check.o");
    command_result built = run_command(nvcc + " -arch=sm_90 -DELEM_T=" CUX_STRINGIFY(CUX_DEVICE_MEM_ELEM_T) " -c " +
                                       source_path("test/device/cux_device_header_check.cu") + " -o " + out);
    EXPECT_EQ(0, built.status) << built.output;
    unlink(out.c_str());
#endif
}

/* The header's copy, compiled for the host and run here: every alignment pair, lengths around each piece and word
 * size, 1 to 256 lanes; each byte written once, by the right value, nothing outside, no misaligned word
 * (test/device/cux_device_copy_check.cu). The same code runs in kernels. Needs nvcc. */
TEST(ipc_device_header, the_copy_writes_every_byte_once_with_aligned_words_at_every_alignment_and_lane_count)
{
#if CUX_UCX_VERNUM < 121
    GTEST_SKIP() << "our header serves UCX 1.21+";
#else
    std::string skip, nvcc = device_nvcc(&skip);
    if (!skip.empty()) {
        GTEST_SKIP() << skip;
    }
    std::string exe      = build_path("test/cux_device_copy_check");
    command_result built = run_command(nvcc + " -O2 " + source_path("test/device/cux_device_copy_check.cu") +
                                       " -o " + exe);
    ASSERT_EQ(0, built.status) << built.output;
    command_result ran = run_command(exe);
    EXPECT_EQ(0, ran.status) << ran.output;
    EXPECT_NE(std::string::npos, ran.output.find(" cases passed")) << ran.output;
    unlink(exe.c_str());
#endif
}

/* UCX 1.23: an element holds its own mapping, released with the element (UCP releases a device memory list's
 * elements when the list goes, which may be after the application released the key). */
TEST_F(ipc_transport, a_memory_element_outlives_its_key_until_it_is_released)
{
#if CUX_UCX_VERNUM < 123
    GTEST_SKIP() << "before UCX 1.23 an element has no release: it lives as long as its key";
#endif
    open_md({{"CACHE", "n"}});
    start_peer();
    current_device gpu0(0);
    ASSERT_EQ(UCS_OK, gpu0.status());
    const size_t size = 1 << 20;
    const long before = mappings_held();
    remote_buf rb     = remote_alloc(size, 0, 8, alloc_vmm_fd);
    ASSERT_NE(0u, rb.addr);
    ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 67));
    device_elem elem(m_md, m_iface, nullptr, rb.rkey.rkey);
    ASSERT_EQ(UCS_OK, elem.status);
    uct_rkey_release(m_component, &rb.rkey); /* the key goes first */
    std::vector<uint8_t> got(4096);
    raw_copy(got.data(), (void*)(uintptr_t)(rb.addr + elem.offset), got.size());
    auto expect = pattern(67, size);
    EXPECT_EQ(0, memcmp(got.data(), expect.data(), got.size())) << "the element's mapping outlived the key";
    elem.release();
    EXPECT_EQ(before, mappings_held()) << "the element's release gives the mapping back";
    peer_msg fr = {};
    fr.op = peer_op::free; fr.a = rb.addr;
    EXPECT_EQ(UCS_OK, m_peer->call(fr).status);
}

/* UCP's own code over ours, as an application calls it (UCX 1.22): ucp_device_remote_mem_list_create selects a
 * device lane (cuda_ipc, by its flag), takes the device endpoint and packs the element from the peer's key. The
 * list lands in GPU memory; here it is read back and followed: the endpoint names cuda_ipc, and the element's
 * address plus offset reaches the bytes the peer wrote. The peer is this binary again (--ucp-device-target). */
#if CUX_UCX_VERNUM >= 122

namespace {

const size_t device_target_size = 1 << 20;
const uint64_t device_target_seed = 29;

struct ucp_side {
    int          fd     = -1;
    ucp_context_h ctx   = nullptr;
    ucp_worker_h worker = nullptr;
    ucp_ep_h     ep     = nullptr;

    bool send(const void *buf, uint64_t len)
    {
        return (::send(fd, &len, sizeof(len), 0) == sizeof(len)) && (::send(fd, buf, len, 0) == (ssize_t)len);
    }

    /* A message, progressing the worker meanwhile (the peer's wire-up may need it). */
    bool recv(std::vector<char> &out)
    {
        uint64_t len = 0;
        return recv_raw(&len, sizeof(len)) && (out.resize(len), recv_raw(out.data(), len));
    }

    bool recv_raw(void *buf, size_t len)
    {
        char *p = (char*)buf;
        while (len > 0) {
            ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
            if (n > 0) {
                p += n;
                len -= n;
            } else if ((n == 0) || ((errno != EAGAIN) && (errno != EWOULDBLOCK))) {
                return false;
            } else if (worker != nullptr) {
                ucp_worker_progress(worker);
            }
        }
        return true;
    }

    ucs_status_t flush()
    {
        ucp_request_param_t param = {};
        void *req                 = ucp_ep_flush_nbx(ep, &param);
        if (UCS_PTR_IS_ERR(req)) {
            return UCS_PTR_STATUS(req);
        }
        ucs_status_t status = UCS_OK;
        if (req != nullptr) {
            while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
                ucp_worker_progress(worker);
            }
            ucp_request_free(req);
        }
        return status;
    }

    /* Context and worker with the device feature, addresses exchanged, an endpoint wired up. */
    ucs_status_t open()
    {
        ucp_config_t *config;
        ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_config_modify(config, "TLS", "self,sm,cuda_copy,cuda_ipc");
        /* UCP calls an endpoint remote-connected only after a wire-up exchange, which lanes that all connect to
         * interfaces (sm, cuda_ipc) never make unless told to resolve the peer's endpoint; device memory lists
         * answer NOT_CONNECTED until then (UCX 1.22) */
        ucp_config_modify(config, "RESOLVE_REMOTE_EP_ID", "y");
        ucp_params_t params = {};
        params.field_mask   = UCP_PARAM_FIELD_FEATURES;
        params.features     = UCP_FEATURE_RMA | UCP_FEATURE_DEVICE;
        status              = ucp_init(&params, config, &ctx);
        ucp_config_release(config);
        if (status != UCS_OK) {
            return status;
        }
        ucp_worker_params_t wp = {};
        if ((status = ucp_worker_create(ctx, &wp, &worker)) != UCS_OK) {
            return status;
        }
        ucp_address_t *addr;
        size_t addr_len;
        if ((status = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK) {
            return status;
        }
        bool sent = send(addr, addr_len);
        ucp_worker_release_address(worker, addr);
        std::vector<char> peer;
        if (!sent || !recv(peer)) {
            return UCS_ERR_IO_ERROR;
        }
        ucp_ep_params_t ep_params = {};
        ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep_params.address         = (const ucp_address_t*)peer.data();
        if ((status = ucp_ep_create(worker, &ep_params, &ep)) != UCS_OK) {
            return status;
        }
        return flush();
    }

    void close()
    {
        if (ep != nullptr) {
            ucp_request_param_t param = {};
            param.op_attr_mask        = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags               = UCP_EP_CLOSE_FLAG_FORCE;
            void *req                 = ucp_ep_close_nbx(ep, &param);
            if ((req != nullptr) && !UCS_PTR_IS_ERR(req)) {
                while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                    ucp_worker_progress(worker);
                }
                ucp_request_free(req);
            }
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
        if (ctx != nullptr) {
            ucp_cleanup(ctx);
        }
    }
};

} // namespace

/* The target: a GPU buffer filled with a pattern, mapped, its key and address sent; then it progresses until told
 * to stop. Exit status 0 when all went well. */
int ucp_device_target_main(int fd)
{
    current_device gpu0(0);
    ucp_side side;
    side.fd = fd;
    if ((gpu0.status() != UCS_OK) || (side.open() != UCS_OK)) {
        return 2;
    }
    buffer region(buf_kind::cuda0, device_target_size);
    region.write(pattern(device_target_seed, device_target_size));
    ucp_mem_map_params_t mp = {};
    mp.field_mask           = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address              = region.ptr();
    mp.length               = device_target_size;
    ucp_mem_h memh;
    void *rkey_buf;
    size_t rkey_len;
    if ((ucp_mem_map(side.ctx, &mp, &memh) != UCS_OK) ||
        (ucp_rkey_pack(side.ctx, memh, &rkey_buf, &rkey_len) != UCS_OK)) {
        return 3;
    }
    uint64_t base = (uintptr_t)region.ptr();
    bool sent     = side.send(&base, sizeof(base)) && side.send(rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    std::vector<char> stop;
    if (!sent || !side.recv(stop)) { /* progresses until the initiator is done */
        return 4;
    }
    ucp_mem_unmap(side.ctx, memh);
    side.close();
    return 0;
}

TEST_F(ipc_transport, ucp_builds_a_device_memory_list_over_cuda_ipc)
{
    if (cux_device_get(0)->sys_dev == UCS_SYS_DEVICE_ID_UNKNOWN) {
        GTEST_SKIP() << "UCP's device lists need the GPU's system device (the mock gives one with MOCK_CUDA_PCI=1)";
    }
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    pid_t child = fork();
    if (child == 0) {
        ::close(sv[0]);
        std::string fd = std::to_string(sv[1]);
        /* nothing here tells UCP's memory-type cache of cuMemAlloc memory (ucx-cuda-run says the same) */
        setenv("UCX_MEMTYPE_CACHE", "n", 1);
        execl("/proc/self/exe", "cux_gtest", "--ucp-device-target", fd.c_str(), (char*)nullptr);
        _exit(127);
    }
    ::close(sv[1]);
    current_device gpu0(0);
    ASSERT_EQ(UCS_OK, gpu0.status());
    ucp_side side;
    side.fd = sv[0];
    ASSERT_EQ(UCS_OK, side.open());
    std::vector<char> base_msg, rkey_buf;
    ASSERT_TRUE(side.recv(base_msg) && side.recv(rkey_buf));
    uint64_t base;
    memcpy(&base, base_msg.data(), sizeof(base));
    ucp_rkey_h rkey;
    ASSERT_EQ(UCS_OK, ucp_ep_rkey_unpack(side.ep, rkey_buf.data(), &rkey));

    ucp_device_mem_list_elem_t elem = {};
    elem.field_mask   = UCP_DEVICE_MEM_LIST_ELEM_FIELD_EP | UCP_DEVICE_MEM_LIST_ELEM_FIELD_RKEY |
                        UCP_DEVICE_MEM_LIST_ELEM_FIELD_REMOTE_ADDR;
    elem.ep           = side.ep;
    elem.rkey         = rkey;
    elem.remote_addr  = base + 4096;
    ucp_device_mem_list_params_t params = {};
    params.field_mask   = UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENT_SIZE |
                          UCP_DEVICE_MEM_LIST_PARAMS_FIELD_NUM_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_WORKER;
    params.elements     = &elem;
    params.element_size = sizeof(elem);
    params.num_elements = 1;
    params.worker       = side.worker;
    ucp_device_remote_mem_list_h list = nullptr;
    ucs_status_t status;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (((status = ucp_device_remote_mem_list_create(&params, &list)) == UCS_ERR_NOT_CONNECTED) &&
           (std::chrono::steady_clock::now() < deadline)) {
        ucp_worker_progress(side.worker); /* UCP's answer until the peer has connected back: progress and retry */
    }
    EXPECT_EQ(UCS_OK, status) << "UCP found no device lane";
    if (list != nullptr) {
        const size_t size = sizeof(ucp_device_remote_mem_list_t) + sizeof(uct_device_remote_mem_elem_t) +
                            sizeof(uct_device_remote_tl_elem_t);
        std::vector<uint8_t> host(size);
        raw_copy(host.data(), list, size); /* the list is in GPU memory, as kernels read it */
        auto hdr = (const ucp_device_remote_mem_list_t*)host.data();
        EXPECT_EQ(1u, hdr->length);
        ASSERT_EQ(1u, hdr->num_lanes) << "one device lane: cuda_ipc";
        const uct_device_remote_mem_elem_t &e = hdr->mem_elements[0];
        EXPECT_EQ(base + 4096, e.addr);
        uct_device_ep_t dep;
        raw_copy(&dep, e.tl[0].ep, sizeof(dep));
        EXPECT_EQ(UCT_DEVICE_TL_CUDA_IPC, dep.uct_tl_id);
        std::vector<uint8_t> got(4096);
        raw_copy(got.data(), (void*)(uintptr_t)(e.addr + e.tl[0].uct.cuda_ipc_md_mem_element.mapped_offset),
                 got.size());
        auto expect = pattern(device_target_seed, device_target_size);
        EXPECT_EQ(0, memcmp(got.data(), expect.data() + 4096, got.size())) << "the peer's bytes through the element";
        ucp_device_mem_list_release(list);
    }
    ucp_rkey_destroy(rkey);
    EXPECT_TRUE(side.send("Q", 1));
    side.close();
    int wst = 0;
    ASSERT_EQ(child, waitpid(child, &wst, 0));
    EXPECT_TRUE(WIFEXITED(wst) && (WEXITSTATUS(wst) == 0)) << "the target's status " << wst;
}
#endif

#endif

#if CUX_UCX_VERNUM < 122
int ucp_device_target_main(int) { return 127; } /* UCP's device memory lists as tested here are 1.22's */
#endif
