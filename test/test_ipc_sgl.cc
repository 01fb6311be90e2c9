/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 34, item 2: UCT's scatter-gather zero-copy put (UCX 1.22+) and get (1.23+) on cuda_ipc. A list of pieces
 * into two of the peer's allocations (adjacent, at odd offsets, empty, repeated at a stride) lands piece by piece
 * and nowhere else, with one completion; a list with one bad element is refused before anything is written
 * (issue 45: also one whose later element carries a key the peer no longer holds). Where UCX has no op for a list,
 * the tests hand it to the transport's own function, which every release compiles.
 */
#include "ipc_transport.h"

#include <vector>

extern "C" {
#include "compat/cux_ucx_compat.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/import/cux_ipc_import.h"
#include "ipc/cux_ipc_sgl.h"
#include <uct/api/v2/uct_v2.h>
}

using namespace cux_test;

namespace {

/* The arrays a scatter-gather call takes, built element by element. */
struct sgl_list {
    std::vector<void*>      buffers;
    std::vector<size_t>     lengths, counts, strides;
    std::vector<uint64_t>   remote;
    std::vector<uct_rkey_t> rkeys;

    void add(void *buffer, size_t length, uint64_t remote_addr, uct_rkey_t rkey, size_t count = 1,
             size_t stride = 0)
    {
        buffers.push_back(buffer);
        lengths.push_back(length);
        remote.push_back(remote_addr);
        rkeys.push_back(rkey);
        counts.push_back(count);
        strides.push_back(stride);
    }

    /* Writes what the list moves from `from` (bytes at the source addresses, relative to from_base) into `to`
     * (relative to to_base), as the pieces do. */
    void apply(bool put, const std::vector<uint8_t> &from, uintptr_t from_base, std::vector<uint8_t> &to,
               uintptr_t to_base, uint64_t remote_base, uct_rkey_t only_rkey) const
    {
        for (size_t i = 0; i < buffers.size(); ++i) {
            if (rkeys[i] != only_rkey) {
                continue;
            }
            for (size_t r = 0; r < counts[i]; ++r) {
                uintptr_t local = (uintptr_t)buffers[i] + r * strides[i];
                uint64_t rem    = remote[i] + r * strides[i] - remote_base;
                for (size_t k = 0; k < lengths[i]; ++k) {
                    if (put) {
                        to[rem + k] = from[local - from_base + k];
                    } else {
                        to[local - to_base + k] = from[rem + k];
                    }
                }
            }
        }
    }
};

} // namespace

class ipc_sgl : public ipc_transport {
protected:
    ucs_status_t sgl(bool put, const sgl_list &l, counting_completion &comp, bool with_counts = true)
    {
        const size_t *counts  = with_counts ? l.counts.data() : nullptr;
        const size_t *strides = with_counts ? l.strides.data() : nullptr;
        ucs_status_t status;
#if CUX_UCX_HAS_PUT_SGL
        if (put) {
            status = uct_ep_put_sgl_zcopy(m_ep, l.buffers.data(), l.lengths.data(), nullptr, l.remote.data(),
                                          l.rkeys.data(), counts, strides, l.buffers.size(), &comp.comp);
            return (status == UCS_INPROGRESS) ? wait(&comp.comp) : status;
        }
#endif
#if CUX_UCX_HAS_GET_SGL
        status = uct_ep_get_sgl_zcopy(m_ep, l.buffers.data(), l.lengths.data(), nullptr, l.remote.data(),
                                      l.rkeys.data(), counts, strides, l.buffers.size(), &comp.comp);
#else
        status = cux_ipc_sgl_zcopy(m_ep, l.buffers.data(), l.lengths.data(), nullptr, l.remote.data(),
                                   l.rkeys.data(), counts, strides, l.buffers.size(), &comp.comp, put);
#endif
        return (status == UCS_INPROGRESS) ? wait(&comp.comp) : status;
    }

