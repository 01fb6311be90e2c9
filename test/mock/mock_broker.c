/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): imports from a process of another PID namespace.
 *
 * The driver's kernel module opens a legacy handle or an exported descriptor of any process on the host, in
 * whatever PID namespace (bench/results/2026-12-02-h200x1-pidns/). The mock opens the exporter's memfd through
 * /proc/PID/fd, which names nothing when the exporter's pid is of another namespace. There, the exporter's own
 * broker hands the memfd over instead: a thread listening on an abstract UNIX socket (abstract names are per
 * network namespace, so processes of different PID namespaces on one network namespace reach each other), named
 * by a random token the exports carry, which answers a descriptor number with that descriptor (SCM_RIGHTS).
 *
 * Only processes with MOCK_CUDA_BROKER=1 start one (at their first export): it is a thread and a descriptor
 * more, which tests that count either must not see. Its answers are checked as the /proc path's are (inode and
 * size), so a descriptor number the exporter reuses names nothing.
 */
#include "mock.h"
#include "../../src/base/cux_fd_passing.h"

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

static uint64_t mock_broker_token_of_pid; /* the token of the process in mock_broker_pid, 0 if none */
static pid_t    mock_broker_pid;

/* The socket of a token: an abstract name (a leading NUL) with the token in it. */
static socklen_t mock_broker_addr(uint64_t token, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "mockcuda-broker-%016llx", (unsigned long long)token);
    return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sun->sun_path + 1);
}

/* One request per connection: a descriptor number in, a byte saying whether it is open out, with it if so. */
static void *mock_broker_serve(void *arg)
{
    int listener = (int)(intptr_t)arg;
    int conn, fd;
    char ok;

    for (;;) {
        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if ((conn < 0) && ((errno == EINTR) || (errno == ECONNABORTED))) {
            continue;
        }
        if (conn < 0) {
            break; /* the listener is gone: no spinning */
        }
        if (recv(conn, &fd, sizeof(fd), MSG_WAITALL) == (ssize_t)sizeof(fd)) {
            ok = (fcntl(fd, F_GETFD) >= 0);
            (void)cux_fd_passing_send(conn, &ok, 1, ok ? fd : -1);
        }
        close(conn);
    }
    return NULL;
}

/* Starts this process's broker; its token, or 0 where it cannot listen. Called with mock_lock held. */
static uint64_t mock_broker_start(void)
{
    struct sockaddr_un sun;
    pthread_t thread;
    uint64_t token;
    int listener;

    if (syscall(SYS_getrandom, &token, sizeof(token), 0) != (long)sizeof(token)) {
        return 0;
    }
    token |= 1; /* never 0, "no broker" */
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if ((listener < 0) || (bind(listener, (struct sockaddr*)&sun, mock_broker_addr(token, &sun)) != 0) ||
        (listen(listener, 16) != 0) ||
        (pthread_create(&thread, NULL, mock_broker_serve, (void*)(intptr_t)listener) != 0)) {
        if (listener >= 0) {
            close(listener);
        }
        return 0;
    }
    pthread_detach(thread);
    return token;
}

uint64_t mock_broker_token(void)
{
    const char *on = getenv("MOCK_CUDA_BROKER");
    uint64_t token;

    if ((on == NULL) || strcmp(on, "1")) {
        return 0;
    }
    pthread_mutex_lock(&mock_lock);
    if (mock_broker_pid != getpid()) { /* the first export, or a forked child's: its own */
        mock_broker_token_of_pid = mock_broker_start();
        mock_broker_pid          = getpid();
    }
    token = mock_broker_token_of_pid;
    pthread_mutex_unlock(&mock_lock);
    return token;
}

uint64_t mock_pid_namespace(void)
{
    struct stat st;

    return (stat("/proc/self/ns/pid", &st) == 0) ? (uint64_t)st.st_ino : 0;
}

/* The descriptor fd of the broker with that token, received here; -1 if it is not there or fd is not open. */
static int mock_broker_fetch(uint64_t token, int fd)
{
    struct sockaddr_un sun;
    int conn, got = -1;
    char ok = 0;

    conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if ((conn >= 0) && (connect(conn, (struct sockaddr*)&sun, mock_broker_addr(token, &sun)) == 0) &&
        (send(conn, &fd, sizeof(fd), MSG_NOSIGNAL) == (ssize_t)sizeof(fd)) &&
        (cux_fd_passing_recv(conn, &ok, 1, &got) == 0) && !ok && (got >= 0)) {
        close(got);
        got = -1;
    }
    if (conn >= 0) {
        close(conn);
    }
    return got;
}

int mock_open_exporter_fd(pid_t pid, uint64_t pid_ns, uint64_t token, int fd)
{
    char path[64];

    if ((token != 0) && (pid_ns != mock_pid_namespace())) {
        return mock_broker_fetch(token, fd);
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
    return mock_open_as_driver(path);
}
