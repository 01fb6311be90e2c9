/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy data path through libuct: put/get short and zcopy in every direction, memory-type detection,
 * allocation, completion machinery (flush, pending, event arming) and bounded resources. Runs on a real GPU,
 * or on the mock driver in CI; skipped when neither is there.
 */
#include "cux_test.h"
#include "ipc_transport.h" /* imex_channel, and the peer's allocators */

#include <iostream>
#include <poll.h>
#include <unistd.h>
#include <cstring>

extern "C" {
#include "base/cux_link_perf.h"
#include "base/cux_ptr.h"
#include <uct/api/v2/uct_v2.h> /* uct_iface_estimate_perf; uct_md_query_v2 in UCX 1.16 and later */
#include <uct/base/uct_md.h>     /* the md op itself: 1.22's memory flags are in the v2 attributes only */
#include <ucs/memory/memtype_cache.h>
}

using namespace cux_test;

static std::vector<buf_kind> kinds()
{
    std::vector<buf_kind> k = {buf_kind::host, buf_kind::pinned_host, buf_kind::cuda0, buf_kind::managed};
    if (cux_device_count() > 1) {
        k.push_back(buf_kind::cuda1);
    }
    return k;
}

static const std::vector<size_t> sizes = {1, 7, 64, 4096, 65537, 1 << 20, 64 << 20};

class copy : public copy_transport {
protected:
    enum class op { put_short, get_short, put_zcopy, get_zcopy };

