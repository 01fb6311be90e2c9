/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc: remote-key format and validation, the mapping cache's logic (both without a GPU), and transfers
 * between two processes (real GPUs, or the mock driver whose device memory is shared through memfd).
 */
#include "ipc_transport.h"

#include <cstring>
#include <memory>
#include <dirent.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include "ipc/cux_ipc_rkey.h"
#include "ipc/cux_ipc_cache.h"
#include "ipc/cux_ipc_md.h"
#include "ipc/cux_ipc_import.h"
#include "ipc/cux_ipc_proof.h"
#include <ucs/sys/sys.h>
}

using namespace cux_test;

/* ---------------------------------------------------------------- remote keys (CPU) */

static cux_ipc_rkey_t sample_key(uint64_t system_id)
{
    cux_ipc_rkey_t key;
    memset(&key, 0, sizeof(key));
    key.system_id = system_id;
    key.pid       = 1234;
    key.base      = 0x7f0000000000ull;
    key.length    = 1 << 20;
    key.buffer_id = 42;
    memset(&key.handle, 0x5a, sizeof(key.handle));
    cux_ipc_rkey_seal(&key);
    return key;
}

TEST(ipc_rkey, sealed_key_round_trips)
{
    cux_ipc_rkey_t key = sample_key(7), copy;
    memcpy(&copy, &key, sizeof(copy));
    EXPECT_EQ(UCS_OK, cux_ipc_rkey_check(&copy, 7));
}

TEST(ipc_rkey, every_corrupted_byte_is_rejected)
{
    cux_ipc_rkey_t key = sample_key(7);
    for (size_t i = 0; i < sizeof(key); ++i) {
        cux_ipc_rkey_t bad = key;
        ((uint8_t*)&bad)[i] ^= 0x40;
        EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&bad, 7)) << "byte " << i;
    }
}

TEST(ipc_rkey, truncated_key_is_rejected)
{
    cux_ipc_rkey_t key = sample_key(7);
    for (size_t keep : {size_t(0), size_t(4), sizeof(key) / 2, sizeof(key) - 1}) {
        cux_ipc_rkey_t cut;
        memset(&cut, 0, sizeof(cut));
        memcpy(&cut, &key, keep);
        EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&cut, 7)) << keep << " bytes";
    }
}

/* UCP 1.13 aborts the importer on any unpack error but UCS_ERR_UNREACHABLE: a key of an older build of this
 * module must be unreachable, as every other key that cannot be used. */
TEST(ipc_rkey, key_of_an_older_format_is_unreachable)
{
    cux_ipc_rkey_t key = sample_key(7);
    key.version = CUX_IPC_RKEY_VERSION - 1;
    cux_ipc_rkey_seal(&key);
    key.version = CUX_IPC_RKEY_VERSION - 1; /* seal writes the current version */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7));
    key = sample_key(7);
    key.kind = 7;
    cux_ipc_rkey_seal(&key);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7));
}

TEST(ipc_rkey, key_of_another_host_is_unreachable)
{
    cux_ipc_rkey_t key = sample_key(8);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7));
}

/* A key of this very process passes the format check: whether it is usable is decided on the endpoint, where it
 * must name an endpoint to this process and be proven in this process's memory
 * (ipc_transport.an_endpoint_to_this_process_copies_only_memory_it_registered). */
/* Finding: UCX's perftest releases a zeroed key when its endpoint set-up fails before it unpacks one (UCX 1.22's
 * gtest test_uct_loopback_cuda.envelope with cuda_ipc); that crashed once rkey_release held mappings. */
TEST_F(ipc_transport, releasing_a_zeroed_key_does_nothing)
{
    uct_rkey_bundle_t zeroed = {};
    EXPECT_EQ(UCS_OK, uct_rkey_release(m_component, &zeroed));
}

TEST(ipc_rkey, key_of_this_very_process_passes_the_format_check)
{
    cux_ipc_rkey_t key = sample_key(7);
    key.pid = getpid();
    cux_ipc_rkey_seal(&key);
    EXPECT_EQ(UCS_OK, cux_ipc_rkey_check(&key, 7));
}

TEST(ipc_rkey, range_checks)
{
    cux_ipc_rkey_t key = sample_key(7);
    EXPECT_TRUE(cux_ipc_rkey_covers(&key, key.base, key.length));
    EXPECT_TRUE(cux_ipc_rkey_covers(&key, key.base + 100, 10));
    EXPECT_FALSE(cux_ipc_rkey_covers(&key, key.base - 1, 10));
    EXPECT_FALSE(cux_ipc_rkey_covers(&key, key.base + key.length - 5, 10));
    EXPECT_FALSE(cux_ipc_rkey_covers(&key, key.base + 1, UINT64_MAX));
}

/* ---------------------------------------------------------------- mapping cache (CPU) */

struct fake_driver {
    int      mapped = 0, opens = 0, fail = 0;
    int      capacity = 0; /* most mappings open at once, 0 for no limit */
    uint64_t next   = 0x100000;

    static ucs_status_t map(void *arg, const cux_ipc_rkey_t *key, int device, void *peer, void **mapped_p)
    {
        fake_driver *d = (fake_driver*)arg;
        if (d->fail || ((d->capacity > 0) && (d->mapped >= d->capacity))) {
            return UCS_ERR_NO_MEMORY;
        }
        d->mapped++;
        d->opens++;
        *mapped_p = (void*)(d->next += 0x100000);
        return UCS_OK;
    }
    static void unmap(void *arg, const cux_ipc_region_t *region)
    {
        ((fake_driver*)arg)->mapped--;
    }
};

class ipc_cache : public ::testing::Test {
protected:
    void SetUp() override { cux_ipc_cache_init(&m_cache, &m_ops, &m_drv); }
    void TearDown() override
    {
        cux_ipc_cache_purge(&m_cache);
        EXPECT_EQ(0, m_drv.mapped) << "mappings leaked";
    }

    cux_ipc_rkey_t key(int pid, uint64_t base, uint64_t id, uint64_t len = 4096)
    {
        cux_ipc_rkey_t k = sample_key(7);
        k.pid = pid; k.base = base; k.buffer_id = id; k.length = len;
        return k;
    }

    cux_ipc_region_t *get(const cux_ipc_rkey_t &k, int device = 0, uint64_t owner = 1)
    {
        cux_ipc_region_t *r = nullptr;
        EXPECT_EQ(UCS_OK, cux_ipc_cache_get(&m_cache, &k, device, nullptr, owner, &r));
        return r;
    }

    fake_driver         m_drv;
    cux_ipc_cache_ops_t m_ops = {fake_driver::map, fake_driver::unmap};
    cux_ipc_cache_t     m_cache;
};

TEST_F(ipc_cache, hit_makes_no_driver_call)
{
    auto k = key(1, 0x1000, 1);
    cux_ipc_region_t *r1 = get(k);
    cux_ipc_cache_put(&m_cache, r1);
    cux_ipc_region_t *r2 = get(k);
    EXPECT_EQ(r1, r2);
    EXPECT_EQ(1, m_drv.opens);
    EXPECT_EQ(1ul, m_cache.stats.hits);
    cux_ipc_cache_put(&m_cache, r2);
}

TEST_F(ipc_cache, key_parts_are_all_distinct)
{
    cux_ipc_region_t *a = get(key(1, 0x1000, 1)), *b = get(key(2, 0x1000, 1)), *c = get(key(1, 0x1000, 1), 1);
    EXPECT_NE(a, b);
    EXPECT_NE(a, c);
    EXPECT_EQ(3, m_drv.opens);
    for (auto r : {a, b, c}) {
        cux_ipc_cache_put(&m_cache, r);
    }
}

TEST_F(ipc_cache, new_buffer_at_the_same_address_is_remapped)
{
    cux_ipc_region_t *old = get(key(1, 0x1000, 1));
    void *old_mapping     = old->mapped;
    cux_ipc_cache_put(&m_cache, old);
    cux_ipc_region_t *r = get(key(1, 0x1000, 2));
    EXPECT_NE(old_mapping, r->mapped);
    EXPECT_EQ(1ul, m_cache.stats.stale);
    EXPECT_EQ(1, m_drv.mapped) << "the stale mapping was not closed";
    cux_ipc_cache_put(&m_cache, r);
}

TEST_F(ipc_cache, stale_mapping_in_use_is_closed_when_released)
{
    cux_ipc_region_t *old = get(key(1, 0x1000, 1));
    cux_ipc_region_t *r   = get(key(1, 0x1000, 2));
    EXPECT_EQ(2, m_drv.mapped);
    cux_ipc_cache_put(&m_cache, old);
    EXPECT_EQ(1, m_drv.mapped);
    cux_ipc_cache_put(&m_cache, r);
}

TEST_F(ipc_cache, purging_one_process_keeps_the_others_and_waits_for_mappings_in_use)
{
    cux_ipc_region_t *in_use = get(key(1, 0x1000, 1));
    cux_ipc_cache_put(&m_cache, get(key(1, 0x2000, 2)));
    cux_ipc_cache_put(&m_cache, get(key(2, 0x1000, 1)));
    EXPECT_EQ(3, m_drv.mapped);
    cux_ipc_cache_purge_pid(&m_cache, 1);
    EXPECT_EQ(2, m_drv.mapped) << "process 1's unused mapping was kept, or one in use was unmapped";
    EXPECT_EQ(1ul, m_cache.num_regions);
    cux_ipc_cache_put(&m_cache, in_use);
    EXPECT_EQ(1, m_drv.mapped) << "process 1's mapping in use was not unmapped at its release";
    cux_ipc_region_t *other = get(key(2, 0x1000, 1));
    EXPECT_EQ(3, m_drv.opens) << "process 2's mapping was not kept";
    cux_ipc_cache_put(&m_cache, other);
}

