/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc spans (a buffer across several cuMemCreate allocations of one range) kept by UCP's registration
 * cache: what a kept registration packs after the range changed, and how long a span's key stays valid.
 */
#include "ipc_transport.h"

#include <cstring>
#include <vector>

extern "C" {
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/import/cux_ipc_import.h"
#include "driver/cux_device.h"
}

using namespace cux_test;

#if CUX_UCX_CACHES_IPC_REGISTRATIONS
extern "C" {
#include "base/cux_ptr.h"
}

namespace {
/* `pieces` cuMemCreate allocations with the POSIX descriptor handle type mapped one after another in one reserved
 * range on device 0 (PyTorch's expandable segments); *piece_size is the granularity. */
/* What device 0's allocations with the POSIX descriptor handle type are made and accessed with. */
void vmm_props(CUmemAllocationProp *prop, CUmemAccessDesc *access)
{
    *prop                      = {};
    *access                    = {};
    prop->type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id          = 0;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    access->location           = prop->location;
    access->flags              = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

CUdeviceptr vmm_range(unsigned pieces, size_t *piece_size)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle handle;
    CUcontext ctx, prev;
    CUdeviceptr dptr = 0;
    size_t granularity;

    cux_device_ctx(0, &ctx);
    cux_drv.cuCtxPushCurrent(ctx);
    vmm_props(&prop, &access);
    if ((cux_drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
         CUDA_SUCCESS) && (cux_drv.cuMemAddressReserve(&dptr, pieces * granularity, 0, 0, 0) == CUDA_SUCCESS)) {
        for (unsigned i = 0; i < pieces; ++i) {
            if (cux_drv.cuMemCreate(&handle, granularity, &prop, 0) == CUDA_SUCCESS) {
                cux_drv.cuMemMap(dptr + i * granularity, granularity, 0, handle, 0);
                cux_drv.cuMemRelease(handle);
            }
        }
        cux_drv.cuMemSetAccess(dptr, pieces * granularity, &access, 1);
    }
    cux_drv.cuCtxPopCurrent(&prev);
    *piece_size = granularity;
    return dptr;
}

/* The application gives piece i back and maps a new allocation in its place (an expandable segment that shrank
 * and grew again). */
void replace_piece(CUdeviceptr dptr, size_t piece_size, unsigned i)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUmemGenericAllocationHandle handle;
    CUcontext ctx, prev;

    cux_device_ctx(0, &ctx);
    cux_drv.cuCtxPushCurrent(ctx);
    vmm_props(&prop, &access);
    cux_drv.cuMemUnmap(dptr + i * piece_size, piece_size);
    if (cux_drv.cuMemCreate(&handle, piece_size, &prop, 0) == CUDA_SUCCESS) {
        cux_drv.cuMemMap(dptr + i * piece_size, piece_size, 0, handle, 0);
        cux_drv.cuMemRelease(handle);
        cux_drv.cuMemSetAccess(dptr + i * piece_size, piece_size, &access, 1);
    }
    cux_drv.cuCtxPopCurrent(&prev);
}

void free_range(CUdeviceptr dptr, size_t piece_size, unsigned pieces)
{
    CUcontext ctx, prev;

    cux_device_ctx(0, &ctx);
    cux_drv.cuCtxPushCurrent(ctx);
    for (unsigned i = 0; i < pieces; ++i) {
        cux_drv.cuMemUnmap(dptr + i * piece_size, piece_size);
    }
    cux_drv.cuMemAddressFree(dptr, pieces * piece_size);
    cux_drv.cuCtxPopCurrent(&prev);
}
} // namespace

class ipc_spans : public ipc_transport {
protected:
    /* `pieces` allocations of one range (vmm_range), registered as one buffer */
    void register_range(unsigned pieces, size_t *piece, CUdeviceptr *dptr, uct_mem_h *memh)
    {
        *dptr = vmm_range(pieces, piece);
        ASSERT_NE(0u, *dptr);
        ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)*dptr, pieces * *piece, UCT_MD_MEM_ACCESS_ALL, memh));
    }

    ucs_status_t pack(uct_mem_h memh, void *address, size_t length, cux_ipc_rkey_t *key)
    {
        uct_md_mkey_pack_params_t params = {};
#if CUX_UCX_MKEY_PACK_TAKES_ADDRESS
        return uct_md_mkey_pack_v2(m_md, memh, address, length, &params, key);
#else
        (void)address;
        (void)length;
        return uct_md_mkey_pack_v2(m_md, memh, &params, key);
#endif
    }
};

/*
 * Issue 32, finding 2: UCP 1.14+ keeps registrations, and mkey_pack re-checks only the allocation at the buffer's start
 * (cux_ipc_key_is_of on memh->key). A span made earlier (memh->span) is handed out again as long as its range
 * covers the buffer, even after a later piece was given back and a new allocation mapped in its place: the key
 * still names the old piece's descriptor, so a peer writes (put) into or reads (get) from memory the
 * application no longer has at that address, and the old piece stays allocated while the registration lives.
 * Expected: every piece of a packed span is the allocation mapped there now (else a new span, or a NONE key).
 */
