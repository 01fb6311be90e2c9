/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The address of a cuda_ipc interface: what a process tells its peers about itself. Nothing in it is believed
 * before it is proven (cux_ipc_proof.h): the pid, namespace and start time against what the kernel shows, the
 * identity record and its secret against the process itself.
 */
#ifndef CUX_IPC_ADDR_H_
#define CUX_IPC_ADDR_H_

#include <ucs/sys/compiler_def.h>
#include <stdint.h>

#define CUX_IPC_ADDR_MAGIC 0x34415843u /* "CXA4"; above any pid, so an older build's address never matches */

/* Packed: UCP packs addresses byte by byte. */
typedef struct cux_ipc_iface_addr {
    uint32_t magic;
    int32_t  pid;
    uint64_t pid_ns;     /* inode of /proc/self/ns/pid: a pid names the same process only in one namespace */
    uint64_t start_time; /* process start, in clock ticks after boot, as /proc/PID/stat gives it */
    uint64_t identity;   /* where the process keeps its identity record */
    uint64_t secret;     /* the record's random part */
    uint64_t channel;    /* the token naming its socket in UCX_CUDA_IPC_SOCKET_DIR; 0: it has none */
} UCS_S_PACKED cux_ipc_iface_addr_t;

#endif
