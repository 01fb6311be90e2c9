/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc remote key: see cux_ipc_rkey.h.
 */
#include "cux_ipc_rkey.h"

#include <ucs/debug/log.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <ucs/sys/math.h>

/* A word-wise multiply-xorshift hash: enough to tell a corrupt or truncated key from a valid one, and cheap
 * (both ends compute it for every rendezvous message; a byte-wise hash cost about 150 ns per key). */
static uint32_t cux_ipc_rkey_checksum(const cux_ipc_rkey_t *rkey)
{
    const uint8_t *p = (const uint8_t*)rkey;
    const size_t n   = offsetof(cux_ipc_rkey_t, checksum);
    uint64_t hash    = 0x84222325cbf29ce4ull;
    uint64_t word;
    size_t i;

    for (i = 0; i < n; i += sizeof(word)) {
        word = 0;
        memcpy(&word, p + i, ucs_min(sizeof(word), n - i));
        hash ^= word;
        hash *= 0x9e3779b97f4a7c15ull;
        hash ^= hash >> 29;
    }
    return (uint32_t)(hash ^ (hash >> 32));
}

void cux_ipc_rkey_seal(cux_ipc_rkey_t *rkey)
{
    rkey->magic    = CUX_IPC_RKEY_MAGIC;
    rkey->version  = CUX_IPC_RKEY_VERSION;
    rkey->checksum = cux_ipc_rkey_checksum(rkey);
}

ucs_status_t cux_ipc_rkey_check(const cux_ipc_rkey_t *rkey, uint64_t local_system_id, int32_t local_pid)
{
    if (rkey->magic != CUX_IPC_RKEY_MAGIC) {
        ucs_error("cuda_ipc: remote key has magic 0x%x, expected 0x%x: not a cuda_ipc key", rkey->magic,
                  CUX_IPC_RKEY_MAGIC);
        return UCS_ERR_INVALID_PARAM;
    }
    if (rkey->version != CUX_IPC_RKEY_VERSION) {
        ucs_error("cuda_ipc: remote key version %u, this module speaks %u", rkey->version,
                  CUX_IPC_RKEY_VERSION);
        return UCS_ERR_INVALID_PARAM;
    }
    if (rkey->checksum != cux_ipc_rkey_checksum(rkey)) {
        ucs_error("cuda_ipc: remote key is corrupt or truncated (checksum mismatch)");
        return UCS_ERR_INVALID_PARAM;
    }
    if ((rkey->kind != CUX_IPC_KIND_LEGACY) && (rkey->kind != CUX_IPC_KIND_VMM_FD) &&
        (rkey->kind != CUX_IPC_KIND_NONE)) {
        ucs_error("cuda_ipc: remote key of unknown kind %u", rkey->kind);
        return UCS_ERR_INVALID_PARAM;
    }
    if ((rkey->length == 0) || (rkey->base + rkey->length < rkey->base)) {
        ucs_error("cuda_ipc: remote key has an invalid range 0x%" PRIx64 "+%" PRIu64, rkey->base,
                  rkey->length);
        return UCS_ERR_INVALID_PARAM;
    }
    if (rkey->system_id != local_system_id) {
        ucs_debug("cuda_ipc: remote key comes from another host (system id 0x%" PRIx64 ", ours 0x%" PRIx64 ")",
                  rkey->system_id, local_system_id);
        return UCS_ERR_UNREACHABLE;
    }
    if (rkey->pid == local_pid) {
        ucs_debug("cuda_ipc: remote key names this very process (pid %d): not a peer's memory", local_pid);
        return UCS_ERR_UNREACHABLE;
    }
    if (rkey->kind == CUX_IPC_KIND_NONE) {
        ucs_debug("cuda_ipc: remote allocation 0x%" PRIx64 "+%" PRIu64 " cannot be shared: another path carries it",
                  rkey->base, rkey->length);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}
