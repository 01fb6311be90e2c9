/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel to peers in other PID namespaces (containers without a shared PID namespace), where a pid,
 * /proc, pidfds and process_vm_readv reach nothing. UCX_CUDA_IPC_SOCKET_DIR names a directory both containers
 * mount; each process listens there on a UNIX socket (SOCK_SEQPACKET) named by a random token that its interface
 * address carries.
 *
 * The channel carries questions and answers; what they mean is the two sides': the importer's proof asks them
 * (cux_ipc_proof_channel.c), and the exporting side's answer (cux_ipc_answer.c) is the function the server is
 * handed. What the channel itself vouches for is what
 * the kernel says: both sides require the other's uid to be their own (SO_PEERCRED), and a client learns what
 * the kernel shows of the process that listens (its pid here, or none where it is not visible from here; a
 * pidfd of it where the kernel gives one), never what that process says of itself.
 *
 * The server is a thread of its own, so a peer's proof never waits for the application's threads to progress
 * UCX. It never blocks on one client: replies go out without waiting, and a client that does not read them
 * (its socket's buffer full) is dropped. Closing it never waits for a client either.
 */
#ifndef CUX_IPC_CHANNEL_H_
#define CUX_IPC_CHANNEL_H_

#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"

#include <ucs/type/status.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CUX_IPC_CHANNEL_MAGIC 0x324e4358u /* "XCN2": a HELLO is a challenge */

enum {
    CUX_IPC_CHANNEL_HELLO   = 1,
    CUX_IPC_CHANNEL_PROVE   = 2,
    CUX_IPC_CHANNEL_TAKE_FD = 3,
    CUX_IPC_CHANNEL_SPAN    = 4
};

/* A piece number of TAKE_FD that means the key's own descriptor. */
#define CUX_IPC_CHANNEL_KEY_FD UINT32_MAX

typedef struct cux_ipc_channel_request {
    uint32_t magic;
    uint32_t op;
    uint32_t piece; /* TAKE_FD: which of a span's pieces, or CUX_IPC_CHANNEL_KEY_FD */
    uint32_t seq;   /* the reply carries it back: a late reply to an abandoned request is told apart */
    union {
        cux_ipc_rkey_t key; /* PROVE, TAKE_FD, SPAN */
        struct {
            cux_ipc_iface_addr_t addr;  /* HELLO: the address the asker holds, its secret left out (zero) */
            uint64_t             nonce; /* a challenge of the asker's, new for each connection */
        } hello;
    };
} cux_ipc_channel_request_t;

typedef struct cux_ipc_channel_reply {
    uint32_t magic;
    int32_t  status; /* UCS_OK, or why not (not this process's address, the key not held: UCS_ERR_UNREACHABLE) */
    uint32_t seq;
    uint32_t reserved;
    union {
        uint64_t             proof;                   /* HELLO: the challenge answered under the address's secret */
        cux_ipc_span_piece_t piece[CUX_IPC_SPAN_MAX]; /* SPAN: the held span key's pieces */
    };
} cux_ipc_channel_reply_t;

/* A reply without a body: its header. */
#define CUX_IPC_CHANNEL_REPLY_HEADER offsetof(cux_ipc_channel_reply_t, proof)

/* The server's answer to one request: fills reply's status and body and returns the body's length (0 for none);
 * *fd_p (-1 when called) is a descriptor to send with it, which the channel closes after sending. */
typedef size_t (*cux_ipc_channel_answer_t)(const cux_ipc_channel_request_t *req, cux_ipc_channel_reply_t *reply,
                                           int *fd_p);

/* What the kernel says of the process listening at the other end of a connection (at its listen()); its uid is
 * ours, or there is no connection. */
typedef struct cux_ipc_channel_listener {
    pid_t pid;   /* in this process's PID namespace; 0 where the listener is not visible from here */
    int   pidfd; /* SO_PEERPIDFD (Linux 6.5+), visible or not; -1 where the kernel gives none. The caller's. */
} cux_ipc_channel_listener_t;

/* --- the serving side (cux_ipc_channel_serve.c) --- */

/* Listens in dir and answers every request with answer (once per process; every memory domain opened with a
 * directory counts, the first one's is used). UCS_OK without a directory (""). Errors are logged; the memory
 * domain still opens, without it. */
ucs_status_t cux_ipc_channel_listen(const char *dir, cux_ipc_channel_answer_t answer);
/* One memory domain that listened is closed: the last one stops the server and removes its socket. */
void cux_ipc_channel_unlisten(void);
/* The token of this process's socket, for its address; 0 where it does not listen (a forked child does not). */
uint64_t cux_ipc_channel_token(void);
/* The directory peers' sockets are looked for in; NULL where none was set. */
const char *cux_ipc_channel_dir(void);

/* --- the asking side (cux_ipc_channel_ask.c) --- */

/* The shortest bound of a question (UCX_CUDA_IPC_PROOF_TIMEOUT's floor): the kernel takes a zero timeval for none. */
#define CUX_IPC_PROOF_TIMEOUT_MIN 1e-3

/* Connects to the socket of token in our directory, served by a process of our uid: the connection's descriptor
 * and what the kernel says of that process, or -1 (logged at debug level). Sends and receives on it give up after
 * timeout seconds (at least CUX_IPC_PROOF_TIMEOUT_MIN; 1e9 or more: never). */
int cux_ipc_channel_connect(uint64_t token, double timeout, cux_ipc_channel_listener_t *listener);
/* Sends req (its magic and sequence number filled here) and receives its reply: the reply's length (at least
 * CUX_IPC_CHANNEL_REPLY_HEADER), or -1 when the peer did not answer in time, is gone, or answered out of
 * protocol. *fd_p: a descriptor that came with the reply (-1: none), now the caller's. One question at a time. */
ssize_t cux_ipc_channel_ask(int channel, cux_ipc_channel_request_t *req, cux_ipc_channel_reply_t *reply, int *fd_p);
/* Has the peer closed its end (exited)? */
int cux_ipc_channel_closed(int channel);

#endif
