/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs for peers of other PID namespaces: what this process asks over a peer's socket and what
 * the answers mean (cux_ipc_proof.h says what is proven; the channel, cux_ipc_channel.h, only carries the
 * questions; what a process answers is the exporting side's, cux_ipc_answer.c).
 *
 * Who listens on the socket an address names is the kernel's word, never the address's:
 * - a listener the kernel shows in our own namespace (its NSpid has one level) is no peer of another namespace,
 *   whatever its address claims: refused;
 * - a listener it shows in a namespace below ours must be the pid (its innermost NSpid), the namespace (the inode
 *   of its /proc/PID/ns/pid) and the start time its address claims; its mappings are bound to that process;
 * - a listener it does not show (a sibling or a parent namespace: the usual two containers) cannot be named by
 *   pid from here; its mappings are bound to the process the kernel's pidfd of it names (pidfs, Linux 6.9+), or
 *   else to this one connection.
 * Then the listener must answer a challenge under its address's secret, which it never sends: a process that
 * only knows where the socket is learns nothing that lets it pose as that process.
 */
#define _GNU_SOURCE
#include "ipc/import/cux_ipc_proof_channel.h"
#include "ipc/common/cux_ipc_pidfs.h"
#include "ipc/common/cux_ipc_names.h"
#include "ipc/import/cux_ipc_peer_read.h"

#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>


static int cux_ipc_proof_kernel_for_tests; /* CUX_IPC_TEST_* flags: cux_ipc_proof_channel_test_kernel */

void cux_ipc_proof_channel_test_kernel(int flags)
{
    __atomic_store_n(&cux_ipc_proof_kernel_for_tests, flags, __ATOMIC_RELAXED);
}

static int cux_ipc_proof_kernel_shows_listeners(void)
{
    return !(__atomic_load_n(&cux_ipc_proof_kernel_for_tests, __ATOMIC_RELAXED) & CUX_IPC_TEST_UNSHOWN);
}

static int cux_ipc_proof_kernel_has_pidfs(void)
{
    return !(__atomic_load_n(&cux_ipc_proof_kernel_for_tests, __ATOMIC_RELAXED) & CUX_IPC_TEST_NO_PIDFS);
}

/* --- asking --- */

/* A peer on this host in another PID namespace (a container without a shared PID namespace) that cannot be asked
 * over a channel: UCX carries GPU memory to it over another transport, many times slower. Said once per such
 * namespace and cause at warning level, with what would help, since nothing else would tell the user; UCP asks
 * about every address it sees, so the rest at debug level. */
static void cux_ipc_proof_log_foreign_namespace(const cux_ipc_iface_addr_t *addr, const char *why)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t last_ns;
    static const char *last_why;
    int warn;

    pthread_mutex_lock(&lock);
    warn     = (last_ns != addr->pid_ns) || (last_why != why);
    last_ns  = addr->pid_ns;
    last_why = why;
    pthread_mutex_unlock(&lock);
    if (warn) {
        ucs_warn("cuda_ipc: the peer process on this host is in another PID namespace (%" PRIu64 ") and %s, so "
                 "GPU memory to it goes over another transport: set UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR on both "
                 "sides to a directory both containers mount, or give them one PID namespace (docker --pid=host or "
                 "--pid=container:NAME, Kubernetes hostPID or shareProcessNamespace)", addr->pid_ns, why);
    } else {
        ucs_debug("cuda_ipc: pid %d in PID namespace %" PRIu64 " is not reachable: %s", addr->pid, addr->pid_ns,
                  why);
    }
}

/* The pids of a process visible here in each PID namespace from ours down to its own (/proc/PID/status, NSpid:
 * readable without ptrace permission): how many, and the last. 0 where it cannot be read. */
static int cux_ipc_proof_nspid(pid_t pid, int32_t *innermost)
{
    char path[64], line[512], *p, *end;
    int levels = 0;
    long value;
    FILE *file;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    file = fopen(path, "re");
    if (file == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), file) != NULL) {
        if (strncmp(line, "NSpid:", 6) != 0) {
            continue;
        }
        for (p = line + 6;; p = end) {
            value = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            *innermost = (int32_t)value;
            ++levels;
        }
        break;
    }
    fclose(file);
    return levels;
}