TEST_F(ipc_cache, lru_bound_on_regions)
{
    cux_ipc_cache_configure(&m_cache, 1, 8, SIZE_MAX);
    for (uint64_t i = 0; i < 100; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i)));
        EXPECT_LE(m_cache.num_regions, 8ul);
    }
    EXPECT_EQ(8, m_drv.mapped);
    /* the most recently used survive */
    cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * 100, 99)));
    EXPECT_EQ(100, m_drv.opens);
}

TEST_F(ipc_cache, lru_bound_on_bytes)
{
    cux_ipc_cache_configure(&m_cache, 1, ULONG_MAX, 10 * 4096);
    for (uint64_t i = 0; i < 50; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i)));
        EXPECT_LE(m_cache.total_size, 10u * 4096);
    }
}

TEST_F(ipc_cache, regions_in_use_are_never_evicted)
{
    cux_ipc_cache_configure(&m_cache, 1, 2, SIZE_MAX);
    std::vector<cux_ipc_region_t*> held;
    for (uint64_t i = 0; i < 5; ++i) {
        held.push_back(get(key(1, 0x1000 * (i + 1), i)));
    }
    EXPECT_EQ(5, m_drv.mapped) << "a mapping in use was closed";
    for (auto r : held) {
        cux_ipc_cache_put(&m_cache, r);
    }
    EXPECT_EQ(2, m_drv.mapped);
}

/* Finding: one failed mapping evicted every unused mapping of every peer and device before retrying. */
TEST_F(ipc_cache, a_failed_mapping_releases_only_what_it_needs_on_its_device)
{
    for (uint64_t i = 0; i < 3; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i), 0));
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i), 1));
    }
    m_drv.capacity = 6;
    cux_ipc_region_t *r = get(key(2, 0x9000, 9), 0);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(6, m_drv.mapped) << "more was released than the new mapping needed";
    EXPECT_EQ(1ul, m_cache.stats.evictions);
    cux_ipc_cache_put(&m_cache, r);
    /* the other device's mappings are all still cached */
    for (uint64_t i = 0; i < 3; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i), 1));
    }
    EXPECT_EQ(7, m_drv.opens);
}

/* Finding: a cache hit compared pid, device, base, buffer id and length, not the handle, so a reused pid (or a
 * forged key) could be served another allocation's mapping. */
TEST_F(ipc_cache, a_key_with_another_handle_is_not_served_the_cached_mapping)
{
    auto k = key(1, 0x1000, 1);
    cux_ipc_cache_put(&m_cache, get(k));
    auto other = k;
    other.handle.reserved[3] ^= 1;
    cux_ipc_region_t *r = get(other);
    EXPECT_EQ(2, m_drv.opens);
    EXPECT_EQ(1ul, m_cache.stats.stale);
    cux_ipc_cache_put(&m_cache, r);
}

TEST_F(ipc_cache, disabled_cache_unmaps_after_use)
{
    cux_ipc_cache_configure(&m_cache, 0, ULONG_MAX, SIZE_MAX);
    cux_ipc_region_t *a = get(key(1, 0x1000, 1));
    cux_ipc_region_t *b = get(key(1, 0x1000, 1));
    EXPECT_EQ(a, b) << "concurrent users must share the one mapping";
    cux_ipc_cache_put(&m_cache, a);
    EXPECT_EQ(1, m_drv.mapped);
    cux_ipc_cache_put(&m_cache, b);
    EXPECT_EQ(0, m_drv.mapped);
}

TEST_F(ipc_cache, turning_caching_off_releases_unused_mappings)
{
    cux_ipc_cache_put(&m_cache, get(key(1, 0x1000, 1)));
    cux_ipc_region_t *held = get(key(1, 0x2000, 2));
    cux_ipc_cache_configure(&m_cache, 0, ULONG_MAX, SIZE_MAX);
    EXPECT_EQ(1, m_drv.mapped);
    cux_ipc_cache_put(&m_cache, held);
    EXPECT_EQ(0, m_drv.mapped);
}

TEST_F(ipc_cache, map_failure_is_reported_and_retried_after_freeing_unused)
{
    cux_ipc_cache_put(&m_cache, get(key(1, 0x1000, 1)));
    m_drv.fail = 1;
    cux_ipc_region_t *r;
    auto k = key(1, 0x2000, 2);
    EXPECT_EQ(UCS_ERR_NO_MEMORY, cux_ipc_cache_get(&m_cache, &k, 0, nullptr, 1, &r));
    EXPECT_EQ(0, m_drv.mapped) << "unused mappings were not released before the retry";
}

/* Review 2: the retry after a failed mapping released unused mappings "as much as the new one needs", by the
 * key's claimed length: one key claiming more than every unused mapping holds emptied the device's cache for a
 * mapping that could never succeed. Now nothing is released when it cannot help. */
TEST_F(ipc_cache, a_mapping_that_releasing_cannot_help_releases_nothing)
{
    for (uint64_t i = 0; i < 8; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i)));
    }
    m_drv.fail = 1;
    cux_ipc_region_t *r;
    auto huge = key(2, 0x100000, 9, 1ull << 50);
    EXPECT_EQ(UCS_ERR_NO_MEMORY, cux_ipc_cache_get(&m_cache, &huge, 0, nullptr, 1, &r));
    EXPECT_EQ(8, m_drv.mapped) << "another peer's mappings were released for a mapping they could not make room for";
    EXPECT_EQ(0ul, m_cache.stats.evictions);
}

/* A pid reused by a new process that presents a key of the same allocation is another owner: not served the
 * mapping of the process that held that pid before. */
TEST_F(ipc_cache, a_new_process_with_a_reused_pid_is_not_served_the_old_mapping)
{
    auto k = key(1, 0x1000, 1);
    cux_ipc_cache_put(&m_cache, get(k, 0, 100));
    cux_ipc_region_t *r = get(k, 0, 200);
    EXPECT_EQ(2, m_drv.opens);
    cux_ipc_cache_put(&m_cache, r);
}

/* ---------------------------------------------------------------- two processes */

TEST_F(ipc_transport, put_and_get_between_processes)
{
    std::vector<std::pair<int, int>> pairs = {{0, 0}};
    if (cux_device_count() > 1) {
        pairs.push_back({0, 1});
        pairs.push_back({1, 0});
    }
    uint64_t seed = 1000;
    for (auto devs : pairs) {
        for (size_t size : {size_t(1), size_t(4097), size_t(1) << 20, size_t(64) << 20, size_t(256) << 20}) {
            SCOPED_TRACE("local GPU" + std::to_string(devs.first) + " <-> peer GPU" +
                         std::to_string(devs.second) + ", " + std::to_string(size) + " bytes");
            buffer local(devs.first ? buf_kind::cuda1 : buf_kind::cuda0, size);
            remote_buf rb = remote_alloc(size, devs.second, ++seed);
            ASSERT_NE(0u, rb.addr);

            /* put: poisoned remote gets our data */
            local.write(pattern(++seed, size));
            ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), size, rb.addr, rb.rkey.rkey));
            EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, seed)) << "put data mismatch";

            /* get: fresh remote data lands in our poisoned buffer */
            local.write(std::vector<uint8_t>(size, 0xa5));
            ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, ++seed));
            ASSERT_EQ(UCS_OK, zcopy(false, local.ptr(), size, rb.addr, rb.rkey.rkey));
            EXPECT_TRUE(local.read() == pattern(seed, size)) << "get data mismatch";

            /* inside the allocation, at an offset */
            if (size > 64) {
                ASSERT_EQ(UCS_OK, zcopy(false, local.ptr(), 32, rb.addr + 17, rb.rkey.rkey));
                auto expect = pattern(seed, size);
                auto got    = local.read();
                EXPECT_EQ(0, memcmp(got.data(), expect.data() + 17, 32));
            }
            remote_free(rb);
        }
    }
}

/* Many copies in flight: accepted into batches (issued together at progress, flush, or when a batch is full),
 * or each issued at once (MAX_BATCH=1); a flush right after them covers all. */
TEST_F(ipc_transport, many_copies_in_flight_complete_and_flush_in_order)
{
    const size_t chunk = 16384, count = 70, size = chunk * count;

    for (const char *max_batch : {"16", "1", "32"}) {
        SCOPED_TRACE(std::string("MAX_BATCH=") + max_batch);
        destroy_ep();
        open_iface({{"MAX_BATCH", max_batch}});
        start_peer();
        buffer local(buf_kind::cuda0, size);
        remote_buf rb = remote_alloc(size, cux_device_count() - 1, 41);
        ASSERT_NE(0u, rb.addr);
        local.write(pattern(42, size));

        for (int put = 1; put >= 0; --put) {
            counting_completion ops(count), flushed;
            for (size_t i = 0; i < count; ++i) {
                uct_iov_t iov = {(char*)local.ptr() + i * chunk, chunk, UCT_MEM_HANDLE_NULL, 0, 1};
                ucs_status_t status = put ? uct_ep_put_zcopy(m_ep, &iov, 1, rb.addr + i * chunk, rb.rkey.rkey,
                                                             &ops.comp) :
                                            uct_ep_get_zcopy(m_ep, &iov, 1, rb.addr + i * chunk, rb.rkey.rkey,
                                                             &ops.comp);
                ASSERT_TRUE((status == UCS_INPROGRESS) || (status == UCS_OK)) << ucs_status_string(status);
                if (status == UCS_OK) {
                    --ops.comp.count;
                }
            }
            ucs_status_t status = uct_iface_flush(m_iface, 0, &flushed.comp);
            if (status == UCS_INPROGRESS) {
                ASSERT_EQ(UCS_OK, wait(&flushed.comp));
            } else {
                ASSERT_EQ(UCS_OK, status);
            }
            EXPECT_EQ(0, ops.comp.count) << "the flush finished before the operations it covers";
            EXPECT_EQ(UCS_OK, ops.status);
            if (put) {
                EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, 42)) << "put data mismatch";
                ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 43));
                local.write(std::vector<uint8_t>(size, 0xa5));
            } else {
                EXPECT_TRUE(local.read() == pattern(43, size)) << "get data mismatch";
            }
        }
        remote_free(rb);
    }
}