    /* The list with its arrays as given (counts or strides may be null) */
    ucs_status_t sgl_raw(const sgl_list &l, const size_t *counts, const size_t *strides, counting_completion &comp)
    {
        return cux_ipc_sgl_zcopy(m_ep, l.buffers.data(), l.lengths.data(), nullptr, l.remote.data(), l.rkeys.data(),
                                 counts, strides, l.buffers.size(), &comp.comp, 1);
    }

    /* The whole of a remote allocation, read back with a plain get. */
    std::vector<uint8_t> remote_image(const remote_buf &rb, size_t size)
    {
        buffer back(buf_kind::cuda0, size);
        EXPECT_EQ(UCS_OK, zcopy(false, back.ptr(), size, rb.addr, rb.rkey.rkey));
        return back.read();
    }

    /* The interface again with these settings, and its peer. */
    void reopen(const std::vector<std::pair<std::string, std::string>> &config)
    {
        destroy_ep();
        open_iface(config);
        start_peer();
    }

    /* pattern(seed), written into b: what b holds now. */
    static std::vector<uint8_t> written(buffer &b, uint64_t seed)
    {
        std::vector<uint8_t> p = pattern(seed, b.size());
        b.write(p);
        return p;
    }

    /* A remote allocation of size bytes holding pattern(seed), 0 in addr if it could not be made or filled. */
    remote_buf filled_remote(size_t size, uint64_t seed)
    {
        remote_buf rb = remote_alloc(size, 0, seed, alloc_legacy);
        if ((rb.addr != 0) && (remote(peer_op::fill, rb.addr, size, seed) != 0)) {
            remote_free(rb);
            rb.addr = 0;
        }
        return rb;
    }

    /* The two sides of a list's test: a (a remote allocation holding pattern(seed), addr 0 if it could not be made
     * or filled), local (holding pattern(seed + 1): mine; l its address), and want (what a is to hold: its pattern,
     * until a list's apply). */
    struct list_sides {
        remote_buf           a;
        buffer               local;
        std::vector<uint8_t> mine, want;
        uint8_t             *l;

        list_sides(ipc_sgl &test, size_t size, uint64_t seed) :
            a(test.filled_remote(size, seed)), local(buf_kind::cuda0, size), mine(written(local, seed + 1)),
            want(pattern(seed, size)), l((uint8_t*)local.ptr())
        {
        }
    };

    void check_list_launches(long want_launches, long want_large, const char *list_batch = "1024",
                             const char *max_batch = "128");

    /* Pieces into (or out of) two allocations, of every shape a list may hold. */
    void check_list(bool put)
    {
        const size_t size = 1 << 20;
        start_peer();
        remote_buf a = remote_alloc(size, 0, 71, alloc_legacy), b = remote_alloc(size, 0, 72, alloc_vmm_fd);
        ASSERT_NE(0u, a.addr);
        ASSERT_NE(0u, b.addr);
        ASSERT_EQ(0, remote(peer_op::fill, a.addr, size, 71));
        ASSERT_EQ(0, remote(peer_op::fill, b.addr, size, 72));
        buffer local(buf_kind::cuda0, size);
        std::vector<uint8_t> mine = pattern(73, size);
        local.write(mine);
        uint8_t *l = (uint8_t*)local.ptr();

        sgl_list list;
        list.add(l, 4096, a.addr, a.rkey.rkey);
        list.add(l + 4096, 4096, a.addr + 4096, a.rkey.rkey); /* continues the previous piece: one copy */
        list.add(l + 100001, 1000, b.addr + 7, b.rkey.rkey);  /* odd offsets, another allocation */
        list.add(l + 300000, 0, a.addr + 300000, a.rkey.rkey); /* empty */
        list.add(l + 200000, 512, a.addr + 200000, a.rkey.rkey, 3, 16384); /* three times, 16 KB apart */
        list.add(l + 500003, 77, a.addr + 600005, a.rkey.rkey); /* elsewhere in the remote allocation */

        counting_completion comp;
        ASSERT_EQ(UCS_OK, sgl(put, list, comp));
        EXPECT_LE(comp.done, 1) << "one completion for the list";

        std::vector<uint8_t> want_a = pattern(71, size), want_b = pattern(72, size);
        if (put) {
            list.apply(true, mine, (uintptr_t)l, want_a, 0, a.addr, a.rkey.rkey);
            list.apply(true, mine, (uintptr_t)l, want_b, 0, b.addr, b.rkey.rkey);
            EXPECT_TRUE(remote_image(a, size) == want_a) << "the pieces into the first allocation, nothing else";
            EXPECT_TRUE(remote_image(b, size) == want_b) << "the piece into the second allocation, nothing else";
        } else {
            std::vector<uint8_t> want = mine;
            list.apply(false, want_a, 0, want, (uintptr_t)l, a.addr, a.rkey.rkey);
            list.apply(false, want_b, 0, want, (uintptr_t)l, b.addr, b.rkey.rkey);
            EXPECT_TRUE(local.read() == want) << "each piece read into its place, nothing else";
        }
        remote_free(a);
        remote_free(b);
    }
};