/* Does the pidfd name the process of pid in our namespace, still running? (/proc/self/fdinfo gives its pid.) */
static int cux_ipc_proof_pidfd_is(int pidfd, pid_t pid)
{
    char path[64], line[128];
    long named = -1;
    FILE *file;

    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    file = fopen(path, "re");
    if (file == NULL) {
        return 0;
    }
    while (fgets(line, sizeof(line), file) != NULL) {
        if (sscanf(line, "Pid: %ld", &named) == 1) {
            break;
        }
    }
    fclose(file);
    return (named == pid) && cux_ipc_pidfd_alive(pidfd);
}

/* A listener the kernel shows here: the process its address names, or not (why_p says how not). UCS_OK with
 * *owner_p set when all of it is the kernel's word; UCS_ERR_UNSUPPORTED when its namespace cannot be read (the
 * caller then binds its mappings as for a listener it does not show); UCS_ERR_UNREACHABLE when it is not. */
static ucs_status_t cux_ipc_proof_listener_shown(const cux_ipc_iface_addr_t *addr,
                                                 const cux_ipc_channel_listener_t *listener, uint64_t *owner_p,
                                                 const char **why_p)
{
    unsigned long start_time;
    int32_t innermost = 0;
    char path[64];
    struct stat st;
    int levels, pidfd;

    levels = cux_ipc_proof_nspid(listener->pid, &innermost);
    if (levels == 1) {
        ucs_debug("cuda_ipc: the socket of an address claiming pid %d of PID namespace %" PRIu64 " is served by pid "
                  "%d of this process's own namespace: refused", addr->pid, addr->pid_ns, (int)listener->pid);
        *why_p = "the process serving its socket is of this process's own PID namespace";
        return UCS_ERR_UNREACHABLE;
    }
    if ((levels == 0) || (innermost != addr->pid)) {
        ucs_debug("cuda_ipc: the socket of an address claiming pid %d is served by pid %d here, pid %d in its own "
                  "namespace: refused", addr->pid, (int)listener->pid, innermost);
        *why_p = "the process serving its socket is not the process its address names";
        return UCS_ERR_UNREACHABLE;
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)listener->pid);
    if (stat(path, &st) != 0) {
        ucs_debug("cuda_ipc: the PID namespace of pid %d, which serves a peer's socket, cannot be read (%m): its "
                  "mappings are bound to its connection", (int)listener->pid);
        return UCS_ERR_UNSUPPORTED;
    }
    start_time = ucs_sys_get_proc_create_time(listener->pid);
    if (((uint64_t)st.st_ino != addr->pid_ns) || (start_time != addr->start_time)) {
        ucs_debug("cuda_ipc: the socket of pid %d of PID namespace %" PRIu64 " (started at %" PRIu64 ") is served "
                  "by pid %d of namespace %" PRIu64 " started at %lu: refused", addr->pid, addr->pid_ns,
                  addr->start_time, (int)listener->pid, (uint64_t)st.st_ino, start_time);
        *why_p = "the process serving its socket is not the process its address names";
        return UCS_ERR_UNREACHABLE;
    }
    /* the pid was not reused while it was read: the kernel's pidfd of the listener still names it, alive */
    pidfd = (listener->pidfd >= 0) ? listener->pidfd : (int)syscall(SYS_pidfd_open, listener->pid, 0);
    if ((pidfd < 0) || !cux_ipc_proof_pidfd_is(pidfd, listener->pid) ||
        (ucs_sys_get_proc_create_time(listener->pid) != start_time)) {
        ucs_debug("cuda_ipc: pid %d, which served a peer's socket, exited while it was checked", (int)listener->pid);
        *why_p = "the process serving its socket exited";
        if ((pidfd >= 0) && (pidfd != listener->pidfd)) {
            close(pidfd);
        }
        return UCS_ERR_UNREACHABLE;
    }
    if (pidfd != listener->pidfd) {
        close(pidfd);
    }
    *owner_p = CUX_IPC_OWNER_PROCESS | start_time;
    return UCS_OK;
}

/* The pidfs inode of the listener's pidfd; 0 where the kernel gives none (or a test plays a kernel before 6.9). */
static uint64_t cux_ipc_proof_listener_inode(const cux_ipc_channel_listener_t *listener)
{
    return cux_ipc_proof_kernel_has_pidfs() ? cux_ipc_pidfd_inode(listener->pidfd) : 0;
}