/* A copy that finds nothing in flight goes to the driver from the call that accepts it (a lone rendezvous pays
 * no wait for the next progress); one that finds a copy in flight waits to be batched, until progress. */
TEST_F(ipc_transport, a_lone_copy_is_issued_at_once_and_later_ones_wait_for_a_batch)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "counts the copies the mock driver accepts, with its copies in flight (MOCK_CUDA_ASYNC=1)";
    }
    const size_t size = 4096;
    destroy_ep();
    open_iface({{"MAX_BATCH", "16"}});
    start_peer();
    buffer local(buf_kind::cuda0, 2 * size);
    remote_buf rb = remote_alloc(2 * size, cux_device_count() - 1, 61);
    ASSERT_NE(0u, rb.addr);
    const long issued = mock_live("issued copies");

    counting_completion ops(2);
    for (size_t i = 0; i < 2; ++i) {
        uct_iov_t iov = {(char*)local.ptr() + i * size, size, UCT_MEM_HANDLE_NULL, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_get_zcopy(m_ep, &iov, 1, rb.addr + i * size, rb.rkey.rkey, &ops.comp));
        EXPECT_EQ(issued + 1, mock_live("issued copies")) << "after copy " << i;
    }
    ASSERT_EQ(UCS_OK, wait(&ops.comp));
    EXPECT_EQ(issued + 2, mock_live("issued copies"));
    EXPECT_TRUE(local.read() == pattern(61, 2 * size)) << "get data mismatch";
    remote_free(rb);
}

/* Issue 22: a KV-cache transfer is many adjacent blocks of one allocation on each side. A GPU spends about the
 * same time on every copy between processes whatever its size, so blocks that continue each other in the same
 * two allocations go as one copy, with the local buffer registered or not (UCP passes no handle: the pointer
 * query finds its allocation); blocks of another allocation stay copies of their own. Every byte is checked. */
TEST_F(ipc_transport, adjacent_blocks_of_the_same_allocations_are_one_copy)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "counts the copies the mock driver accepts, with its copies in flight (MOCK_CUDA_ASYNC=1)";
    }
    const size_t block = 16384, count = 16, size = block * count;
    destroy_ep();
    open_iface({{"MAX_BATCH", "16"}});
    start_peer();
    buffer local(buf_kind::cuda0, size);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh));
    remote_buf rb    = remote_alloc(size, cux_device_count() - 1, 71);
    remote_buf other = remote_alloc(block, cux_device_count() - 1, 72);
    ASSERT_NE(0u, rb.addr);
    ASSERT_NE(0u, other.addr);

    struct {
        const char *what;
        uct_mem_h  memh;
        bool       interleave; /* every other block to another remote allocation */
        long       most_copies;
    } cases[] = {{"one allocation each side", memh, false, 2},
                 {"no local memory handle", UCT_MEM_HANDLE_NULL, false, 2},
                 {"another remote allocation in between", memh, true, (long)count}};
    for (const auto &c : cases) {
        SCOPED_TRACE(c.what);
        for (int put = 1; put >= 0; --put) {
            SCOPED_TRACE(put ? "put" : "get");
            if (put) {
                local.write(pattern(73, size));
            } else {
                ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 74));
            }
            const long issued = mock_live("issued copies");
            counting_completion ops(count), flushed;
            for (size_t i = 0; i < count; ++i) {
                bool away       = c.interleave && (i % 2);
                uct_iov_t iov   = {(char*)local.ptr() + i * block, block, c.memh, 0, 1};
                uint64_t raddr  = away ? other.addr : rb.addr + i * block;
                uct_rkey_t rkey = away ? other.rkey.rkey : rb.rkey.rkey;
                ucs_status_t st = put ? uct_ep_put_zcopy(m_ep, &iov, 1, raddr, rkey, &ops.comp)
                                      : uct_ep_get_zcopy(m_ep, &iov, 1, raddr, rkey, &ops.comp);
                ASSERT_EQ(UCS_INPROGRESS, st);
            }
            ucs_status_t status = uct_iface_flush(m_iface, 0, &flushed.comp);
            ASSERT_EQ(UCS_OK, (status == UCS_INPROGRESS) ? wait(&flushed.comp) : status);
            EXPECT_EQ(0, ops.comp.count);
            EXPECT_EQ(UCS_OK, ops.status);
            long copies = mock_live("issued copies") - issued;
            EXPECT_LE(copies, c.most_copies);
            if (c.most_copies == (long)count) {
                EXPECT_EQ((long)count, copies) << "blocks of different allocations were merged";
            }
            if (c.interleave) {
                continue; /* the blocks overwrite each other in the other allocation */
            }
            if (put) {
                EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, 73)) << "put data mismatch";
            } else {
                EXPECT_TRUE(local.read() == pattern(74, size)) << "get data mismatch";
            }
        }
    }
    remote_free(other);
    remote_free(rb);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}

TEST_F(ipc_transport, outside_the_remote_allocation_is_an_error)
{
    buffer local(buf_kind::cuda0, 8192);
    remote_buf rb = remote_alloc(4096, 0, 1);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, zcopy(true, local.ptr(), 8192, rb.addr, rb.rkey.rkey));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, zcopy(true, local.ptr(), 16, rb.addr - 16, rb.rkey.rkey));
    remote_free(rb);
}

#if CUX_UCX_CACHES_IPC_REGISTRATIONS
/* UCP 1.14+ caches cuda_ipc registrations, and a stock UCX has no hooks to tell it of a freed GPU buffer: the
 * cached registration of a freed buffer may be handed back for a new one at the same place. UCP 1.16+ says
 * which buffer it sends; 1.14 and 1.15 do not, and the registered buffer is checked. */
TEST_F(ipc_transport, a_registration_that_outlived_its_buffer_packs_the_allocation_there_now)
{
    const size_t size = 1 << 20;
    std::unique_ptr<buffer> old_buf(new buffer(buf_kind::cuda0, size));
    uct_mem_h memh;
    cux_ipc_rkey_t before, after;
    uct_md_mkey_pack_params_t params = {};

    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, old_buf->ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh));
    auto pack = [&](void *address, cux_ipc_rkey_t *key) {
#if CUX_UCX_MKEY_PACK_TAKES_ADDRESS
        return uct_md_mkey_pack_v2(m_md, memh, address, size, &params, key);
#else
        return uct_md_mkey_pack_v2(m_md, memh, &params, key);
#endif
    };
    void *old_ptr = old_buf->ptr();
    ASSERT_EQ(UCS_OK, pack(old_ptr, &before));
    EXPECT_EQ((uintptr_t)old_ptr, before.base);
    old_buf.reset();

    buffer new_buf(buf_kind::cuda0, size); /* the same size: allocators tend to hand the same place back */
    if (!CUX_UCX_MKEY_PACK_TAKES_ADDRESS && (new_buf.ptr() != old_ptr)) {
        GTEST_SKIP() << "the new buffer is not where the registered one was";
    }
    ASSERT_EQ(UCS_OK, pack(new_buf.ptr(), &after));
    EXPECT_EQ((uintptr_t)new_buf.ptr(), after.base);
    EXPECT_NE(before.buffer_id, after.buffer_id) << "the key of the freed allocation was packed";

    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
}
#endif

/* Finding: a 4 KB buffer's key re-sealed to claim 1 GB was trusted, and a get 64 KB past the real end returned
 * UCS_OK (on a GPU: reading whatever is mapped there). */
TEST_F(ipc_transport, a_key_claiming_more_than_its_allocation_is_refused)
{
    remote_buf rb = remote_alloc(4096, 0, 1);
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)rb.rkey.rkey; /* unpacked: the key comes first */
    forged.length = 1ull << 30;
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    buffer local(buf_kind::cuda0, 4096);
    /* the peer holds no such key: the proof fails before anything is mapped */
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(false, local.ptr(), 4096, rb.addr + 65536, bundle.rkey));
    uct_rkey_release(m_component, &bundle);
    /* the true key still works */
    round_trip(local, rb, 4096, 61);
    remote_free(rb);
}

/* Finding: a key was not bound to the endpoint it is used on: it could name a third process, whose memory (or
 * descriptors, for VMM keys) this process would then open. */
TEST_F(ipc_transport, a_key_naming_another_process_is_refused_on_this_endpoint)
{
    remote_buf rb = remote_alloc(4096, 0, 1);
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)rb.rkey.rkey;
    forged.pid = (forged.pid == 1) ? 2 : 1; /* init, or another process that is neither us nor the peer */
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    buffer local(buf_kind::cuda0, 4096);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(false, local.ptr(), 4096, rb.addr, bundle.rkey));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), 4096, rb.addr, bundle.rkey));
    uct_rkey_release(m_component, &bundle);
    remote_free(rb);
}

/* Finding: a VMM import took whatever descriptor number the key named in the exporter, which may have been
 * closed and reused, here for another exported allocation: the import then mapped that one. */
TEST_F(ipc_transport, a_vmm_key_naming_another_descriptor_is_refused)
{
    remote_buf a = remote_alloc(2 << 20, 0, 1, alloc_vmm_fd), b = remote_alloc(4 << 20, 0, 2, alloc_vmm_fd);
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)a.rkey.rkey;
    ASSERT_EQ(CUX_IPC_KIND_VMM_FD, forged.kind);
    forged.export_fd = ((const cux_ipc_rkey_t*)b.rkey.rkey)->export_fd;
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    buffer local(buf_kind::cuda0, 4096);
    EXPECT_NE(UCS_OK, zcopy(false, local.ptr(), 4096, a.addr, bundle.rkey)) << "read another allocation";
    uct_rkey_release(m_component, &bundle);
    round_trip(local, a, 4096, 71);
    remote_free(b);
    remote_free(a);
}

/* fork() after initialisation: in the child, registration, key packing and unpacking, and copies fail with an
 * error (the driver's state belongs to the parent), never hang, and never hand out the parent's identity. */
