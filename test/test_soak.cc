/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Soak: many operations over many buffers on cuda_copy and cuda_ipc, with what the process holds measured at
 * the start and at the end: the interfaces' events and streams, the mapping cache, open file descriptors, the
 * resident host memory and (with a real driver) the GPU memory in use. Nothing may grow with the work done.
 *
 * CUX_TEST_SOAK_OPS operations and CUX_TEST_SOAK_BUFFERS buffers per transport (defaults 20000 and 200, small enough for
 * CI's mock run); the GPU host runs 500000 and 10000 per transport (10^6 operations in all).
 */
#include "ipc_transport.h"

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <fstream>

using namespace cux_test;

namespace {

unsigned long soak_env(const char *name, unsigned long dflt)
{
    const char *v = getenv(name);
    return (v != nullptr) ? strtoul(v, nullptr, 0) : dflt;
}

/* What the process holds. */
struct holdings {
    long   fds       = 0;
    long   rss_kb    = 0;
    long   gpu_used  = -1; /* bytes in use on GPU0, -1 where the driver cannot say (the mock) */
    long   events    = -1, streams = -1;
    unsigned long regions = 0;

    static holdings now(uct_iface_h iface)
    {
        holdings h;
        h.fds = open_descriptors();
        std::ifstream status("/proc/self/status");
        std::string line;
        while (std::getline(status, line)) {
            if (line.rfind("VmRSS:", 0) == 0) {
                h.rss_kb = atol(line.c_str() + 6);
            }
        }
        h.gpu_used = gpu_memory_used();
        if (iface != nullptr) {
            h.events  = cux_iface_num_events(iface);
            h.streams = cux_iface_num_streams(iface);
        }
        size_t size;
        unsigned long hits, misses, stale, evictions;
        cux_ipc_cache_counters(&h.regions, &size, &hits, &misses, &stale, &evictions);
        return h;
    }

    static long gpu_memory_used()
    {
        const char *path = getenv("CUX_DRIVER_PATH");
        void *lib        = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        CUresult (*get_info)(size_t*, size_t*) = nullptr;
        size_t free_b, total_b;
        CUcontext ctx;

        if (lib != nullptr) {
            *(void**)&get_info = dlsym(lib, "cuMemGetInfo_v2");
            dlclose(lib);
        }
        if ((get_info == nullptr) || (cux_device_ctx(0, &ctx) != UCS_OK) ||
            (cux_drv.cuCtxPushCurrent(ctx) != CUDA_SUCCESS)) {
            return -1;
        }
        CUresult res = get_info(&free_b, &total_b);
        cux_drv.cuCtxPopCurrent(&ctx);
        return (res == CUDA_SUCCESS) ? (long)(total_b - free_b) : -1;
    }

    std::string str() const
    {
        char s[256];
        snprintf(s, sizeof(s), "%ld fds, %ld kB resident, GPU0 %s%ld MB in use, %ld events, %ld streams, %lu mappings",
                 fds, rss_kb, (gpu_used < 0) ? "(unknown) " : "", (gpu_used < 0) ? 0 : gpu_used >> 20, events,
                 streams, regions);
        return s;
    }
};

/* The end may hold at most this much more than the start (after the warm-up). */
void expect_no_growth(const holdings &start, const holdings &end)
{
    EXPECT_EQ(start.fds, end.fds) << "file descriptors leaked";
    EXPECT_LE(end.rss_kb - start.rss_kb, 64 * 1024) << "resident host memory grew by more than 64 MB";
    if ((start.gpu_used >= 0) && (end.gpu_used >= 0)) {
        EXPECT_LE(end.gpu_used - start.gpu_used, 64l << 20) << "GPU memory in use grew by more than 64 MB";
    }
    EXPECT_LE(end.events, start.events + 64) << "events grew with the work done";
    EXPECT_EQ(start.streams, end.streams) << "streams grew with the work done";
}

/* A window of zero-copy operations in flight: posted until window are outstanding, progressed until done. */
struct op_window {
    struct op {
        uct_completion_t comp;
        op_window        *owner;
    };
    std::vector<op> ops;
    std::vector<op*> idle;
    unsigned long done = 0, errors = 0;

    explicit op_window(size_t window) : ops(window)
    {
        for (auto &o : ops) {
            o.comp.func  = completed;
            o.owner      = this;
            idle.push_back(&o);
        }
    }

    static void completed(uct_completion_t *self)
    {
        op *o = ucs_container_of(self, op, comp);
        o->owner->errors += (self->status != UCS_OK);
        ++o->owner->done;
        o->owner->idle.push_back(o);
    }

    /* A free completion, progressing the worker until one is. */
    uct_completion_t *get(uct_worker_h worker)
    {
        while (idle.empty()) {
            uct_worker_progress(worker);
        }
        op *o = idle.back();
        idle.pop_back();
        o->comp.count  = 1;
        o->comp.status = UCS_OK;
        return &o->comp;
    }

    /* The operation was posted: it completes later (INPROGRESS), or now or never, so its completion is free. */
    void posted(uct_completion_t *comp, ucs_status_t status)
    {
        if (status != UCS_INPROGRESS) {
            errors += (status != UCS_OK);
            ++done;
            idle.push_back(ucs_container_of(comp, op, comp));
        }
    }

    void drain(uct_worker_h worker)
    {
        while (idle.size() < ops.size()) {
            uct_worker_progress(worker);
        }
    }
};

} // namespace

class soak_copy : public copy_transport {
};

/* cuda_copy: puts and gets between host memory and many GPU buffers (both GPUs where there are two), each
 * buffer registered and deregistered as it is used; the last buffers' content checked at the end. */
TEST_F(soak_copy, many_operations_over_many_buffers_hold_nothing_more_at_the_end)
{
    const unsigned long total = soak_env("CUX_TEST_SOAK_OPS", 20000), nbufs = soak_env("CUX_TEST_SOAK_BUFFERS", 200);
    const size_t size = 4096;
    std::vector<std::unique_ptr<buffer>> bufs;
    const std::vector<uint8_t> content(size, 0x3c); /* everywhere, so every copy moves the same bytes */
    for (unsigned long i = 0; i < nbufs; ++i) {
        bufs.emplace_back(new buffer((i % 2) && (cux_device_count() > 1) ? buf_kind::cuda1 : buf_kind::cuda0, size));
        bufs.back()->write(content);
    }
    buffer host(buf_kind::pinned_host, size * 64);
    memset(host.ptr(), 0x3c, size * 64);
    op_window window(64);

    auto run = [&](unsigned long count) {
        for (unsigned long n = 0; n < count; ++n) {
            buffer &b             = *bufs[n % nbufs];
            uct_completion_t *cmp = window.get(m_worker);
            uct_iov_t iov         = {(char*)host.ptr() + (n % 64) * size, size, UCT_MEM_HANDLE_NULL, 0, 1};
            uct_mem_h memh;
            if ((n % nbufs) == 0) { /* a registration per round over the buffers */
                ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, b.ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh));
                ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
            }
            ucs_status_t status = ((n + n / nbufs) % 2) ?
                                  uct_ep_get_zcopy(m_ep, &iov, 1, (uint64_t)b.ptr(), 0, cmp) :
                                  uct_ep_put_zcopy(m_ep, &iov, 1, (uint64_t)b.ptr(), 0, cmp);
            window.posted(cmp, status);
        }
        window.drain(m_worker);
    };

    run(nbufs * 2); /* warm-up: streams, events and lazily made resources exist from here on */
    holdings start = holdings::now(m_iface);
    run(total);
    holdings end = holdings::now(m_iface);
    printf("cuda_copy soak, %lu operations over %lu buffers:\n  start: %s\n  end:   %s\n", total, nbufs,
           start.str().c_str(), end.str().c_str());
    EXPECT_EQ(0ul, window.errors);
    EXPECT_EQ(total + nbufs * 2, window.done);
    expect_no_growth(start, end);

    EXPECT_TRUE(bufs[0]->read() == content) << "GPU0 data";
    EXPECT_TRUE(bufs[nbufs - 1]->read() == content) << "last buffer's data";
    EXPECT_EQ(0, memcmp(host.ptr(), content.data(), size)) << "host data";
}