/* A listener the kernel does not show by pid here: the process its pidfd names where the kernel gives each
 * process an inode of its own, else this connection alone. */
static uint64_t cux_ipc_proof_listener_unshown(const cux_ipc_channel_listener_t *listener)
{
    static uint64_t connections;
    uint64_t inode = cux_ipc_proof_listener_inode(listener);

    if (inode != 0) {
        return CUX_IPC_OWNER_PIDFS | (inode & ~(3ull << 62));
    }
    return CUX_IPC_OWNER_CONNECTION | __atomic_add_fetch(&connections, 1, __ATOMIC_RELAXED);
}

/* Is the listener the process the address names? Where the address carries its process's pidfs inode, the
 * listener's pidfd must have that inode: a process that took the socket's name (unlinked it and listens under it)
 * is another process, whatever it knows of the address. Where the address carries none (a kernel without pidfs),
 * the connection is all there is (docs/threat-model.md). */
static int cux_ipc_proof_listener_is(const cux_ipc_iface_addr_t *addr, const cux_ipc_channel_listener_t *listener)
{
    return (addr->process == 0) || !cux_ipc_proof_kernel_has_pidfs() ||
           (cux_ipc_proof_listener_inode(listener) == addr->process);
}

/* Does the process on the connection hold the address: does it answer our challenge under its secret? */
static int cux_ipc_proof_channel_hello(int channel, const cux_ipc_iface_addr_t *addr)
{
    cux_ipc_channel_request_t req;
    cux_ipc_channel_reply_t reply;
    uint64_t nonce;
    ssize_t n;
    int fd;

    memset(&req, 0, sizeof(req));
    cux_ipc_random(&nonce, sizeof(nonce));
    req.op                = CUX_IPC_CHANNEL_HELLO;
    req.hello.addr        = *addr;
    req.hello.addr.secret = 0; /* never sent: the answer shows the listener knows it */
    req.hello.nonce       = nonce;
    n = cux_ipc_channel_ask(channel, &req, &reply, &fd);
    if (fd >= 0) {
        close(fd);
    }
    return (n == (ssize_t)(CUX_IPC_CHANNEL_REPLY_HEADER + sizeof(reply.proof))) && (reply.status == UCS_OK) &&
           (reply.proof == cux_ipc_proof_hello_hash(addr, nonce));
}

ucs_status_t cux_ipc_proof_channel_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr)
{
    cux_ipc_channel_listener_t listener;
    const char *why = NULL;
    ucs_status_t status;
    uint64_t owner = 0;
    int channel;

    if (cux_ipc_channel_dir() == NULL) {
        cux_ipc_proof_log_foreign_namespace(addr, "UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR is not set here");
        return UCS_ERR_UNREACHABLE;
    }
    if (addr->channel == 0) {
        cux_ipc_proof_log_foreign_namespace(addr, "has no socket (UCX_" CUX_IPC_CONFIG_PREFIX "SOCKET_DIR is not "
                                            "set there, or it could not listen)");
        return UCS_ERR_UNREACHABLE;
    }
    channel = cux_ipc_channel_connect(addr->channel, cux_ipc_peer_read_timeout(), &listener);
    if (channel < 0) {
        cux_ipc_proof_log_foreign_namespace(addr, "its socket is not in this process's UCX_" CUX_IPC_CONFIG_PREFIX
                                            "SOCKET_DIR, cannot be connected to, or is not its own "
                                            "(UCX_LOG_LEVEL=debug says which)");
        return UCS_ERR_UNREACHABLE;
    }
    status = ((listener.pid > 0) && cux_ipc_proof_kernel_shows_listeners()) ?
             cux_ipc_proof_listener_shown(addr, &listener, &owner, &why) : UCS_ERR_UNSUPPORTED;
    if (status == UCS_ERR_UNSUPPORTED) {
        owner  = cux_ipc_proof_listener_unshown(&listener);
        status = UCS_OK;
    }
    if ((status == UCS_OK) && !cux_ipc_proof_listener_is(addr, &listener)) {
        ucs_debug("cuda_ipc: the process on socket %016" PRIx64 " is not pid %d of PID namespace %" PRIu64 " (its "
                  "pidfd's inode is not the one the address names)", addr->channel, addr->pid, addr->pid_ns);
        why    = "another process listens under its socket's name";
        status = UCS_ERR_UNREACHABLE;
    }
    if ((status == UCS_OK) && !cux_ipc_proof_channel_hello(channel, addr)) {
        ucs_debug("cuda_ipc: the process on socket %016" PRIx64 " does not answer for the address of pid %d in PID "
                  "namespace %" PRIu64 ": not the process that sent it", addr->channel, addr->pid, addr->pid_ns);
        why    = "the process serving its socket does not hold its address";
        status = UCS_ERR_UNREACHABLE;
    }
    if (listener.pidfd >= 0) {
        close(listener.pidfd);
    }
    if (status != UCS_OK) {
        close(channel);
        cux_ipc_proof_log_foreign_namespace(addr, why);
        return status;
    }
    pthread_mutex_init(&peer->channel_lock, NULL);
    peer->channel    = channel;
    peer->pid        = addr->pid;
    peer->pid_ns     = addr->pid_ns;
    peer->start_time = addr->start_time;
    peer->owner      = owner;
    peer->readable   = 1; /* its keys are proven by asking it, whatever the proof mode */
    return UCS_OK;
}