#if CUX_UCX_HAS_PUT_SGL
TEST_F(ipc_sgl, the_interface_offers_the_ops_for_lists_of_any_length)
{
    uct_iface_attr_v2_t attr = {};
    attr.field_mask = UCT_IFACE_ATTR_FIELD_CAP_FLAGS | UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT;
#  if CUX_UCX_HAS_GET_SGL
    attr.field_mask |= UCT_IFACE_ATTR_FIELD_MAX_GET_SGL_ZCOPY_COUNT;
#  endif
    ASSERT_EQ(UCS_OK, uct_iface_query_v2(m_iface, &attr));
    EXPECT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_V2_PUT_SGL_ZCOPY);
    EXPECT_GE(attr.max_put_sgl_zcopy_count, (size_t)UINT32_MAX) << "a list is one operation: UCP need not cut it";
#  if CUX_UCX_HAS_GET_SGL
    EXPECT_TRUE(attr.cap.flags & UCT_IFACE_FLAG_V2_GET_SGL_ZCOPY);
    EXPECT_EQ(attr.max_put_sgl_zcopy_count, attr.max_get_sgl_zcopy_count);
#  endif
}
#endif

TEST_F(ipc_sgl, a_put_list_writes_each_piece_and_nothing_else_with_one_completion)
{
    check_list(true);
}

TEST_F(ipc_sgl, a_get_list_reads_each_piece_into_its_place_with_one_completion)
{
    check_list(false);
}

TEST_F(ipc_sgl, a_list_with_a_bad_element_is_refused_before_anything_is_written)
{
    const size_t size = 1 << 20;
    start_peer();
    remote_buf a = remote_alloc(size, 0, 81, alloc_legacy);
    ASSERT_NE(0u, a.addr);
    ASSERT_EQ(0, remote(peer_op::fill, a.addr, size, 81));
    buffer local(buf_kind::cuda0, size);
    local.write(pattern(82, size));
    uint8_t *l = (uint8_t*)local.ptr();

    sgl_list outside;
    outside.add(l, 4096, a.addr, a.rkey.rkey);
    outside.add(l + 8192, 512, a.addr + size - 100, a.rkey.rkey); /* runs past the allocation */
    counting_completion comp;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, sgl(true, outside, comp));

    sgl_list repeated;
    repeated.add(l, 4096, a.addr, a.rkey.rkey);
    repeated.add(l + 8192, 512, a.addr + 8192, a.rkey.rkey, 2, 1 << 30); /* its repeats leave the allocation */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, sgl(true, repeated, comp));
    std::vector<size_t> no_strides_counts = {1, 2};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, sgl_raw(repeated, no_strides_counts.data(), nullptr, comp))
        << "repeats without a stride";
    std::vector<size_t> huge_counts = {1, SIZE_MAX / 2}, strides = {0, 4};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, sgl_raw(repeated, huge_counts.data(), strides.data(), comp))
        << "repeats whose span overflows";
    EXPECT_EQ(0, comp.done);
    EXPECT_EQ(0, remote(peer_op::check, a.addr, size, 81)) << "nothing of a refused list was written";

    /* a key the peer never handed out, behind a good piece: refused before the good piece goes */
    cux_ipc_rkey_t forged = *(const cux_ipc_rkey_t*)a.rkey.rkey;
    forged.buffer_id ^= 1;
    cux_ipc_rkey_seal(&forged);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged, &bundle));
    sgl_list with_forged;
    with_forged.add(l, 4096, a.addr, a.rkey.rkey);
    with_forged.add(l + 8192, 512, a.addr + 8192, bundle.rkey);
    counting_completion comp2;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, sgl(true, with_forged, comp2));
    EXPECT_EQ(0, comp2.done);
    EXPECT_EQ(0, remote(peer_op::check, a.addr, size, 81)) << "the good piece before the forged key was written";
    uct_rkey_release(m_component, &bundle);
    remote_free(a);
}

