/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel, asking side: a connection to a peer of another PID namespace, and a question and its answer
 * over it (see cux_ipc_channel.h). The caller holds one connection per peer and asks one question at a time.
 */
#define _GNU_SOURCE
#include "ipc/channel/cux_ipc_channel.h"
#include "base/cux_fd_passing.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void cux_ipc_channel_set_timeout(int fd, double timeout)
{
    struct timeval tv;

    if (timeout >= 1e9) {
        return; /* PROOF_TIMEOUT=inf: no bound */
    }
    /* a zero timeval is no bound at all to the kernel: a shorter timeout than the floor is the floor */
    timeout    = ucs_max(timeout, CUX_IPC_PROOF_TIMEOUT_MIN);
    tv.tv_sec  = (time_t)timeout;
    tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

ssize_t cux_ipc_channel_ask(int channel, cux_ipc_channel_request_t *req, cux_ipc_channel_reply_t *reply, int *fd_p)
{
    static uint32_t next_seq;
    unsigned stale = 0;
    ssize_t n;

    req->magic = CUX_IPC_CHANNEL_MAGIC;
    req->seq   = __atomic_add_fetch(&next_seq, 1, __ATOMIC_RELAXED);
    *fd_p      = -1;
    if (send(channel, req, sizeof(*req), MSG_NOSIGNAL) != (ssize_t)sizeof(*req)) {
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
        if (n < (ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER) {
            break;
        }
    } while (reply->seq != req->seq);
    if ((n < (ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER) || (reply->magic != CUX_IPC_CHANNEL_MAGIC)) {
        if (*fd_p >= 0) {
            close(*fd_p);
            *fd_p = -1;
        }
        return -1;
    }
    return n;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

int cux_ipc_channel_connect(uint64_t token, double timeout, cux_ipc_channel_listener_t *listener)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *dir       = cux_ipc_channel_dir();
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int fd;

    listener->pidfd = -1;
    if ((dir == NULL) || (token == 0)) {
        return -1;
    }
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016" PRIx64, dir, token) >=
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
        ucs_debug("cuda_ipc: cannot connect to %s: %m", sa.sun_path);
        goto err;
    }
    /* whoever listens there must run as our user, as a peer of our namespace must to be read */
    if ((getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) || (cred.uid != geteuid())) {
        ucs_debug("cuda_ipc: %s is served by uid %d, not ours: refused", sa.sun_path,
                  (len == sizeof(cred)) ? (int)cred.uid : -1);
        goto err;
    }
    listener->pid = cred.pid;
    len           = sizeof(listener->pidfd);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &listener->pidfd, &len) != 0) {
        listener->pidfd = -1; /* before Linux 6.5, or the listener has exited */
    }
    return fd;

err:
    close(fd);
    return -1;
}

int cux_ipc_channel_closed(int channel)
{
    struct pollfd pfd = {.fd = channel, .events = POLLRDHUP};

    return (poll(&pfd, 1, 0) > 0) && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}