TEST_F(ipc_transport, after_fork_the_child_fails_cleanly_without_the_parents_identity)
{
    remote_buf rb = remote_alloc(4096, 0, 1);
    buffer local(buf_kind::cuda0, 4096);
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), 4096, UCT_MD_MEM_ACCESS_ALL, &memh));
    std::vector<uint8_t> packed(sizeof(cux_ipc_rkey_t));
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, packed.data()));

    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        alarm(30); /* a hang ends as a signal, which the parent reports */
        int bad = 0;
        uct_mem_h child_memh;
        uct_rkey_bundle_t bundle;
        std::vector<uint8_t> key(sizeof(cux_ipc_rkey_t));
        bad |= (uct_md_mem_reg(m_md, local.ptr(), 4096, UCT_MD_MEM_ACCESS_ALL, &child_memh) == UCS_OK) << 0;
        bad |= (uct_md_mkey_pack(m_md, memh, key.data()) == UCS_OK) << 1;
        bad |= (uct_rkey_unpack(m_component, packed.data(), &bundle) == UCS_OK) << 2;
        bad |= (zcopy(false, local.ptr(), 4096, rb.addr, rb.rkey.rkey) == UCS_OK) << 3;
        bad |= (zcopy(true, local.ptr(), 4096, rb.addr, rb.rkey.rkey) == UCS_OK) << 4;
        _exit(bad);
    }
    ASSERT_GT(child, 0);
    int wst = 0;
    ASSERT_EQ(child, waitpid(child, &wst, 0));
    EXPECT_TRUE(WIFEXITED(wst)) << "the child was killed by signal " << WTERMSIG(wst) << " (a hang ends so)";
    EXPECT_EQ(0, WEXITSTATUS(wst)) << "child steps that succeeded (bits: reg, pack, unpack, get, put): "
                                   << WEXITSTATUS(wst);

    /* the parent is unaffected */
    round_trip(local, rb, 4096, 81);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    remote_free(rb);
}

/* Injected faults (mock driver): an error status or error completion, no hang, nothing left behind, and the
 * interface still usable once the fault is gone. */
TEST_F(ipc_transport, a_failed_mapping_is_an_error_and_leaves_nothing_behind)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "faults are injected by the mock driver (MOCK_CUDA_FAIL)";
    }
    remote_buf rb = remote_alloc(1 << 20, 0, 1);
    buffer local(buf_kind::cuda0, 1 << 20);
    long mappings = mock_live("mappings");
    setenv("MOCK_CUDA_FAIL", "cuIpcOpenMemHandle", 1);
    EXPECT_EQ(UCS_ERR_NO_MEMORY, zcopy(false, local.ptr(), 1 << 20, rb.addr, rb.rkey.rkey));
    unsetenv("MOCK_CUDA_FAIL");
    EXPECT_EQ(mappings, mock_live("mappings"));
    round_trip(local, rb, 1 << 20, 91);
    remote_free(rb);
}

/* Blocks in reverse order go as a batch of copies; adjacent blocks go as one merged copy: either failing
 * completes every operation with an error. */
TEST_F(ipc_transport, a_failed_batch_of_copies_completes_every_copy_with_an_error)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "faults are injected by the mock driver (MOCK_CUDA_FAIL)";
    }
    const size_t size = 65536, n = 8;
    remote_buf rb = remote_alloc(size * n, 0, 1);
    buffer local(buf_kind::cuda0, size * n);
    long events = mock_live("events");
    for (const char *fail : {"cuMemcpyBatchAsync", "cuMemcpyAsync"}) {
        SCOPED_TRACE(fail);
        bool merged = !strcmp(fail, "cuMemcpyAsync");
        counting_completion comp(n);
        setenv("MOCK_CUDA_FAIL", fail, 1);
        for (size_t i = 0; i < n; ++i) {
            uct_iov_t iov   = {(char*)local.ptr() + i * size, size, UCT_MEM_HANDLE_NULL, 0, 1};
            uint64_t remote = rb.addr + (merged ? i : n - 1 - i) * size;
            ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, remote, rb.rkey.rkey, &comp.comp);
            if (status != UCS_INPROGRESS) {
                EXPECT_NE(UCS_OK, status);
                uct_invoke_completion(&comp.comp, status);
            }
        }
        EXPECT_NE(UCS_OK, wait(&comp.comp));
        unsetenv("MOCK_CUDA_FAIL");
    }
    EXPECT_LE(mock_live("events"), events + 64) << "events of the failed batch were not returned";
    buffer again(buf_kind::cuda0, size);
    round_trip(again, rb, size, 92);
    remote_free(rb);
}

TEST_F(ipc_transport, corrupt_or_foreign_rkey_is_rejected)
{
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = 4096; req.b = 0; req.c = 1;
    peer_msg reply = m_peer->call(req);
    ASSERT_EQ(UCS_OK, reply.status);
    uct_rkey_bundle_t bundle;

    std::vector<uint8_t> bad(reply.blob, reply.blob + sizeof(cux_ipc_rkey_t));
    bad[20] ^= 1;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, bad.data(), &bundle));

    cux_ipc_rkey_t foreign;
    memcpy(&foreign, reply.blob, sizeof(foreign));
    foreign.system_id ^= 1;
    cux_ipc_rkey_seal(&foreign);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, &foreign, &bundle));

    std::vector<uint8_t> zeros(sizeof(cux_ipc_rkey_t), 0);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, zeros.data(), &bundle));
}

TEST_F(ipc_transport, gpus_without_peer_access_are_refused_clearly)
{
    if (!using_mock_driver() || (cux_device_count() < 2)) {
        GTEST_SKIP() << "needs a GPU pair without peer access: emulated by the mock driver";
    }
    buffer local(buf_kind::cuda0, 4096);
    remote_buf rb = remote_alloc(4096, 1, 1);
    setenv("MOCK_CUDA_NO_PEER", "1", 1);
    ucs_status_t status = zcopy(true, local.ptr(), 4096, rb.addr, rb.rkey.rkey);
    unsetenv("MOCK_CUDA_NO_PEER");
    EXPECT_EQ(UCS_ERR_UNREACHABLE, status);
    /* with access, the same buffer works */
    EXPECT_EQ(UCS_OK, zcopy(true, local.ptr(), 4096, rb.addr, rb.rkey.rkey));
    remote_free(rb);
}

/* The peer numbers the GPUs differently (CUDA_VISIBLE_DEVICES): its device 0 is our device 1, found by UUID. */
TEST_F(ipc_transport, peer_with_other_visible_devices_is_matched_by_uuid)
{
    if ((cux_device_count() < 2) || (getenv("CUDA_VISIBLE_DEVICES") != nullptr)) {
        GTEST_SKIP() << "needs two GPUs and CUDA_VISIBLE_DEVICES unset here";
    }
    const size_t size = 1 << 20;
    buffer local(buf_kind::cuda0, size);

    for (const char *visible : {"1,0", "1"}) {
        SCOPED_TRACE(std::string("peer with CUDA_VISIBLE_DEVICES=") + visible);
        start_peer(visible);
        remote_buf rb = remote_alloc(size, 0, 31);
        ASSERT_NE(0u, rb.addr);
        EXPECT_EQ(1, ((cux_ipc_unpacked_rkey_t*)rb.rkey.rkey)->peer_device) << "peer's GPU0 is our GPU1";
        round_trip(local, rb, size, 32);
        remote_free(rb);
    }
}

TEST_F(ipc_transport, vmm_memory_travels_as_a_file_descriptor)
{
    const size_t size = 3 << 20;
    buffer local(buf_kind::cuda0, size);

    for (int device = 0; device < std::min(cux_device_count(), 2); ++device) {
        SCOPED_TRACE("peer GPU" + std::to_string(device));
        remote_buf rb = remote_alloc(size, device, 7, alloc_vmm_fd);
        ASSERT_NE(0u, rb.addr);
        round_trip(local, rb, size, 21);
        remote_free(rb);
    }
}

/* UCP 1.16+ asserts that a cuda buffer registers with every memory domain it chose by memory type: memory that
 * cannot be shared registers, and its key makes the peer's unpack answer UNREACHABLE, so that UCP leaves
 * cuda_ipc out for the transfer (as for a key from another host). */
TEST_F(ipc_transport, vmm_memory_without_a_shareable_handle_registers_with_a_key_peers_skip)
{
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = 2 << 20; req.b = 0; req.c = 1; req.d = alloc_vmm_private;
    peer_msg reply = m_peer->call(req);
    ASSERT_EQ(UCS_OK, reply.status);
    cux_ipc_rkey_t key;
    memcpy(&key, reply.blob, sizeof(key));
    EXPECT_EQ(CUX_IPC_KIND_NONE, key.kind);
    uct_rkey_bundle_t bundle;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, reply.blob, &bundle));
    req = {};
    req.op = peer_op::free; req.a = reply.a;
    EXPECT_EQ(UCS_OK, m_peer->call(req).status);
}

/* Memory that cannot be shared is recognised by asking the driver, not by export calls that fail: an application
 * run under compute-sanitizer would see each failure as an error. */
TEST_F(ipc_transport, memory_that_cannot_be_shared_is_recognised_without_a_failing_export_call)
{
    for (uint64_t kind : {alloc_vmm_private, alloc_vmm_fd, alloc_legacy}) {
        SCOPED_TRACE("allocation kind " + std::to_string(kind));
        size_t size = 2 << 20;
        CUdeviceptr dptr;
        ASSERT_EQ(CUDA_SUCCESS, ipc_alloc(0, kind, &size, &dptr));
        long failed_before = mock_live("failed exports");
        uct_mem_h memh;
        std::vector<uint8_t> packed(4096);
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)dptr, size, UCT_MD_MEM_ACCESS_ALL, &memh));
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, packed.data()));
        cux_ipc_rkey_t key;
        memcpy(&key, packed.data(), sizeof(key));
        EXPECT_EQ((kind == alloc_vmm_private) ? CUX_IPC_KIND_NONE :
                  (kind == alloc_vmm_fd) ? CUX_IPC_KIND_VMM_FD : CUX_IPC_KIND_LEGACY, key.kind);
        EXPECT_EQ(failed_before, mock_live("failed exports")) << "an export call failed";
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
        EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, kind, dptr, size));
    }
}

