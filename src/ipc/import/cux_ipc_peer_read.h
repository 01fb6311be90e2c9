/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reads of another process's memory with a deadline. Every proof reads memory at addresses a peer chose
 * (process_vm_readv), and a peer can make such a read block for as long as it likes: a page backed by a FUSE
 * file it never serves, or registered with userfaultfd. The read is done by a reader thread; the caller waits
 * until the deadline and then gives up, and the blocked reader stays with the read until the peer answers
 * (or the process ends). A few readers at most: when all of them are blocked, reads fail at their deadline.
 * The hand-over costs a thread switch each way (a key's proof went from 0.7 to 15 us on an H200 host, a first
 * mapping from 36 to 72 us; cached mappings read nothing): with no deadline (timeout inf), reads are made on the
 * calling thread, as before, for hosts whose local processes are trusted.
 */
#ifndef CUX_IPC_PEER_READ_H_
#define CUX_IPC_PEER_READ_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Most reader threads, blocked ones included. */
#define CUX_IPC_PEER_READERS_MAX 4

/* How long a read may take (UCX_CUDA_IPC_PROOF_TIMEOUT; the last memory domain opened sets it), in seconds; 1e9
 * or more: no deadline, reads on the calling thread. */
void cux_ipc_peer_read_set_timeout(double seconds);
/* That timeout, which also bounds every request to a peer over cuda_ipc's channel (cux_ipc_channel.h). */
double cux_ipc_peer_read_timeout(void);

/* Reads len bytes at address of pid: the count read, or -1 with errno (ETIMEDOUT: not done by the deadline). */
ssize_t cux_ipc_peer_read_bounded(int32_t pid, uint64_t address, void *buf, size_t len);

#endif
