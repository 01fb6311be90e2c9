/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel, importing side: a connection to a peer of another PID namespace and the questions asked
 * over it (see cux_ipc_channel.h). The caller holds one connection per peer and asks one question at a time.
 */
#define _GNU_SOURCE
#include "cux_ipc_channel.h"
#include "base/cux_fd_passing.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void cux_ipc_channel_set_timeout(int fd, double timeout)
{
    struct timeval tv;

    if (timeout >= 1e9) {
        return; /* PROOF_TIMEOUT=inf: no bound */
    }
    tv.tv_sec  = (time_t)timeout;
    tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One question and its answer: the reply's length (at least its header, with the request's status), or -1 when
 * the peer did not answer in time, is gone, or answered out of protocol. *fd_p: a descriptor that came with it. */
static ssize_t cux_ipc_channel_call(int channel, uint32_t op, const cux_ipc_rkey_t *key, uint32_t piece,
                                    cux_ipc_channel_reply_t *reply, int *fd_p)
{
    static uint32_t next_seq;
    cux_ipc_channel_request_t req;
    unsigned stale = 0;
    ssize_t n;

    memset(&req, 0, sizeof(req));
    req.magic = CUX_IPC_CHANNEL_MAGIC;
    req.op    = op;
    req.piece = piece;
    req.seq   = __atomic_add_fetch(&next_seq, 1, __ATOMIC_RELAXED);
    if (key != NULL) {
        req.key = *key;
    }
    *fd_p = -1;
    if (send(channel, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
        return -1;
    }
    do { /* replies to earlier questions that timed out are dropped (a few: one question at a time is asked) */
        if (*fd_p >= 0) {
            close(*fd_p);
            *fd_p = -1;
        }
        if (++stale > 64) {
            return -1;
        }
        n = cux_fd_passing_recv_upto(channel, reply, sizeof(*reply), 0, fd_p);
        if (n < (ssize_t)offsetof(cux_ipc_channel_reply_t, addr)) {
            if (*fd_p >= 0) {
                close(*fd_p);
                *fd_p = -1;
            }
            return -1;
        }
    } while (reply->seq != req.seq);
    if (reply->magic != CUX_IPC_CHANNEL_MAGIC) {
        if (*fd_p >= 0) {
            close(*fd_p);
            *fd_p = -1;
        }
        return -1;
    }
    return n;
}

int cux_ipc_channel_connect(const cux_ipc_iface_addr_t *addr, double timeout)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *dir       = cux_ipc_channel_dir();
    cux_ipc_channel_reply_t reply;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int fd, given_fd;
    ssize_t n;

    if ((dir == NULL) || (addr->channel == 0)) {
        return -1;
    }
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016" PRIx64, dir, addr->channel) >=
        sizeof(sa.sun_path)) {
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_debug("cuda_ipc: socket(AF_UNIX) failed: %m");
        return -1;
    }
    cux_ipc_channel_set_timeout(fd, timeout);
    if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) {
        ucs_debug("cuda_ipc: cannot connect to pid %d's socket %s: %m", addr->pid, sa.sun_path);
        goto err;
    }
    /* whoever bound the name must run as our user, as a peer of our namespace must to be read */
    if ((getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) || (cred.uid != geteuid())) {
        ucs_debug("cuda_ipc: %s is served by uid %d, not ours: refused", sa.sun_path,
                  (len == sizeof(cred)) ? (int)cred.uid : -1);
        goto err;
    }
    n = cux_ipc_channel_call(fd, CUX_IPC_CHANNEL_HELLO, NULL, 0, &reply, &given_fd);
    if (given_fd >= 0) {
        close(given_fd);
    }
    if ((n != (ssize_t)(offsetof(cux_ipc_channel_reply_t, addr) + sizeof(reply.addr))) ||
        (reply.status != UCS_OK) || (memcmp(&reply.addr, addr, sizeof(*addr)) != 0)) {
        ucs_debug("cuda_ipc: the process on %s does not hold the address of pid %d in PID namespace %" PRIu64
                  ": not the process that sent it", sa.sun_path, addr->pid, addr->pid_ns);
        goto err;
    }
    return fd;

err:
    close(fd);
    return -1;
}

ucs_status_t cux_ipc_channel_prove(int channel, const cux_ipc_rkey_t *key)
{
    cux_ipc_channel_reply_t reply;
    int fd;

    if (cux_ipc_channel_call(channel, CUX_IPC_CHANNEL_PROVE, key, 0, &reply, &fd) < 0) {
        return UCS_ERR_UNREACHABLE;
    }
    if (fd >= 0) {
        close(fd);
    }
    return (reply.status == UCS_OK) ? UCS_OK : UCS_ERR_UNREACHABLE;
}

int cux_ipc_channel_take_fd(int channel, const cux_ipc_rkey_t *key, uint32_t piece)
{
    cux_ipc_channel_reply_t reply;
    int fd;

    if (cux_ipc_channel_call(channel, CUX_IPC_CHANNEL_TAKE_FD, key, piece, &reply, &fd) < 0) {
        return -1;
    }
    if ((reply.status != UCS_OK) && (fd >= 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

ucs_status_t cux_ipc_channel_span(int channel, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece)
{
    size_t len = key->span.count * sizeof(*piece);
    cux_ipc_channel_reply_t reply;
    ssize_t n;
    int fd;

    if (key->span.count > CUX_IPC_SPAN_MAX) {
        return UCS_ERR_UNREACHABLE;
    }
    n = cux_ipc_channel_call(channel, CUX_IPC_CHANNEL_SPAN, key, 0, &reply, &fd);
    if (fd >= 0) {
        close(fd);
    }
    if ((n != (ssize_t)(offsetof(cux_ipc_channel_reply_t, piece) + len)) || (reply.status != UCS_OK)) {
        return UCS_ERR_UNREACHABLE;
    }
    memcpy(piece, reply.piece, len);
    return UCS_OK;
}

int cux_ipc_channel_closed(int channel)
{
    struct pollfd pfd = {.fd = channel, .events = POLLRDHUP};

    return (poll(&pfd, 1, 0) > 0) && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}