TEST_F(ipc_transport, host_memory_is_not_registered)
{
    std::vector<char> host(4096);
    uct_mem_h memh;
    EXPECT_EQ(UCS_ERR_UNSUPPORTED,
              uct_md_mem_reg(m_md, host.data(), host.size(),
                             UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS, &memh));
}

TEST_F(ipc_transport, reallocation_at_the_same_address_is_seen)
{
    const size_t size = 1 << 20;
    buffer local(buf_kind::cuda0, size);

    remote_buf first = remote_alloc(size, 0, 1);
    local.write(pattern(11, size));
    ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), size, first.addr, first.rkey.rkey));
    ASSERT_EQ(0, remote(peer_op::check, first.addr, size, 11));
    uint64_t addr = first.addr;
    remote_free(first);

    counters before = cache();
    remote_buf second = remote_alloc(size, 0, 2);
    local.write(pattern(12, size));
    ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), size, second.addr, second.rkey.rkey));
    EXPECT_EQ(0, remote(peer_op::check, second.addr, size, 12)) << "the transfer went to the old buffer";
    if (second.addr == addr) {
        EXPECT_EQ(before.stale + 1, cache().stale) << "re-allocation at the same address not detected";
    } else {
        printf("note: the peer's second buffer came back at another address\n");
    }
    remote_free(second);
}

TEST_F(ipc_transport, cache_stays_within_its_bounds)
{
    const unsigned max_regions = 32;
    const unsigned count       = using_mock_driver() ? 1000 : 10000;
    open_md({{"CACHE_MAX_REGIONS", std::to_string(max_regions)}});
    start_peer();
    buffer local(buf_kind::cuda0, 65536);
    local.write(pattern(5, 65536));
    std::vector<remote_buf> bufs;

    for (unsigned i = 0; i < count; ++i) {
        bufs.push_back(remote_alloc(65536, i % cux_device_count(), i));
        ASSERT_NE(0u, bufs.back().addr) << "buffer " << i;
        ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), 65536, bufs.back().addr, bufs.back().rkey.rkey));
        ASSERT_LE(cache().regions, max_regions) << "after " << i + 1 << " buffers";
    }
    EXPECT_EQ(0, remote(peer_op::check, bufs.back().addr, 65536, 5));
    EXPECT_EQ(0, remote(peer_op::check, bufs.front().addr, 65536, 5));
    counters c = cache();
    printf("%u buffers: %lu regions cached, %lu misses, %lu evictions\n", count, c.regions, c.misses,
           c.evictions);
    for (auto &rb : bufs) {
        remote_free(rb);
    }
}

TEST_F(ipc_transport, cache_off_unmaps_after_use)
{
    open_md({{"CACHE", "n"}});
    start_peer();
    buffer local(buf_kind::cuda0, 4096);
    remote_buf rb = remote_alloc(4096, 0, 1);
    unsigned long misses = cache().misses;
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), 4096, rb.addr, rb.rkey.rkey));
        EXPECT_EQ(0ul, cache().regions);
    }
    EXPECT_EQ(misses + 3, cache().misses);
    remote_free(rb);
}

/* What the driver does with the memory of a process that is gone varies (seen on the GPU host: a handle of a
 * small buffer still opened, as its allocation chunk was mapped already). What must hold: every operation
 * finishes with a status, nothing hangs or crashes, and the interface still flushes. */
TEST_F(ipc_transport, peer_that_exited_gives_errors_not_hangs)
{
    const size_t big = 8 << 20; /* its own allocation, never mapped before the exit */
    buffer local(buf_kind::cuda0, big);
    remote_buf mapped   = remote_alloc(1 << 20, 0, 1);
    remote_buf unmapped = remote_alloc(big, 0, 2);
    ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), 1 << 20, mapped.addr, mapped.rkey.rkey));

    m_peer->stop();

    ucs_status_t never_mapped = zcopy(true, local.ptr(), big, unmapped.addr, unmapped.rkey.rkey);
    ucs_status_t was_mapped   = zcopy(true, local.ptr(), 1 << 20, mapped.addr, mapped.rkey.rkey);
    printf("after the peer exited: never-mapped buffer: %s, mapped buffer: %s\n",
           ucs_status_string(never_mapped), ucs_status_string(was_mapped));
    EXPECT_NE(UCS_ERR_TIMED_OUT, never_mapped);
    EXPECT_NE(UCS_ERR_TIMED_OUT, was_mapped);
    if (using_mock_driver()) {
        EXPECT_NE(UCS_OK, never_mapped) << "the mock cannot open a handle of an exited process";
    }
    counting_completion flush;
    ucs_status_t status = uct_ep_flush(m_ep, 0, &flush.comp);
    EXPECT_EQ(UCS_OK, (status == UCS_INPROGRESS) ? wait(&flush.comp) : status);
    uct_rkey_release(m_component, &mapped.rkey);
    uct_rkey_release(m_component, &unmapped.rkey);
}

/* An asynchronous error (here injected: every event query fails, as after a faulting kernel) reaches every copy
 * of a batch, not only the first; a flush issued with them completes once; the interface stays usable; events,
 * streams and mappings are back to their counts once it is closed. */
TEST_F(ipc_transport, asynchronous_error_reaches_every_copy_of_a_batch)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "needs the mock driver's error injection";
    }
    const size_t chunk = 4096, count = 8;
    destroy_ep();
    close_iface();
    const long events = mock_live("events"), streams = mock_live("streams"), mappings = mock_live("mappings");
    open_iface({{"MAX_BATCH", "16"}});
    start_peer();
    buffer local(buf_kind::cuda0, chunk * count);
    remote_buf rb = remote_alloc(chunk * count, cux_device_count() - 1, 7);
    ASSERT_NE(0u, rb.addr);

    setenv("MOCK_CUDA_EVENT_ERROR", "1", 1);
    std::vector<counting_completion> ops(count);
    for (size_t i = 0; i < count; ++i) {
        uct_iov_t iov = {(char*)local.ptr() + i * chunk, chunk, UCT_MEM_HANDLE_NULL, 0, 1};
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, rb.addr + i * chunk, rb.rkey.rkey,
                                                   &ops[i].comp));
    }
    counting_completion flushed;
    ASSERT_EQ(UCS_INPROGRESS, uct_iface_flush(m_iface, 0, &flushed.comp));
    wait(&flushed.comp);
    unsetenv("MOCK_CUDA_EVENT_ERROR");

    size_t errors = 0;
    for (auto &op : ops) {
        EXPECT_EQ(1, op.done);
        errors += (op.done == 1) && (op.status != UCS_OK);
    }
    EXPECT_EQ(count, errors) << "copies of a failed batch completed with UCS_OK";
    EXPECT_EQ(1, flushed.done);
    EXPECT_EQ(UCS_OK, zcopy(true, local.ptr(), chunk, rb.addr, rb.rkey.rkey)) << "the interface is still usable";
    remote_free(rb);
    destroy_ep();
    close_iface();
    cux_ipc_cache_purge(&cux_ipc_cache); /* the process-wide cache keeps mappings for the next interface */
    EXPECT_EQ(events, mock_live("events"));
    EXPECT_EQ(streams, mock_live("streams"));
    EXPECT_EQ(mappings, mock_live("mappings"));
    open_iface();
}

/* Odd values are clamped with a warning, and the interface works with what it took. */
TEST_F(ipc_transport, odd_configuration_values_are_clamped)
{
    for (const char *max_batch : {"0", "1000"}) {
        SCOPED_TRACE(std::string("MAX_BATCH=") + max_batch);
        destroy_ep();
        open_iface({{"MAX_BATCH", max_batch}});
        start_peer();
        buffer local(buf_kind::cuda0, 65536);
        remote_buf rb = remote_alloc(65536, 0, 3);
        ASSERT_NE(0u, rb.addr);
        local.write(pattern(4, 65536));
        ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), 65536, rb.addr, rb.rkey.rkey));
        EXPECT_EQ(0, remote(peer_op::check, rb.addr, 65536, 4));
        remote_free(rb);
    }

    /* no mapping kept at all would reopen it (about a millisecond) for every operation: one is kept */
    destroy_ep();
    close_iface();
    open_md({{"CACHE_MAX_REGIONS", "0"}});
    open_iface();
    start_peer();
    buffer local(buf_kind::cuda0, 4096);
    remote_buf rb = remote_alloc(4096, 0, 5);
    unsigned long regions, hits, misses, stale, evictions;
    size_t total;
    cux_ipc_cache_counters(&regions, &total, &hits, &misses, &stale, &evictions);
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), 4096, rb.addr, rb.rkey.rkey));
    }
    unsigned long misses_before = misses, hits_before = hits;
    cux_ipc_cache_counters(&regions, &total, &hits, &misses, &stale, &evictions);
    EXPECT_EQ(1u, misses - misses_before);
    EXPECT_EQ(2u, hits - hits_before);
    remote_free(rb);
}

/* A peer killed with copies in flight: the copies complete (the mapping keeps the memory), nothing hangs,
 * ep_check reports the endpoint to the interface's error handler, which is how UCP learns to fail it, and
 * destroying the endpoint gives the dead peer's mappings back. On the mock the copies really are in flight
 * (MOCK_CUDA_ASYNC: done only when their events complete). */
