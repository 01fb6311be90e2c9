/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What UCX's own module gives applications without being asked, and ours must give too (docs/parity.md): a
 * buffer filled by a plain synchronous copy can be sent at once, whichever way the module learns of it; the
 * calling thread's CUDA context is as it was; UCP's memory-type cache learns what the memory domain was asked
 * about; the link measurement leaves peer access on. Runs on a real GPU, or on the mock driver, which lands
 * pageable copies late unless the memory or the context asks for synchronous memory operations.
 */
#include "cux_test.h"

#include <cstring>
#include <dlfcn.h>
#include <thread>

extern "C" {
#include <ucs/memory/memtype_cache.h>
#include "base/cux_link_perf.h"
}

using namespace cux_test;

namespace {

/* The driver's own synchronous copies, as an application calls them (not through our loader's table). */
struct app_driver {
    CUresult (*htod)(CUdeviceptr, const void*, size_t) = nullptr;
    CUresult (*dtoh)(void*, CUdeviceptr, size_t)       = nullptr;

    app_driver()
    {
        const char *path = getenv("CUX_DRIVER_PATH");
        void *handle     = dlopen((path != nullptr) ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (handle != nullptr) {
            *(void**)&htod = dlsym(handle, "cuMemcpyHtoD_v2");
            *(void**)&dtoh = dlsym(handle, "cuMemcpyDtoH_v2");
        }
    }
};

CUcontext current_ctx()
{
    CUcontext ctx = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cux_drv.cuCtxGetCurrent(&ctx));
    return ctx;
}


} // namespace

class parity : public copy_transport {
protected:
    void SetUp() override
    {
        copy_transport::SetUp();
        if (HasFatalFailure() || IsSkipped()) {
            return;
        }
        ASSERT_NE(nullptr, m_drv.htod) << "the driver has no cuMemcpyHtoD_v2";
        /* the application's thread works in the device's primary context, as the CUDA runtime does */
        ASSERT_EQ(UCS_OK, cux_device_ctx(0, &m_app_ctx));
        ASSERT_EQ(CUDA_SUCCESS, cux_drv.cuCtxPushCurrent(m_app_ctx));
    }

    void TearDown() override
    {
        CUcontext popped;
        if (m_app_ctx != nullptr) {
            cux_drv.cuCtxPopCurrent(&popped);
        }
        copy_transport::TearDown();
    }

    enum class learn { mem_query, detect, mem_reg, none };

    /* How UCP learns of a GPU buffer before it moves it: once per message, as UCP does with its cache off. */
    void tell_the_module(learn how, void *dev, size_t size)
    {
        uct_md_mem_attr_t attr;
        ucs_memory_type_t type;
        uct_mem_h memh;

        switch (how) {
        case learn::mem_query:
            attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE;
            ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, dev, size, &attr));
            break;
        case learn::detect:
            ASSERT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, dev, size, &type));
            break;
        case learn::mem_reg:
            ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, dev, size, UCT_MD_MEM_ACCESS_ALL, &memh));
            ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
            break;
        case learn::none:
            break;
        }
    }

    /* Fill by a plain synchronous copy from pageable memory, let the module see the buffer, and send it at once
     * (put_zcopy to pageable host memory): every round's content must arrive whole. */
    void fill_and_send(learn how, void *dev, size_t size, int rounds = 20)
    {
        std::vector<uint8_t> in(size);

        for (int r = 0; r < rounds; ++r) {
            auto data = pattern(1000 + r, size);
            ASSERT_EQ(CUDA_SUCCESS, m_drv.htod((CUdeviceptr)dev, data.data(), size));
            tell_the_module(how, dev, size);
            uct_iov_t iov = {dev, size, UCT_MEM_HANDLE_NULL, 0, 1};
            counting_completion comp;
            ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)in.data(), 0, &comp.comp);
            if (status == UCS_INPROGRESS) {
                status = wait(&comp.comp);
            }
            ASSERT_EQ(UCS_OK, status);
            size_t bad = 0;
            while ((bad < size) && (in[bad] == data[bad])) {
                ++bad;
            }
            ASSERT_EQ(size, bad) << "round " << r << ": byte " << bad << " of " << size << " is stale";
        }
    }

    app_driver m_drv;
    CUcontext  m_app_ctx = nullptr;
};

static const size_t fill_size = (1 << 20) + 3; /* past the mock's eagerly landed head, like a real tail */

TEST_F(parity, synchronous_fill_then_send_after_a_memory_query)
{
    buffer dev(buf_kind::cuda0, fill_size);
    fill_and_send(learn::mem_query, dev.ptr(), fill_size);
}

TEST_F(parity, synchronous_fill_then_send_after_memory_type_detection)
{
    buffer dev(buf_kind::cuda0, fill_size);
    fill_and_send(learn::detect, dev.ptr(), fill_size);
}