/* cuda_ipc: puts and gets into many buffers of the peer, more than the mapping cache keeps, so mappings are
 * made and evicted all along: the operations go to a working set of an eighth of the buffers that slides on by
 * one buffer every 50 operations (a mapping costs about a millisecond on a GPU, a hit nothing). */
TEST_F(ipc_transport, soak_many_operations_over_many_peer_buffers_hold_nothing_more_at_the_end)
{
    const unsigned long total = soak_env("CUX_TEST_SOAK_OPS", 20000), nbufs = soak_env("CUX_TEST_SOAK_BUFFERS", 200);
    const size_t size = 4096;
    destroy_ep();
    open_md({{"CACHE_MAX_REGIONS", std::to_string(nbufs / 4)}});
    start_peer();
    std::vector<remote_buf> rbs;
    for (unsigned long i = 0; i < nbufs; ++i) {
        rbs.push_back(remote_alloc(size, i % cux_device_count(), i));
        ASSERT_NE(0u, rbs.back().addr);
    }
    buffer local(buf_kind::cuda0, size * 64);
    local.write(std::vector<uint8_t>(size * 64, 0x5e));
    op_window window(64);
    const unsigned long working = std::max(1ul, nbufs / 8);

    auto run = [&](unsigned long count, bool warm_up) {
        for (unsigned long n = 0; n < count; ++n) {
            /* the warm-up visits every buffer (every device) once, in order */
            remote_buf &rb        = rbs[warm_up ? (n % nbufs) : ((n / 50 + n % working) % nbufs)];
            uct_completion_t *cmp = window.get(m_worker);
            uct_iov_t iov         = {(char*)local.ptr() + (n % 64) * size, size, UCT_MEM_HANDLE_NULL, 0, 1};
            ucs_status_t status   = (n % 2) ? uct_ep_get_zcopy(m_ep, &iov, 1, rb.addr, rb.rkey.rkey, cmp) :
                                              uct_ep_put_zcopy(m_ep, &iov, 1, rb.addr, rb.rkey.rkey, cmp);
            window.posted(cmp, status);
        }
        window.drain(m_worker);
    };

    run(nbufs * 2, true);
    holdings start = holdings::now(m_iface);
    counters c0    = cache();
    run(total, false);
    holdings end = holdings::now(m_iface);
    counters c1  = cache();
    printf("cuda_ipc soak, %lu operations over %lu peer buffers (cache bound %lu):\n  start: %s\n  end:   %s\n"
           "  mappings made %lu, evicted %lu, hits %lu\n", total, nbufs, nbufs / 4, start.str().c_str(),
           end.str().c_str(), c1.misses - c0.misses, c1.evictions - c0.evictions, c1.hits - c0.hits);
    EXPECT_EQ(0ul, window.errors);
    EXPECT_EQ(total + nbufs * 2, window.done);
    expect_no_growth(start, end);
    EXPECT_LE(end.regions, nbufs / 4);
    buffer fresh(buf_kind::cuda0, size);
    round_trip(fresh, rbs[nbufs / 2], size, 77); /* data still goes both ways */
    for (auto &rb : rbs) {
        remote_free(rb);
    }
}