    /* One transfer local -> remote (put) or remote -> local (get), checked byte for byte. */
    void transfer(op o, buf_kind local_kind, buf_kind remote_kind, size_t size, bool register_local)
    {
        buffer local(local_kind, size), remote(remote_kind, size);
        bool put      = (o == op::put_short) || (o == op::put_zcopy);
        buffer &src   = put ? local : remote;
        buffer &dst   = put ? remote : local;
        auto data     = random_bytes(size);
        auto poison   = std::vector<uint8_t>(size, 0xa5);
        uct_mem_h memh = UCT_MEM_HANDLE_NULL;
        ucs_status_t status;

        src.write(data);
        dst.write(poison);

        if (register_local) {
            ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh));
        }

        uint64_t raddr = (uint64_t)remote.ptr();
        switch (o) {
        case op::put_short:
            status = uct_ep_put_short(m_ep, local.ptr(), size, raddr, 0);
            break;
        case op::get_short:
            status = uct_ep_get_short(m_ep, local.ptr(), size, raddr, 0);
            break;
        default: {
            uct_iov_t iov = {local.ptr(), size, memh, 0, 1};
            counting_completion comp;
            status = put ? uct_ep_put_zcopy(m_ep, &iov, 1, raddr, 0, &comp.comp) :
                           uct_ep_get_zcopy(m_ep, &iov, 1, raddr, 0, &comp.comp);
            if (status == UCS_INPROGRESS) {
                status = wait(&comp.comp);
            }
            break;
        }
        }
        ASSERT_EQ(UCS_OK, status) << "size " << size;
        if (memh != UCT_MEM_HANDLE_NULL) {
            ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
        }

        auto got = dst.read();
        ASSERT_EQ(0, memcmp(got.data(), data.data(), size))
                << buf_kind_name(src.kind()) << " -> " << buf_kind_name(dst.kind()) << ", " << size << " bytes";
    }

    /* The bandwidth the interface estimates for an operation between two memory types. */
    double estimate(ucs_memory_type_t local, ucs_memory_type_t remote, uct_ep_operation_t operation)
    {
        uct_perf_attr_t attr    = {};
        attr.field_mask         = UCT_PERF_ATTR_FIELD_OPERATION | UCT_PERF_ATTR_FIELD_LOCAL_MEMORY_TYPE |
                                  UCT_PERF_ATTR_FIELD_REMOTE_MEMORY_TYPE | UCT_PERF_ATTR_FIELD_BANDWIDTH;
        attr.operation          = operation;
        attr.local_memory_type  = local;
        attr.remote_memory_type = remote;
        EXPECT_EQ(UCS_OK, uct_iface_estimate_perf(m_iface, &attr));
        return attr.bandwidth.shared + attr.bandwidth.dedicated;
    }

    void all_directions(op o, bool register_local, size_t max_size = SIZE_MAX)
    {
        for (buf_kind l : kinds()) {
            for (buf_kind r : kinds()) {
                for (size_t size : sizes) {
                    if (size > max_size) {
                        continue;
                    }
                    SCOPED_TRACE(std::string(buf_kind_name(l)) + "/" + buf_kind_name(r) + " " +
                                 std::to_string(size));
                    transfer(o, l, r, size, register_local);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
};

TEST_F(copy, put_short_every_direction)  { all_directions(op::put_short, false); }
TEST_F(copy, get_short_every_direction)  { all_directions(op::get_short, false); }
TEST_F(copy, put_zcopy_every_direction)  { all_directions(op::put_zcopy, false); }
TEST_F(copy, get_zcopy_every_direction)  { all_directions(op::get_zcopy, false); }
TEST_F(copy, put_zcopy_registered_local) { all_directions(op::put_zcopy, true, 1 << 20); }
TEST_F(copy, get_zcopy_registered_local) { all_directions(op::get_zcopy, true, 1 << 20); }

/* UCP asks each transport what a copy between two memory types would cost, and takes a failure as "not
 * supported": cuda_copy refuses host-to-host (the CPU's job), so that UCP never routes host messages through
 * it, and answers for every pair that has a GPU end. */
TEST_F(copy, estimates_no_host_to_host_copy)
{
    const ucs_memory_type_t host = UCS_MEMORY_TYPE_HOST, cuda = UCS_MEMORY_TYPE_CUDA;
    const std::pair<ucs_memory_type_t, ucs_memory_type_t> pairs[] = {{host, host}, {host, cuda}, {cuda, host},
                                                                     {cuda, cuda}};

    for (const auto &p : pairs) {
        for (uct_ep_operation_t operation : {UCT_EP_OP_PUT_ZCOPY, UCT_EP_OP_GET_ZCOPY}) {
            uct_perf_attr_t attr = {};
            attr.field_mask = UCT_PERF_ATTR_FIELD_OPERATION | UCT_PERF_ATTR_FIELD_LOCAL_MEMORY_TYPE |
                              UCT_PERF_ATTR_FIELD_REMOTE_MEMORY_TYPE | UCT_PERF_ATTR_FIELD_BANDWIDTH;
            attr.operation          = operation;
            attr.local_memory_type  = p.first;
            attr.remote_memory_type = p.second;
            ucs_status_t status     = uct_iface_estimate_perf(m_iface, &attr);
            SCOPED_TRACE(std::string(ucs_memory_type_names[p.first]) + " -> " + ucs_memory_type_names[p.second]);
            if ((p.first == host) && (p.second == host)) {
                EXPECT_EQ(UCS_ERR_UNSUPPORTED, status);
            } else {
                ASSERT_EQ(UCS_OK, status);
                EXPECT_GT(attr.bandwidth.shared + attr.bandwidth.dedicated, 0.0);
            }
        }
    }
    uct_perf_attr_t no_types = {};
    no_types.field_mask      = UCT_PERF_ATTR_FIELD_BANDWIDTH;
    EXPECT_EQ(UCS_OK, uct_iface_estimate_perf(m_iface, &no_types)) << "an estimate that names no memory types";
}

/* With BW "auto", each pair of memory types gets its own link's measured bandwidth (a get moves data from the
 * remote buffer to the local one); host<->GPU pairs no more than UCX's own module's figures unless HOST_STAGING
 * is on (more makes UCP 1.22 send host messages through GPU fragments); an explicit BW is every pair's. */
TEST_F(copy, estimates_each_direction_by_its_own_link)
{
    const ucs_memory_type_t host = UCS_MEMORY_TYPE_HOST, cuda = UCS_MEMORY_TYPE_CUDA;
    struct {
        ucs_memory_type_t  local, remote;
        uct_ep_operation_t operation;
        int                src, dst;
    } const cases[] = {
        {host, cuda, UCT_EP_OP_PUT_ZCOPY, CUX_LINK_HOST, 0}, {cuda, host, UCT_EP_OP_PUT_ZCOPY, 0, CUX_LINK_HOST},
        {host, cuda, UCT_EP_OP_GET_ZCOPY, 0, CUX_LINK_HOST}, {cuda, host, UCT_EP_OP_GET_SHORT, CUX_LINK_HOST, 0},
        {cuda, cuda, UCT_EP_OP_PUT_SHORT, 0, 0},             {UCS_MEMORY_TYPE_CUDA_MANAGED, host,
                                                              UCT_EP_OP_PUT_ZCOPY, 0, CUX_LINK_HOST},
    };
    const double h2d = 8300.0 * (1 << 20), d2h = 11660.0 * (1 << 20);
    for (bool staging : {false, true}) {
        open_iface({{"HOST_STAGING", staging ? "y" : "n"}});
        for (const auto &c : cases) {
            cux_link_perf_t link;
            SCOPED_TRACE(std::string(ucs_memory_type_names[c.local]) + " / " + ucs_memory_type_names[c.remote] +
                         " op " + std::to_string(c.operation) + (staging ? ", host staging" : ""));
            ASSERT_EQ(UCS_OK, cux_link_perf_get(c.src, c.dst, &link));
            double expect = link.bandwidth;
            if (!staging && (c.src == CUX_LINK_HOST)) {
                expect = std::min(expect, h2d);
            } else if (!staging && (c.dst == CUX_LINK_HOST)) {
                expect = std::min(expect, d2h);
            }
            EXPECT_DOUBLE_EQ(expect, estimate(c.local, c.remote, c.operation));
        }
    }

    open_iface({{"BW", "1234MBs"}});
    for (const auto &c : cases) {
        EXPECT_DOUBLE_EQ(1234.0 * (1 << 20), estimate(c.local, c.remote, c.operation));
    }
}

/* UCX's own cuda_copy (1.19 and later) takes BW as a list, its default being one: a figure for any pair, then
 * host -> GPU, GPU -> host and GPU -> GPU. Set-ups that name it keep working here: each pair gets its figure
 * (a get reads the remote buffer), managed memory the default, and a pair the list leaves out the default,
 * measured where it is auto. Anything else fails the interface with an error line, as a bad value does in UCX. */
TEST_F(copy, takes_the_bandwidth_list_of_ucx_modules)
{
    const ucs_memory_type_t host = UCS_MEMORY_TYPE_HOST, cuda = UCS_MEMORY_TYPE_CUDA;
    const double mb = 1 << 20, gb = 1 << 30;
    uct_iface_attr_t attr;

    ASSERT_NO_FATAL_FAILURE(open_iface({{"BW", "10000MBs,h2d:8300MBs,d2h:11660MBs,d2d:320GBs"}}));
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    EXPECT_DOUBLE_EQ(10000 * mb, attr.bandwidth.shared);
    EXPECT_DOUBLE_EQ(8300 * mb, estimate(host, cuda, UCT_EP_OP_PUT_ZCOPY));
    EXPECT_DOUBLE_EQ(11660 * mb, estimate(cuda, host, UCT_EP_OP_PUT_SHORT));
    EXPECT_DOUBLE_EQ(11660 * mb, estimate(host, cuda, UCT_EP_OP_GET_ZCOPY));
    EXPECT_DOUBLE_EQ(320 * gb, estimate(cuda, cuda, UCT_EP_OP_PUT_ZCOPY));
    EXPECT_DOUBLE_EQ(10000 * mb, estimate(UCS_MEMORY_TYPE_CUDA_MANAGED, host, UCT_EP_OP_PUT_ZCOPY));

    ASSERT_NO_FATAL_FAILURE(open_iface({{"BW", "auto,d2d:100GBs"}}));
    cux_link_perf_t link;
    ASSERT_EQ(UCS_OK, cux_link_perf_get(0, CUX_LINK_HOST, &link));
    EXPECT_DOUBLE_EQ(100 * gb, estimate(cuda, cuda, UCT_EP_OP_PUT_ZCOPY));
    EXPECT_DOUBLE_EQ(std::min(link.bandwidth, 11660 * mb), estimate(cuda, host, UCT_EP_OP_PUT_ZCOPY));

    for (const char *bad : {"", "fast", "h2d:", "h2x:1GBs", "h2d:1GBs,h2d:2GBs", "h2d:auto", "1GBs,2GBs",
                            "default:1GBs,3GBs"}) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, iface_open_status({{"BW", bad}})) << "BW=" << bad;
    }
}

/* BW and LAT "auto" (the default) report the measured host -> GPU link; an explicit value wins. */
TEST_F(copy, reported_performance_is_measured_once_unless_configured)
{
    cux_link_perf_t first, again;
    uct_iface_attr_t attr;

    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    ASSERT_EQ(UCS_OK, cux_link_perf_get(CUX_LINK_HOST, 0, &first));
    EXPECT_GT(first.bandwidth, 0);
    EXPECT_GT(first.latency, 0);
    EXPECT_DOUBLE_EQ(first.bandwidth, attr.bandwidth.shared);
    EXPECT_DOUBLE_EQ(first.latency, attr.latency.c);
    ASSERT_EQ(UCS_OK, cux_link_perf_get(CUX_LINK_HOST, 0, &again));
    EXPECT_EQ(0, memcmp(&first, &again, sizeof(first))) << "measured again instead of cached";
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, cux_link_perf_get(CUX_LINK_HOST, CUX_LINK_HOST, &again));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, cux_link_perf_get(0, 1000, &again));

    open_iface({{"BW", "1234MBs"}, {"LAT", "3us"}});
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    EXPECT_DOUBLE_EQ(1234.0 * (1 << 20), attr.bandwidth.shared);
    EXPECT_NEAR(3e-6, attr.latency.c, 1e-8);
}

