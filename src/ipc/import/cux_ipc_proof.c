/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs (cux_ipc_proof.h): a peer's address proven against the process the kernel shows. This
 * process's own identity and secrets are the exporting side's (cux_ipc_identity.c); the proofs of keys are
 * cux_ipc_proof_keys.c; peers of other PID namespaces are asked over their socket (cux_ipc_proof_channel.c).
 */
#define _GNU_SOURCE
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/import/cux_ipc_peer_read.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "ipc/import/cux_ipc_proof_channel.h"
#include "driver/cux_driver.h"

#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *cux_ipc_proof_mode_names[] = {
    [CUX_IPC_PROOF_AUTO]   = "auto",
    [CUX_IPC_PROOF_MEMORY] = "memory",
    [CUX_IPC_PROOF_LAST]   = NULL
};

/* --- the peer's side, checked --- */

/* Reads len bytes at address of pid; the count read, or -1 with errno: a peer cannot make it take longer than
 * UCX_CUDA_IPC_PROOF_TIMEOUT (ETIMEDOUT). */
static ssize_t cux_ipc_read_peer(int32_t pid, uint64_t address, void *buf, size_t len)
{
    return cux_ipc_peer_read_bounded(pid, address, buf, len);
}

/* An endpoint of this process to itself (UCX's own gtest makes them, as UCX's module allows): the address must
 * be this process's own, byte for byte (its magic and domain part aside, which say what its interface adds); its
 * keys are then proven in this process's memory like a peer's. */
static ucs_status_t cux_ipc_peer_open_self(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr,
                                           uint64_t pid_ns)
{
    cux_ipc_iface_addr_t own;

    cux_ipc_proof_own_address(&own, pid_ns);
    if (memcmp(&own.pid, &addr->pid, CUX_IPC_ADDR_HOST_LEN - offsetof(cux_ipc_iface_addr_t, pid)) != 0) {
        ucs_debug("cuda_ipc: an address with this process's pid %d that is not its own", addr->pid);
        return UCS_ERR_UNREACHABLE;
    }
    peer->pidfd = syscall(SYS_pidfd_open, addr->pid, 0);
    if (peer->pidfd < 0) {
        ucs_debug("cuda_ipc: pidfd_open(%d) of this process failed: %m", addr->pid);
        return UCS_ERR_UNREACHABLE;
    }
    peer->pid        = addr->pid;
    peer->pid_ns     = addr->pid_ns;
    peer->start_time = addr->start_time;
    peer->owner      = CUX_IPC_OWNER_PROCESS | addr->start_time;
    peer->readable   = 1;
    peer->keys       = cux_ipc_key_table_directory();
    return UCS_OK;
}

/* --- processes whose address an endpoint proved: what rkey_ptr may trust without an endpoint --- */

#define CUX_IPC_KNOWN_PEERS 256

static struct {
    pthread_mutex_t lock;
    struct {
        int32_t  pid;
        uint64_t start_time;
        uint64_t keys;
    } peer[CUX_IPC_KNOWN_PEERS];
    unsigned next; /* the slot taken next when the pid is new: the oldest */
} cux_ipc_known = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void cux_ipc_known_add(const cux_ipc_peer_t *peer)
{
    unsigned i;

    pthread_mutex_lock(&cux_ipc_known.lock);
    for (i = 0; (i < CUX_IPC_KNOWN_PEERS) && (cux_ipc_known.peer[i].pid != peer->pid); ++i) {
    }
    if (i == CUX_IPC_KNOWN_PEERS) {
        i                  = cux_ipc_known.next;
        cux_ipc_known.next = (i + 1) % CUX_IPC_KNOWN_PEERS;
    }
    cux_ipc_known.peer[i].pid        = peer->pid;
    cux_ipc_known.peer[i].start_time = peer->start_time;
    cux_ipc_known.peer[i].keys       = peer->keys;
    pthread_mutex_unlock(&cux_ipc_known.lock);
}