TEST_F(parity, synchronous_fill_then_send_after_registration)
{
    buffer dev(buf_kind::cuda0, fill_size);
    fill_and_send(learn::mem_reg, dev.ptr(), fill_size);
}

TEST_F(parity, synchronous_fill_then_send_of_managed_memory)
{
    buffer managed(buf_kind::managed, fill_size);
    fill_and_send(learn::mem_query, managed.ptr(), fill_size);
}

/* A message inside a larger allocation: the module learns of the allocation through the message's address. */
TEST_F(parity, synchronous_fill_then_send_of_a_message_inside_an_allocation)
{
    buffer dev(buf_kind::cuda0, 4 * fill_size);
    fill_and_send(learn::mem_query, (char*)dev.ptr() + fill_size + 4171, fill_size);
}

/* Memory the memory domain allocated itself is synchronous from the start. */
TEST_F(parity, synchronous_fill_then_send_of_md_allocated_memory)
{
    uct_allocated_memory_t mem;

    ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, fill_size, &mem));
    fill_and_send(learn::none, mem.address, fill_size);
    EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
}

/*
 * Two threads of one context (issue 31's stress, cux_ucp_datacheck --threads 2: 1 run in 1,000): thread B's first
 * contact gives the context CU_CTX_SYNC_MEMOPS and synchronises once, while thread A's fill, started a moment
 * before the flag, is still landing. When A hands the buffer over, the flag is there already; the module must
 * still let A's earlier fill land before it moves data into the buffer, or the fill lands over the data. Here
 * the fill is issued without the flag, the flag is then set as B would set it, and A's first contact follows.
 */
TEST_F(parity, a_thread_whose_fill_raced_the_flag_of_another_thread_sees_its_fill_land_first)
{
    buffer dev(buf_kind::cuda0, fill_size);
    auto poison = std::vector<uint8_t>(fill_size, 0xa5), data = pattern(77, fill_size);
    unsigned flags = 0;

    const bool ctx_flags = (cux_drv.cuCtxSetFlags != nullptr); /* else the allocation's attribute (a 12.0 driver) */

    ASSERT_EQ(CUDA_SUCCESS, cux_drv.cuCtxGetFlags(&flags));
    std::thread a([&] {
        unsigned one = 1;
        ASSERT_EQ(CUDA_SUCCESS, cux_drv.cuCtxPushCurrent(m_app_ctx));
        if (ctx_flags) {
            ASSERT_EQ(CUDA_SUCCESS, cux_drv.cuCtxSetFlags(flags & ~CU_CTX_SYNC_MEMOPS));
        }
        ASSERT_EQ(CUDA_SUCCESS, m_drv.htod((CUdeviceptr)dev.ptr(), poison.data(), fill_size)); /* A's fill */
        /* B's first contact */
        ASSERT_EQ(CUDA_SUCCESS, ctx_flags ? cux_drv.cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS) :
                                cux_drv.cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                                              (CUdeviceptr)dev.ptr()));
        tell_the_module(learn::mem_query, dev.ptr(), fill_size); /* A's first contact */
        uct_iov_t iov = {data.data(), fill_size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dev.ptr(), 0, &comp.comp);
        if (status == UCS_INPROGRESS) {
            status = wait(&comp.comp);
        }
        ASSERT_EQ(UCS_OK, status);
        std::vector<uint8_t> got(fill_size);
        ASSERT_EQ(CUDA_SUCCESS, m_drv.dtoh(got.data(), (CUdeviceptr)dev.ptr(), fill_size));
        size_t good = 0;
        while ((good < fill_size) && (got[good] == data[good])) {
            ++good;
        }
        EXPECT_EQ(fill_size, good) << "byte " << good << " is 0x" << std::hex << (int)got[good]
                                   << ": the fill landed over the data";
        CUcontext popped;
        cux_drv.cuCtxPopCurrent(&popped);
    });
    a.join();
}

/* UCX's own module tells UCP's memory-type cache what a memory query found (UCX's allocation hooks report
 * buffers as "unknown" and UCP asks the memory domain about those only). */
TEST_F(parity, memory_query_updates_the_memtype_cache)
{
    buffer dev(buf_kind::cuda0, 3 * 4096);
    uct_md_mem_attr_t attr;
    ucs_memory_info_t info;

    if ((ucs_memtype_cache_global_instance == nullptr) &&
        (ucs_memtype_cache_lookup(dev.ptr(), 1, &info) == UCS_ERR_UNSUPPORTED)) {
        GTEST_SKIP() << "UCP's memory-type cache is off (UCX_MEMTYPE_CACHE=n)";
    }
    /* what earlier tests' queries left of buffers freed since (no hook tells the cache of a mock free) may lie
     * here, where the mock placed this allocation: gone first, so the entry looked up is this query's */
    ucs_memtype_cache_remove(dev.ptr(), 3 * 4096);
    attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE;
    ASSERT_EQ(UCS_OK, uct_md_mem_query(m_md, (char*)dev.ptr() + 4096, 16, &attr));
    ASSERT_EQ(UCS_OK, ucs_memtype_cache_lookup((char*)dev.ptr() + 2 * 4096, 16, &info));
    EXPECT_EQ(UCS_MEMORY_TYPE_CUDA, info.type);
    EXPECT_EQ(dev.ptr(), info.base_address); /* the whole allocation, not only the queried range */
    ucs_memtype_cache_remove(dev.ptr(), 3 * 4096);
}