TEST_F(copy, zero_length_is_a_no_op)
{
    buffer b(buf_kind::cuda0, 64);
    uct_iov_t iov = {b.ptr(), 0, UCT_MEM_HANDLE_NULL, 0, 1};
    EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, b.ptr(), 0, (uint64_t)b.ptr(), 0));
    EXPECT_EQ(UCS_OK, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)b.ptr(), 0, NULL));
}

TEST_F(copy, bad_input_gets_an_error_status)
{
    buffer b(buf_kind::cuda0, 64);
    uct_iov_t iov[2] = {{b.ptr(), 32, UCT_MEM_HANDLE_NULL, 0, 1}, {b.ptr(), 32, UCT_MEM_HANDLE_NULL, 0, 1}};
    counting_completion comp;

    /* more iov entries than max_iov */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_ep_put_zcopy(m_ep, iov, 2, (uint64_t)b.ptr(), 0, &comp.comp));
    /* a null destination */
    EXPECT_NE(UCS_OK, uct_ep_put_short(m_ep, b.ptr(), 8, 0, 0));
    EXPECT_LT(uct_ep_put_zcopy(m_ep, iov, 1, 0, 0, &comp.comp), UCS_OK);
}

TEST_F(copy, memory_type_detection)
{
    buffer dev(buf_kind::cuda0, 4096), managed(buf_kind::managed, 4096), pinned(buf_kind::pinned_host, 4096);
    std::vector<char> host(4096);
    ucs_memory_type_t type;
    uct_md_mem_attr_t attr;

    ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, dev.ptr(), 4096, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
    ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, managed.ptr(), 4096, &type));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA_MANAGED, type);
    EXPECT_NE(UCS_OK, uct_md_detect_memory_type(m_md, pinned.ptr(), 4096, &type));
    EXPECT_NE(UCS_OK, uct_md_detect_memory_type(m_md, host.data(), 4096, &type));

    /* an address inside the allocation: base and length are the allocation's */
    attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_FIELD_SYS_DEV |
                      UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS | UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH;
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, (char*)dev.ptr() + 100, 10, &attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
    EXPECT_EQ(dev.ptr(), attr.base_address);
    EXPECT_GE(attr.alloc_length, 4096u);
    EXPECT_NE(UCS_OK, uct_md_mem_query(m_md, host.data(), 4096, &attr));

    if (cux_device_count() > 1) {
        buffer dev1(buf_kind::cuda1, 4096);
        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, dev1.ptr(), 4096, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
    }
}

/* UCX's memory-type tests have fabric cases (test_switch_cuda_device.cc, detect_mem_type_cuda_fabric): memory made
 * with the fabric handle type, VMM or from a pool, is CUDA memory with its allocation's bounds. The driver makes
 * such VMM memory only where the process has an IMEX channel (the mock's, here; the GPU host has none). */
TEST_F(copy, fabric_memory_is_detected_as_cuda_memory)
{
    std::unique_ptr<imex_channel> channel;
    if (using_mock_driver()) {
        channel.reset(new imex_channel());
    }
    for (uint64_t kind : {(uint64_t)alloc_vmm_fabric, (uint64_t)alloc_pool_fabric}) {
        SCOPED_TRACE((kind == alloc_vmm_fabric) ? "VMM memory" : "pool memory");
        size_t size = 1 << 20;
        CUdeviceptr dptr;
        if (ipc_alloc(0, kind, &size, &dptr) != CUDA_SUCCESS) {
            continue; /* no IMEX channel: the driver makes no fabric VMM memory */
        }
        ucs_memory_type_t type;
        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, (void*)(dptr + 4096), 4096, &type));
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, type);
        uct_md_mem_attr_t attr;
        attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS |
                          UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH;
        ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, (void*)(dptr + 4096), 4096, &attr));
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
        EXPECT_EQ((void*)dptr, attr.base_address);
        EXPECT_GE(attr.alloc_length, size);
        EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, kind, dptr, size));
    }
}

/* The handle types the driver allows for an allocation. */
static uint64_t allowed_handle_types(const void *address)
{
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES;
    uint64_t types           = 0;
    void *data[]             = {&types};
    return (cux_drv.cuPointerGetAttributes(1, &attr, data, (CUdeviceptr)(uintptr_t)address) == CUDA_SUCCESS) ?
           types : 0;
}

/* UCX_CUDA_COPY_ENABLE_FABRIC (UCX's name and default, try): where the process has an IMEX channel, what cuda_copy
 * allocates is fabric memory (with the descriptor type as well), which cuda_ipc shares with other hosts of a
 * multi-node NVLink domain; n, or no channel, keeps cuMemAlloc, and the driver is asked nothing about fabric; y
 * without a channel fails the allocation with one error line. */
