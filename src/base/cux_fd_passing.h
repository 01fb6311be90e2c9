/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A message with a descriptor over a UNIX socket (SCM_RIGHTS): cuda_ipc's channel to peers of other PID
 * namespaces (src/ipc/cux_ipc_channel.h), and the programs around the module that hand descriptors between
 * processes (the tests' peer, the mock driver's broker, bench/cux_pidns_probe). Header only (C and C++), since
 * they are separate binaries.
 */
#ifndef CUX_FD_PASSING_H_
#define CUX_FD_PASSING_H_

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

/* A message of len bytes at buf, with control_len bytes of room for descriptors in control. */
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
    union {
        struct cmsghdr align;
        char           buf[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov;
    struct msghdr msg;
    struct cmsghdr *cmsg;

    cux_fd_passing_msg(&msg, &iov, (void*)buf, len, control.buf, sizeof(control.buf));
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

/* Room for this many descriptors in a received message: the one expected, and a few more that a careless or
 * hostile sender attached, which are closed here rather than left open in the receiver. A sender that attached
 * more than fit has its message refused (MSG_CTRUNC: the kernel drops those that did not fit). */
#define CUX_FD_PASSING_ROOM 8

/* Closes every descriptor of SCM_RIGHTS messages in msg except the first, which it returns (-1: none). */
static inline int cux_fd_passing_take_first(struct msghdr *msg)
{
    struct cmsghdr *cmsg;
    int fd = -1, got;
    size_t i, n;

    for (cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL; cmsg = CMSG_NXTHDR(msg, cmsg)) {
        if ((cmsg->cmsg_level != SOL_SOCKET) || (cmsg->cmsg_type != SCM_RIGHTS)) {
            continue;
        }
        n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (i = 0; i < n; ++i) {
            memcpy(&got, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            if (fd < 0) {
                fd = got;
            } else {
                close(got);
            }
        }
    }
    return fd;
}

/* Receives a message of at most len bytes (recvmsg flags) and the descriptor that came with it (*fd_p: -1 if none;
 * close-on-exec): the count received, or -1 (*fd_p -1; errno EBADMSG when more descriptors came than there is
 * room for). Every descriptor beyond the first is closed. */
static inline ssize_t cux_fd_passing_recv_upto(int sock, void *buf, size_t len, int flags, int *fd_p)
{
    union { /* aligned as a control message must be */
        struct cmsghdr align;
        char           buf[CMSG_SPACE(CUX_FD_PASSING_ROOM * sizeof(int))];
    } control;
    struct iovec iov;
    struct msghdr msg;
    ssize_t n;
    int fd;

    *fd_p = -1;
    cux_fd_passing_msg(&msg, &iov, buf, len, control.buf, sizeof(control.buf));
    n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    if (n < 0) {
        return -1;
    }
    fd = cux_fd_passing_take_first(&msg);
    if (msg.msg_flags & MSG_CTRUNC) {
        if (fd >= 0) {
            close(fd);
        }
        errno = EBADMSG;
        return -1;
    }
    *fd_p = fd;
    return n;
}

/* Receives len bytes and the descriptor that came with them (*fd_p: -1 if none; close-on-exec); 0, or -1 when
 * fewer bytes came. */
static inline int cux_fd_passing_recv(int sock, void *buf, size_t len, int *fd_p)
{
    return (cux_fd_passing_recv_upto(sock, buf, len, MSG_WAITALL, fd_p) == (ssize_t)len) ? 0 : -1;
}

#endif
