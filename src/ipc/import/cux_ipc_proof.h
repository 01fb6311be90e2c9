/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs: how a process proves to a peer that an interface address and the remote keys it sends
 * are its own, and how the importer checks that proof. Nothing a peer writes about itself (pid, start time,
 * allocation, length) is taken on its word.
 *
 * - Identity. Each process keeps an identity record (magic, pid, start time, 64 random bits) in its own
 *   memory; its interface address carries the pid, start time and the record's address and secret. The
 *   importer opens a pidfd of the pid first, checks the start time in /proc against the address, reads the
 *   record back from that process (process_vm_readv), and then checks that the pidfd's process is still alive,
 *   so the pid was not reused in between.
 * - Keys. An exporter keeps every key it hands out in its table of keys out (cux_ipc_key_table.h), whose place
 *   its identity record names, and puts the key's slot in the key; the importer reads the slot from that table
 *   and compares it byte for byte before it maps anything: never from a place the key chose, where a copy of
 *   the key's bytes could lie. A key's secret is a keyed hash of its allocation with a per-process random key:
 *   a key of this very process is checked in its own table and by its secret, without reading any memory.
 * - Without an endpoint (rkey_ptr), a key's process is trusted only if an endpoint of this process proved that
 *   process's address (and it is still the same process).
 * - Another PID namespace (containers). A pid there means nothing here, so no proof above reaches the peer. With
 *   UCX_CUDA_IPC_SOCKET_DIR set on both sides, the peer is asked instead, over a UNIX socket (cux_ipc_channel.h;
 *   cux_ipc_proof_channel.c). Who answers is the kernel's word, not the address's: a listener the kernel shows in
 *   our namespace is no peer of another; one it shows in a namespace below ours must be the pid, namespace and
 *   start time its address claims; one it does not show is bound to its connection (or to its pidfd where the
 *   kernel names one). The listener then answers a challenge under its address's secret, which it never sends,
 *   so it hands a stranger nothing to pose as it. It answers each key's proof from its own table of keys out and
 *   hands over descriptors and span tables of keys it holds; the connection is its liveness. A mapping proven
 *   over a connection serves only that peer (CUX_IPC_OWNER_*). Everything that names a peer by pid names its
 *   namespace too (two containers both have a pid 1).
 * - Another host of our multi-node NVLink domain (cux_ipc_domain.h). Nothing the kernel shows reaches it: its
 *   address is taken as its word where its domain is ours and its pid is not a process of this host with its
 *   start time (a process here that says it is elsewhere), and only keys that cross hosts by themselves (fabric
 *   handles, a capability the driver and IMEX enforce) are taken from it, on an endpoint to it alone
 *   (cux_ipc_proof_remote.c; docs/threat-model.md, "Fabric handles").
 * - Without read access. process_vm_readv needs the same permission as pidfd_getfd (the same user and a ptrace
 *   policy that allows it; Yama's ptrace_scope=1 allows it only for descendants). Where the OS refuses it, VMM
 *   memory cannot be imported anyway, and a legacy IPC handle is bound to the peer by the exporting pid the
 *   driver writes into it (bytes 8-11 on Linux, checked on a handle of our own before it is relied on). The
 *   driver does not verify those bytes (cux_ipc_handle.h): the binding holds against a handle passed on as it
 *   is, not against a peer that rewrites it. PEER_PROOF=memory refuses such peers instead.
 */
#ifndef CUX_IPC_PROOF_H_
#define CUX_IPC_PROOF_H_

#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/export/cux_ipc_identity.h"

#include <ucs/debug/log.h>
#include <ucs/type/status.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

/* How much a peer must prove (UCX_CUDA_IPC_PEER_PROOF). */
typedef enum {
    CUX_IPC_PROOF_AUTO,   /* its memory where the OS lets us read it; otherwise legacy handles bound by the driver */
    CUX_IPC_PROOF_MEMORY, /* its memory, always: a peer the OS does not let us read is not reachable */
    CUX_IPC_PROOF_LAST
} cux_ipc_proof_mode_t;

extern const char *cux_ipc_proof_mode_names[];

/* A peer as an endpoint knows it, once its address was proven. */
#define CUX_IPC_PEER_CHUNKS_KNOWN 16

/* Who a peer is, as far as the kernel says: the mapping cache serves a mapping only to the owner it was proven
 * for (cux_ipc_cache.h). The kind is in the top bits, so owners of two kinds never compare equal. */
#define CUX_IPC_OWNER_PROCESS    (0ull << 62) /* a process /proc and a pidfd show us: its start time */
#define CUX_IPC_OWNER_PIDFS      (1ull << 62) /* a listener the kernel names by its pidfd's inode (Linux 6.9+) */
#define CUX_IPC_OWNER_CONNECTION (2ull << 62) /* one connection: nothing the kernel says names its process */
#define CUX_IPC_OWNER_REMOTE     (3ull << 62) /* a process of another host: its address's words, hashed */
#define CUX_IPC_OWNER_KIND(_owner) ((_owner) & (3ull << 62))

typedef struct cux_ipc_peer {
    uint64_t system_id;    /* its host (ucs_get_system_id): ours, but for a peer on another host */
    int32_t  pid;
    uint64_t pid_ns;       /* the namespace its pid is of */
    uint64_t start_time;
    uint64_t owner;        /* CUX_IPC_OWNER_*: what its mappings are bound to */
    int      pidfd;
    int      readable;     /* its memory can be read: keys are proven there, VMM descriptors can be taken */
    int      logged;       /* a rejected key of this peer was logged at error level already */
    uint64_t keys;         /* where its table of keys out has its directory (from its proven identity) */
    uint64_t chunk[CUX_IPC_PEER_CHUNKS_KNOWN]; /* where its first chunks of keys are, once read (0: not yet) */
    int      channel;      /* a peer of another PID namespace: the connection it is asked over (-1: none) */
    pthread_mutex_t channel_lock; /* one question at a time on it */
} cux_ipc_peer_t;

/* A rejected key: one error line per peer, the rest at debug level (a peer may retry forever). */
#define cux_ipc_peer_reject(_peer, _fmt, ...) \
    ({ \
        ucs_log((_peer)->logged ? UCS_LOG_LEVEL_DEBUG : UCS_LOG_LEVEL_ERROR, "cuda_ipc: " _fmt \
                "%s", ## __VA_ARGS__, (_peer)->logged ? "" : " (further keys refused from this peer: debug log)"); \
        (_peer)->logged = 1; \
        UCS_ERR_UNREACHABLE; \
    })

/* Did the peer make the key (its pid in its namespace, on its host)? */
static inline int cux_ipc_peer_made(const cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key)
{
    return (key->pid == peer->pid) && (key->pid_ns == peer->pid_ns) && (key->system_id == peer->system_id);
}

static inline int cux_ipc_peer_is_remote(const cux_ipc_peer_t *peer)
{
    return CUX_IPC_OWNER_KIND(peer->owner) == CUX_IPC_OWNER_REMOTE;
}

/* Whether the address comes from a process on this host in another PID namespace than pid_ns (ours): a peer no
 * proof reaches (cux_ipc_peer_open says so once per namespace, at warning level). */
int cux_ipc_addr_in_other_pid_namespace(const cux_ipc_iface_addr_t *addr, uint64_t pid_ns);

/* Is the address a proven peer of another process in our namespace, or this process's own address (an
 * endpoint to itself)? UCS_OK with the peer open (pidfd held; cux_ipc_peer_close gives it back),
 * UCS_ERR_UNREACHABLE (logged at debug level: UCP asks for every address it sees) otherwise. */
ucs_status_t cux_ipc_peer_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr, uint64_t pid_ns,
                               cux_ipc_proof_mode_t mode);
void cux_ipc_peer_close(cux_ipc_peer_t *peer);

/* Is the address, whose device address names another host than ours, a peer on another host of our NVLink
 * domain? 1, or 0 with *why_p saying why not. pid_ns: ours. */
int cux_ipc_remote_peer_acceptable(const cux_ipc_iface_addr_t *addr, uint64_t pid_ns, const char **why_p);
/* The same, opened as an endpoint's peer (UCS_ERR_UNREACHABLE, logged at debug level, if it is not one). */
ucs_status_t cux_ipc_remote_peer_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr, uint64_t system_id,
                                      uint64_t pid_ns);
