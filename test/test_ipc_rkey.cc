/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's remote-key format and its validation, without a GPU.
 */
#include "ipc_transport.h"

extern "C" {
#include "ipc/common/cux_ipc_rkey.h"
}

using namespace cux_test;

TEST(ipc_rkey, sealed_key_round_trips)
{
    cux_ipc_rkey_t key = sample_key(7), copy;
    memcpy(&copy, &key, sizeof(copy));
    EXPECT_EQ(UCS_OK, cux_ipc_rkey_check(&copy, 7, 0));
}

TEST(ipc_rkey, every_corrupted_byte_is_rejected)
{
    cux_ipc_rkey_t key = sample_key(7);
    for (size_t i = 0; i < sizeof(key); ++i) {
        cux_ipc_rkey_t bad = key;
        ((uint8_t*)&bad)[i] ^= 0x40;
        EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&bad, 7, 0)) << "byte " << i;
    }
}

TEST(ipc_rkey, truncated_key_is_rejected)
{
    cux_ipc_rkey_t key = sample_key(7);
    for (size_t keep : {size_t(0), size_t(4), sizeof(key) / 2, sizeof(key) - 1}) {
        cux_ipc_rkey_t cut;
        memset(&cut, 0, sizeof(cut));
        memcpy(&cut, &key, keep);
        EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&cut, 7, 0)) << keep << " bytes";
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
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7, 0));
    key = sample_key(7);
    key.kind = 7;
    cux_ipc_rkey_seal(&key);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7, 0));
}

TEST(ipc_rkey, key_of_another_host_is_unreachable)
{
    cux_ipc_rkey_t key = sample_key(8);
    EXPECT_EQ(UCS_ERR_UNREACHABLE, cux_ipc_rkey_check(&key, 7, 0));
}

/* A key of this very process passes the format check: whether it is usable is decided on the endpoint, where it
 * must name an endpoint to this process and be proven in this process's memory
 * (ipc_transport.an_endpoint_to_this_process_copies_only_memory_it_registered). */
TEST(ipc_rkey, key_of_this_very_process_passes_the_format_check)
{
    cux_ipc_rkey_t key = sample_key(7);
    key.pid = getpid();
    cux_ipc_rkey_seal(&key);
    EXPECT_EQ(UCS_OK, cux_ipc_rkey_check(&key, 7, 0));
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
