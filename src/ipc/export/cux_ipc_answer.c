/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: what this process answers a peer of another PID namespace over its socket
 * (cux_ipc_answer.h). Every answer comes from its own table of keys out, for keys it still holds.
 */
#define _GNU_SOURCE
#include "ipc/export/cux_ipc_answer.h"
#include "ipc/export/cux_ipc_identity.h"

#include <fcntl.h>
#include <string.h>

typedef struct {
    uint32_t piece; /* which descriptor: CUX_IPC_CHANNEL_KEY_FD, or a span's piece */
    int      fd;    /* its duplicate, or -1 */
} cux_ipc_proof_fd_use_t;

/* With the table of keys out locked and the key held: its descriptor (or a piece's), duplicated for the reply. */
static void cux_ipc_proof_dup_fd(const cux_ipc_rkey_t *key, void *arg)
{
    cux_ipc_proof_fd_use_t *use = arg;
    const cux_ipc_span_piece_t *piece;
    int fd = -1;

    if ((use->piece == CUX_IPC_CHANNEL_KEY_FD) &&
        ((key->kind == CUX_IPC_KIND_VMM_FD) || (key->kind == CUX_IPC_KIND_POOL_FD))) {
        fd = key->export_fd;
    } else if ((key->kind == CUX_IPC_KIND_VMM_SPAN) && (use->piece < key->span.count)) {
        piece = (const cux_ipc_span_piece_t*)(uintptr_t)key->span.table;
        fd    = piece[use->piece].fd;
    }
    use->fd = (fd >= 0) ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

typedef struct {
    cux_ipc_channel_reply_t *reply;
    size_t                  len; /* of the table copied into the reply */
} cux_ipc_proof_span_copy_t;

/* With the table locked and the key held: its span's table, sized by the held key, and only for a span. */
static void cux_ipc_proof_copy_span(const cux_ipc_rkey_t *key, void *arg)
{
    cux_ipc_proof_span_copy_t *copy = arg;

    if ((key->kind == CUX_IPC_KIND_VMM_SPAN) && (key->span.count <= CUX_IPC_SPAN_MAX)) {
        copy->len = key->span.count * sizeof(copy->reply->piece[0]);
        memcpy(copy->reply->piece, (const void*)(uintptr_t)key->span.table, copy->len);
        copy->reply->status = UCS_OK;
    }
}

size_t cux_ipc_proof_answer(const cux_ipc_channel_request_t *req, cux_ipc_channel_reply_t *reply, int *fd_p)
{
    cux_ipc_proof_span_copy_t copy = {.reply = reply, .len = 0};
    cux_ipc_proof_fd_use_t use     = {.piece = req->piece, .fd = -1};
    cux_ipc_iface_addr_t own, claim;

    switch (req->op) {
    case CUX_IPC_CHANNEL_HELLO:
        /* the challenge answered only for this process's own address, and the secret never sent */
        cux_ipc_proof_own_address(&own, cux_ipc_pid_namespace());
        claim        = own;
        claim.secret = 0;
        if (memcmp(&claim, &req->hello.addr, sizeof(claim)) != 0) {
            return 0;
        }
        reply->proof  = cux_ipc_proof_hello_hash(&own, req->hello.nonce);
        reply->status = UCS_OK;
        return sizeof(reply->proof);
    case CUX_IPC_CHANNEL_PROVE:
        reply->status = cux_ipc_proof_own_key_use(&req->key, NULL, NULL) ? UCS_OK : UCS_ERR_UNREACHABLE;
        return 0;
    case CUX_IPC_CHANNEL_TAKE_FD:
        if (cux_ipc_proof_own_key_use(&req->key, cux_ipc_proof_dup_fd, &use) && (use.fd >= 0)) {
            *fd_p         = use.fd;
            reply->status = UCS_OK;
        }
        return 0;
    case CUX_IPC_CHANNEL_SPAN:
        (void)cux_ipc_proof_own_key_use(&req->key, cux_ipc_proof_copy_span, &copy);
        return copy.len;
    default:
        return 0;
    }
}