/* A list is one operation in flight however many pieces it has (issue 62): with one place left it goes whole;
 * with none it gets UCS_ERR_NO_RESOURCE with none of its pieces issued (UCP retries the whole list from its
 * pending queue), and goes whole once there is room. */
TEST_F(ipc_sgl, a_list_takes_one_place_in_flight_and_goes_whole_or_not_at_all)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "holds a copy in flight on purpose (the mock driver's MOCK_CUDA_ASYNC=1)";
    }
    const size_t size = 1 << 20, piece = 4096, count = 100;
    for (const char *max_inflight : {"2", "1"}) {
        SCOPED_TRACE(std::string("MAX_INFLIGHT=") + max_inflight);
        const bool room = !strcmp(max_inflight, "2");
        reopen({{"MAX_INFLIGHT", max_inflight}});
        list_sides s(*this, size, 91);
        ASSERT_NE(0u, s.a.addr);

        uct_iov_t iov = {s.l, piece, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion first;
        ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov, 1, s.a.addr, s.a.rkey.rkey, &first.comp))
            << "a copy in flight, holding one place";
        sgl_list list; /* every other block: 100 pieces, none continuing another */
        for (size_t i = 1; i <= count; ++i) {
            list.add(s.l + 2 * i * piece, piece, s.a.addr + 2 * i * piece, s.a.rkey.rkey);
        }
        counting_completion comp;
        ucs_status_t status = sgl_raw(list, nullptr, nullptr, comp);
        EXPECT_EQ(room ? UCS_INPROGRESS : UCS_ERR_NO_RESOURCE, status) << count << " pieces";
        if (status == UCS_INPROGRESS) {
            EXPECT_EQ(UCS_OK, wait(&comp.comp));
            EXPECT_EQ(1, comp.done);
        }
        EXPECT_EQ(UCS_OK, wait(&first.comp));
        std::vector<uint8_t> &want = s.want;
        std::copy(s.mine.begin(), s.mine.begin() + piece, want.begin());
        if (room) {
            list.apply(true, s.mine, (uintptr_t)s.l, want, 0, s.a.addr, s.a.rkey.rkey);
        }
        EXPECT_TRUE(remote_image(s.a, size) == want) << "the list's pieces, if it went, and nothing else";

        if (!room) {
            counting_completion again;
            EXPECT_EQ(UCS_OK, sgl(true, list, again)) << "the whole list, once there is room";
            list.apply(true, s.mine, (uintptr_t)s.l, want, 0, s.a.addr, s.a.rkey.rkey);
            EXPECT_TRUE(remote_image(s.a, size) == want);
        }
        remote_free(s.a);
    }
}

/* Issue 62: what a list costs the driver. Adjacent blocks of one allocation on each side are one copy; scattered
 * ones go as one kernel launch per 128 copies (LIST_BATCH's default); either way the list records one event, and its
 * pieces' mapping is looked up once. A list of blocks each in its own allocation looks up each (the cache's hits
 * count them). */
