/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The address of a cuda_ipc interface: what a process tells its peers about itself. Nothing in it is believed
 * before it is proven (cux_ipc_proof.h): the pid, namespace and start time against what the kernel shows, the
 * identity record and its secret against the process itself. A process whose GPUs are in a multi-node NVLink
 * domain (cux_ipc_domain.h) adds the domain's cluster and clique, which peers on other hosts compare with theirs;
 * its magic says so, so that the address's length is known on every UCX release (before 1.18 UCT is not told).
 */
#ifndef CUX_IPC_ADDR_H_
#define CUX_IPC_ADDR_H_

#include <ucs/sys/compiler_def.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CUX_IPC_ADDR_MAGIC        0x35415843u /* "CXA5"; above any pid, so an older build's address never matches */
#define CUX_IPC_ADDR_MAGIC_DOMAIN 0x35445843u /* "CXD5": the same, followed by the NVLink domain */

/* Packed: UCP packs addresses byte by byte. */
typedef struct cux_ipc_iface_addr {
    uint32_t magic;
    int32_t  pid;
    uint64_t pid_ns;     /* inode of /proc/self/ns/pid: a pid names the same process only in one namespace */
    uint64_t start_time; /* process start, in clock ticks after boot, as /proc/PID/stat gives it */
    uint64_t identity;   /* where the process keeps its identity record */
    uint64_t secret;     /* the record's random part */
    uint64_t channel;    /* the token naming its socket in UCX_CUDA_IPC_SOCKET_DIR; 0: it has none */
    uint64_t process;    /* its pidfs inode (cux_ipc_pidfs.h): who must listen on that socket; 0: the kernel has none */
    /* CUX_IPC_ADDR_MAGIC_DOMAIN only (zero otherwise): NVML's word on its GPUs' multi-node NVLink domain */
    uint8_t  cluster[16];
    uint32_t clique;
} UCS_S_PACKED cux_ipc_iface_addr_t;

/* The length of an address without its domain part. */
#define CUX_IPC_ADDR_HOST_LEN offsetof(cux_ipc_iface_addr_t, cluster)

/* How many bytes the address takes packed. */
static inline size_t cux_ipc_addr_length(const cux_ipc_iface_addr_t *addr)
{
    return (addr->magic == CUX_IPC_ADDR_MAGIC_DOMAIN) ? sizeof(*addr) : CUX_IPC_ADDR_HOST_LEN;
}

/* An address as UCP packed it (any alignment), length bytes long (SIZE_MAX: UCT does not say, before 1.18): the
 * domain part is read only where the magic says it is there, and the length (where told) holds it. An address too
 * short for what its magic says gets magic 0: no peer's. */
static inline void cux_ipc_addr_unpack(cux_ipc_iface_addr_t *addr, const void *packed, size_t length)
{
    memset(addr, 0, sizeof(*addr));
    if (length < CUX_IPC_ADDR_HOST_LEN) {
        return;
    }
    memcpy(addr, packed, CUX_IPC_ADDR_HOST_LEN);
    if (addr->magic != CUX_IPC_ADDR_MAGIC_DOMAIN) {
        return;
    }
    if (length < sizeof(*addr)) {
        addr->magic = 0;
        return;
    }
    memcpy(addr->cluster, (const char*)packed + CUX_IPC_ADDR_HOST_LEN, sizeof(*addr) - CUX_IPC_ADDR_HOST_LEN);
}

#endif
