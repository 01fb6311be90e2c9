/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs, keys (cux_ipc_proof.h): a key is the peer's when the peer's table of keys out holds it,
 * read back through the directory its proven identity named (or asked over its channel); then what the key
 * names is taken: a span's table, a descriptor through the peer's pidfd, a legacy handle bound by the pid the
 * driver writes into it. Who the peer is (its address proven) is cux_ipc_proof.c.
 */
#define _GNU_SOURCE
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/import/cux_ipc_peer_read.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "ipc/import/cux_ipc_proof_channel.h"
#include "ipc/import/cux_ipc_handle.h"
#include "driver/cux_driver.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Reads slot `record` of the peer's table of keys out, through the directory its proven identity named. */
static ucs_status_t cux_ipc_peer_read_key(cux_ipc_peer_t *peer, uint64_t record, cux_ipc_rkey_t *held)
{
    uint64_t chunk_index = record / CUX_IPC_KEY_CHUNK_SLOTS, chunk = 0;

    if (chunk_index >= CUX_IPC_KEY_CHUNKS) {
        return UCS_ERR_UNREACHABLE;
    }
    if (chunk_index < CUX_IPC_PEER_CHUNKS_KNOWN) {
        chunk = peer->chunk[chunk_index];
    }
    if (chunk == 0) {
        if ((cux_ipc_peer_read_bounded(peer->pid, peer->keys + chunk_index * sizeof(uint64_t), &chunk, sizeof(chunk)) !=
             (ssize_t)sizeof(chunk)) || (chunk == 0)) {
            return UCS_ERR_UNREACHABLE;
        }
        if (chunk_index < CUX_IPC_PEER_CHUNKS_KNOWN) {
            peer->chunk[chunk_index] = chunk; /* chunks are never freed */
        }
    }
    return (cux_ipc_peer_read_bounded(peer->pid, chunk + (record % CUX_IPC_KEY_CHUNK_SLOTS) * sizeof(*held), held,
                              sizeof(*held)) == (ssize_t)sizeof(*held)) ? UCS_OK : UCS_ERR_UNREACHABLE;
}

ucs_status_t cux_ipc_peer_check_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key)
{
    cux_ipc_rkey_t held;

    if (!cux_ipc_peer_made(peer, key)) {
        return cux_ipc_peer_reject(peer, "remote key of pid %d (PID namespace %" PRIu64 ", host 0x%" PRIx64 ") used "
                                   "on an endpoint to pid %d (%" PRIu64 ", host 0x%" PRIx64 "): refused", key->pid,
                                   key->pid_ns, key->system_id, peer->pid, peer->pid_ns, peer->system_id);
    }
    if (cux_ipc_peer_is_remote(peer)) {
        /* its exporter's key (above), of another host: it passed unpack only with a fabric handle
         * (cux_ipc_rkey_unpack), which the driver opens for a holder of an IMEX channel alone */
        return UCS_OK;
    }
    if (peer->channel >= 0) {
        return cux_ipc_proof_channel_key(peer, key);
    }
    if (!peer->readable) {
        if (key->kind != CUX_IPC_KIND_LEGACY) {
            return cux_ipc_peer_reject(peer, "pid %d's VMM or pool memory is proven in its memory or needs a "
                                       "descriptor, which the OS does not let this process read or take (same "
                                       "user and ptrace permission needed)", peer->pid);
        }
        return UCS_OK; /* bound at mapping time by the pid in the handle */
    }
    if (cux_ipc_proof_key_is_own(key)) {
        /* a key of this very process: in its own table as it was handed out, secret and all */
        if (!cux_ipc_proof_own_key_use(key, NULL, NULL)) {
            return cux_ipc_peer_reject(peer, "a key of this process for 0x%" PRIx64 "+%" PRIu64 " that it did "
                                       "not hand out (made up, or already deregistered): refused", key->base,
                                       key->length);
        }
        return UCS_OK;
    }
    if ((cux_ipc_peer_read_key(peer, key->record, &held) != UCS_OK) || (memcmp(&held, key, sizeof(held)) != 0)) {
        return cux_ipc_peer_reject(peer, "pid %d holds no such key for 0x%" PRIx64 "+%" PRIu64 " (forged, or "
                                   "already deregistered): refused", peer->pid, key->base, key->length);
    }
    if (!cux_ipc_pidfd_alive(peer->pidfd)) {
        return cux_ipc_peer_reject(peer, "pid %d exited", peer->pid);
    }
    return UCS_OK;
}

ucs_status_t cux_ipc_peer_read_span(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece)
{
    size_t len = key->span.count * sizeof(*piece);
    ucs_status_t status;

    if (peer->channel >= 0) {
        status = cux_ipc_proof_channel_span(peer, key, piece);
    } else {
        status = (peer->readable &&
                  (cux_ipc_peer_read_bounded(peer->pid, key->span.table, piece, len) == (ssize_t)len)) ?
                 UCS_OK : UCS_ERR_UNREACHABLE;
    }
    if (status != UCS_OK) {
        return cux_ipc_peer_reject(peer, "cannot read pid %d's table of %u pieces of its span 0x%" PRIx64 "+%" PRIu64
                                   ": refused", peer->pid, key->span.count, key->base, key->length);
    }
    return UCS_OK;
}

int cux_ipc_peer_take_fd(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, uint32_t piece, int fd)
{
    int local;

    if (peer->channel >= 0) {
        local = cux_ipc_proof_channel_take_fd(peer, key, piece);
        if (local < 0) {
            ucs_error("cuda_ipc: pid %d of PID namespace %" PRIu64 " did not hand over the descriptor of its "
                      "allocation 0x%" PRIx64 " (deregistered, or gone)", peer->pid, peer->pid_ns, key->base);
        }
        return local;
    }
    local = syscall(SYS_pidfd_getfd, peer->pidfd, fd, 0);
    if (local < 0) {
        ucs_error("cuda_ipc: pidfd_getfd(pid %d, fd %d) failed: %m%s", peer->pid, fd,
                  (errno == EPERM) ? " (the OS does not let this process take the exporter's descriptor)" : "");
    }
    return local;
}

ucs_status_t cux_ipc_peer_check_handle(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key)
{
    if (!cux_ipc_handle_layout_known()) {
        /* the key's proof in the peer's memory is all there is */
        return peer->readable ? UCS_OK :
               cux_ipc_peer_reject(peer, "this driver's IPC handles do not show which process exported them, and "
                                   "pid %d's memory cannot be read to prove its key: refused", peer->pid);
    }
    if (cux_ipc_handle_pid(&key->handle) != peer->pid) {
        return cux_ipc_peer_reject(peer, "a key of pid %d carries an IPC handle exported by pid %d: refused",
                                   peer->pid, cux_ipc_handle_pid(&key->handle));
    }
    return UCS_OK;
}