TEST_F(ipc_spans, a_kept_registration_never_packs_a_span_naming_a_replaced_piece)
{
    size_t piece;
    const unsigned pieces = 3;
    CUdeviceptr dptr;
    uct_mem_h memh;
    ASSERT_NO_FATAL_FAILURE(register_range(pieces, &piece, &dptr, &memh));
    cux_ipc_rkey_t before, after;
    ASSERT_EQ(UCS_OK, pack(memh, (void*)dptr, pieces * piece, &before));
    ASSERT_EQ(CUX_IPC_KIND_VMM_SPAN, before.kind);
    ASSERT_EQ(pieces, before.span.count);

    replace_piece(dptr, piece, 2);
    cux_ptr_info_t now;
    ASSERT_EQ(UCS_OK, cux_ptr_query((void*)(dptr + 2 * piece), &now));
    ASSERT_EQ(UCS_OK, pack(memh, (void*)dptr, pieces * piece, &after));
    if (after.kind == CUX_IPC_KIND_VMM_SPAN) {
        const cux_ipc_span_piece_t *table = (const cux_ipc_span_piece_t*)(uintptr_t)after.span.table;
        printf("span after piece 2 was replaced: the key's piece 2 is buffer id %llu, the range holds %llu "
               "there now (the key was %s)\n", (unsigned long long)table[2].buffer_id,
               (unsigned long long)now.buffer_id, (after.span.pieces == before.span.pieces) ? "reused" : "remade");
        EXPECT_EQ(now.buffer_id, table[2].buffer_id) << "the packed span names a piece the range no longer holds";
    }
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    free_range(dptr, piece, pieces);
}

#if CUX_UCX_MKEY_PACK_TAKES_ADDRESS
/*
 * UCP 1.16 keeps registrations, and without CUDA memory hooks (a stock UCX) a kept registration outlives the
 * buffer it was made for: new allocations made in its range share it (ucp_mem_map copies the cached parent's
 * handle), and each ucp_rkey_pack asks it for a key of a different allocation. Seen on the GPU host with Ubuntu's
 * UCX 1.16: the module renewed the registration's key for each, which withdrew the one handed out before, and a
 * peer's put with it was refused ("holds no such key"). A registration keeps a key per allocation it has served,
 * until it ends. Here one registration over a range of three allocations, a key for a buffer in each.
 */
TEST_F(ipc_spans, a_registration_serving_several_allocations_keeps_each_key_it_handed_out)
{
    size_t piece;
    const unsigned pieces = 3;
    CUdeviceptr dptr;
    uct_mem_h memh;
    ASSERT_NO_FATAL_FAILURE(register_range(pieces, &piece, &dptr, &memh));
    std::vector<cux_ipc_rkey_t> keys(pieces);
    for (unsigned i = 0; i < pieces; ++i) { /* a buffer inside each allocation, as UCP packs them */
        ASSERT_EQ(UCS_OK, pack(memh, (void*)(dptr + i * piece + 64), piece / 2, &keys[i]));
        ASSERT_EQ(CUX_IPC_KIND_VMM_FD, keys[i].kind);
        EXPECT_EQ(dptr + i * piece, keys[i].base);
    }
    for (unsigned i = 0; i < pieces; ++i) { /* every key still proves (this process's own: its table) */
        uct_rkey_bundle_t bundle;
        void *ptr = nullptr;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &keys[i], &bundle));
        EXPECT_EQ(UCS_OK, uct_rkey_ptr(m_component, &bundle, dptr + i * piece + 64, &ptr)) << "key of piece " << i;
        uct_rkey_release(m_component, &bundle);
    }
    ASSERT_EQ(UCS_OK, pack(memh, (void*)(dptr + 64), piece / 2, &keys[0])); /* back to the first */
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    cux_ipc_cache_purge_pid(&cux_ipc_cache, cux_ipc_pid_namespace(), getpid());
    free_range(dptr, piece, pieces);
}

/*
 * Issue 32, finding 3: when a buffer packed from a registration runs further than the registration's span, a larger span
 * replaces it and the old span is released at once (cux_ipc_memh_pack_unlock: "unused = memh->span"), its key
 * wiped. A peer that holds the old key and has not mapped it yet (a rendezvous in flight) then fails its proof:
 * UCS_ERR_UNREACHABLE from a zcopy UCP already committed to, although the registration and the memory are alive.
 * Expected: a span lives as long as its registration (or until the allocation under it changes).
 */
TEST_F(ipc_spans, a_larger_span_leaves_the_key_a_peer_holds_valid)
{
    size_t piece;
    const unsigned pieces = 3;
    CUdeviceptr dptr;
    uct_mem_h memh;
    ASSERT_NO_FATAL_FAILURE(register_range(pieces, &piece, &dptr, &memh));
    cux_ipc_rkey_t first, second;
    ASSERT_EQ(UCS_OK, pack(memh, (void*)dptr, piece + piece / 2, &first)); /* pieces 0 and 1 */
    ASSERT_EQ(CUX_IPC_KIND_VMM_SPAN, first.kind);
    ASSERT_EQ(2u, first.span.count);
    uct_rkey_bundle_t bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &first, &bundle)); /* the peer has the key, not the mapping */

    ASSERT_EQ(UCS_OK, pack(memh, (void*)dptr, 2 * piece + piece / 2, &second)); /* another message: 0 to 2 */
    ASSERT_EQ(3u, second.span.count);

    /* the first key, proven now (an endpoint of this process to itself proves keys like a peer's) */
    void *ptr = nullptr;
    ucs_status_t st = uct_rkey_ptr(m_component, &bundle, dptr + 100, &ptr);
    printf("the first span's key after a larger span was packed: %s\n", ucs_status_string(st));
    EXPECT_EQ(UCS_OK, st) << "a key handed out for a live registration no longer proves";
    uct_rkey_release(m_component, &bundle);
    EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
    cux_ipc_cache_purge_pid(&cux_ipc_cache, cux_ipc_pid_namespace(), getpid());
    free_range(dptr, piece, pieces);
}
#endif
#endif