/* A thread that had no current context has none after any of our calls; one that had its own keeps it. */
TEST_F(parity, the_callers_context_is_left_as_it_was)
{
    buffer dev(buf_kind::cuda0, 4096);
    std::vector<uint8_t> host(4096);
    CUcontext other = nullptr;

    auto every_call = [&](const char *who) {
        SCOPED_TRACE(who);
        CUcontext before = current_ctx();
        uct_md_mem_attr_t attr = {};
        ucs_memory_type_t type;
        uct_allocated_memory_t mem;
        uct_mem_h memh;

        attr.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE;
        EXPECT_EQ(UCS_OK, uct_md_mem_query(m_md, dev.ptr(), 4096, &attr));
        EXPECT_EQ(before, current_ctx()) << "mem_query";
        EXPECT_EQ(UCS_OK, uct_md_detect_memory_type(m_md, dev.ptr(), 4096, &type));
        EXPECT_EQ(before, current_ctx()) << "detect_memory_type";
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, dev.ptr(), 4096, UCT_MD_MEM_ACCESS_ALL, &memh));
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
        EXPECT_EQ(before, current_ctx()) << "mem_reg";
        ASSERT_EQ(UCS_OK, md_alloc(m_md, UCS_MEMORY_TYPE_CUDA, 4096, &mem));
        EXPECT_EQ(UCS_OK, uct_mem_free(&mem));
        EXPECT_EQ(before, current_ctx()) << "mem_alloc";
        EXPECT_EQ(UCS_OK, uct_ep_put_short(m_ep, host.data(), 8, (uint64_t)dev.ptr(), 0));
        EXPECT_EQ(before, current_ctx()) << "put_short";
        uct_iov_t iov = {host.data(), 4096, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)dev.ptr(), 0, &comp.comp);
        EXPECT_EQ(before, current_ctx()) << "put_zcopy";
        if (status == UCS_INPROGRESS) {
            status = wait(&comp.comp);
        }
        EXPECT_EQ(UCS_OK, status);
        EXPECT_EQ(before, current_ctx()) << "progress";
    };

    std::thread([&] {
        every_call("a thread with no context");
        EXPECT_EQ(nullptr, current_ctx());
    }).join();

    if (cux_device_count() > 1) {
        ASSERT_EQ(UCS_OK, cux_device_ctx(1, &other));
        std::thread([&] {
            ASSERT_EQ(CUDA_SUCCESS, cux_drv.cuCtxSetCurrent(other));
            every_call("a thread in another device's context");
            EXPECT_EQ(other, current_ctx());
        }).join();
    }
}

/* The link measurement (cuda_ipc with BW=auto) enables peer access as a mapping would, and leaves it on: a
 * mapping opened since may rely on it. */
TEST(parity_links, measurement_leaves_peer_access_on)
{
    CUX_SKIP_WITHOUT_GPU();
    if (cux_device_count() < 2) {
        GTEST_SKIP() << "needs two GPUs";
    }
    command_result r = run_command("UCX_MODULES=^cuda " + build_path("test/cux_gtest") + " --probe-peer-access");
    EXPECT_EQ(0, r.status) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("peer access after the measurement: on")) << r.output;
}

/* --probe-peer-access: in a process of its own, so that the measurement of the pair has not run yet. */
int probe_peer_access()
{
    CUcontext ctx0, ctx1, popped;
    cux_link_perf_t perf;
    CUresult res;

    if ((cux_device_count() < 2) || (cux_device_ctx(0, &ctx0) != UCS_OK) || (cux_device_ctx(1, &ctx1) != UCS_OK)) {
        printf("needs two GPUs\n");
        return 1;
    }
    if (cux_link_perf_get(0, 1, &perf) != UCS_OK) {
        printf("the measurement of GPU0 -> GPU1 failed\n");
        return 1;
    }
    cux_drv.cuCtxPushCurrent(ctx0);
    res = cux_drv.cuCtxEnablePeerAccess(ctx1, 0);
    cux_drv.cuCtxPopCurrent(&popped);
    printf("GPU0 -> GPU1: %.1f GB/s, %.2f us; peer access after the measurement: %s\n", perf.bandwidth / 1e9,
           perf.latency * 1e6, (res == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) ? "on" : "off");
    return 0;
}