TEST_F(copy, md_allocates_fabric_memory_where_an_imex_channel_is)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "the mock's IMEX channel (the GPU host has none)";
    }
    imex_channel channel;
    open_md();
    uct_allocated_memory_t mem;
    long before = mock_live("fabric calls");
    ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 100000, &mem));
    EXPECT_EQ(before + 1, mock_live("fabric calls")) << "one cuMemCreate with the fabric type";
    EXPECT_EQ((uint64_t)(CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              allowed_handle_types(mem.address));
    EXPECT_GE(mem.length, 100000u);
    ucs_memory_type_t detected;
    ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, mem.address, 100000, &detected));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, detected);
    auto data = random_bytes(100000);
    raw_copy(mem.address, data.data(), data.size());
    std::vector<uint8_t> back(data.size());
    raw_copy(back.data(), mem.address, back.size());
    EXPECT_TRUE(back == data);
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));

    open_md({{"ENABLE_FABRIC", "n"}});
    before = mock_live("fabric calls");
    ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 100000, &mem));
    EXPECT_EQ(before, mock_live("fabric calls"));
    EXPECT_EQ(0u, allowed_handle_types(mem.address) & CU_MEM_HANDLE_TYPE_FABRIC);
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));

    /* a channel the driver does not honour (the mock's is channel0 alone; the module takes any channelN): try falls
     * back to cuMemAlloc with one diagnostic line, and asks the driver no more; y fails */
    {
        char dir[] = "/tmp/cux-imex-refused-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        std::string other = std::string(dir) + "/channel1";
        fclose(fopen(other.c_str(), "w"));
        setenv(CUX_IMEX_CHANNELS_DIR_ENV, dir, 1);
        cux_ipc_fabric_ask_again();
        open_md();
        warnings_captured diag(UCS_LOG_LEVEL_DIAG);
        before = mock_live("fabric calls");
        for (int i = 0; i < 3; ++i) {
            ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 100000, &mem));
            EXPECT_EQ(0u, allowed_handle_types(mem.address) & CU_MEM_HANDLE_TYPE_FABRIC);
            EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
        }
        EXPECT_EQ(before + 1, mock_live("fabric calls")) << "refused once, then not asked again";
        EXPECT_EQ(1u, diag.count("the driver makes no fabric memory here"));
        EXPECT_EQ(0u, diag.count("cuMemCreate")) << "no error line of the refusal";
        open_md({{"ENABLE_FABRIC", "y"}});
        EXPECT_NE(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 100000, &mem));
        unlink(other.c_str());
        rmdir(dir);
    }

    channel.withdraw();
    for (const char *setting : {"try", "y"}) {
        SCOPED_TRACE(setting);
        open_md({{"ENABLE_FABRIC", setting}});
        warnings_captured logged(UCS_LOG_LEVEL_ERROR);
        before = mock_live("fabric calls");
        ucs_status_t status = md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 100000, &mem);
        EXPECT_EQ(before, mock_live("fabric calls")) << "no channel: the driver is asked nothing about fabric";
        if (!strcmp(setting, "try")) {
            ASSERT_EQ(UCS_OK, status);
            EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
        } else {
            EXPECT_NE(UCS_OK, status);
            EXPECT_EQ(1u, logged.count("UCX_CUDA_COPY_ENABLE_FABRIC=y, but this process has no IMEX channel"));
        }
    }
}

#ifdef UCT_DMABUF_FD_INVALID
/* UCX 1.16 and later ask memory queries for a DMA-BUF descriptor of GPU memory (for InfiniBand registration). */
class copy_dmabuf : public copy {
protected:
    /* The memory types the md gives descriptors of. */
    uint64_t dmabuf_mem_types()
    {
        uct_md_attr_v2_t attr = {};
        attr.field_mask = UCT_MD_ATTR_FIELD_DMABUF_MEM_TYPES;
        EXPECT_EQ(UCS_OK, uct_md_query_v2(m_md, &attr));
        return attr.dmabuf_mem_types;
    }

    uct_md_mem_attr_t query(const void *address, size_t length)
    {
        uct_md_mem_attr_t attr;
        attr.field_mask    = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_FIELD_DMABUF_FD |
                             UCT_MD_MEM_ATTR_FIELD_DMABUF_OFFSET;
        attr.dmabuf_fd     = 12345;
        attr.dmabuf_offset = 12345;
        EXPECT_EQ(UCS_OK, uct_md_mem_query(m_md, address, length, &attr));
        return attr;
    }
};

TEST_F(copy_dmabuf, descriptor_covers_the_pages_of_a_buffer_inside_an_allocation)
{
    if (!(dmabuf_mem_types() & UCS_BIT(UCS_MEMORY_TYPE_CUDA))) {
        ASSERT_FALSE(using_mock_driver()) << "the mock supports dma-buf";
        GTEST_SKIP() << "this GPU or driver does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)";
    }
    const size_t page = sysconf(_SC_PAGESIZE);
    buffer dev(buf_kind::cuda0, 4 << 20);
    for (size_t offset : {size_t(0), size_t(100), page + 1}) {
        for (size_t length : {size_t(1), size_t(5000), size_t(1 << 20)}) {
            const char *address = (const char*)dev.ptr() + offset;
            uct_md_mem_attr_t attr = query(address, length);
            EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
            ASSERT_GE(attr.dmabuf_fd, 0) << "offset " << offset << " length " << length;
            off_t size = lseek(attr.dmabuf_fd, 0, SEEK_END);
            close(attr.dmabuf_fd);
            std::cout << "dma-buf descriptor of " << length << " bytes at offset " << offset << ": " << size
                      << " bytes, the address at " << attr.dmabuf_offset << std::endl;
            /* the descriptor holds the buffer's pages and no more */
            EXPECT_EQ(((uintptr_t)address) % page, attr.dmabuf_offset);
            EXPECT_EQ(0, size % (off_t)page) << size;
            EXPECT_GE(size, (off_t)(attr.dmabuf_offset + length));
            EXPECT_LT(size, (off_t)(attr.dmabuf_offset + length + page));
        }
    }
}

TEST_F(copy_dmabuf, managed_memory_has_no_descriptor)
{
    buffer managed(buf_kind::managed, 1 << 20);
    uct_md_mem_attr_t attr = query(managed.ptr(), 1 << 20);
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA_MANAGED, attr.mem_type);
    EXPECT_EQ(UCT_DMABUF_FD_INVALID, attr.dmabuf_fd);
    EXPECT_EQ(0u, attr.dmabuf_offset);
    EXPECT_FALSE(dmabuf_mem_types() & UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED));
}

TEST_F(copy_dmabuf, turned_off_gives_none)
{
    open_md({{"DMABUF", "off"}});
    EXPECT_EQ(0u, dmabuf_mem_types());
    buffer dev(buf_kind::cuda0, 4096);
    uct_md_mem_attr_t attr = query(dev.ptr(), 4096);
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
    EXPECT_EQ(UCT_DMABUF_FD_INVALID, attr.dmabuf_fd);
    EXPECT_EQ(0u, attr.dmabuf_offset);
}

TEST_F(copy_dmabuf, a_descriptor_the_driver_refuses_leaves_the_query_intact)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "the mock driver's MOCK_CUDA_NO_DMABUF";
    }
    setenv("MOCK_CUDA_NO_DMABUF", "1", 1);
    buffer dev(buf_kind::cuda0, 4096);
    uct_md_mem_attr_t attr = query(dev.ptr(), 4096);
    unsetenv("MOCK_CUDA_NO_DMABUF");
    EXPECT_EQ(UCT_DMABUF_FD_INVALID, attr.dmabuf_fd);
}
#endif

#if CUX_UCX_HAS_MEM_FLAGS
/* Issue 20: UCX 1.22's InfiniBand memory domains register only memory flagged UCS_MEM_FLAG_REGISTRABLE, and UCP
 * trusts a memory-type cache entry whose device is known: GPU memory must carry the flag in the memory query and
 * in the cache, or no GPU buffer is registered with the NIC (no GPUDirect RDMA). Unless a dma-buf the devices
 * support cannot be had for it, as UCX's own module answers. */
