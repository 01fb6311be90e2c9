/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A message with a descriptor over a UNIX socket (SCM_RIGHTS): cuda_ipc's channel to peers of other PID
 * namespaces (src/ipc/cux_ipc_channel.h), and the programs around the module that hand descriptors between
 * processes (the tests' peer, the mock driver's broker, bench/cux_pidns_probe). Header only (C and C++), since
 * they are separate binaries.
 */
#ifndef CUX_FD_PASSING_H_
#define CUX_FD_PASSING_H_

#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A message of len bytes at buf, with room for one descriptor in control. */
static inline void cux_fd_passing_msg(struct msghdr *msg, struct iovec *iov, void *buf, size_t len, char *control,
                                  size_t control_len)
{
    memset(control, 0, control_len);
    memset(msg, 0, sizeof(*msg));
    iov->iov_base       = buf;
    iov->iov_len        = len;
    msg->msg_iov        = iov;
    msg->msg_iovlen     = 1;
    msg->msg_control    = control;
    msg->msg_controllen = control_len;
}

/* Sends len bytes, with fd when fd >= 0; 0, or -1 when the message did not go whole. */
static inline int cux_fd_passing_send(int sock, const void *buf, size_t len, int fd)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov;
    struct msghdr msg;
    struct cmsghdr *cmsg;

    cux_fd_passing_msg(&msg, &iov, (void*)buf, len, control, sizeof(control));
    if (fd < 0) {
        msg.msg_control    = NULL; /* no descriptor goes */
        msg.msg_controllen = 0;
    } else {
        cmsg             = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type  = SCM_RIGHTS;
        cmsg->cmsg_len   = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    return (sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len) ? 0 : -1;
}

/* Receives a message of at most len bytes (recvmsg flags) and the descriptor that came with it (*fd_p: -1 if none;
 * close-on-exec): the count received, or -1 (nothing received, *fd_p -1). */
static inline ssize_t cux_fd_passing_recv_upto(int sock, void *buf, size_t len, int flags, int *fd_p)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov;
    struct msghdr msg;
    struct cmsghdr *cmsg;
    ssize_t n;

    *fd_p = -1;
    cux_fd_passing_msg(&msg, &iov, buf, len, control, sizeof(control));
    n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        return -1;
    }
    cmsg = CMSG_FIRSTHDR(&msg);
    if ((cmsg != NULL) && (cmsg->cmsg_level == SOL_SOCKET) && (cmsg->cmsg_type == SCM_RIGHTS)) {
        memcpy(fd_p, CMSG_DATA(cmsg), sizeof(int));
    }
    return n;
}

/* Receives len bytes and the descriptor that came with them (*fd_p: -1 if none; close-on-exec); 0, or -1 when
 * fewer bytes came. */
static inline int cux_fd_passing_recv(int sock, void *buf, size_t len, int *fd_p)
{
    return (cux_fd_passing_recv_upto(sock, buf, len, MSG_WAITALL, fd_p) == (ssize_t)len) ? 0 : -1;
}

#endif