TEST_F(ipc_sgl, a_list_costs_one_event_and_its_copies_merged_and_launched_in_batches)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "counts the mock driver's copies, launches and events (MOCK_CUDA_ASYNC=1)";
    }
    const size_t piece = 4096, count = 1000, size = 2 * count * piece;
    reopen({{"MAX_BATCH", "128"}, {"COPY_KERNEL_MAX", "256k"}});
    list_sides s(*this, size, 95);
    ASSERT_NE(0u, s.a.addr);

    for (bool adjacent : {true, false}) {
        SCOPED_TRACE(adjacent ? "adjacent blocks" : "scattered blocks");
        sgl_list list;
        for (size_t i = 0; i < count; ++i) { /* scattered: every other block, backwards */
            const size_t at = adjacent ? i * piece : 2 * (count - 1 - i) * piece;
            list.add(s.l + at, piece, s.a.addr + at, s.a.rkey.rkey);
        }
        const long copies = mock_live("issued copies"), launches = mock_live("kernel launches");
        const long events = mock_live("event records");
        const counters before = cache();
        counting_completion comp;
        ASSERT_EQ(UCS_OK, sgl(true, list, comp));
        EXPECT_EQ(1, comp.done);
        EXPECT_EQ(before.hits + before.misses + 1, cache().hits + cache().misses)
            << "one lookup of the remote mapping for the whole list";
        EXPECT_EQ(events + 1, mock_live("event records")) << "one event for the list";
        if (adjacent) {
            EXPECT_EQ(copies + 1, mock_live("issued copies")) << "adjacent blocks: one copy";
        } else {
            EXPECT_EQ(launches + 8, mock_live("kernel launches")) << "scattered blocks: 1,000 copies, 128 a launch";
        }
        list.apply(true, s.mine, (uintptr_t)s.l, s.want, 0, s.a.addr, s.a.rkey.rkey);
        EXPECT_TRUE(remote_image(s.a, size) == s.want);
    }
    remote_free(s.a);

    /* one allocation per block on the remote side: one lookup each, one event for all; more blocks than one hold of
     * the cache's lock takes (256), mapped on the first list and found held on the second */
    std::vector<remote_buf> blocks;
    sgl_list list;
    for (size_t i = 0; i < 300; ++i) {
        blocks.push_back(remote_alloc(piece, 0, 100 + i, alloc_legacy));
        ASSERT_NE(0u, blocks.back().addr);
        list.add(s.l + (i % 64) * piece, piece, blocks.back().addr, blocks.back().rkey.rkey);
    }
    for (int pass = 0; pass < 2; ++pass) {
        const long events     = mock_live("event records");
        const counters before = cache();
        counting_completion comp;
        ASSERT_EQ(UCS_OK, sgl(true, list, comp));
        EXPECT_EQ(events + 1, mock_live("event records"));
        EXPECT_EQ(before.hits + before.misses + blocks.size(), cache().hits + cache().misses) << "a lookup per block";
        EXPECT_EQ(before.hits + (pass ? blocks.size() : 0), cache().hits) << "pass " << pass;
    }
    for (size_t i = 0; i < blocks.size(); ++i) {
        EXPECT_TRUE(remote_image(blocks[i], piece) ==
                    std::vector<uint8_t>(s.mine.begin() + (i % 64) * piece, s.mine.begin() + (i % 64 + 1) * piece))
            << "block " << i;
        remote_free(blocks[i]);
    }
}

/* Issue 62: a list's copies go to the GPU in launches of up to 1,024 copies (the large kernel, whose 24 KB parameter
 * CUDA 12.1 drivers take), the last few in the small one (3 KB, which the driver copies faster); a run of copies
 * that holds one too large for the kernel goes to the copy engines alone, not the whole list. With LIST_BATCH=128,
 * or where the driver takes no large parameters, the same list goes 128 copies a launch (a fresh process, below:
 * the kernels are loaded once per context). 2,101 pieces: 2,100 of 4 KB scattered backwards, and one of 512 KB
 * (over COPY_KERNEL_MAX) at 1,030. */