TEST_F(copy, memory_queries_and_the_memtype_cache_flag_gpu_memory_registrable)
{
    buffer dev(buf_kind::cuda0, 1 << 20);
    uct_md_mem_attr_v2_t attr = {};
    attr.field_mask = UCT_MD_MEM_ATTR_V2_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_V2_FIELD_SYS_DEV |
                      UCT_MD_MEM_ATTR_V2_FIELD_MEM_FLAGS;
    ASSERT_EQ(UCS_OK, m_md->ops->mem_query(m_md, dev.ptr(), 1 << 20, &attr));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, attr.mem_type);
    EXPECT_EQ(UCS_MEM_FLAG_REGISTRABLE, attr.mem_flags);

    ucs_memory_info_t info;
    if (ucs_memtype_cache_lookup(dev.ptr(), 1 << 20, &info) == UCS_OK) {
        EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, info.type);
        EXPECT_EQ(UCS_MEM_FLAG_REGISTRABLE, info.mem_flags) << "a cache entry UCP trusts would skip registration";
    }

    if (using_mock_driver()) { /* dma-buf supported, but not for this buffer: not registrable, as UCX answers */
        setenv("MOCK_CUDA_NO_DMABUF", "1", 1);
        attr.field_mask |= UCT_MD_MEM_ATTR_V2_FIELD_DMABUF_FD;
        attr.dmabuf_fd   = UCT_DMABUF_FD_INVALID;
        ASSERT_EQ(UCS_OK, m_md->ops->mem_query(m_md, dev.ptr(), 1 << 20, &attr));
        unsetenv("MOCK_CUDA_NO_DMABUF");
        if (attr.sys_dev != UCS_SYS_DEVICE_ID_UNKNOWN) {
            EXPECT_EQ(0, attr.mem_flags);
        }
    }
}

#endif

#if CUX_UCX_ALLOCATES_ON_DEVICE
/* UCX 1.22 asks for memory on a given device (its system device), e.g. for staging buffers near a peer; fabric
 * memory too (UCX's test_mem_alloc_device *_cuda_fabric cases, with CUDA_COPY_ENABLE_FABRIC=y), where the mock's
 * IMEX channel lets the driver make it. */
TEST_F(copy, md_allocates_on_the_device_asked_for)
{
    std::unique_ptr<imex_channel> channel;
    if (using_mock_driver()) {
        channel.reset(new imex_channel());
    }
    for (const char *fabric : {"n", "y"}) {
        SCOPED_TRACE(std::string("ENABLE_FABRIC=") + fabric);
        if (!strcmp(fabric, "y") && !using_mock_driver()) {
            continue; /* a host without an IMEX channel makes no fabric memory */
        }
        open_md({{"ENABLE_FABRIC", fabric}});
        for (int device = cux_device_count() - 1; device >= 0; --device) {
            ucs_sys_device_t sys_dev = cux_device_get(device)->sys_dev;
            if (sys_dev == UCS_SYS_DEVICE_ID_UNKNOWN) {
                GTEST_SKIP() << "GPU " << device << " has no UCX system device";
            }
            uct_alloc_method_t method     = UCT_ALLOC_METHOD_MD;
            uct_mem_alloc_params_t params = {};
            uct_allocated_memory_t mem;
            params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                                UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_NAME |
                                UCT_MEM_ALLOC_PARAM_FIELD_SYS_DEVICE;
            params.flags      = UCT_MD_MEM_ACCESS_ALL;
            params.mem_type   = UCS_MEMORY_TYPE_CUDA;
            params.mds.mds    = &m_md;
            params.mds.count  = 1;
            params.name       = "cux test";
            params.sys_device = sys_dev;
            ASSERT_EQ(UCS_OK, uct_mem_alloc(1 << 20, &method, 1, &params, &mem));
            cux_ptr_info_t info;
            ASSERT_EQ(UCS_OK, cux_ptr_query(mem.address, &info));
            EXPECT_EQ(device, info.device);
            EXPECT_EQ(!strcmp(fabric, "y"), !!(allowed_handle_types(mem.address) & CU_MEM_HANDLE_TYPE_FABRIC));
            EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
        }
    }
}
#endif

TEST_F(copy, md_allocates_device_and_managed_memory)
{
    for (ucs_memory_type_t mem_type : {UCS_MEMORY_TYPE_CUDA, UCS_MEMORY_TYPE_CUDA_MANAGED}) {
        uct_allocated_memory_t mem;
        ucs_memory_type_t detected;

        ASSERT_EQ(UCS_OK, md_alloc(m_md, mem_type, 1 << 20, &mem));
        EXPECT_EQ(mem_type, mem.mem_type);
        ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, mem.address, 1 << 20, &detected));
        EXPECT_EQ(mem_type, detected);

        auto data = random_bytes(1 << 20);
        raw_copy(mem.address, data.data(), data.size());
        std::vector<uint8_t> back(data.size());
        raw_copy(back.data(), mem.address, back.size());
        EXPECT_EQ(data, back);

        /* releasing an allocation as if it were a registration is refused */
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_md_mem_dereg(m_md, mem.memh));
        EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
    }
}

static bool driver_says_pinned(const void *p)
{
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    unsigned int type        = 0;
    void *data               = &type;

    return (cux_drv.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)p) == CUDA_SUCCESS) &&
           (type == CU_MEMORYTYPE_HOST);
}

TEST_F(copy, host_registration_pins_and_unpins)
{
    std::vector<char> host(3 * 4096 + 100);
    uct_mem_h memh, memh2;

    ASSERT_FALSE(driver_says_pinned(host.data() + 10));
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, host.data() + 10, 5000, UCT_MD_MEM_ACCESS_ALL, &memh));
    EXPECT_TRUE(driver_says_pinned(host.data() + 10));
    /* overlapping registration: still succeeds (the range is already pinned) */
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, host.data() + 20, 100, UCT_MD_MEM_ACCESS_ALL, &memh2));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh2));
    EXPECT_TRUE(driver_says_pinned(host.data() + 10)) << "the overlapping registration unpinned the first";
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    EXPECT_FALSE(driver_says_pinned(host.data() + 10));
}

TEST_F(copy, registration_without_pinning)
{
    std::vector<char> host(8192);
    uct_md_config_t *config;
    uct_md_h md;
    uct_mem_h memh;

    setenv("UCX_CUDA_COPY_PIN_HOST", "n", 1);
    ASSERT_EQ(UCS_OK, uct_md_config_read(m_component, NULL, NULL, &config));
    unsetenv("UCX_CUDA_COPY_PIN_HOST");
    ASSERT_EQ(UCS_OK, uct_md_open(m_component, "cuda_cpy", config, &md));
    uct_config_release(config);
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(md, host.data(), host.size(), UCT_MD_MEM_ACCESS_ALL, &memh));
    EXPECT_FALSE(driver_says_pinned(host.data()));
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(md, memh));
    uct_md_close(md);
}

