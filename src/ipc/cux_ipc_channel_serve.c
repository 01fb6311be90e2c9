/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel, exporting side: the socket this process listens on and the thread that answers peers of
 * other PID namespaces (see cux_ipc_channel.h).
 */
#define _GNU_SOURCE
#include "cux_ipc_channel.h"
#include "cux_ipc_key_table.h"
#include "cux_ipc_md.h"
#include "cux_ipc_peer_read.h"
#include "base/cux_fd_passing.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Most connections served at once; further ones are closed at once (their proofs fail, one debug line). */
#define CUX_IPC_CHANNEL_CLIENTS_MAX 1024

static struct {
    pthread_mutex_t lock;
    unsigned        refs;      /* memory domains that asked to listen */
    pid_t           pid;       /* the process that listens: a forked child does not */
    char            dir[sizeof(((struct sockaddr_un*)0)->sun_path)];
    char            path[sizeof(((struct sockaddr_un*)0)->sun_path)];
    uint64_t        token;
    int             listen_fd;
    int             stop[2];   /* a pipe: the server thread ends when its read end becomes readable */
    pthread_t       thread;
} cux_ipc_channel = {.lock = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1, .stop = {-1, -1}};

const char *cux_ipc_channel_dir(void)
{
    return (cux_ipc_channel.dir[0] != '\0') ? cux_ipc_channel.dir : NULL;
}

uint64_t cux_ipc_channel_token(void)
{
    return (cux_ipc_channel.pid == getpid()) ? cux_ipc_channel.token : 0;
}

/* --- answers --- */

typedef struct {
    uint32_t piece;
    int      fd;
} cux_ipc_channel_fd_use_t;

/* With the table locked and the key held: its descriptor (or a piece's), duplicated for the reply. */
static void cux_ipc_channel_dup_fd(const cux_ipc_rkey_t *key, void *arg)
{
    cux_ipc_channel_fd_use_t *use = arg;
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

/* With the table locked and the key held: its span's table. */
static void cux_ipc_channel_copy_span(const cux_ipc_rkey_t *key, void *arg)
{
    cux_ipc_channel_reply_t *reply = arg;

    if ((key->kind == CUX_IPC_KIND_VMM_SPAN) && (key->span.count <= CUX_IPC_SPAN_MAX)) {
        memcpy(reply->piece, (const void*)(uintptr_t)key->span.table, key->span.count * sizeof(reply->piece[0]));
        reply->status = UCS_OK;
    }
}

/* Answers one request on a connection; 0, or -1 when the connection is to be closed. */
static int cux_ipc_channel_answer(int conn)
{
    cux_ipc_channel_request_t req;
    cux_ipc_channel_reply_t reply;
    cux_ipc_channel_fd_use_t use = {.fd = -1};
    size_t len                   = offsetof(cux_ipc_channel_reply_t, addr);
    ssize_t n;
    int ret;

    n = recv(conn, &req, sizeof(req), MSG_DONTWAIT);
    if ((n < 0) && ((errno == EAGAIN) || (errno == EINTR))) {
        return 0;
    }
    if ((n != (ssize_t)sizeof(req)) || (req.magic != CUX_IPC_CHANNEL_MAGIC)) {
        return -1; /* closed, or not our protocol */
    }
    memset(&reply, 0, sizeof(reply));
    reply.magic  = CUX_IPC_CHANNEL_MAGIC;
    reply.seq    = req.seq;
    reply.status = UCS_ERR_UNREACHABLE;
    switch (req.op) {
    case CUX_IPC_CHANNEL_HELLO:
        cux_ipc_proof_own_address(&reply.addr, cux_ipc_pid_namespace());
        reply.status = UCS_OK;
        len         += sizeof(reply.addr);
        break;
    case CUX_IPC_CHANNEL_PROVE:
        reply.status = cux_ipc_proof_own_key_use(&req.key, NULL, NULL) ? UCS_OK : UCS_ERR_UNREACHABLE;
        break;
    case CUX_IPC_CHANNEL_TAKE_FD:
        use.piece = req.piece;
        if (cux_ipc_proof_own_key_use(&req.key, cux_ipc_channel_dup_fd, &use) && (use.fd >= 0)) {
            reply.status = UCS_OK;
        }
        break;
    case CUX_IPC_CHANNEL_SPAN:
        if (cux_ipc_proof_own_key_use(&req.key, cux_ipc_channel_copy_span, &reply)) {
            len += req.key.span.count * sizeof(reply.piece[0]);
        }
        break;
    default:
        break;
    }
    ret = cux_fd_passing_send(conn, &reply, len, use.fd);
    if (use.fd >= 0) {
        close(use.fd);
    }
    return ret;
}

/* A new connection: kept if its process runs as our user (what the kernel says, not the peer). */
static int cux_ipc_channel_accept(int listen_fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int conn;

    conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
        return -1;
    }
    if ((getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) || (cred.uid != geteuid())) {
        ucs_debug("cuda_ipc: a connection to this process's socket from uid %d (not ours): closed",
                  (len == sizeof(cred)) ? (int)cred.uid : -1);
        close(conn);
        return -1;
    }
    /* a peer that stops reading its replies is dropped after the proof timeout instead of holding us up */
    cux_ipc_channel_set_timeout(conn, cux_ipc_peer_read_timeout());
    (void)fcntl(conn, F_SETFL, fcntl(conn, F_GETFL) & ~O_NONBLOCK); /* replies block, up to that timeout */
    return conn;
}