void ipc_sgl::check_list_launches(long want_launches, long want_large, const char *list_batch, const char *max_batch)
{
    const size_t piece = 4096, count = 2100, big = 512 * 1024, size = 2 * count * piece + big;
    SCOPED_TRACE(std::string("LIST_BATCH=") + list_batch + ", MAX_BATCH=" + max_batch);
    reopen({{"MAX_BATCH", max_batch}, {"COPY_KERNEL_MAX", "256k"}, {"LIST_BATCH", list_batch}});
    list_sides s(*this, size, 101);
    ASSERT_NE(0u, s.a.addr);
    sgl_list list;
    for (size_t i = 0; i < count; ++i) {
        if (i == 1030) {
            list.add(s.l + 2 * count * piece, big, s.a.addr + 2 * count * piece, s.a.rkey.rkey);
        }
        list.add(s.l + 2 * (count - 1 - i) * piece, piece, s.a.addr + 2 * (count - 1 - i) * piece, s.a.rkey.rkey);
    }
    const long launches = mock_live("kernel launches"), large = mock_live("large kernel launches");
    const long copies   = mock_live("issued copies");
    counting_completion comp;
    ASSERT_EQ(UCS_OK, sgl(true, list, comp));
    EXPECT_EQ(1, comp.done);
    EXPECT_EQ(launches + want_launches, mock_live("kernel launches"));
    EXPECT_EQ(large + want_large, mock_live("large kernel launches"));
    if (want_launches == 0) {
        EXPECT_EQ(copies + (long)list.buffers.size(), mock_live("issued copies")) << "every copy alone";
    }
    list.apply(true, s.mine, (uintptr_t)s.l, s.want, 0, s.a.addr, s.a.rkey.rkey);
    EXPECT_TRUE(remote_image(s.a, size) == s.want);
    remote_free(s.a);
}

TEST_F(ipc_sgl, a_list_goes_1024_copies_a_launch_and_only_the_run_with_a_large_copy_to_the_copy_engines)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "counts the mock driver's launches (MOCK_CUDA_ASYNC=1)";
    }
    /* copies 0-1023: one large launch; 1024-2047 hold the large copy: copy engines; 2048-2100: one small launch */
    check_list_launches(2, 1);
    /* LIST_BATCH=128: every launch small, as where the driver takes no large parameters (below) */
    check_list_launches(16, 0, "128");
    /* each bound by itself: MAX_BATCH=1 issues each operation at once, and a list is one; LIST_BATCH=1 each copy */
    check_list_launches(2, 1, "1024", "1");
    check_list_launches(0, 0, "1");

    command_result r = run_test_in_fresh_process(
        "MOCK_CUDA_NO_LARGE_PARAMS=1",
        "ipc_sgl.DISABLED_in_a_fresh_process_a_driver_without_large_parameters_takes_a_list_128_copies_a_launch");
    EXPECT_TRUE(passed(r)) << r.output;
}

TEST_F(ipc_sgl, DISABLED_in_a_fresh_process_a_driver_without_large_parameters_takes_a_list_128_copies_a_launch)
{
    /* 17 runs of 128 copies (the last 53); the one of 1024-1151 holds the large copy */
    check_list_launches(16, 0);
}

/* A list's first copies may go to the GPU in a batch that also ends an earlier operation: when that batch fails,
 * both report the failure, the list at its own end though its later copies went well. */
