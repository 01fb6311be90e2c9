/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 47: fabric handles. cuMemCreate memory made with the fabric handle type and no descriptor type goes
 * between processes through its fabric handle, proven as every key is; memory that can go another way goes that
 * way; a process without an IMEX channel asks the driver nothing about fabric (without one, the H200's driver
 * corrupts the heap of a process that exports a pool as fabric). The mock's IMEX channel is a file "channel0" in
 * $CUX_IMEX_CHANNELS_DIR (test/mock/mock_vmm.c); the module looks in the same directory.
 */
#include "ipc_transport.h"

#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "ipc/common/cux_ipc_rkey.h"
}

using namespace cux_test;

namespace {

class ipc_fabric : public ipc_transport {
protected:
    void SetUp() override
    {
        if (using_mock_driver()) {
            m_channel.reset(new imex_channel());
        }
        ipc_transport::SetUp();
    }

    void TearDown() override
    {
        ipc_transport::TearDown();
        m_channel.reset();
    }

    /* The peer's buffer of a fabric kind; skips where the driver makes none (no IMEX channel on this host). */
    bool fabric_alloc(size_t size, uint64_t seed, uint64_t kind, peer_msg *reply)
    {
        peer_msg req = {};
        req.op = peer_op::alloc; req.a = size; req.b = 0; req.c = seed; req.d = kind;
        *reply = m_peer->call(req);
        return reply->status == UCS_OK;
    }

    /* The peer's buffer in reply, unpacked, then written and read back twice: imported once (what: by which
     * handle), then found in the cache; freed after. */
    void round_trips_through_one_fabric_import(const peer_msg &reply, size_t size, uint64_t seed, const char *what)
    {
        remote_buf rb = {reply.a, {}};
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
        long fabric_before = mock_live("fabric calls");
        counters before    = cache();
        buffer local(buf_kind::cuda0, size);
        round_trip(local, rb, size, seed);
        if (using_mock_driver()) {
            EXPECT_EQ(fabric_before + 1, mock_live("fabric calls")) << what;
        }
        round_trip(local, rb, size, seed + 2); /* the mapping is kept: no second import */
        if (using_mock_driver()) {
            EXPECT_EQ(fabric_before + 1, mock_live("fabric calls"));
        }
        EXPECT_EQ(before.misses + 1, cache().misses) << "mapped once, then found in the cache";
        remote_free(rb);
    }

    void peer_free(uint64_t addr)
    {
        peer_msg req = {};
        req.op = peer_op::free; req.a = addr;
        EXPECT_EQ(UCS_OK, m_peer->call(req).status);
    }

    std::unique_ptr<imex_channel> m_channel;
};

#define SKIP_WITHOUT_FABRIC_MEMORY(_ok) \
    if (!(_ok)) { \
        GTEST_SKIP() << "the driver makes no fabric memory here (no IMEX channel; the H200 host has none)"; \
    }

} // namespace

TEST_F(ipc_fabric, fabric_only_vmm_memory_goes_through_its_fabric_handle)
{
    const size_t size = 2 << 20;
    peer_msg reply;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(size, 31, alloc_vmm_fabric, &reply));
    cux_ipc_rkey_t key;
    memcpy(&key, reply.blob, sizeof(key));
    EXPECT_EQ(CUX_IPC_KIND_VMM_FABRIC, key.kind);
    EXPECT_EQ(-1, key.export_fd) << "a fabric key holds no descriptor";
    round_trips_through_one_fabric_import(reply, size, 32, "one import of the fabric handle");
}

/* A buffer inside a larger fabric allocation, at an offset, as an application's messages are. */
TEST_F(ipc_fabric, a_message_inside_a_fabric_allocation_lands_at_its_offset)
{
    const size_t size = 4 << 20, offset = 12345, length = 100000;
    peer_msg reply;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(size, 41, alloc_vmm_fabric, &reply));
    remote_buf rb = {reply.a, {}};
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
    buffer local(buf_kind::cuda0, length);
    local.write(pattern(42, length));
    ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), length, rb.addr + offset, rb.rkey.rkey));
    /* the bytes around the message are still the peer's first pattern (seed 41), the message is ours */
    std::vector<uint8_t> whole = pattern(41, size), ours = pattern(42, length);
    std::copy(ours.begin(), ours.end(), whole.begin() + offset);
    buffer back(buf_kind::cuda0, size);
    ASSERT_EQ(UCS_OK, zcopy(false, back.ptr(), size, rb.addr, rb.rkey.rkey));
    EXPECT_TRUE(back.read() == whole);
    remote_free(rb);
}

/* The descriptor is the stronger way (the kernel hands it over only to a process allowed to take it): memory that
 * has both types goes by its descriptor, and its export asks nothing about fabric. */
TEST_F(ipc_fabric, memory_with_a_descriptor_and_a_fabric_handle_goes_by_its_descriptor)
{
    size_t size = 2 << 20;
    CUdeviceptr dptr;
    if (ipc_alloc(0, alloc_vmm_fabric_fd, &size, &dptr) != CUDA_SUCCESS) {
        GTEST_SKIP() << "the driver makes no fabric memory here (no IMEX channel)";
    }
    long fabric_before = mock_live("fabric calls");
    EXPECT_EQ(CUX_IPC_KIND_VMM_FD, own_key(dptr, size).kind);
    EXPECT_EQ(fabric_before, mock_live("fabric calls"));
    EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, alloc_vmm_fabric_fd, dptr, size));
}