TEST_F(ipc_transport, killed_peer_is_reported_by_ep_check)
{
    const size_t chunk = 65536, count = 8;
    const long mappings_before = mock_live("mappings");
    buffer local(buf_kind::cuda0, chunk * count);
    remote_buf rb = remote_alloc(chunk * count, 0, 9);
    ASSERT_NE(0u, rb.addr);

    EXPECT_EQ(UCS_OK, uct_ep_check(m_ep, 0, NULL));
    uct_worker_progress(m_worker);
    EXPECT_TRUE(m_ep_errors.empty()) << "a live peer was reported";

    if (using_mock_driver()) {
        setenv("MOCK_CUDA_ASYNC", "1", 1);
    }
    counting_completion ops(count);
    for (size_t i = 0; i < count; ++i) {
        uct_iov_t iov = {(char*)local.ptr() + i * chunk, chunk, UCT_MEM_HANDLE_NULL, 0, 1};
        ucs_status_t status = uct_ep_put_zcopy(m_ep, &iov, 1, rb.addr + i * chunk, rb.rkey.rkey, &ops.comp);
        ASSERT_TRUE((status == UCS_INPROGRESS) || (status == UCS_OK)) << ucs_status_string(status);
        ops.comp.count -= (status == UCS_OK);
    }
    if (using_mock_driver()) {
        EXPECT_EQ(int(count), ops.comp.count) << "no copy was still in flight";
        EXPECT_EQ(mappings_before + 1, mock_live("mappings"));
    }
    m_peer->stop(); /* exits now, copies still in flight */

    EXPECT_EQ(UCS_OK, uct_ep_check(m_ep, 0, NULL));
    for (int i = 0; (i < 1000) && m_ep_errors.empty(); ++i) {
        uct_worker_progress(m_worker);
    }
    ASSERT_EQ(1u, m_ep_errors.size()) << "the dead peer was not reported";
    EXPECT_EQ(m_ep, m_ep_errors[0].first);
    EXPECT_NE(UCS_OK, m_ep_errors[0].second);
    if (ops.comp.count > 0) {
        EXPECT_NE(UCS_ERR_TIMED_OUT, wait(&ops.comp)) << "copies in flight never completed";
    }
    EXPECT_EQ(0, ops.comp.count);
    counting_completion flushed;
    ucs_status_t status = uct_iface_flush(m_iface, 0, &flushed.comp);
    EXPECT_EQ(UCS_OK, (status == UCS_INPROGRESS) ? wait(&flushed.comp) : status);
    unsetenv("MOCK_CUDA_ASYNC");
    uct_rkey_release(m_component, &rb.rkey);
    destroy_ep();
    if (using_mock_driver()) {
        EXPECT_EQ(mappings_before, mock_live("mappings")) << "the dead peer's mapping was kept";
    }
}

/* UCP invalidates a failed rendezvous's send buffer before giving it back: the invalidation completes (the
 * peer only ever reads that buffer, and its registration is gone); without a completion it is refused. */
TEST_F(ipc_transport, invalidating_a_registration_completes)
{
    buffer local(buf_kind::cuda0, 65536);
    uct_md_attr_t attr;
    uct_mem_h memh;

    ASSERT_EQ(UCS_OK, uct_md_query(m_md, &attr));
    EXPECT_TRUE(attr.cap.flags & UCT_MD_FLAG_INVALIDATE);

    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), 65536, UCT_MD_MEM_ACCESS_ALL, &memh));
    counting_completion comp(2); /* as UCP does: one for the call, one per memory domain */
    uct_md_mem_dereg_params_t params = {};
    params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH | UCT_MD_MEM_DEREG_FIELD_FLAGS |
                        UCT_MD_MEM_DEREG_FIELD_COMPLETION;
    params.memh       = memh;
    params.flags      = UCT_MD_MEM_DEREG_FLAG_INVALIDATE;
    params.comp       = &comp.comp;
    ASSERT_EQ(UCS_OK, uct_md_mem_dereg_v2(m_md, &params));
    EXPECT_EQ(1, comp.comp.count) << "the invalidation did not complete";

    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, local.ptr(), 65536, UCT_MD_MEM_ACCESS_ALL, &memh));
    params.memh       = memh;
    params.field_mask = UCT_MD_MEM_DEREG_FIELD_MEMH | UCT_MD_MEM_DEREG_FIELD_FLAGS;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, uct_md_mem_dereg_v2(m_md, &params));
    params.flags = 0;
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg_v2(m_md, &params));
}

/* ---------------------------------------------------------------- review 2: keys prove where they came from */

namespace {
/* An endpoint of m_iface to the device and interface address in a peer's greeting; nullptr if refused. */
uct_ep_h ep_to(uct_iface_h iface, const uint8_t *dev_addr, const uint8_t *iface_addr)
{
    uct_ep_params_t params = {};
    uct_ep_h ep            = nullptr;
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = iface;
    params.dev_addr   = (const uct_device_addr_t*)dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)iface_addr;
    return (uct_ep_create(&params, &ep) == UCS_OK) ? ep : nullptr;
}

/* A legacy buffer of the third process (seed), and its key re-sealed with pid: what a peer could forge. */
cux_ipc_rkey_t third_process_key(ipc_peer &third, uint64_t seed, int32_t pid, uint64_t *addr_p)
{
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = 4096; req.b = 0; req.c = seed; req.d = alloc_legacy;
    peer_msg reply = third.call(req);
    cux_ipc_rkey_t forged;
    EXPECT_EQ(UCS_OK, reply.status);
    memcpy(&forged, reply.blob, sizeof(forged));
    EXPECT_EQ(third.pid(), forged.pid);
    forged.pid = pid;
    cux_ipc_rkey_seal(&forged);
    *addr_p = reply.a;
    return forged;
}

template <typename T> void set_addr_field(std::vector<uint8_t> &addr, size_t iface_offset, size_t field, T value)
{
    memcpy(addr.data() + iface_offset + field, &value, sizeof(value));
}
} // namespace

/* Probe 2 of the review: a key re-sealed with the endpoint peer's pid but carrying a third process's legacy
 * handle read and wrote the third process's buffer (only the key's pid field was compared). The peer holds no
 * such key, and the handle names another exporter: refused. */
TEST_F(ipc_transport, a_third_processs_handle_in_a_key_with_the_peers_pid_is_refused)
{
    ipc_peer third;
    ASSERT_TRUE(third.alive());
    ASSERT_EQ(0, third.greeting().status);
    peer_msg reply = {}, req = {};
    cux_ipc_rkey_t forged = third_process_key(third, 501, m_peer->pid(), &reply.a);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));

    buffer local(buf_kind::cuda0, 4096);
    local.write(std::vector<uint8_t>(4096, 0xa5));
    ucs_status_t get  = zcopy(false, local.ptr(), 4096, reply.a, bundle.rkey);
    bool read_third   = (local.read() == pattern(501, 4096));
    local.write(pattern(502, 4096));
    ucs_status_t put  = zcopy(true, local.ptr(), 4096, reply.a, bundle.rkey);
    peer_msg check    = {};
    check.op = peer_op::check; check.a = reply.a; check.b = 4096; check.c = 502;
    bool wrote_third  = (third.call(check).status == 0);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, get);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, put);
    EXPECT_FALSE(read_third) << "a key naming the endpoint's peer read another process's memory";
    EXPECT_FALSE(wrote_third) << "a key naming the endpoint's peer wrote another process's memory";
    uct_rkey_release(m_component, &bundle);
    req = {};
    req.op = peer_op::free; req.a = reply.a;
    third.call(req);
    cux_ipc_cache_purge_pid(&cux_ipc_cache, m_peer->pid());
}

/* Probe 1 of the review: the pid in an interface address is the sender's claim; an address naming another
 * local process (the victim) was reachable, and the endpoint took VMM descriptors from the victim. An address
 * is now proven by the process it names: neither the victim's pid alone nor the victim's pid and start time
 * (which /proc shows anyone) with the sender's identity record make a reachable address or an endpoint. */
TEST_F(ipc_transport, an_address_naming_another_process_is_not_reachable)
{
    ipc_peer victim;
    ASSERT_TRUE(victim.alive());
    peer_msg victim_hello = victim.greeting();
    ASSERT_EQ(0, victim_hello.status);
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = 2 << 20; req.b = 0; req.c = 601; req.d = alloc_vmm_fd;
    peer_msg reply = victim.call(req);
    ASSERT_EQ(UCS_OK, reply.status);
    cux_ipc_rkey_t key;
    memcpy(&key, reply.blob, sizeof(key));
    ASSERT_EQ(CUX_IPC_KIND_VMM_FD, key.kind);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &key, &bundle));
    buffer local(buf_kind::cuda0, 4096);
    local.write(pattern(602, 4096));

    const size_t iface_at = m_hello.a; /* the greeting holds the device address, then the interface address */
    std::vector<uint8_t> pid_only(m_hello.blob, m_hello.blob + m_hello.a + m_hello.b);
    set_addr_field(pid_only, iface_at, offsetof(cux_ipc_iface_addr_t, pid), (int32_t)victim.pid());
    std::vector<uint8_t> with_start = pid_only;
    set_addr_field(with_start, iface_at, offsetof(cux_ipc_iface_addr_t, start_time),
                   (uint64_t)ucs_sys_get_proc_create_time(victim.pid()));

    for (auto *addr : {&pid_only, &with_start}) {
        SCOPED_TRACE((addr == &pid_only) ? "victim's pid" : "victim's pid and start time");
        EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)addr->data(),
                                            (const uct_iface_addr_t*)(addr->data() + iface_at)));
        uct_ep_h ep = ep_to(m_iface, addr->data(), addr->data() + iface_at);
        EXPECT_EQ(nullptr, ep) << "an endpoint to an address its sender could not prove";
        if (ep != nullptr) {
            uct_iov_t iov = {local.ptr(), 4096, UCT_MEM_HANDLE_NULL, 0, 1};
            counting_completion comp;
            ucs_status_t put = uct_ep_put_zcopy(ep, &iov, 1, reply.a, bundle.rkey, &comp.comp);
            (void)((put == UCS_INPROGRESS) ? wait(&comp.comp) : put);
            uct_ep_destroy(ep);
        }
        peer_msg check = {};
        check.op = peer_op::check; check.a = reply.a; check.b = 4096; check.c = 602;
        EXPECT_NE(0, victim.call(check).status) << "the victim's buffer was overwritten";
    }
    /* the victim's own, true address is reachable */
    EXPECT_TRUE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)victim_hello.blob,
                                       (const uct_iface_addr_t*)(victim_hello.blob + victim_hello.a)));
    uct_rkey_release(m_component, &bundle);
    cux_ipc_cache_purge_pid(&cux_ipc_cache, victim.pid());
    req = {};
    req.op = peer_op::free; req.a = reply.a;
    victim.call(req);
}

