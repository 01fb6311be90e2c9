/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's mapping cache: its logic against a fake driver, without a GPU.
 */
#include "ipc_transport.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/import/cux_ipc_cache.h"
}

using namespace cux_test;

struct fake_driver {
    std::atomic<int> mapped{0}, opens{0}, fail{0}, in_map{0};
    int      capacity = 0; /* most mappings open at once, 0 for no limit */
    int      slow_ms  = 0; /* how long a map takes (a slow proof, a slow import) */
    uint64_t next   = 0x100000;

    static ucs_status_t map(void *arg, const cux_ipc_rkey_t *key, int device, void *peer, void **mapped_p,
                            void **held_p)
    {
        *held_p = nullptr;
        fake_driver *d = (fake_driver*)arg;
        int fail       = d->fail; /* as asked when the map began */
        d->in_map++;
        usleep(d->slow_ms * 1000);
        if (fail || ((d->capacity > 0) && (d->mapped >= d->capacity))) {
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

    cux_ipc_region_t *get(const cux_ipc_rkey_t &k, int device = 0, uint64_t owner = 1, uint64_t key_id = 0)
    {
        cux_ipc_region_t *r = nullptr;
        EXPECT_EQ(UCS_OK, cux_ipc_cache_get(&m_cache, &k, key_id, device, nullptr, owner, &r));
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

/* A hit of the unpacked key a mapping last served skips the key's comparison; any other key is compared. */
TEST_F(ipc_cache, a_key_remembered_by_id_is_served_and_another_allocation_at_its_place_is_not)
{
    auto k = key(1, 0x1000, 1), fresh = key(1, 0x1000, 2);
    cux_ipc_region_t *r = get(k, 0, 1, 11);
    EXPECT_EQ(11u, r->key_id) << "the key it was mapped from";
    cux_ipc_cache_put(&m_cache, r);
    r = get(k, 0, 1, 12); /* another unpacking of the same key: compared, then remembered */
    EXPECT_EQ(12u, r->key_id);
    cux_ipc_cache_put(&m_cache, r);
    r = get(k, 0, 1, 12);
    EXPECT_EQ(1, m_drv.opens);
    EXPECT_EQ(2ul, m_cache.stats.hits);
    cux_ipc_cache_put(&m_cache, r);
    r = get(fresh, 0, 1, 13); /* a new buffer at that address, as its own unpacked key names it */
    EXPECT_EQ(1ul, m_cache.stats.stale);
    EXPECT_EQ(2, m_drv.opens);
    EXPECT_EQ(13u, r->key_id);
    cux_ipc_cache_put(&m_cache, r);
    cux_ipc_cache_batch_begin(&m_cache);
    EXPECT_EQ(nullptr, cux_ipc_cache_batch_hit(&m_cache, &k, 12, 0, 1)) << "the old key served the new buffer";
    cux_ipc_cache_batch_end(&m_cache);
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
    cux_ipc_cache_purge_pid(&m_cache, 0, 1);
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
    cux_ipc_cache_configure(&m_cache, 1, 8, SIZE_MAX, UCS_TIME_INFINITY);
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
    cux_ipc_cache_configure(&m_cache, 1, ULONG_MAX, 10 * 4096, UCS_TIME_INFINITY);
    for (uint64_t i = 0; i < 50; ++i) {
        cux_ipc_cache_put(&m_cache, get(key(1, 0x1000 * (i + 1), i)));
        EXPECT_LE(m_cache.total_size, 10u * 4096);
    }
}

TEST_F(ipc_cache, regions_in_use_are_never_evicted)
{
    cux_ipc_cache_configure(&m_cache, 1, 2, SIZE_MAX, UCS_TIME_INFINITY);
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
    cux_ipc_cache_configure(&m_cache, 0, ULONG_MAX, SIZE_MAX, UCS_TIME_INFINITY);
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
    cux_ipc_cache_configure(&m_cache, 0, ULONG_MAX, SIZE_MAX, UCS_TIME_INFINITY);
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
    EXPECT_EQ(UCS_ERR_NO_MEMORY, cux_ipc_cache_get(&m_cache, &k, 0, 0, nullptr, 1, &r));
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
    EXPECT_EQ(UCS_ERR_NO_MEMORY, cux_ipc_cache_get(&m_cache, &huge, 0, 0, nullptr, 1, &r));
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

/* A freed buffer stays allocated while a peer keeps it mapped: unused mappings go at the next operation once
 * idle for longer than the bound, oldest first; mappings in use stay whatever their age (issue 22, item 5). */
TEST_F(ipc_cache, unused_mappings_go_after_the_idle_bound_at_the_next_operation)
{
    cux_ipc_cache_configure(&m_cache, 1, ULONG_MAX, SIZE_MAX, ucs_time_from_msec(30));
    cux_ipc_region_t *held = get(key(1, 0x1000, 1));
    cux_ipc_cache_put(&m_cache, get(key(1, 0x2000, 2)));
    cux_ipc_cache_put(&m_cache, get(key(1, 0x3000, 3)));
    EXPECT_EQ(3, m_drv.mapped);
    usleep(80000);
    cux_ipc_cache_put(&m_cache, get(key(2, 0x4000, 4))); /* any operation: the two idle ones go */
    EXPECT_EQ(2, m_drv.mapped) << "the mapping in use and the new one stay";
    EXPECT_EQ(2ul, m_cache.stats.expired);
    cux_ipc_cache_put(&m_cache, held);
    cux_ipc_cache_put(&m_cache, get(key(1, 0x1000, 1))); /* used again within the bound: a hit */
    EXPECT_EQ(4, m_drv.opens);

    cux_ipc_cache_configure(&m_cache, 1, ULONG_MAX, SIZE_MAX, UCS_TIME_INFINITY);
    usleep(50000);
    cux_ipc_cache_put(&m_cache, get(key(3, 0x5000, 5)));
    EXPECT_EQ(3, m_drv.mapped) << "with no bound, unused mappings stay";
}

/* A miss maps outside the cache's lock (issue 32, item 4): a thread that wants the mapping another thread is making
 * waits for it and is served it, the handle imported once; a purge meanwhile leaves the new mapping to its last
 * release; a failed map leaves nothing behind, and the waiter then maps it itself. */
TEST_F(ipc_cache, a_mapping_in_progress_is_imported_once_and_shared)
{
    auto k           = key(1, 0x1000, 1);
    m_drv.slow_ms    = 200;
    cux_ipc_region_t *first = nullptr, *second = nullptr;
    std::thread mapper([&] { first = get(k); });
    while (m_drv.in_map == 0) {
        usleep(1000);
    }
    second = get(k); /* while the first is being mapped */
    mapper.join();
    EXPECT_EQ(first, second);
    EXPECT_EQ(1, m_drv.opens);
    EXPECT_EQ(1ul, m_cache.stats.hits);
    cux_ipc_cache_put(&m_cache, first);
    cux_ipc_cache_put(&m_cache, second);
}

TEST_F(ipc_cache, a_purge_during_a_mapping_leaves_it_to_its_last_release)
{
    auto k        = key(1, 0x1000, 1);
    m_drv.slow_ms = 200;
    cux_ipc_region_t *r = nullptr;
    std::thread mapper([&] { r = get(k); });
    while (m_drv.in_map == 0) {
        usleep(1000);
    }
    cux_ipc_cache_purge(&m_cache);
    mapper.join();
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(1, m_drv.mapped);
    EXPECT_EQ(0ul, m_cache.num_regions);
    cux_ipc_cache_put(&m_cache, r); /* detached: unmapped now */
    EXPECT_EQ(0, m_drv.mapped);
}

TEST_F(ipc_cache, a_failed_mapping_leaves_nothing_and_a_waiter_maps_it_itself)
{
    auto k        = key(1, 0x1000, 1);
    m_drv.slow_ms = 200;
    m_drv.fail    = 1;
    ucs_status_t first = UCS_OK;
    std::thread mapper([&] {
        cux_ipc_region_t *r = nullptr;
        first = cux_ipc_cache_get(&m_cache, &k, 0, 0, nullptr, 1, &r);
    });
    while (m_drv.in_map == 0) {
        usleep(1000);
    }
    usleep(50000);
    m_drv.fail = 0; /* the waiter's own map succeeds */
    cux_ipc_region_t *r = get(k);
    mapper.join();
    EXPECT_EQ(UCS_ERR_NO_MEMORY, first);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(1ul, m_cache.num_regions);
    cux_ipc_cache_put(&m_cache, r);
}

/*
 * Issue 32, finding 4: the mapping cache held its lock across the map callback (the peer's proof, the driver's
 * import), so one slow map (a slow proof: a peer's page it never serves) held up every thread's operations to
 * every peer. Here a map that takes 2 s, and a hit of another peer's mapping from a second thread meanwhile.
 */
namespace {
struct slow_driver {
    std::atomic<int> in_map{0};
    static ucs_status_t map(void *arg, const cux_ipc_rkey_t *key, int device, void *peer, void **mapped_p,
                            void **held_p)
    {
        slow_driver *d = (slow_driver*)arg;
        *held_p               = nullptr;
        *mapped_p             = (void*)(uintptr_t)(0x100000 * (key->pid + 1));
        if (key->pid == 1) { /* the slow peer */
            d->in_map = 1;
            usleep(2000000);
            d->in_map = 2;
        }
        return UCS_OK;
    }
    static void unmap(void *arg, const cux_ipc_region_t *region) {}
};
} // namespace

TEST(ipc_cache_peers, a_slow_mapping_of_one_peer_holds_up_no_hit_of_another)
{
    slow_driver drv;
    cux_ipc_cache_ops_t ops = {slow_driver::map, slow_driver::unmap};
    cux_ipc_cache_t cache;
    cux_ipc_cache_init(&cache, &ops, &drv);

    cux_ipc_rkey_t fast = sample_key(7), slow = sample_key(7);
    fast.pid = 2;
    slow.pid = 1;
    cux_ipc_region_t *r = nullptr;
    ASSERT_EQ(UCS_OK, cux_ipc_cache_get(&cache, &fast, 0, 0, nullptr, 1, &r)); /* peer 2's mapping, open */
    cux_ipc_cache_put(&cache, r);

    std::thread mapper([&] {
        cux_ipc_region_t *s = nullptr;
        if (cux_ipc_cache_get(&cache, &slow, 0, 0, nullptr, 1, &s) == UCS_OK) {
            cux_ipc_cache_put(&cache, s);
        }
    });
    while (drv.in_map == 0) {
        usleep(1000);
    }
    ucs_time_t start = ucs_get_time();
    ASSERT_EQ(UCS_OK, cux_ipc_cache_get(&cache, &fast, 0, 0, nullptr, 1, &r)); /* a hit */
    double waited = ucs_time_to_sec(ucs_get_time() - start);
    cux_ipc_cache_put(&cache, r);
    mapper.join();
    printf("a cache hit of peer 2 while peer 1's key is mapped: waited %.3f s (the map took 2 s)\n", waited);
    EXPECT_LT(waited, 0.5) << "a hit waited for another peer's mapping";
    cux_ipc_cache_purge(&cache);
}

/* Issue 34, item 3: a KV cache of one allocation per block puts 100,000 mappings in the cache. Every one is found
 * again without a second import, and the table grew with them, so a lookup walks a short chain (with the first
 * 1024 chains a lookup walked about a hundred regions). A purge gives the grown table back. */
TEST_F(ipc_cache, a_hundred_thousand_mappings_are_found_again_in_short_chains)
{
    const uint64_t n = 100000;

    for (int pass = 0; pass < 2; ++pass) {
        for (uint64_t i = 0; i < n; ++i) {
            cux_ipc_region_t *r = get(key(1, 0x200000000ull + i * 0xc000, i + 1, 45 * 1024));
            ASSERT_NE(nullptr, r);
            cux_ipc_cache_put(&m_cache, r);
        }
    }
    EXPECT_EQ(n, (uint64_t)m_drv.opens.load()) << "a mapping was imported twice";
    EXPECT_EQ(n, m_cache.stats.hits);
    EXPECT_EQ(0ul, m_cache.stats.evictions);
    EXPECT_GE(m_cache.num_buckets * 2, n) << "the table did not grow with its mappings";
    unsigned long longest = 0;
    for (unsigned long b = 0; b < m_cache.num_buckets; ++b) {
        unsigned long len = 0;
        for (cux_ipc_region_t *r = m_cache.buckets[b]; r != nullptr; r = r->next) {
            ++len;
        }
        longest = std::max(longest, len);
    }
    printf("%lu mappings in %lu chains, the longest %lu\n", (unsigned long)n, m_cache.num_buckets, longest);
    EXPECT_LE(longest, 16ul);
    cux_ipc_cache_purge(&m_cache);
    EXPECT_EQ(m_cache.initial, m_cache.buckets);
    EXPECT_EQ(0, m_drv.mapped.load());
}

/* A scatter-gather list's runs: the hits under one lock, what the cache cannot serve at once left to
 * cux_ipc_cache_get, and the releases together, the cache trimmed once at the end. */
TEST_F(ipc_cache, a_batch_serves_only_ready_mappings_of_the_same_owner_and_allocation)
{
    cux_ipc_cache_put(&m_cache, get(key(1, 0x1000, 1)));
    cux_ipc_cache_put(&m_cache, get(key(1, 0x2000, 2)));
    auto hit = key(1, 0x1000, 1), stale = key(1, 0x2000, 3), missing = key(1, 0x3000, 4);

    cux_ipc_cache_batch_begin(&m_cache);
    cux_ipc_region_t *r = cux_ipc_cache_batch_hit(&m_cache, &hit, 0, 0, 1);
    EXPECT_EQ(nullptr, cux_ipc_cache_batch_hit(&m_cache, &hit, 0, 0, 2)) << "another owner's mapping served";
    EXPECT_EQ(nullptr, cux_ipc_cache_batch_hit(&m_cache, &hit, 0, 1, 1)) << "another device's mapping served";
    EXPECT_EQ(nullptr, cux_ipc_cache_batch_hit(&m_cache, &stale, 0, 0, 1)) << "another allocation's mapping served";
    EXPECT_EQ(nullptr, cux_ipc_cache_batch_hit(&m_cache, &missing, 0, 0, 1));
    cux_ipc_cache_batch_end(&m_cache);
    ASSERT_NE(nullptr, r);
    EXPECT_EQ(1u, r->refcount);
    EXPECT_EQ(2, m_drv.opens) << "a batch mapped something";
    EXPECT_EQ(0ul, m_cache.stats.stale) << "a batch dropped a mapping";

    /* in use: a bound of no mappings cannot unmap it until the batch releases it */
    cux_ipc_cache_configure(&m_cache, 1, 0, SIZE_MAX, UCS_TIME_INFINITY);
    EXPECT_EQ(1, m_drv.mapped);
    cux_ipc_cache_batch_begin(&m_cache);
    cux_ipc_cache_batch_put(&m_cache, r);
    EXPECT_EQ(1, m_drv.mapped) << "trimmed before the batch's end";
    cux_ipc_cache_batch_end(&m_cache);
    EXPECT_EQ(0, m_drv.mapped);
}

TEST_F(ipc_cache, a_batch_releases_many_mappings_and_the_last_use_of_a_detached_one_unmaps_it)
{
    std::vector<cux_ipc_region_t*> regions;
    for (int i = 0; i < 100; ++i) {
        regions.push_back(get(key(1, 0x1000 * (i + 1), i)));
    }
    cux_ipc_cache_purge_pid(&m_cache, sample_key(7).pid_ns, 1); /* detached, in use */
    EXPECT_EQ(100, m_drv.mapped);
    cux_ipc_cache_batch_begin(&m_cache);
    for (auto r : regions) {
        cux_ipc_cache_batch_put(&m_cache, r);
    }
    cux_ipc_cache_batch_end(&m_cache);
    EXPECT_EQ(0, m_drv.mapped);
}
