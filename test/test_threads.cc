/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Threads: several threads, each with a worker and interfaces of its own, share one memory domain, the device
 * table and the process-wide mapping cache, as the threads of an application with a UCP worker each do. Every
 * transfer is data-checked. run-tests.sh also runs these under ThreadSanitizer (suite sanitizers-thread). One UCP
 * worker shared by threads (UCS_THREAD_MODE_MULTI) is test/cux_ucp_datacheck --threads, run from test_perftest.cc.
 */
#include "ipc_transport.h"

#include <atomic>
#include <cstring>
#include <thread>

using namespace cux_test;

namespace {

const int num_threads = 4;

/* A worker of the calling thread's own, an interface of tl_name on it and an endpoint: to the peer whose hello
 * message is given, else to the interface itself. */
class thread_iface {
public:
    thread_iface(uct_md_h md, const char *tl_name, const peer_msg *peer)
    {
        uct_iface_config_t *config;
        uct_iface_params_t params = {};
        uct_ep_params_t ep_params = {};
        uct_iface_attr_t attr;

        if ((ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &m_async) != UCS_OK) ||
            (uct_worker_create(m_async, UCS_THREAD_MODE_SINGLE, &m_worker) != UCS_OK) ||
            (uct_md_iface_config_read(md, tl_name, NULL, NULL, &config) != UCS_OK)) {
            return;
        }
        params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
        params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name  = tl_name;
        params.mode.device.dev_name = "cuda";
        ucs_status_t status         = uct_iface_open(md, m_worker, &params, config, &m_iface);
        uct_config_release(config);
        if ((status != UCS_OK) || (uct_iface_query(m_iface, &attr) != UCS_OK)) {
            return;
        }
        uct_iface_progress_enable(m_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        m_own_addr.resize(attr.iface_addr_len);
        if (uct_iface_get_address(m_iface, (uct_iface_addr_t*)m_own_addr.data()) != UCS_OK) {
            return;
        }
        ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                               UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep_params.iface      = m_iface;
        ep_params.dev_addr   = peer ? (const uct_device_addr_t*)peer->blob : NULL;
        ep_params.iface_addr = peer ? (const uct_iface_addr_t*)(peer->blob + peer->a) :
                                      (const uct_iface_addr_t*)m_own_addr.data();
        m_ok = (uct_ep_create(&ep_params, &m_ep) == UCS_OK);
    }

    ~thread_iface()
    {
        if (m_ep != nullptr) {
            uct_ep_destroy(m_ep);
        }
        if (m_iface != nullptr) {
            uct_iface_close(m_iface);
        }
        if (m_worker != nullptr) {
            uct_worker_destroy(m_worker);
        }
        if (m_async != nullptr) {
            ucs_async_context_destroy(m_async);
        }
    }

    bool ok() const { return m_ok; }