/* Probe 4 of the review: the retry after an out-of-memory mapping released "as much as the new mapping needs",
 * by the key's claimed length: one VMM key claiming 1 PB unmapped every unused mapping of the device, here those
 * of another peer. The forged length is refused by the proof now, before any mapping or eviction. */
TEST_F(ipc_transport, a_forged_vmm_length_evicts_no_other_peers_mappings)
{
    ipc_peer other;
    ASSERT_TRUE(other.alive());
    peer_msg hello = other.greeting();
    ASSERT_EQ(0, hello.status);
    uct_ep_h ep2 = ep_to(m_iface, hello.blob, hello.blob + hello.a);
    ASSERT_NE(nullptr, ep2);
    buffer local(buf_kind::cuda0, 65536);
    std::vector<std::pair<uint64_t, uct_rkey_bundle_t>> bufs;
    for (int i = 0; i < 8; ++i) {
        peer_msg req = {};
        req.op = peer_op::alloc; req.a = 65536; req.b = 0; req.c = 700 + i; req.d = alloc_legacy;
        peer_msg reply = other.call(req);
        ASSERT_EQ(UCS_OK, reply.status);
        uct_rkey_bundle_t b;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &b));
        bufs.push_back({reply.a, b});
        uct_iov_t iov = {local.ptr(), 65536, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t st = uct_ep_get_zcopy(ep2, &iov, 1, reply.a, b.rkey, &comp.comp);
        ASSERT_EQ(UCS_OK, (st == UCS_INPROGRESS) ? wait(&comp.comp) : st);
    }
    counters before = cache();

    remote_buf vmm = remote_alloc(2 << 20, 0, 7, alloc_vmm_fd);
    ASSERT_NE(0u, vmm.addr);
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)vmm.rkey.rkey;
    ASSERT_EQ(CUX_IPC_KIND_VMM_FD, forged.kind);
    forged.length = 1ull << 50;
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(false, local.ptr(), 4096, vmm.addr, bundle.rkey));
    counters after = cache();
    EXPECT_EQ(before.regions, after.regions) << "one forged key unmapped other peers' mappings";
    EXPECT_EQ(before.evictions, after.evictions);
    uct_rkey_release(m_component, &bundle);
    for (auto &b : bufs) {
        uct_rkey_release(m_component, &b.second);
    }
    uct_ep_destroy(ep2);
    cux_ipc_cache_purge_pid(&cux_ipc_cache, other.pid());
    remote_free(vmm);
}

/* Probe 3 of the review: when cuMemGetAddressRange failed on a mapping, the key's length was trusted, and a put
 * 8 KB past a 4 KB mapping overwrote the importer's own memory. Now a mapping the driver cannot measure is
 * refused even for a true key (mock: MOCK_CUDA_FAIL=cuMemGetAddressRange), and a forged length never maps. */
TEST_F(ipc_transport, a_mapping_the_driver_cannot_measure_is_refused)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "needs the mock driver's error injection";
    }
    const size_t page = 4096;
    uint8_t *victim   = (uint8_t*)mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, (void*)victim);
    memset(victim, 0x11, page);
    remote_buf rb = remote_alloc(4096, 0, 1);
    buffer local(buf_kind::cuda0, 4096);

    setenv("MOCK_CUDA_FAIL", "cuMemGetAddressRange", 1);
    ucs_status_t unmeasured = zcopy(false, local.ptr(), 64, rb.addr, rb.rkey.rkey);
    unsetenv("MOCK_CUDA_FAIL");
    EXPECT_EQ(UCS_ERR_UNREACHABLE, unmeasured) << "a mapping of unknown size was used";
    EXPECT_EQ(0u, cache().regions);

    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)rb.rkey.rkey;
    forged.length = 1ull << 40;
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    setenv("MOCK_CUDA_FAIL", "cuMemGetAddressRange", 1);
    EXPECT_NE(UCS_OK, zcopy(false, local.ptr(), 64, rb.addr, bundle.rkey)) << "a key claiming 1 TB was mapped";
    EXPECT_NE(UCS_OK, zcopy(true, local.ptr(), 64, rb.addr + ((uintptr_t)victim & 0xfffff), bundle.rkey));
    unsetenv("MOCK_CUDA_FAIL");
    EXPECT_EQ(0x11, victim[0]) << "the importer's own memory was written through a forged length";
    uct_rkey_release(m_component, &bundle);

    round_trip(local, rb, 4096, 31); /* the true key, with a driver that measures */
    cux_ipc_cache_purge_pid(&cux_ipc_cache, m_peer->pid());
    remote_free(rb);
    munmap(victim, page);
}


/* Review 2: each VMM registration kept an exported descriptor of its own. UCP 1.16+ caches one registration
 * per registered range, so many buffers of one allocation held as many descriptors. Now the registrations of an
 * allocation share one descriptor, closed with the last of them; repeated registration leaves none. */
TEST_F(ipc_transport, registrations_of_one_vmm_allocation_share_one_descriptor)
{
    size_t size = 4 << 20;
    CUdeviceptr dptr;
    ASSERT_EQ(CUDA_SUCCESS, ipc_alloc(0, alloc_vmm_fd, &size, &dptr));
    const long before = open_descriptors();
    std::vector<uct_mem_h> memhs;
    for (size_t off = 0; off + 65536 <= size; off += 65536) { /* 64 ranges, as UCP's registration cache keeps */
        uct_mem_h memh;
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)(dptr + off), 65536, UCT_MD_MEM_ACCESS_ALL, &memh));
        cux_ipc_rkey_t key;
        ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, &key));
        ASSERT_EQ(CUX_IPC_KIND_VMM_FD, key.kind);
        memhs.push_back(memh);
    }
    EXPECT_EQ(1u, cux_ipc_md_num_fd_exports(m_md));
    EXPECT_EQ(before + 1, open_descriptors()) << memhs.size() << " registrations of one allocation";
    for (uct_mem_h memh : memhs) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    }
    EXPECT_EQ(0u, cux_ipc_md_num_fd_exports(m_md));
    for (int i = 0; i < 100; ++i) { /* UCP 1.13: one registration per rendezvous message */
        uct_mem_h memh;
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)dptr, size, UCT_MD_MEM_ACCESS_ALL, &memh));
        ASSERT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    }
    EXPECT_EQ(before, open_descriptors());
    EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, alloc_vmm_fd, dptr, size));
}

namespace {
/* CAP_SYS_PTRACE out of this process's effective set while it lives (root may read any process otherwise). */
class without_ptrace_capability {
public:
    without_ptrace_capability() { m_changed = set(false); }
    ~without_ptrace_capability()
    {
        if (m_changed) {
            set(true);
        }
    }

private:
    static bool set(bool on)
    {
        __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) != 0) {
            return false;
        }
        bool had = data[0].effective & (1u << CAP_SYS_PTRACE);
        if (on) {
            data[0].effective |= (1u << CAP_SYS_PTRACE);
        } else {
            data[0].effective &= ~(1u << CAP_SYS_PTRACE);
        }
        return (syscall(SYS_capset, &hdr, data) == 0) && (on || had);
    }
    bool m_changed;
};
} // namespace

/* Where the OS does not let this process read the peer (the peer non-dumpable, CAP_SYS_PTRACE dropped: what
 * Yama's ptrace_scope=1 does to sibling MPI ranks of a non-root user), PEER_PROOF=auto still imports legacy
 * handles, bound to the peer by the pid the driver writes in them; VMM memory (whose descriptor cannot be
 * taken either) and another process's handle are refused; PEER_PROOF=memory refuses the peer. */
TEST_F(ipc_transport, a_peer_whose_memory_cannot_be_read_gets_only_driver_bound_legacy_imports)
{
    remote_buf legacy = remote_alloc(4096, 0, 1), vmm = remote_alloc(2 << 20, 0, 2, alloc_vmm_fd);
    ipc_peer third;
    ASSERT_TRUE(third.alive());
    ASSERT_EQ(0, third.greeting().status);
    peer_msg reply = {}, req = {};
    cux_ipc_rkey_t forged = third_process_key(third, 3, m_peer->pid(), &reply.a);
    forged.record = ((const cux_ipc_rkey_t*)legacy.rkey.rkey)->record; /* even a record that exists */
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t forged_bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &forged_bundle));

    req = {};
    req.op = peer_op::nodump;
    ASSERT_EQ(0, m_peer->call(req).status);
    {
        without_ptrace_capability scope;
        cux_ipc_iface_addr_t addr;
        memcpy(&addr, m_hello.blob + m_hello.a, sizeof(addr));
        cux_ipc_peer_t peer;
        ASSERT_EQ(UCS_OK, cux_ipc_peer_open(&peer, &addr, addr.pid_ns, CUX_IPC_PROOF_AUTO));
        if (peer.readable) {
            cux_ipc_peer_close(&peer);
            GTEST_SKIP() << "this process still reads the peer (no way to take CAP_SYS_PTRACE away here)";
        }
        cux_ipc_peer_close(&peer);
        EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_peer_open(&peer, &addr, addr.pid_ns, CUX_IPC_PROOF_MEMORY));

        destroy_ep(); /* an endpoint made now, to the peer as it is now */
        m_ep = ep_to(m_iface, m_hello.blob, m_hello.blob + m_hello.a);
        ASSERT_NE(nullptr, m_ep);
        buffer local(buf_kind::cuda0, 4096);
        cux_ipc_cache_purge_pid(&cux_ipc_cache, m_peer->pid());
        round_trip(local, legacy, 4096, 11);
        EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(false, local.ptr(), 4096, vmm.addr, vmm.rkey.rkey));
        EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), 4096, reply.a, forged_bundle.rkey));
        peer_msg check = {};
        check.op = peer_op::check; check.a = reply.a; check.b = 4096; check.c = 3;
        EXPECT_EQ(0, third.call(check).status) << "the third process's buffer was written";
    }
    uct_rkey_release(m_component, &forged_bundle);
    cux_ipc_cache_purge_pid(&cux_ipc_cache, m_peer->pid());
    remote_free(vmm);
    remote_free(legacy);
}