/* One question about a key on the peer's connection, one at a time: the reply's length, or -1. *fd_p: a descriptor
 * that came with it, the caller's (-1: none). */
static ssize_t cux_ipc_proof_channel_ask_key(cux_ipc_peer_t *peer, uint32_t op, const cux_ipc_rkey_t *key,
                                             uint32_t piece, cux_ipc_channel_reply_t *reply, int *fd_p)
{
    cux_ipc_channel_request_t req;
    ssize_t n;

    memset(&req, 0, sizeof(req));
    req.op    = op;
    req.piece = piece;
    req.key   = *key;
    pthread_mutex_lock(&peer->channel_lock);
    n = cux_ipc_channel_ask(peer->channel, &req, reply, fd_p);
    pthread_mutex_unlock(&peer->channel_lock);
    return n;
}

/* The same, for an answer that brings no descriptor (one that came anyway is closed). */
static ssize_t cux_ipc_proof_channel_ask_key_only(cux_ipc_peer_t *peer, uint32_t op, const cux_ipc_rkey_t *key,
                                                  cux_ipc_channel_reply_t *reply)
{
    ssize_t n;
    int fd;

    n = cux_ipc_proof_channel_ask_key(peer, op, key, 0, reply, &fd);
    if (fd >= 0) {
        close(fd);
    }
    return n;
}

ucs_status_t cux_ipc_proof_channel_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key)
{
    cux_ipc_channel_reply_t reply;

    if ((cux_ipc_proof_channel_ask_key_only(peer, CUX_IPC_CHANNEL_PROVE, key, &reply) < 0) ||
        (reply.status != UCS_OK)) {
        return cux_ipc_peer_reject(peer, "pid %d of PID namespace %" PRIu64 " does not hold a key for 0x%" PRIx64
                                   "+%" PRIu64 " (forged, already deregistered, or the process is gone): refused",
                                   peer->pid, peer->pid_ns, key->base, key->length);
    }
    return UCS_OK;
}

ucs_status_t cux_ipc_proof_channel_span(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece)
{
    size_t len = key->span.count * sizeof(*piece);
    cux_ipc_channel_reply_t reply;

    if ((key->span.count > CUX_IPC_SPAN_MAX) ||
        (cux_ipc_proof_channel_ask_key_only(peer, CUX_IPC_CHANNEL_SPAN, key, &reply) !=
         (ssize_t)(CUX_IPC_CHANNEL_REPLY_HEADER + len)) ||
        (reply.status != UCS_OK)) {
        return UCS_ERR_UNREACHABLE;
    }
    memcpy(piece, reply.piece, len);
    return UCS_OK;
}

int cux_ipc_proof_channel_take_fd(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, uint32_t piece)
{
    cux_ipc_channel_reply_t reply;
    ssize_t n;
    int fd;

    n = cux_ipc_proof_channel_ask_key(peer, CUX_IPC_CHANNEL_TAKE_FD, key, piece, &reply, &fd);
    if (((n < 0) || (reply.status != UCS_OK)) && (fd >= 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}