static void *cux_ipc_channel_serve(void *arg)
{
    static struct pollfd pfd[2 + CUX_IPC_CHANNEL_CLIENTS_MAX];
    nfds_t n = 2, i;
    int conn;

    (void)arg;
    pfd[0] = (struct pollfd){.fd = cux_ipc_channel.stop[0], .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = cux_ipc_channel.listen_fd, .events = POLLIN};
    for (;;) {
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            ucs_error("cuda_ipc: the socket server stops: poll failed: %m");
            break;
        }
        if (pfd[0].revents != 0) {
            break;
        }
        for (i = 2; i < n;) {
            /* a connection that hung up, or broke the protocol, is closed */
            if ((pfd[i].revents != 0) &&
                (((pfd[i].revents & POLLIN) == 0) || (cux_ipc_channel_answer(pfd[i].fd) != 0))) {
                close(pfd[i].fd);
                pfd[i] = pfd[--n];
                continue;
            }
            ++i;
        }
        if (pfd[1].revents & POLLIN) {
            conn = cux_ipc_channel_accept(pfd[1].fd);
            if ((conn >= 0) && (n == 2 + CUX_IPC_CHANNEL_CLIENTS_MAX)) {
                ucs_debug("cuda_ipc: %d connections to this process's socket already: one more closed",
                          CUX_IPC_CHANNEL_CLIENTS_MAX);
                close(conn);
            } else if (conn >= 0) {
                pfd[n++] = (struct pollfd){.fd = conn, .events = POLLIN};
            }
        }
    }
    for (i = 2; i < n; ++i) {
        close(pfd[i].fd);
    }
    return NULL;
}

/* --- listening --- */

static ucs_status_t cux_ipc_channel_open_socket(const char *dir)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, len;

    if (getrandom(&cux_ipc_channel.token, sizeof(cux_ipc_channel.token), 0) != sizeof(cux_ipc_channel.token)) {
        ucs_error("cuda_ipc: no random name for the socket in %s: %m", dir);
        return UCS_ERR_IO_ERROR;
    }
    cux_ipc_channel.token |= 1; /* never 0, which means none */
    len = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016" PRIx64, dir, cux_ipc_channel.token);
    if ((len < 0) || ((size_t)len >= sizeof(sa.sun_path))) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s is too long for a socket's path (at most %zu "
                  "characters)", dir, sizeof(sa.sun_path) - 27);
        return UCS_ERR_INVALID_PARAM;
    }
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ucs_error("cuda_ipc: socket(AF_UNIX) failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    /* owner only; connections are accepted only after listen, so none comes before the mode is set */
    if ((bind(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) || (chmod(sa.sun_path, S_IRUSR | S_IWUSR) != 0) ||
        (listen(fd, 128) != 0)) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s: cannot listen on %s: %m (peers in other PID "
                  "namespaces will not reach this process over cuda_ipc)", dir, sa.sun_path);
        close(fd);
        (void)unlink(sa.sun_path);
        return UCS_ERR_IO_ERROR;
    }
    memcpy(cux_ipc_channel.path, sa.sun_path, sizeof(sa.sun_path));
    cux_ipc_channel.listen_fd = fd;
    return UCS_OK;
}

