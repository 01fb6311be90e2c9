/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs, inside the proof: what cux_ipc_proof.c, cux_ipc_proof_channel.c (the proofs of peers
 * of other PID namespaces, over the channel) and cux_ipc_proof_remote.c (peers on other hosts) share. Not for the
 * layers above, which use cux_ipc_proof.h.
 */
#ifndef CUX_IPC_PROOF_CHANNEL_H_
#define CUX_IPC_PROOF_CHANNEL_H_

#include "ipc/import/cux_ipc_proof.h"

#include <ucs/debug/log.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* pidfd system calls where the libc's headers are older than them. */
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* The pidfd's process has not exited: a pid read before this was not reused in between. */
static inline int cux_ipc_pidfd_alive(int pidfd)
{
    return (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0) || (errno == EPERM);
}

/* A peer of another PID namespace (cux_ipc_peer_open): connected to over its socket, and who answers there
 * checked against what the kernel says and against the address's secret. UCS_ERR_UNREACHABLE otherwise (said
 * once per namespace and cause, at warning level, where the setting or the peer's own setting is the cause). */
ucs_status_t cux_ipc_proof_channel_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr);

/* Asked over the peer's connection, one question at a time: does it hold the key (UCS_ERR_UNREACHABLE, said once
 * per peer, if not); a held span key's pieces; a held key's descriptor (-1 if not given). */
ucs_status_t cux_ipc_proof_channel_key(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key);
ucs_status_t cux_ipc_proof_channel_span(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, cux_ipc_span_piece_t *piece);
int cux_ipc_proof_channel_take_fd(cux_ipc_peer_t *peer, const cux_ipc_rkey_t *key, uint32_t piece);

/* For tests, which cannot put this process beside a peer's namespace nor run on an older kernel: flags of the
 * kernel the proof sees, 0 (the product) for this one as it is. UNSHOWN: every listener taken for one the kernel
 * does not show here; NO_PIDFS: pidfds have no inode of their own (before Linux 6.9). */
#define CUX_IPC_TEST_KERNEL_AS_IS     0
#define CUX_IPC_TEST_UNSHOWN          1
#define CUX_IPC_TEST_NO_PIDFS         2
#define CUX_IPC_TEST_UNSHOWN_NO_PIDFS (CUX_IPC_TEST_UNSHOWN | CUX_IPC_TEST_NO_PIDFS)
void cux_ipc_proof_channel_test_kernel(int flags);

#endif