    /* A zero-copy put or get of size bytes, waited for (at most 30 s); its status. */
    ucs_status_t zcopy(bool put, void *local, size_t size, uint64_t raddr, uct_rkey_t rkey)
    {
        uct_iov_t iov = {local, size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = put ? uct_ep_put_zcopy(m_ep, &iov, 1, raddr, rkey, &comp.comp) :
                                    uct_ep_get_zcopy(m_ep, &iov, 1, raddr, rkey, &comp.comp);
        if (status != UCS_INPROGRESS) {
            return status;
        }
        ucs_time_t deadline = ucs_get_time() + ucs_time_from_sec(30.0);
        while (!comp.done && (ucs_get_time() < deadline)) {
            uct_worker_progress(m_worker);
        }
        return comp.done ? comp.status : UCS_ERR_TIMED_OUT;
    }

private:
    ucs_async_context_t *m_async = nullptr;
    uct_worker_h        m_worker = nullptr;
    uct_iface_h         m_iface  = nullptr;
    uct_ep_h            m_ep     = nullptr;
    std::vector<char>   m_own_addr;
    bool                m_ok     = false;
};

/* Runs body(thread index) on num_threads threads at once; the number of threads that reported a failure. */
template <typename F> int run_threads(F body)
{
    std::atomic<int> failed(0);
    std::vector<std::thread> threads;

    for (int t = 0; t < num_threads; ++t) {
        threads.emplace_back([&, t] {
            if (!body(t)) {
                ++failed;
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    return failed.load();
}

} // namespace

class threads_copy : public copy_transport {
};

/* cuda_copy: each thread moves data host -> GPU0 -> GPU1 -> host on its own interface, registering and
 * querying its buffers on the shared memory domain meanwhile. */
TEST_F(threads_copy, workers_of_their_own_share_the_memory_domain)
{
    const size_t size = 65536 + 17;
    const int rounds  = 50;
    int failed = run_threads([&](int t) {
        thread_iface ti(m_md, "cuda_copy", nullptr);
        buffer host(buf_kind::host, size), gpu0(buf_kind::cuda0, size);
        buffer gpu1(cux_device_count() > 1 ? buf_kind::cuda1 : buf_kind::cuda0, size);
        std::vector<uint8_t> back(size);
        if (!ti.ok()) {
            ADD_FAILURE() << "thread " << t << ": no interface";
            return false;
        }
        for (int r = 0; r < rounds; ++r) {
            std::vector<uint8_t> data = pattern(1000 * t + r, size);
            uct_mem_h memh;
            memcpy(host.ptr(), data.data(), size);
            if ((uct_md_mem_reg(m_md, gpu0.ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh) != UCS_OK) ||
                (ti.zcopy(true, host.ptr(), size, (uint64_t)gpu0.ptr(), 0) != UCS_OK) ||
                (ti.zcopy(true, gpu0.ptr(), size, (uint64_t)gpu1.ptr(), 0) != UCS_OK) ||
                (ti.zcopy(false, back.data(), size, (uint64_t)gpu1.ptr(), 0) != UCS_OK) ||
                (uct_md_mem_dereg(m_md, memh) != UCS_OK)) {
                ADD_FAILURE() << "thread " << t << ", round " << r << ": an operation failed";
                return false;
            }
            if (back != data) {
                ADD_FAILURE() << "thread " << t << ", round " << r << ": data mismatch";
                return false;
            }
        }
        return true;
    });
    EXPECT_EQ(0, failed);
}

/* cuda_ipc: each thread puts its own content into its part of the peer's buffers and gets it back, through
 * the mapping cache shared by all; the cache holds fewer mappings than there are buffers, so threads evict
 * each other's mappings while others are in use. */
TEST_F(ipc_transport, threads_with_workers_of_their_own_share_the_mapping_cache)
{
    const size_t chunk = 4096 + 3, nbufs = 6;
    const int rounds   = 60;
    destroy_ep();
    open_md({{"CACHE_MAX_REGIONS", "2"}});
    start_peer();
    std::vector<remote_buf> rbs;
    for (size_t i = 0; i < nbufs; ++i) {
        rbs.push_back(remote_alloc(chunk * num_threads, i % cux_device_count(), 100 + i));
        ASSERT_NE(0u, rbs.back().addr);
    }
    counters before = cache();
    int failed = run_threads([&](int t) {
        thread_iface ti(m_md, "cuda_ipc", &m_hello);
        buffer local(t % 2 ? buf_kind::cuda0 : (cux_device_count() > 1 ? buf_kind::cuda1 : buf_kind::cuda0),
                     chunk);
        if (!ti.ok()) {
            ADD_FAILURE() << "thread " << t << ": no interface";
            return false;
        }
        for (int r = 0; r < rounds; ++r) {
            const remote_buf &rb = rbs[(r + t) % nbufs];
            uint64_t raddr       = rb.addr + chunk * t;
            std::vector<uint8_t> data = pattern(1000 * t + r, chunk);
            local.write(data);
            if ((ti.zcopy(true, local.ptr(), chunk, raddr, rb.rkey.rkey) != UCS_OK)) {
                ADD_FAILURE() << "thread " << t << ", round " << r << ": put failed";
                return false;
            }
            local.write(std::vector<uint8_t>(chunk, 0xa5));
            if (ti.zcopy(false, local.ptr(), chunk, raddr, rb.rkey.rkey) != UCS_OK) {
                ADD_FAILURE() << "thread " << t << ", round " << r << ": get failed";
                return false;
            }
            if (local.read() != data) {
                ADD_FAILURE() << "thread " << t << ", round " << r << ": data mismatch";
                return false;
            }
        }
        return true;
    });
    EXPECT_EQ(0, failed);
    counters after = cache();
    EXPECT_LE(after.regions, 2ul);
    printf("%d threads x %d round trips: %lu mappings made, %lu evicted\n", num_threads, rounds,
           after.misses - before.misses, after.evictions - before.evictions);
    for (auto &rb : rbs) {
        remote_free(rb);
    }
}