/* Found on the GPU host: a pinned range must not reach into the next buffer, or copies from that buffer
 * straddle the end of a pinned range and the driver rejects them. */
TEST_F(copy, pinning_leaves_neighbouring_buffers_alone)
{
    const size_t len = 65537;
    std::vector<char> block(3 * len + 64);
    char *a = block.data() + 16, *b = a + len + 15;
    buffer dev(buf_kind::cuda0, len);
    auto data = random_bytes(len);
    uct_mem_h memh;

    memcpy(b, data.data(), len);
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, a, len, UCT_MD_MEM_ACCESS_ALL, &memh));
    for (void *dst : {(void*)(a + 0), dev.ptr()}) {
        uct_iov_t iov = {b, len, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst, 0, &comp.comp);
        if (status == UCS_INPROGRESS) {
            status = wait(&comp.comp);
        }
        ASSERT_EQ(UCS_OK, status);
    }
    EXPECT_EQ(0, memcmp(a, data.data(), len));
    EXPECT_EQ(data, dev.read());
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}

TEST_F(copy, flush_waits_for_all_operations)
{
    const size_t n = 64, size = 1 << 20;
    buffer src(buf_kind::cuda0, n * size), dst(buf_kind::pinned_host, n * size);
    auto data = random_bytes(n * size);
    counting_completion ops(n), flush;

    src.write(data);
    for (size_t i = 0; i < n; ++i) {
        uct_iov_t iov = {(char*)src.ptr() + i * size, size, UCT_MEM_HANDLE_NULL, 0, 1};
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr() + i * size, 0, &ops.comp);
        ASSERT_TRUE((status == UCS_INPROGRESS) || (status == UCS_OK));
    }
    ucs_status_t status = uct_ep_flush(m_ep, 0, &flush.comp);
    if (status == UCS_INPROGRESS) {
        ASSERT_EQ(UCS_OK, wait(&flush.comp));
    } else {
        ASSERT_EQ(UCS_OK, status);
    }
    EXPECT_EQ(1, ops.done) << "flush completed before the operations";
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_iface, 0, NULL));
    EXPECT_EQ(data, dst.read());
}

/* UCX's module bounds its CUDA events with MAX_EVENTS; here that is a second name for MAX_INFLIGHT, which bounds
 * the operations in flight, and with them the events. */
TEST_F(copy, max_events_is_a_second_name_for_max_inflight)
{
    ASSERT_NO_FATAL_FAILURE(open_iface({{"MAX_EVENTS", "4"}}));
    buffer src(buf_kind::cuda0, 8 * 4096), dst(buf_kind::cuda0, 8 * 4096);
    counting_completion ops(4);

    for (int i = 0; i < 8; ++i) {
        uct_iov_t iov = {(char*)src.ptr() + i * 4096, 4096, UCT_MEM_HANDLE_NULL, 0, 1};
        EXPECT_EQ((i < 4) ? UCS_INPROGRESS : UCS_ERR_NO_RESOURCE,
                  uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr() + i * 4096, 0, &ops.comp)) << i;
    }
    EXPECT_EQ(UCS_OK, wait(&ops.comp));
}

TEST_F(copy, pending_queue_when_inflight_limit_is_reached)
{
    open_iface({{"MAX_INFLIGHT", "4"}});
    const int n = 64;
    buffer src(buf_kind::cuda0, n * 4096), dst(buf_kind::cuda0, n * 4096);
    auto data = random_bytes(n * 4096);
    counting_completion ops(n);
    int issued = 0, no_resource = 0;

    struct pending_op {
        uct_pending_req_t req;
        uct_ep_h         ep;
        void             *src, *dst;
        counting_completion *comp;
        int              *issued;
    };
    std::vector<pending_op> pend(n);

    src.write(data);
    auto issue = [&](void *s, void *d) {
        uct_iov_t iov = {s, 4096, UCT_MEM_HANDLE_NULL, 0, 1};
        return uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)d, 0, &ops.comp);
    };
    for (int i = 0; i < n; ++i) {
        void *s = (char*)src.ptr() + i * 4096, *d = (char*)dst.ptr() + i * 4096;
        ucs_status_t status = issue(s, d);
        if (status == UCS_ERR_NO_RESOURCE) {
            ++no_resource;
            pend[i] = {{}, m_ep, s, d, &ops, &issued};
            pend[i].req.func = [](uct_pending_req_t *req) {
                pending_op *p = ucs_container_of(req, pending_op, req);
                uct_iov_t iov = {p->src, 4096, UCT_MEM_HANDLE_NULL, 0, 1};
                ucs_status_t st = uct_ep_put_zcopy(p->ep, &iov, 1, (uint64_t)p->dst, 0, &p->comp->comp);
                if (st != UCS_ERR_NO_RESOURCE) {
                    ++*p->issued;
                    return UCS_OK;
                }
                return st;
            };
            status = uct_ep_pending_add(m_ep, &pend[i].req, 0);
            if (status == UCS_ERR_BUSY) { /* resources came back meanwhile */
                ASSERT_NE(UCS_ERR_NO_RESOURCE, issue(s, d));
                ++issued;
            } else {
                ASSERT_EQ(UCS_OK, status);
            }
        } else {
            ASSERT_EQ(UCS_INPROGRESS, status);
            ++issued;
        }
    }
    EXPECT_GT(no_resource, 0);
    ASSERT_EQ(UCS_OK, wait(&ops.comp));
    EXPECT_EQ(n, issued);
    EXPECT_EQ(data, dst.read());
    EXPECT_LE(cux_iface_num_events(m_iface), 4u);
}

TEST_F(copy, pending_purge_returns_requests)
{
    open_iface({{"MAX_INFLIGHT", "1"}});
    buffer src(buf_kind::cuda0, 4096), dst(buf_kind::cuda0, 4096);
    uct_iov_t iov = {src.ptr(), 4096, UCT_MEM_HANDLE_NULL, 0, 1};
    counting_completion comp;
    uct_pending_req_t req = {};
    int purged = 0;

    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &comp.comp));
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &comp.comp));
    req.func = [](uct_pending_req_t *) { return UCS_ERR_NO_RESOURCE; };
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &req, 0));
    uct_ep_pending_purge(m_ep, [](uct_pending_req_t *, void *arg) { ++*(int*)arg; }, &purged);
    EXPECT_EQ(1, purged);
    ASSERT_EQ(UCS_OK, wait(&comp.comp));
}