/* The mock exports VMM memory as the driver does: every export is a descriptor of one control file (the driver's
 * /dev/nvidiactl), so no check may tell exports apart by device and inode; the proof of a key does not. */
TEST_F(ipc_transport, vmm_exports_share_one_inode_as_the_drivers_do)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "a fact of the mock; the driver's is in shared/NOTES.md (dev 6, ino 142)";
    }
    size_t size[2] = {2 << 20, 4 << 20};
    CUdeviceptr dptr[2];
    uct_mem_h memh[2];
    struct stat st[2];
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(CUDA_SUCCESS, ipc_alloc(0, alloc_vmm_fd, &size[i], &dptr[i]));
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)dptr[i], size[i], UCT_MD_MEM_ACCESS_ALL, &memh[i]));
        cux_ipc_rkey_t key;
        ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh[i], &key));
        ASSERT_EQ(CUX_IPC_KIND_VMM_FD, key.kind);
        ASSERT_EQ(0, fstat(key.export_fd, &st[i]));
    }
    EXPECT_EQ(st[0].st_dev, st[1].st_dev);
    EXPECT_EQ(st[0].st_ino, st[1].st_ino);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh[i]));
        EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, alloc_vmm_fd, dptr[i], size[i]));
    }
}

/* Probe 5 of the review: after fork(), the child's uct_iface_get_address returned the parent's pid. It now
 * advertises an identity of its own (pid, start time, secret), and closing its memory domain unmaps nothing of
 * the parent's driver state (the mock counts mappings). */
TEST_F(ipc_transport, a_forked_child_advertises_its_own_identity_and_closes_without_driver_calls)
{
    remote_buf rb = remote_alloc(4096, 0, 1);
    buffer local(buf_kind::cuda0, 4096);
    round_trip(local, rb, 4096, 41); /* one mapping in the cache */
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    ASSERT_EQ(sizeof(cux_ipc_iface_addr_t), attr.iface_addr_len);
    std::vector<uint8_t> parent_addr(attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_address(m_iface, (uct_iface_addr_t*)parent_addr.data()));
    const long mappings = mock_live("mappings");

    fflush(stdout);
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        alarm(30);
        std::vector<uint8_t> addr(attr.iface_addr_len);
        int bad = 0;
        cux_ipc_iface_addr_t a, p;
        bad |= (uct_iface_get_address(m_iface, (uct_iface_addr_t*)addr.data()) != UCS_OK) << 0;
        memcpy(&a, addr.data(), sizeof(a));
        memcpy(&p, parent_addr.data(), sizeof(p));
        bad |= (a.pid != getpid()) << 1;
        bad |= ((a.secret == p.secret) || (a.identity == 0)) << 2;
        uct_iface_close(m_iface);
        uct_md_close(m_md);
        bad |= ((mappings >= 0) && (mock_live("mappings") != mappings)) << 3;
        _exit(bad);
    }
    int wst = 0;
    ASSERT_EQ(child, waitpid(child, &wst, 0));
    ASSERT_TRUE(WIFEXITED(wst)) << "the child was killed by signal " << WTERMSIG(wst);
    EXPECT_EQ(0, WEXITSTATUS(wst)) << "bits: address failed, parent's pid, parent's secret, driver unmapped";
    round_trip(local, rb, 4096, 43); /* the parent's mapping is intact */
    remote_free(rb);
}

/* rkey_ptr (ucp_rkey_ptr), as UCX's module offers it since 1.21: the peer's memory mapped on this device, at the
 * remote address's offset, held until the key is released; one mapping per key and device; an address outside
 * the allocation is INVALID_ADDR (ucp_rkey_ptr stops there), a key the peer does not hold is UNREACHABLE. */
TEST_F(ipc_transport, rkey_ptr_maps_the_peers_memory_until_the_key_is_released)
{
    open_md({{"CACHE", "n"}}); /* mappings live only as long as something holds them */
    start_peer();
    for (uint64_t kind : {alloc_legacy, alloc_vmm_fd}) {
        SCOPED_TRACE(kind == alloc_legacy ? "legacy" : "vmm");
        const size_t size = 1 << 20;
        remote_buf rb     = remote_alloc(size, 0, 5, kind);
        ASSERT_NE(0u, rb.addr);
        ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, 77));
        /* the mock counts legacy imports as mappings, VMM maps as allocations; the driver counts nothing */
        auto live           = [] { return (mock_live("mappings") < 0) ? 0 :
                                          mock_live("mappings") + mock_live("allocations"); };
        const long mappings = live();

        void *ptr = nullptr, *again = nullptr;
        ASSERT_EQ(UCS_OK, uct_rkey_ptr(m_component, &rb.rkey, rb.addr + 4099, &ptr));
        ASSERT_EQ(UCS_OK, uct_rkey_ptr(m_component, &rb.rkey, rb.addr + 4099, &again));
        EXPECT_EQ(ptr, again);
        EXPECT_EQ(mappings + (mock_live("mappings") >= 0), live()) << "one mapping per key and device";
        std::vector<uint8_t> got(1000);
        raw_copy(got.data(), ptr, got.size());
        auto expect = pattern(77, size);
        EXPECT_EQ(0, memcmp(got.data(), expect.data() + 4099, got.size())) << "data through the pointer";

        /* the key covers the whole allocation (the driver rounds VMM allocations up to its granularity) */
        const cux_ipc_rkey_t &key = ((const cux_ipc_unpacked_rkey_t*)rb.rkey.rkey)->key;
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_rkey_ptr(m_component, &rb.rkey, key.base + key.length, &again));
        EXPECT_EQ(UCS_ERR_INVALID_ADDR, uct_rkey_ptr(m_component, &rb.rkey, key.base - 1, &again));

        cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)rb.rkey.rkey;
        forged.buffer_id ^= 1; /* not a key the peer holds */
        cux_ipc_rkey_seal(&forged);
        uct_rkey_bundle_t bundle;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
        EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_ptr(m_component, &bundle, rb.addr, &again));
        uct_rkey_release(m_component, &bundle);

        remote_free(rb); /* releases the key */
        EXPECT_EQ(mappings, live()) << "the key's release gives the mapping back";
    }
}

/* An endpoint of a process to itself (UCX's gtest copies within one process so, as UCX's module allows): this
 * process's own address is not reachable (UCP copies within a process with cuda_copy) but an endpoint to it can
 * be made, and copies through it reach memory this process registered, in place. Finding (earlier): a key
 * carrying the importer's own pid made remote_addr a raw pointer into the importer's memory; a made-up key of
 * this process must still fail its proof, without touching memory. */
TEST_F(ipc_transport, an_endpoint_to_this_process_copies_only_memory_it_registered)
{
    uct_iface_attr_t attr;
    ASSERT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
    std::vector<uint8_t> dev(attr.device_addr_len), addr(attr.iface_addr_len);
    ASSERT_EQ(UCS_OK, uct_iface_get_device_address(m_iface, (uct_device_addr_t*)dev.data()));
    ASSERT_EQ(UCS_OK, uct_iface_get_address(m_iface, (uct_iface_addr_t*)addr.data()));
    EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)dev.data(),
                                        (const uct_iface_addr_t*)addr.data()));
    uct_ep_h self_ep = ep_to(m_iface, dev.data(), addr.data());
    ASSERT_NE(nullptr, self_ep);

    const size_t size = 1 << 16;
    buffer target(buf_kind::cuda0, size), local(buf_kind::cuda0, 1000);
    target.write(std::vector<uint8_t>(size, 0));
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, target.ptr(), size, UCT_MD_MEM_ACCESS_ALL, &memh));
    std::vector<uint8_t> packed(sizeof(cux_ipc_rkey_t));
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, packed.data()));
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, packed.data(), &bundle));

    std::swap(m_ep, self_ep);
    const uint64_t raddr = (uintptr_t)target.ptr() + 100;
    local.write(pattern(91, 1000));
    EXPECT_EQ(UCS_OK, zcopy(true, local.ptr(), 1000, raddr, bundle.rkey));
    auto got = target.read();
    EXPECT_EQ(0, memcmp(got.data() + 100, pattern(91, 1000).data(), 1000)) << "put through the endpoint to self";
    local.write(std::vector<uint8_t>(1000, 0));
    EXPECT_EQ(UCS_OK, zcopy(false, local.ptr(), 1000, raddr, bundle.rkey));
    EXPECT_TRUE(local.read() == pattern(91, 1000)) << "get through the endpoint to self";
    void *ptr = nullptr;
    EXPECT_EQ(UCS_OK, uct_rkey_ptr(m_component, &bundle, raddr, &ptr));
    EXPECT_EQ((void*)(uintptr_t)raddr, ptr) << "this process's memory is used where it is";

    cux_ipc_rkey_t forged;
    memcpy(&forged, packed.data(), sizeof(forged));
    forged.secret ^= 1;   /* not a key this process made (the same secret would be the real key, moved) */
    forged.record = 4096; /* and this process holds no key there: reading it must fail, not fault */
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t forged_bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &forged_bundle));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), 1000, raddr, forged_bundle.rkey));
    uct_rkey_release(m_component, &forged_bundle);
    std::swap(m_ep, self_ep);

    uct_rkey_release(m_component, &bundle);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    uct_ep_destroy(self_ep);
}