/* The start time and table of a process an endpoint proved; 0 if none did. */
static int cux_ipc_known_find(int32_t pid, uint64_t *start_time, uint64_t *keys)
{
    int found = 0;
    unsigned i;

    pthread_mutex_lock(&cux_ipc_known.lock);
    for (i = 0; i < CUX_IPC_KNOWN_PEERS; ++i) {
        if ((cux_ipc_known.peer[i].pid == pid) && (pid > 0)) {
            *start_time = cux_ipc_known.peer[i].start_time;
            *keys       = cux_ipc_known.peer[i].keys;
            found       = 1;
            break;
        }
    }
    pthread_mutex_unlock(&cux_ipc_known.lock);
    return found;
}

int cux_ipc_addr_in_other_pid_namespace(const cux_ipc_iface_addr_t *addr, uint64_t pid_ns)
{
    return (addr->pid_ns != pid_ns) && (addr->pid_ns != 0) && (pid_ns != 0);
}

ucs_status_t cux_ipc_peer_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr, uint64_t pid_ns,
                               cux_ipc_proof_mode_t mode)
{
    cux_ipc_identity_t record;
    unsigned long start_time;
    ssize_t n;
    int pidfd;

    memset(peer, 0, sizeof(*peer));
    peer->pidfd     = -1;
    peer->channel   = -1;
    peer->system_id = cux_ipc_host_id();
    if ((addr->magic != CUX_IPC_ADDR_MAGIC) && (addr->magic != CUX_IPC_ADDR_MAGIC_DOMAIN)) {
        ucs_debug("cuda_ipc: interface address of another format (magic 0x%x; another build of the module?)",
                  addr->magic);
        return UCS_ERR_UNREACHABLE;
    }
    if ((addr->pid == getpid()) && (addr->pid_ns == pid_ns)) {
        return cux_ipc_peer_open_self(peer, addr, pid_ns);
    }
    if (cux_ipc_addr_in_other_pid_namespace(addr, pid_ns)) {
        return cux_ipc_proof_channel_open(peer, addr);
    }
    if ((addr->pid_ns != pid_ns) || (addr->pid <= 0)) {
        ucs_debug("cuda_ipc: pid %d in PID namespace %" PRIu64 " is not a peer process in ours (%" PRIu64 ")",
                  addr->pid, addr->pid_ns, pid_ns);
        return UCS_ERR_UNREACHABLE;
    }

    /* the pidfd first: while it is open and its process alive, the pid names that process */
    pidfd = syscall(SYS_pidfd_open, addr->pid, 0);
    if (pidfd < 0) {
        ucs_debug("cuda_ipc: pidfd_open(%d) failed: %m", addr->pid);
        return UCS_ERR_UNREACHABLE;
    }
    start_time = ucs_sys_get_proc_create_time(addr->pid);
    if (start_time != addr->start_time) {
        ucs_debug("cuda_ipc: pid %d started at %lu, its address says %" PRIu64 ": not the process that sent it",
                  addr->pid, start_time, addr->start_time);
        goto err_close;
    }

    n = cux_ipc_read_peer(addr->pid, addr->identity, &record, sizeof(record));
    if (n == (ssize_t)sizeof(record)) {
        /* its start time is the kernel's word, checked above: the record's own copy of it would add nothing */
        if ((record.magic != CUX_IPC_IDENTITY_MAGIC) || (record.pid != addr->pid) ||
            (record.secret != addr->secret) || (record.keys == 0)) {
            ucs_debug("cuda_ipc: pid %d does not hold the identity its address names: the address was not "
                      "written by it (or by another build of the module)", addr->pid);
            goto err_close;
        }
        peer->readable = 1;
        peer->keys     = record.keys;
    } else if ((n < 0) && ((errno == EPERM) || (errno == EACCES)) && (mode == CUX_IPC_PROOF_AUTO)) {
        ucs_debug("cuda_ipc: the OS does not let this process read pid %d's memory (%m): only its legacy IPC "
                  "handles, bound by the driver, can be imported", addr->pid);
    } else {
        ucs_debug("cuda_ipc: reading pid %d's identity failed (%s)%s", addr->pid,
                  (n < 0) ? strerror(errno) : "short read",
                  (mode == CUX_IPC_PROOF_MEMORY) ? "; UCX_CUDA_IPC_PEER_PROOF=memory requires it" : "");
        goto err_close;
    }
    if (!cux_ipc_pidfd_alive(pidfd)) {
        ucs_debug("cuda_ipc: pid %d exited while its address was checked", addr->pid);
        goto err_close;
    }
    peer->pid        = addr->pid;
    peer->pid_ns     = addr->pid_ns;
    peer->start_time = addr->start_time;
    peer->owner      = CUX_IPC_OWNER_PROCESS | addr->start_time; /* the kernel's: checked against its pidfd */
    peer->pidfd      = pidfd;
    if (peer->readable) {
        cux_ipc_known_add(peer);
    }
    return UCS_OK;

err_close:
    close(pidfd);
    return UCS_ERR_UNREACHABLE;
}

