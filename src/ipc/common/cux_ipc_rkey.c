/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc remote key: see cux_ipc_rkey.h.
 */
#include "ipc/common/cux_ipc_rkey.h"

#include <ucs/debug/log.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include <ucs/sys/math.h>

/* One word into a multiply-xorshift hash. */
static inline uint64_t cux_ipc_hash_word(uint64_t hash, uint64_t word)
{
    hash ^= word;
    hash *= 0x9e3779b97f4a7c15ull;
    return hash ^ (hash >> 29);
}

/* A word-wise hash: enough to tell a corrupt or truncated key from a valid one, and cheap (both ends compute it
 * for every rendezvous message; a byte-wise hash cost about 150 ns per key). */
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
        hash = cux_ipc_hash_word(hash, word);
    }
    return (uint32_t)(hash ^ (hash >> 32));
}

void cux_ipc_rkey_seal(cux_ipc_rkey_t *rkey)
{
    rkey->magic    = CUX_IPC_RKEY_MAGIC;
    rkey->version  = CUX_IPC_RKEY_VERSION;
    rkey->checksum = cux_ipc_rkey_checksum(rkey);
}

/* A key that is not one at all: the first in the process is an error line, later ones are debug lines (a
 * peer of another build sends one with every rendezvous). */
#define cux_ipc_rkey_invalid(_fmt, ...) \
    ({ \
        static int _logged; \
        int _first = !__atomic_exchange_n(&_logged, 1, __ATOMIC_RELAXED); \
        ucs_log(_first ? UCS_LOG_LEVEL_ERROR : UCS_LOG_LEVEL_DEBUG, "cuda_ipc: remote key refused: " _fmt "%s", \
                ## __VA_ARGS__, _first ? " (another path carries the transfer; further ones: debug log)" : ""); \
        UCS_ERR_UNREACHABLE; \
    })

ucs_status_t cux_ipc_rkey_check(const cux_ipc_rkey_t *rkey, uint64_t local_system_id, int other_hosts)
{
    if (rkey->magic != CUX_IPC_RKEY_MAGIC) {
        return cux_ipc_rkey_invalid("magic 0x%x, expected 0x%x: not a cuda_ipc key of this module", rkey->magic,
                                    CUX_IPC_RKEY_MAGIC);
    }
    if (rkey->version != CUX_IPC_RKEY_VERSION) {
        return cux_ipc_rkey_invalid("version %u, this module speaks %u (a peer with another build of it)",
                                    rkey->version, CUX_IPC_RKEY_VERSION);
    }
    if (rkey->checksum != cux_ipc_rkey_checksum(rkey)) {
        return cux_ipc_rkey_invalid("corrupt or truncated (checksum mismatch)");
    }
    if ((rkey->kind != CUX_IPC_KIND_LEGACY) && (rkey->kind != CUX_IPC_KIND_VMM_FD) &&
        (rkey->kind != CUX_IPC_KIND_NONE) && (rkey->kind != CUX_IPC_KIND_POOL_FD) &&
        (rkey->kind != CUX_IPC_KIND_VMM_SPAN) && (rkey->kind != CUX_IPC_KIND_VMM_FABRIC) &&
        (rkey->kind != CUX_IPC_KIND_POOL_FABRIC)) {
        return cux_ipc_rkey_invalid("unknown kind %u", rkey->kind);
    }
    if ((rkey->kind == CUX_IPC_KIND_VMM_SPAN) && ((rkey->span.count < 2) || (rkey->span.count > CUX_IPC_SPAN_MAX))) {
        return cux_ipc_rkey_invalid("a span of %u allocations (2 to %u)", rkey->span.count, CUX_IPC_SPAN_MAX);
    }
    if ((rkey->length == 0) || (rkey->base + rkey->length < rkey->base)) {
        return cux_ipc_rkey_invalid("invalid range 0x%" PRIx64 "+%" PRIu64, rkey->base, rkey->length);
    }
    if ((rkey->system_id != local_system_id) && (!cux_ipc_rkey_crosses_hosts(rkey) || !other_hosts)) {
        ucs_debug("cuda_ipc: remote key comes from another host (system id 0x%" PRIx64 ", ours 0x%" PRIx64 "), "
                  "%s", rkey->system_id, local_system_id,
                  cux_ipc_rkey_crosses_hosts(rkey) ? "and multi-node NVLink is off here" :
                                                     "and carries no fabric handle");
        return UCS_ERR_UNREACHABLE;
    }
    if (rkey->kind == CUX_IPC_KIND_NONE) {
        ucs_debug("cuda_ipc: remote allocation 0x%" PRIx64 "+%" PRIu64 " cannot be shared: another path carries it",
                  rkey->base, rkey->length);
        return UCS_ERR_UNREACHABLE;
    }
    return UCS_OK;
}

/* What tells the pieces from others: every piece's range and buffer id, hashed. */
uint64_t cux_ipc_span_pieces_id(const cux_ipc_span_piece_t *piece, unsigned count)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    unsigned i;

    for (i = 0; i < count; ++i) {
        hash = cux_ipc_hash_word(hash, piece[i].base);
        hash = cux_ipc_hash_word(hash, piece[i].length);
        hash = cux_ipc_hash_word(hash, piece[i].buffer_id);
    }
    return hash;
}

int cux_ipc_rkey_same_allocation(const cux_ipc_rkey_t *a, const cux_ipc_rkey_t *b)
{
    return (a->pid == b->pid) && (a->pid_ns == b->pid_ns) && (a->kind == b->kind) && (a->base == b->base) &&
           (a->length == b->length) &&
           (a->buffer_id == b->buffer_id) && (a->secret == b->secret) && (a->system_id == b->system_id) &&
           !memcmp(&a->dev_uuid, &b->dev_uuid, sizeof(a->dev_uuid)) &&
           !memcmp(&a->pool_fabric, &b->pool_fabric, sizeof(a->pool_fabric)) &&
           ((a->kind == CUX_IPC_KIND_VMM_SPAN) ?
            ((a->span.pieces == b->span.pieces) && (a->span.count == b->span.count)) :
            !memcmp(&a->handle, &b->handle, sizeof(a->handle)));
}

/* A pool allocation's export data takes the legacy handle's place: the key's layout is the same for every kind. */
_Static_assert(sizeof(CUmemPoolPtrExportData) == sizeof(CUipcMemHandle), "pool export data and IPC handle differ");
_Static_assert(sizeof(CUmemFabricHandle) == sizeof(CUipcMemHandle), "fabric handle and IPC handle differ");