/* A peer known only from one of its keys (rkey_ptr has no endpoint): this process, or a process whose address an
 * endpoint of this process proved (its table of keys known from then), with a pidfd held; UCS_ERR_UNREACHABLE
 * otherwise. Its keys must then be proven in its memory, whatever the proof mode. */
ucs_status_t cux_ipc_peer_open_for_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key);

/* Is the key one the peer made and still holds? UCS_ERR_UNREACHABLE otherwise (logged once per peer at error
 * level). Legacy handles are also checked at mapping time by cux_ipc_peer_check_handle (it needs a device
 * context). */
ucs_status_t cux_ipc_peer_check_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key);

/* The table of pieces a VMM_SPAN key names (key->span.count of them), from the peer's memory or, over a channel,
 * from the peer: UCS_ERR_UNREACHABLE if it cannot be had. The caller proves the key again after it read: what
 * it read holds only while the key does. */
ucs_status_t cux_ipc_peer_read_span(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece);

/* Takes the peer's descriptor fd of the key (piece: CUX_IPC_CHANNEL_KEY_FD, or which piece of a span) through its
 * pidfd (pidfd_getfd), or over its channel; -1 with a log line on failure. */
int cux_ipc_peer_take_fd(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, uint32_t piece, int fd);

/* Was the key's legacy handle exported by the peer? Called with a device context current: the first call checks
 * on a handle of our own that the driver writes the exporting pid where it is read. Where it does not, only a
 * peer whose memory proved the key passes. UCS_ERR_UNREACHABLE otherwise. */
ucs_status_t cux_ipc_peer_check_handle(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key);

#endif
