/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: this process's identity. Each process keeps an identity record (magic, pid, start
 * time, 64 random bits, where its table of keys out is) in its own memory; its interface address names the
 * record and carries its secret, and peers read the record back to prove the address (cux_ipc_proof.h). The
 * secrets of its keys are keyed hashes of their allocations under a random key of its own.
 */
#ifndef CUX_IPC_IDENTITY_H_
#define CUX_IPC_IDENTITY_H_

#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"

#include <stddef.h>
#include <stdint.h>

#define CUX_IPC_IDENTITY_MAGIC 0x3459544e45444943ull /* "CIDENTY4": with the table of keys out */

/* What peers read back from this process. */
typedef struct cux_ipc_identity {
    uint64_t magic;
    int32_t  pid;
    int32_t  reserved;
    uint64_t start_time;
    uint64_t secret;
    uint64_t keys;       /* the directory of its table of keys out */
    uint64_t process;    /* its pidfs inode (cux_ipc_pidfs.h), 0 where the kernel has none */
} cux_ipc_identity_t;

/* This host's id (ucs_get_system_id), asked once: keys are checked against it for every rendezvous message. */
uint64_t cux_ipc_host_id(void);

/* This process's PID namespace: the inode of /proc/self/ns/pid (0 where it cannot be read). */
uint64_t cux_ipc_pid_namespace(void);

/* This process's address (a forked child gets an identity of its own). */
void cux_ipc_proof_own_address(cux_ipc_iface_addr_t *addr, uint64_t pid_ns);

/* Is the key of this very process (this host, pid and PID namespace)? Its own-key proof is separate. */
int cux_ipc_proof_key_is_own(const cux_ipc_rkey_t *key);

/* Did this process hand the key out, and does it still hold it, byte for byte (the secret only it computes among
 * them)? use (or NULL) runs with its table of keys out locked while it holds the key (cux_ipc_key_table_use): the
 * one check of an own key, for an endpoint to this process and for a peer of another namespace asking over the
 * channel. */
int cux_ipc_proof_own_key_use(const cux_ipc_rkey_t *key, void (*use)(const cux_ipc_rkey_t *key, void *arg),
                              void *arg);

/* The secret of a key for an allocation of this process: the same for every registration of the allocation,
 * unpredictable without this process's random key. */
uint64_t cux_ipc_proof_key_secret(const cux_ipc_rkey_t *key);

/* The answer to a challenge: a keyed hash of the nonce and the address (its secret left out) under that secret,
 * which only the process that made the address knows besides the peers it handed the address to. */
uint64_t cux_ipc_proof_hello_hash(const cux_ipc_iface_addr_t *addr, uint64_t nonce);

/* Random bytes (getrandom; a weaker fallback, said once, where there is no entropy source). */
void cux_ipc_random(void *buf, size_t len);

#endif