/* Without a channel the driver refuses every fabric import: the key is refused at unpack (UCP takes another path
 * at once), and the driver is asked nothing. */
TEST_F(ipc_fabric, a_process_without_an_imex_channel_refuses_fabric_keys_without_asking_the_driver)
{
    peer_msg reply;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(2 << 20, 51, alloc_vmm_fabric, &reply));
    m_channel->withdraw();
    long fabric_before = mock_live("fabric calls");
    uct_rkey_bundle_t bundle;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, reply.blob, &bundle));
    EXPECT_EQ(fabric_before, mock_live("fabric calls"));
    peer_free(reply.a);
}

/* A pool made with the fabric type alone goes through the pool's fabric handle and the allocation's export data
 * where both processes have an IMEX channel. Without one (where the H200's driver corrupts the heap of a process
 * that asks) its memory registers with a key that says "another path", the export is never asked for, and one
 * diagnostic line says how to share such a pool. */
TEST_F(ipc_fabric, fabric_pools_go_through_the_pools_fabric_handle_where_a_channel_is)
{
    const size_t size = 1 << 20;
    peer_msg reply;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(size, 71, alloc_pool_fabric, &reply));
    cux_ipc_rkey_t key;
    memcpy(&key, reply.blob, sizeof(key));
    if (!using_mock_driver() && (key.kind == CUX_IPC_KIND_NONE)) {
        peer_free(reply.a);
        GTEST_SKIP() << "this driver exports no pool as fabric here";
    }
    ASSERT_EQ(CUX_IPC_KIND_POOL_FABRIC, key.kind);
    EXPECT_EQ(-1, key.export_fd) << "a fabric pool's key holds no descriptor";
    round_trips_through_one_fabric_import(reply, size, 72, "the pool imported once, by its fabric handle");

    m_channel->withdraw(); /* and the process forgets that it said it */
    warnings_captured diag(UCS_LOG_LEVEL_DIAG);
    size_t own_size = size;
    CUdeviceptr dptr;
    ASSERT_EQ(CUDA_SUCCESS, ipc_alloc(0, alloc_pool_fabric, &own_size, &dptr));
    long fabric_before = mock_live("fabric calls");
    long failed_before = mock_live("failed exports");
    EXPECT_EQ(CUX_IPC_KIND_NONE, own_key(dptr, own_size).kind);
    EXPECT_EQ(fabric_before, mock_live("fabric calls")) << "no channel: the driver is asked nothing about fabric";
    EXPECT_EQ(failed_before, mock_live("failed exports"));
    EXPECT_EQ(CUDA_SUCCESS, ipc_free(0, alloc_pool_fabric, dptr, own_size));
    EXPECT_EQ(1u, diag.count("fabric handle type alone")) << "said once, with the remedy";
}

/* Fabric bytes are a capability: a key whose bytes were changed (another allocation's handle, or made up) is
 * refused by the proof in the exporter's table before the driver sees the bytes. */
TEST_F(ipc_fabric, a_fabric_key_with_other_bytes_is_refused_before_the_driver_sees_them)
{
    const size_t size = 2 << 20;
    peer_msg first, second;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(size, 61, alloc_vmm_fabric, &first));
    ASSERT_TRUE(fabric_alloc(size, 62, alloc_vmm_fabric, &second));
    cux_ipc_rkey_t a, b;
    memcpy(&a, first.blob, sizeof(a));
    memcpy(&b, second.blob, sizeof(b));
    a.fabric = b.fabric; /* the first key, naming the second allocation */
    cux_ipc_rkey_seal(&a);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &a, &bundle));
    long fabric_before = mock_live("fabric calls");
    buffer local(buf_kind::cuda0, size);
    local.write(pattern(63, size));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), size, a.base, bundle.rkey));
    EXPECT_EQ(fabric_before, mock_live("fabric calls")) << "the forged bytes reached the driver";
    EXPECT_EQ(0, remote(peer_op::check, b.base, size, 62)) << "the second allocation was written";
    EXPECT_EQ(0, remote(peer_op::check, a.base, size, 61)) << "the first allocation was written";
    uct_rkey_release(m_component, &bundle);
    peer_free(first.a);
    peer_free(second.a);
}

/* Freed and deregistered: the key is no longer the exporter's, and its bytes map nothing. */
TEST_F(ipc_fabric, a_key_of_freed_fabric_memory_maps_nothing)
{
    const size_t size = 2 << 20;
    peer_msg reply;
    SKIP_WITHOUT_FABRIC_MEMORY(fabric_alloc(size, 71, alloc_vmm_fabric, &reply));
    remote_buf rb = {reply.a, {}};
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
    peer_free(rb.addr);
    buffer local(buf_kind::cuda0, size);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), size, rb.addr, rb.rkey.rkey));
    uct_rkey_release(m_component, &rb.rkey);
}
