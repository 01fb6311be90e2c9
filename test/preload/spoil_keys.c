/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test preload: every cuda_ipc remote key UCP packs in this process leaves it spoiled, so that a real UCP
 * rendezvous hands the peer a key it must refuse without dying (UCP 1.13 aborts the importer on any unpack
 * error but UCS_ERR_UNREACHABLE). UCP calls uct_md_mkey_pack or uct_md_mkey_pack_v2 across libraries, so the
 * preload sees each call. TEST_SPOIL_IPC_KEYS says how:
 *   checksum - one byte of the key flipped (a corrupt key), version - the format of an older build,
 *   zero     - all zero bytes (not a key at all).
 */
#define _GNU_SOURCE
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int spoiled; /* keys spoiled in this process; the first one is reported (processes may _exit) */

/* The key's layout needs no header: its first 8 bytes are magic (4) and version (2), and its length is what the
 * memory domain reports. */
static void spoil(uct_md_h md, void *rkey_buffer)
{
    const char *how = getenv("TEST_SPOIL_IPC_KEYS");
#if CUX_UCX_VERNUM >= 116 /* the v1 query may leave out fields of later releases */
    uct_md_attr_v2_t attr = {.field_mask = UCT_MD_ATTR_FIELD_COMPONENT_NAME | UCT_MD_ATTR_FIELD_RKEY_PACKED_SIZE};

    if ((how == NULL) || (uct_md_query_v2(md, &attr) != UCS_OK) || strcmp(attr.component_name, "cuda_ipc")) {
        return;
    }
#else
    uct_md_attr_t attr;

    if ((how == NULL) || (uct_md_query(md, &attr) != UCS_OK) || strcmp(attr.component_name, "cuda_ipc")) {
        return;
    }
#endif
    if (spoiled++ == 0) {
        fprintf(stderr, "spoil_keys: spoiling cuda_ipc keys (%s) in pid %d\n", how, (int)getpid());
    }
    if (!strcmp(how, "zero")) {
        memset(rkey_buffer, 0, attr.rkey_packed_size);
    } else if (!strcmp(how, "version")) {
        uint16_t version;
        memcpy(&version, (uint8_t*)rkey_buffer + 4, sizeof(version));
        --version;
        memcpy((uint8_t*)rkey_buffer + 4, &version, sizeof(version));
    } else {
        ((uint8_t*)rkey_buffer)[attr.rkey_packed_size / 2] ^= 0x20;
    }
}

ucs_status_t uct_md_mkey_pack(uct_md_h md, uct_mem_h memh, void *rkey_buffer)
{
    static ucs_status_t (*real)(uct_md_h, uct_mem_h, void*);
    ucs_status_t status;

    if (real == NULL) {
        real = (ucs_status_t (*)(uct_md_h, uct_mem_h, void*))dlsym(RTLD_NEXT, "uct_md_mkey_pack");
    }
    status = real(md, memh, rkey_buffer);
    if (status == UCS_OK) {
        spoil(md, rkey_buffer);
    }
    return status;
}

/* UCP packs keys with the v2 call: (md, memh, params, buffer) in 1.13, with the address and length in 1.16+. */
#if CUX_UCX_VERNUM >= 116
#define SPOIL_PACK_V2_ARGS(_x)  uct_md_h md, uct_mem_h memh, void *address, size_t length, \
                                const uct_md_mkey_pack_params_t *params, void *_x
#define SPOIL_PACK_V2_CALL(_x)  md, memh, address, length, params, _x
#define SPOIL_PACK_V2_TYPES     uct_md_h, uct_mem_h, void*, size_t, const uct_md_mkey_pack_params_t*, void*
#else
#define SPOIL_PACK_V2_ARGS(_x)  uct_md_h md, uct_mem_h memh, const uct_md_mkey_pack_params_t *params, void *_x
#define SPOIL_PACK_V2_CALL(_x)  md, memh, params, _x
#define SPOIL_PACK_V2_TYPES     uct_md_h, uct_mem_h, const uct_md_mkey_pack_params_t*, void*
#endif

ucs_status_t uct_md_mkey_pack_v2(SPOIL_PACK_V2_ARGS(mkey_buffer))
{
    static ucs_status_t (*real)(SPOIL_PACK_V2_TYPES);
    ucs_status_t status;

    if (real == NULL) {
        real = (ucs_status_t (*)(SPOIL_PACK_V2_TYPES))dlsym(RTLD_NEXT, "uct_md_mkey_pack_v2");
    }
    status = real(SPOIL_PACK_V2_CALL(mkey_buffer));
    if (status == UCS_OK) {
        spoil(md, mkey_buffer);
    }
    return status;
}