/* A flush covers the operations that wait in the pending queue (issue 31). UCP's worker flush takes an interface's
 * "done" for the end of everything posted through it, and its endpoint flush takes the endpoint's: a flush that
 * came before a waiting put let UCP report the put complete while it had not been issued. Here a put waits for
 * resources (MAX_INFLIGHT=1) behind another; its pending callback first finds no resource once more (as a UCP
 * request can, for a resource of its own), so the interface's only copy completes while it still waits. */
TEST_F(copy, flush_waits_for_operations_in_the_pending_queue)
{
    open_iface({{"MAX_INFLIGHT", "1"}});
    const size_t size = 4096;
    buffer src(buf_kind::cuda0, 2 * size), dst(buf_kind::cuda0, 2 * size);
    auto data = random_bytes(2 * size);
    counting_completion first, second, flush;

    struct waiting_put {
        uct_pending_req_t   req;
        uct_ep_h            ep;
        uct_iov_t           iov;
        uint64_t            dst;
        counting_completion *comp;
        int                 refusals; /* NO_RESOURCE answers left before it tries */
    } put2 = {{}, m_ep, {(char*)src.ptr() + size, size, UCT_MEM_HANDLE_NULL, 0, 1}, (uint64_t)dst.ptr() + size,
              &second, 1};
    put2.req.func = [](uct_pending_req_t *req) {
        waiting_put *p = ucs_container_of(req, waiting_put, req);
        if (p->refusals > 0) {
            --p->refusals;
            return UCS_ERR_NO_RESOURCE;
        }
        ucs_status_t st = uct_ep_put_zcopy(p->ep, &p->iov, 1, p->dst, 0, &p->comp->comp);
        return (st == UCS_ERR_NO_RESOURCE) ? st : UCS_OK;
    };

    src.write(data);
    uct_iov_t iov = {src.ptr(), size, UCT_MEM_HANDLE_NULL, 0, 1};
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &first.comp));
    ASSERT_EQ(UCS_ERR_NO_RESOURCE, uct_ep_put_zcopy(m_ep, &put2.iov, 1, put2.dst, 0, &second.comp));
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &put2.req, 0));

    /* the first put done, the second refused once: nothing in flight, one waits */
    ASSERT_EQ(UCS_OK, wait(&first.comp));
    ASSERT_EQ(0, put2.refusals);
    EXPECT_NE(UCS_OK, uct_iface_flush(m_iface, 0, NULL)) << "the interface said flushed with a put waiting";

    ucs_status_t status = uct_ep_flush(m_ep, 0, &flush.comp);
    ASSERT_TRUE((status == UCS_INPROGRESS) || (status == UCS_ERR_NO_RESOURCE)) << ucs_status_string(status);
    if (status == UCS_ERR_NO_RESOURCE) { /* as UCP does: retry when a resource comes back */
        while ((status = uct_ep_flush(m_ep, 0, &flush.comp)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(m_worker);
        }
    }
    if (status == UCS_INPROGRESS) {
        ASSERT_EQ(UCS_OK, wait(&flush.comp));
    }
    EXPECT_EQ(1, second.done) << "the endpoint flush completed before the waiting put";
    ASSERT_EQ(UCS_OK, wait(&second.comp));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_iface, 0, NULL));
    EXPECT_EQ(data, dst.read());
}

/* A flush that waits behind an endpoint's pending requests is cancelled with them; the purge callback sees only
 * the endpoint's own requests. */
TEST_F(copy, pending_purge_cancels_a_flush_waiting_behind)
{
    open_iface({{"MAX_INFLIGHT", "1"}});
    buffer src(buf_kind::cuda0, 4096), dst(buf_kind::cuda0, 4096);
    uct_iov_t iov = {src.ptr(), 4096, UCT_MEM_HANDLE_NULL, 0, 1};
    counting_completion comp, flush;
    uct_pending_req_t req = {};
    int purged = 0;

    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &comp.comp));
    req.func = [](uct_pending_req_t *) { return UCS_ERR_NO_RESOURCE; };
    ASSERT_EQ(UCS_OK, uct_ep_pending_add(m_ep, &req, 0));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_flush(m_ep, 0, &flush.comp));
    uct_ep_pending_purge(m_ep, [](uct_pending_req_t *, void *arg) { ++*(int*)arg; }, &purged);
    EXPECT_EQ(1, purged);
    EXPECT_EQ(1, flush.done);
    EXPECT_EQ(UCS_ERR_CANCELED, flush.status);
    ASSERT_EQ(UCS_OK, wait(&comp.comp));
    EXPECT_EQ(UCS_OK, uct_iface_flush(m_iface, 0, NULL));
}

TEST_F(copy, event_fd_wakes_on_completion)
{
    const size_t size = 64 << 20;
    buffer src(buf_kind::cuda0, size), dst(buf_kind::pinned_host, size);
    uct_iov_t iov = {src.ptr(), size, UCT_MEM_HANDLE_NULL, 0, 1};
    counting_completion comp;
    int fd;

    ASSERT_EQ(UCS_OK, uct_iface_event_fd_get(m_iface, &fd));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &comp.comp));

    ucs_status_t status;
    while ((status = uct_iface_event_arm(m_iface, UCT_EVENT_SEND_COMP)) == UCS_ERR_BUSY) {
        uct_worker_progress(m_worker);
        if (comp.done) {
            GTEST_SKIP() << "copy finished before the interface could be armed";
        }
    }
    ASSERT_EQ(UCS_OK, status);

    struct pollfd pfd = {fd, POLLIN, 0};
    ASSERT_EQ(1, poll(&pfd, 1, 10000)) << "no wake-up within 10 s";
    ASSERT_EQ(UCS_OK, wait(&comp.comp));
    EXPECT_EQ(1, comp.done);
}