TEST_F(ipc_sgl, a_list_whose_first_copies_failed_with_another_operations_end_reports_the_failure)
{
    if (!using_mock_driver() || (getenv("MOCK_CUDA_ASYNC") == NULL)) {
        GTEST_SKIP() << "injects a failed launch into copies held in flight (MOCK_CUDA_FAIL, MOCK_CUDA_ASYNC=1)";
    }
    const size_t piece = 4096, count = 1100, size = 4 * count * piece;
    reopen({{"MAX_BATCH", "4"}, {"COPY_KERNEL_MAX", "256k"}});
    list_sides s(*this, size, 97);
    ASSERT_NE(0u, s.a.addr);

    /* one copy in flight, so that the next waits in the batch with its end */
    uct_iov_t iov0 = {s.l, piece, UCT_MEM_HANDLE_NULL, 0, 1};
    uct_iov_t iov1 = {s.l + 2 * piece, piece, UCT_MEM_HANDLE_NULL, 0, 1};
    counting_completion first, waiting;
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov0, 1, s.a.addr, s.a.rkey.rkey, &first.comp));
    ASSERT_EQ(UCS_INPROGRESS, uct_ep_put_zcopy(m_ep, &iov1, 1, s.a.addr + 2 * piece, s.a.rkey.rkey, &waiting.comp));
    sgl_list list; /* scattered: the batch fills at LIST_BATCH copies, the earlier one and the list's first ones */
    for (size_t i = 0; i < count; ++i) {
        list.add(s.l + (4 + 3 * i) * piece, piece, s.a.addr + (4 + 3 * i) * piece, s.a.rkey.rkey);
    }
    setenv("MOCK_CUDA_FAIL", "cuLaunchKernel:0:1", 1); /* that batch's launch, once */
    counting_completion comp;
    ucs_status_t status = sgl_raw(list, nullptr, nullptr, comp);
    unsetenv("MOCK_CUDA_FAIL");
    ASSERT_EQ(UCS_INPROGRESS, status);
    EXPECT_EQ(UCS_OK, wait(&first.comp));
    EXPECT_NE(UCS_OK, wait(&waiting.comp)) << "the operation that ended in the failed batch";
    EXPECT_NE(UCS_OK, wait(&comp.comp)) << "the list whose first copies were in the failed batch";
    EXPECT_EQ(1, comp.done);
    remote_free(s.a);
}

/* Issue 45, item 4: a list whose later element carries a key its peer no longer holds (the buffer freed and its
 * registration gone since the key came) writes nothing, not its earlier pieces: every element's allocation is
 * proven and mapped before the first piece is issued. The mappings taken for it are given back. */
TEST_F(ipc_sgl, a_list_whose_later_key_the_peer_no_longer_holds_writes_nothing)
{
    const size_t size = 1 << 20;
    start_peer();
    for (uint64_t kind : {alloc_legacy, alloc_vmm_fd}) {
        SCOPED_TRACE("alloc kind " + std::to_string(kind));
        remote_buf a = remote_alloc(size, 0, 91, kind), gone = remote_alloc(size, 0, 92, kind);
        ASSERT_NE(0u, a.addr);
        ASSERT_NE(0u, gone.addr);
        peer_msg req = {};
        req.op = peer_op::free; req.a = gone.addr; /* the peer lets go of it; this side still has its key */
        ASSERT_EQ(UCS_OK, m_peer->call(req).status);
        buffer local(buf_kind::cuda0, size);
        local.write(pattern(93, size));
        uint8_t *l = (uint8_t*)local.ptr();
        sgl_list list;
        list.add(l, 4096, a.addr, a.rkey.rkey, 4, 65536);
        list.add(l + 8192, 512, a.addr + 300000, a.rkey.rkey);
        list.add(l + 16384, 4096, gone.addr, gone.rkey.rkey);
        cux_ipc_cache_purge(&cux_ipc_cache);
        const counters before = cache();
        counting_completion comp;
        EXPECT_EQ(UCS_ERR_UNREACHABLE, sgl(true, list, comp));
        EXPECT_EQ(0, comp.done);
        EXPECT_EQ(0, remote(peer_op::check, a.addr, size, 91)) << "the earlier pieces were written";
        EXPECT_EQ(before.regions + 1, cache().regions) << "the first allocation's mapping, and nothing else, stays";
        buffer small(buf_kind::cuda0, 4096);
        round_trip(small, a, 4096, 94); /* the held mapping was given back: it is used and released again */
        uct_rkey_release(m_component, &gone.rkey);
        remote_free(a);
    }
    cux_ipc_cache_purge(&cux_ipc_cache);
}