static void cux_ipc_channel_close_socket(void)
{
    if (cux_ipc_channel.listen_fd >= 0) {
        close(cux_ipc_channel.listen_fd);
        (void)unlink(cux_ipc_channel.path);
    }
    cux_ipc_channel.listen_fd = -1;
    cux_ipc_channel.token     = 0;
}

ucs_status_t cux_ipc_channel_listen(const char *dir)
{
    ucs_status_t status = UCS_OK;
    int err;

    if ((dir == NULL) || (dir[0] == '\0')) {
        return UCS_OK;
    }
    pthread_mutex_lock(&cux_ipc_channel.lock);
    if (cux_ipc_channel.pid != getpid()) { /* first use, or a forked child: its parent's server is not here */
        cux_ipc_channel.pid       = getpid();
        cux_ipc_channel.refs      = 0;
        cux_ipc_channel.listen_fd = -1;
        cux_ipc_channel.token     = 0;
    }
    if (cux_ipc_channel.refs++ > 0) {
        if (strcmp(dir, cux_ipc_channel.dir) != 0) {
            ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s: this process uses %s, set first", dir,
                     cux_ipc_channel.dir);
        }
        goto out;
    }
    if (strlen(dir) >= sizeof(cux_ipc_channel.dir)) {
        status = UCS_ERR_INVALID_PARAM;
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s is too long for a socket's path", dir);
        goto out;
    }
    strcpy(cux_ipc_channel.dir, dir); /* peers' sockets are still looked for there */
    status = cux_ipc_channel_open_socket(dir);
    if (status != UCS_OK) {
        cux_ipc_channel.token = 0; /* our address names no socket */
        goto out;
    }
    if (pipe2(cux_ipc_channel.stop, O_CLOEXEC) != 0) {
        err = errno;
        goto err_socket;
    }
    err = pthread_create(&cux_ipc_channel.thread, NULL, cux_ipc_channel_serve, NULL);
    if (err == 0) {
        ucs_debug("cuda_ipc: listening on %s for peers of other PID namespaces", cux_ipc_channel.path);
        goto out;
    }
    close(cux_ipc_channel.stop[0]);
    close(cux_ipc_channel.stop[1]);
err_socket:
    ucs_error("cuda_ipc: cannot serve %s: %s", cux_ipc_channel.path, strerror(err));
    cux_ipc_channel_close_socket();
    status = UCS_ERR_IO_ERROR;
out:
    pthread_mutex_unlock(&cux_ipc_channel.lock);
    return status;
}

void cux_ipc_channel_unlisten(void)
{
    pthread_mutex_lock(&cux_ipc_channel.lock);
    if ((cux_ipc_channel.pid == getpid()) && (cux_ipc_channel.refs > 0) && (--cux_ipc_channel.refs == 0) &&
        (cux_ipc_channel.listen_fd >= 0)) {
        /* the pipe is empty and ours: one byte always goes */
        if (write(cux_ipc_channel.stop[1], "", 1) != 1) {
            ucs_warn("cuda_ipc: cannot stop the socket server: %m");
        }
        pthread_join(cux_ipc_channel.thread, NULL);
        close(cux_ipc_channel.stop[0]);
        close(cux_ipc_channel.stop[1]);
        cux_ipc_channel_close_socket();
    }
    pthread_mutex_unlock(&cux_ipc_channel.lock);
}