TEST_F(copy, hundred_thousand_operations_keep_resources_bounded)
{
    const int total = 100000, window = 256;
    buffer a(buf_kind::cuda0, window * 256), b(buf_kind::pinned_host, window * 256);
    int outstanding = 0, done = 0, posted = 0;

    struct ctr {
        uct_completion_t comp;
        int              *done, *outstanding;
    } c;
    c.comp.func   = [](uct_completion_t *self) {
        ctr *p = ucs_container_of(self, ctr, comp);
        ++*p->done;
        --*p->outstanding;
        self->count = 1;
    };
    c.comp.count  = 1;
    c.comp.status = UCS_OK;
    c.done        = &done;
    c.outstanding = &outstanding;

    /* Alternate directions so that several streams are in use. */
    while (done < total) {
        while ((posted < total) && (outstanding < window)) {
            int i         = posted % window;
            bool up       = (posted / window) % 2;
            uct_iov_t iov = {(char*)(up ? b.ptr() : a.ptr()) + i * 256, 256, UCT_MEM_HANDLE_NULL, 0, 1};
            uint64_t dst  = (uint64_t)(up ? a.ptr() : b.ptr()) + i * 256;
            ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, dst, 0, &c.comp);
            ASSERT_TRUE(status == UCS_INPROGRESS || status == UCS_OK) << ucs_status_string(status);
            if (status == UCS_INPROGRESS) {
                ++outstanding;
            } else {
                ++done;
            }
            ++posted;
        }
        uct_worker_progress(m_worker);
    }
    EXPECT_LE(cux_iface_num_events(m_iface), (unsigned)window + 64);
    EXPECT_LE(cux_iface_num_streams(m_iface), 5u * cux_device_count());
    printf("100000 operations: %u events, %u streams\n", cux_iface_num_events(m_iface),
           cux_iface_num_streams(m_iface));
}

TEST_F(copy, iface_open_on_unknown_device_fails_cleanly)
{
    uct_iface_config_t *config;
    uct_iface_params_t params = {};
    uct_iface_h iface;

    ASSERT_EQ(UCS_OK, uct_md_iface_config_read(m_md, "cuda_copy", NULL, NULL, &config));
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "cuda_copy";
    params.mode.device.dev_name = "gpu7";
    EXPECT_EQ(UCS_ERR_NO_DEVICE, uct_iface_open(m_md, m_worker, &params, config, &iface));
    uct_config_release(config);
}

/* ---------------------------------------------------------------- injected faults (mock driver) */

/* Each fault: an error status or error completion, no hang, the driver objects back to their starting counts,
 * and the interface still usable once the fault is gone. */
class copy_faults : public copy {
protected:
    void SetUp() override
    {
        if (!using_mock_driver()) {
            GTEST_SKIP() << "faults are injected by the mock driver (MOCK_CUDA_FAIL)";
        }
        copy::SetUp();
    }
    void TearDown() override
    {
        unsetenv("MOCK_CUDA_FAIL");
        copy::TearDown();
    }

    /* A zero-copy put GPU0 -> GPU0 (a second buffer) of size bytes, waited for; its status. */
    ucs_status_t put(size_t size)
    {
        buffer src(buf_kind::cuda0, size), dst(buf_kind::cuda0, size);
        uct_iov_t iov = {src.ptr(), size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dst.ptr(), 0, &comp.comp);
        if (status == UCS_INPROGRESS) {
            status = wait(&comp.comp);
        }
        if (uct_ep_flush(m_ep, 0, nullptr) == UCS_INPROGRESS) {
            counting_completion flushed;
            uct_ep_flush(m_ep, 0, &flushed.comp);
            wait(&flushed.comp);
        }
        return status;
    }

    /* Reopen the interface so that it has created no stream or event yet; the counts it starts from. */
    void fresh_iface(long *streams, long *events)
    {
        close_iface();
        *streams = mock_live("streams");
        *events  = mock_live("events");
        open_iface();
    }
};

TEST_F(copy_faults, out_of_device_memory_in_an_allocation)
{
    long before = mock_live("allocations");
    uct_allocated_memory_t mem;
    setenv("MOCK_CUDA_FAIL", "cuMemAlloc", 1);
    EXPECT_NE(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 1 << 20, &mem));
    EXPECT_NE(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA_MANAGED, 1 << 20, &mem));
    unsetenv("MOCK_CUDA_FAIL");
    EXPECT_EQ(before, mock_live("allocations"));
    ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 1 << 20, &mem));
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
    EXPECT_EQ(before, mock_live("allocations"));
}

TEST_F(copy_faults, stream_and_event_creation_failures)
{
    for (const char *call : {"cuStreamCreate", "cuEventCreate"}) {
        SCOPED_TRACE(call);
        long streams, events;
        fresh_iface(&streams, &events);
        setenv("MOCK_CUDA_FAIL", call, 1);
        ucs_status_t status = put(65536);
        if (!strcmp(call, "cuStreamCreate")) {
            EXPECT_NE(UCS_OK, status);
        } else {
            /* a batch that gets no event completes by synchronising its stream: done, not failed */
            EXPECT_NE(UCS_ERR_TIMED_OUT, status);
        }
        unsetenv("MOCK_CUDA_FAIL");
        EXPECT_EQ(UCS_OK, put(65536)) << "the interface is not usable once the fault is gone";
        close_iface();
        EXPECT_EQ(streams, mock_live("streams"));
        EXPECT_EQ(events, mock_live("events"));
        open_iface();
    }
}

TEST_F(copy_faults, a_failed_copy_is_an_error_and_the_interface_goes_on)
{
    long streams, events;
    fresh_iface(&streams, &events);
    setenv("MOCK_CUDA_FAIL", "cuMemcpyAsync", 1);
    EXPECT_NE(UCS_OK, put(65536));
    EXPECT_NE(UCS_OK, put(8));
    unsetenv("MOCK_CUDA_FAIL");
    EXPECT_EQ(UCS_OK, put(65536));
    close_iface();
    EXPECT_EQ(streams, mock_live("streams"));
    EXPECT_EQ(events, mock_live("events"));
    open_iface();
}

/* A context, once retained, is kept for the life of the process, so a failure to create one is tested in a
 * fresh copy of this program (the DISABLED_ test below, run by name) in which every retain fails until the test
 * lifts the fault: opening and querying the interface still work (its link measurement falls back), an
 * allocation fails with an error, and afterwards everything works. */
TEST_F(copy_faults, a_context_that_cannot_be_created_is_an_error_until_it_can)
{
    command_result r = run_test_in_fresh_process(
        "MOCK_CUDA_FAIL=cuDevicePrimaryCtxRetain",
        "copy_faults.DISABLED_in_a_fresh_process_contexts_fail_until_the_driver_can");
    EXPECT_TRUE(passed(r)) << r.output;
}

TEST_F(copy_faults, DISABLED_in_a_fresh_process_contexts_fail_until_the_driver_can)
{
    long allocations = mock_live("allocations"), streams, events;
    uct_allocated_memory_t mem;
    EXPECT_NE(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 1 << 20, &mem)) << "no context, yet memory came";
    EXPECT_EQ(allocations, mock_live("allocations"));
    unsetenv("MOCK_CUDA_FAIL");
    ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 1 << 20, &mem)) << "no context once the driver can";
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
    fresh_iface(&streams, &events);
    EXPECT_EQ(UCS_OK, put(65536));
    close_iface();
    EXPECT_EQ(streams, mock_live("streams"));
    EXPECT_EQ(events, mock_live("events"));
    open_iface();
}