ucs_status_t cux_ipc_peer_open_for_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key)
{
    uint64_t start_time, keys;

    memset(peer, 0, sizeof(*peer));
    peer->pidfd     = -1;
    peer->channel   = -1;
    peer->system_id = cux_ipc_host_id();
    if (key->system_id != peer->system_id) {
        /* nothing but an endpoint's address names a process of another host */
        ucs_debug("cuda_ipc: a key of pid %d of another host without an endpoint: refused", key->pid);
        return UCS_ERR_UNREACHABLE;
    }
    if (key->pid_ns != cux_ipc_pid_namespace()) {
        /* no endpoint's connection is at hand here, and a pid of another namespace names nothing */
        ucs_debug("cuda_ipc: a key of pid %d in another PID namespace (%" PRIu64 ") without an endpoint: refused",
                  key->pid, key->pid_ns);
        return UCS_ERR_UNREACHABLE;
    }
    if (key->pid == getpid()) {
        start_time = ucs_sys_get_proc_create_time(key->pid);
        keys       = cux_ipc_key_table_directory();
    } else if (!cux_ipc_known_find(key->pid, &start_time, &keys)) {
        ucs_debug("cuda_ipc: a key of pid %d, whose address no endpoint of this process proved: refused",
                  key->pid);
        return UCS_ERR_UNREACHABLE;
    }
    peer->pidfd = syscall(SYS_pidfd_open, key->pid, 0);
    if (peer->pidfd < 0) {
        ucs_debug("cuda_ipc: pidfd_open(%d) failed: %m", key->pid);
        return UCS_ERR_UNREACHABLE;
    }
    if (ucs_sys_get_proc_create_time(key->pid) != start_time) {
        ucs_debug("cuda_ipc: pid %d is another process than the one an endpoint proved", key->pid);
        cux_ipc_peer_close(peer);
        return UCS_ERR_UNREACHABLE;
    }
    /* its keys are proven in its table of keys out (cux_ipc_peer_check_key), whatever the proof mode */
    peer->pid        = key->pid;
    peer->pid_ns     = key->pid_ns;
    peer->start_time = start_time;
    peer->owner      = CUX_IPC_OWNER_PROCESS | start_time;
    peer->readable   = 1;
    peer->keys       = keys;
    return UCS_OK;
}

void cux_ipc_peer_close(cux_ipc_peer_t *peer)
{
    if (peer->pidfd >= 0) {
        close(peer->pidfd);
        peer->pidfd = -1;
    }
    if (peer->channel >= 0) {
        close(peer->channel);
        pthread_mutex_destroy(&peer->channel_lock);
        peer->channel = -1;
    }
}
