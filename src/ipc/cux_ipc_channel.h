/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel to peers in other PID namespaces (containers without a shared PID namespace), where a pid,
 * /proc, pidfds and process_vm_readv reach nothing. UCX_CUDA_IPC_SOCKET_DIR names a directory both containers
 * mount; each process listens there on a UNIX socket (SOCK_SEQPACKET) named by a random token that its interface
 * address carries. The kernel says who connected (SO_PEERCRED: both sides require their own uid) and the
 * directory's permissions say who may; whoever bound the name is the peer the connection reaches.
 *
 * Over a connection the exporter answers what an importer of its own namespace finds in its memory:
 * - HELLO: its own interface address, which the importer compares byte for byte with the one it was given;
 * - PROVE: whether a key is in its table of keys out and carries its secret (a made-up key is refused by the
 *   exporter itself, never by bytes the key points at);
 * - TAKE_FD: a held key's descriptor (or a span piece's), as SCM_RIGHTS, in place of pidfd_getfd;
 * - SPAN: a held span key's table of pieces, in place of reading its memory.
 * Each answer is given under the table's lock, while the key is held: a descriptor or table is never one the
 * exporter has already let go. The connection closing is the peer's exit (liveness, as its pidfd is in one
 * namespace).
 *
 * The exporter serves on a thread of its own, so a peer's proof never waits for the application's threads to
 * progress UCX, and a peer that stops reading is dropped at the proof timeout.
 */
#ifndef CUX_IPC_CHANNEL_H_
#define CUX_IPC_CHANNEL_H_

#include "cux_ipc_proof.h"

#include <ucs/type/status.h>
#include <stdint.h>

#define CUX_IPC_CHANNEL_MAGIC 0x4e484358u /* "XCHN" */

enum {
    CUX_IPC_CHANNEL_HELLO   = 1,
    CUX_IPC_CHANNEL_PROVE   = 2,
    CUX_IPC_CHANNEL_TAKE_FD = 3,
    CUX_IPC_CHANNEL_SPAN    = 4
};

/* A piece number of TAKE_FD that means the key's own descriptor. */
#define CUX_IPC_CHANNEL_KEY_FD UINT32_MAX

typedef struct cux_ipc_channel_request {
    uint32_t       magic;
    uint32_t       op;
    uint32_t       piece; /* TAKE_FD: which of a span's pieces, or CUX_IPC_CHANNEL_KEY_FD */
    uint32_t       seq;   /* the reply carries it back: a late reply to an abandoned request is told apart */
    cux_ipc_rkey_t key;   /* PROVE, TAKE_FD, SPAN */
} cux_ipc_channel_request_t;

typedef struct cux_ipc_channel_reply {
    uint32_t magic;
    int32_t  status;      /* UCS_OK, or why not (the key is not held: UCS_ERR_UNREACHABLE) */
    uint32_t seq;
    uint32_t reserved;
    union {
        cux_ipc_iface_addr_t addr;                    /* HELLO */
        cux_ipc_span_piece_t piece[CUX_IPC_SPAN_MAX]; /* SPAN */
    };
} cux_ipc_channel_reply_t;

/* Both sides: sends and receives on the connection give up after timeout seconds (1e9 or more: never). */
void cux_ipc_channel_set_timeout(int fd, double timeout);

/* --- the exporting side (cux_ipc_channel_serve.c) --- */

/* Listens in dir (once per process; every memory domain opened with a directory counts, the first one's is
 * used). UCS_OK without a directory (""). Errors are logged; the memory domain still opens, without it. */
ucs_status_t cux_ipc_channel_listen(const char *dir);
/* One memory domain that listened is closed: the last one stops the server and removes its socket. */
void cux_ipc_channel_unlisten(void);
/* The token of this process's socket, for its address; 0 where it does not listen (a forked child does not). */
uint64_t cux_ipc_channel_token(void);
/* The directory peers' sockets are looked for in; NULL where none was set. */
const char *cux_ipc_channel_dir(void);

/* --- the importing side (cux_ipc_channel_ask.c) --- */

/* Connects to the peer whose address carries a token, in our directory, and checks that the process there is
 * of our uid and holds that very address: the connection's descriptor, or -1 (logged at debug level). */
int cux_ipc_channel_connect(const cux_ipc_iface_addr_t *addr, double timeout);
/* Does the peer hold the key? UCS_ERR_UNREACHABLE otherwise (or when it is gone). */
ucs_status_t cux_ipc_channel_prove(int channel, const cux_ipc_rkey_t *key);
/* A held key's descriptor (piece: CUX_IPC_CHANNEL_KEY_FD, or a span's piece), now ours; -1 if not given. */
int cux_ipc_channel_take_fd(int channel, const cux_ipc_rkey_t *key, uint32_t piece);
/* A held span key's table of pieces (key->span.count of them). */
ucs_status_t cux_ipc_channel_span(int channel, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece);
/* Has the peer closed its end (exited)? */
int cux_ipc_channel_closed(int channel);

#endif
