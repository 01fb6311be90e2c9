/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's channel, exporting side: the socket this process listens on and the thread that answers peers of
 * other PID namespaces (see cux_ipc_channel.h).
 */
#define _GNU_SOURCE
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/common/cux_ipc_names.h"
#include "base/cux_fd_passing.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Most connections served at once; further ones are closed at once (their proofs fail, one debug line). Each is a
 * descriptor of this process: at most an eighth of its descriptor limit (the exporter's descriptors for peers take
 * a quarter), so that clients of our uid cannot spend the application's. */
#define CUX_IPC_CHANNEL_CLIENTS_MAX 1024
#define CUX_IPC_CHANNEL_FD_SHARE    8

/* While no descriptor can be had for a connection (accept: EMFILE, ENFILE), the listening socket stays readable:
 * it is left out of poll for this long instead of waking the thread at once, again and again. */
#define CUX_IPC_CHANNEL_PAUSE_MS 100

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
    cux_ipc_channel_answer_t answer; /* what the proof answers to a request */
} cux_ipc_channel = {.lock = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1, .stop = {-1, -1}};

const char *cux_ipc_channel_dir(void)
{
    return (cux_ipc_channel.dir[0] != '\0') ? cux_ipc_channel.dir : NULL;
}

uint64_t cux_ipc_channel_token(void)
{
    return (cux_ipc_channel.pid == getpid()) ? cux_ipc_channel.token : 0;
}

/* Answers one request on a connection; 0, or -1 when the connection is to be closed. The reply goes out without
 * waiting: a client that left earlier replies unread until its socket is full is dropped, not waited for. */
static int cux_ipc_channel_answer(int conn)
{
    cux_ipc_channel_request_t req;
    cux_ipc_channel_reply_t reply;
    size_t len;
    ssize_t n;
    int fd = -1, ret;

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
    len          = CUX_IPC_CHANNEL_REPLY_HEADER + cux_ipc_channel.answer(&req, &reply, &fd);
    ret          = cux_fd_passing_send(conn, &reply, len, fd);
    if ((ret != 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK))) {
        ucs_debug("cuda_ipc: a client of this process's socket does not read its replies: dropped");
    }
    if (fd >= 0) {
        close(fd);
    }
    return ret;
}

/* A new connection: kept if its process runs as our user (what the kernel says, not the peer). */
static int cux_ipc_channel_accept(int listen_fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int conn;

    /* non-blocking for good: neither a request nor a reply ever waits for one client */
    conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
        return -1;
    }
    if ((getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) || (cred.uid != geteuid())) {
        ucs_debug("cuda_ipc: a connection to this process's socket from uid %d (not ours): closed",
                  (len == sizeof(cred)) ? (int)cred.uid : -1);
        close(conn);
        errno = EPERM; /* a refusal, not a want of descriptors */
        return -1;
    }
    return conn;
}

/* How many connections may be served now: the process's descriptor limit may change while it runs. */
static nfds_t cux_ipc_channel_clients_max(void)
{
    struct rlimit rl;

    if ((getrlimit(RLIMIT_NOFILE, &rl) != 0) || (rl.rlim_cur == RLIM_INFINITY) ||
        (rl.rlim_cur / CUX_IPC_CHANNEL_FD_SHARE >= CUX_IPC_CHANNEL_CLIENTS_MAX)) {
        return CUX_IPC_CHANNEL_CLIENTS_MAX;
    }
    return ucs_max(rl.rlim_cur / CUX_IPC_CHANNEL_FD_SHARE, 1);
}

static void *cux_ipc_channel_serve(void *arg)
{
    static struct pollfd pfd[2 + CUX_IPC_CHANNEL_CLIENTS_MAX];
    nfds_t n = 2, i;
    int conn, ready, paused = 0;

    (void)arg;
    pfd[0] = (struct pollfd){.fd = cux_ipc_channel.stop[0], .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = cux_ipc_channel.listen_fd, .events = POLLIN};
    for (;;) {
        ready = poll(pfd, n, paused ? CUX_IPC_CHANNEL_PAUSE_MS : -1);
        if (paused && (ready == 0)) {
            paused        = 0; /* listening again */
            pfd[1].events = POLLIN;
            continue;
        }
        if (ready < 0) {
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
            if ((conn < 0) && ((errno == EMFILE) || (errno == ENFILE))) {
                ucs_debug("cuda_ipc: no descriptor for a connection to this process's socket: not listening for "
                          "%d ms", CUX_IPC_CHANNEL_PAUSE_MS);
                paused        = 1;
                pfd[1].events = 0;
            } else if ((conn >= 0) && (n - 2 >= cux_ipc_channel_clients_max())) {
                ucs_debug("cuda_ipc: %u connections to this process's socket already: one more closed",
                          (unsigned)(n - 2));
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
    struct stat st = {0};
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
    /* Owner only, from the start: bind creates the file with the socket's own mode (less the umask), so no path
     * is followed to set it afterwards. Connections are accepted only after listen. */
    if ((fchmod(fd, S_IRUSR | S_IWUSR) != 0) || (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0)) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s: cannot listen on %s: %m (peers in other PID "
                  "namespaces will not reach this process over cuda_ipc)", dir, sa.sun_path);
        close(fd); /* nothing was made: a name that existed is another's */
        return UCS_ERR_IO_ERROR;
    }
    /* a umask that takes the owner's own read or write away leaves a socket no peer can connect to */
    if ((fstatat(AT_FDCWD, sa.sun_path, &st, AT_SYMLINK_NOFOLLOW) != 0) ||
        ((st.st_mode & (S_IRUSR | S_IWUSR)) != (S_IRUSR | S_IWUSR))) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s: %s was made mode %03o (the umask takes the owner's "
                  "read or write): peers could not connect", dir, sa.sun_path, (unsigned)(st.st_mode & 0777));
        close(fd);
        (void)unlink(sa.sun_path); /* the file this process made */
        return UCS_ERR_IO_ERROR;
    }
    if (listen(fd, 128) != 0) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s: cannot listen on %s: %m (peers in other PID "
                  "namespaces will not reach this process over cuda_ipc)", dir, sa.sun_path);
        close(fd);
        (void)unlink(sa.sun_path); /* the file this process made */
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

/* A directory that other users may write (without the sticky bit) lets them remove or replace the sockets there:
 * cuda_ipc to this process would then fail. Said once, with the remedy. */
static void cux_ipc_channel_check_dir(const char *dir)
{
    struct stat st;

    if ((stat(dir, &st) == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR=%s may be written by others (mode %03o, owner uid %u): "
                 "they could remove or replace this process's socket there; make it mode 700 and owned by uid %u "
                 "(docs/containers.md)", dir, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid,
                 (unsigned)geteuid());
    }
}

ucs_status_t cux_ipc_channel_listen(const char *dir, cux_ipc_channel_answer_t answer)
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
    cux_ipc_channel.answer = answer;
    cux_ipc_channel_check_dir(dir);
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
