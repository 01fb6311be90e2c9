/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc remote key: everything an importing process needs to map a GPU allocation of the exporting
 * process, and to check that the key is intact, meant for this host, and made by the exporter (the exporter
 * keeps each key it hands out in slot `record` of its table of keys out; see cux_ipc_key_table.h).
 */
#ifndef CUX_IPC_RKEY_H_
#define CUX_IPC_RKEY_H_

#include "driver/cux_cuda.h"
#include <ucs/type/status.h>
#include <stdint.h>
#include <string.h>

#define CUX_IPC_RKEY_MAGIC   0x31495843u /* "CXI1" */
#define CUX_IPC_RKEY_VERSION 6 /* 6: a pool's fabric handle; 5: the exporter's PID namespace; 4: record is a slot of
                                  its table of keys out */

/* How the allocation is shared. */
enum {
    CUX_IPC_KIND_LEGACY = 0,   /* cuIpcGetMemHandle: cuMemAlloc memory */
    CUX_IPC_KIND_VMM_FD = 1,   /* cuMemCreate memory exported as a POSIX fd, taken with pidfd_getfd */
    /* Not shareable (a memory pool without a shareable handle type, cuMemCreate memory without a POSIX fd).
     * Registration still succeeds, because UCP 1.16+ asserts that every cuda buffer registers with the memory
     * domains it chose by memory type; the peer's unpack answers UCS_ERR_UNREACHABLE, on which UCP leaves
     * cuda_ipc out for that transfer and takes another path. */
    CUX_IPC_KIND_NONE   = 2,
    /* Memory of a pool created with the POSIX descriptor handle type: the pool's descriptor (taken with
     * pidfd_getfd, like VMM_FD's) and the allocation's export data (cuMemPoolExportPointer). Added without a
     * version change: a peer of an older build refuses such keys as of an unknown kind and takes another
     * path, and every other kind still goes between the two. */
    CUX_IPC_KIND_POOL_FD = 3,
    /* A buffer across several cuMemCreate allocations mapped one after another in one reserved range (PyTorch's
     * expandable segments): a table of the pieces, each with its descriptor, in the exporter's memory, read
     * back by the importer, which maps every piece in order into one range of its own. */
    CUX_IPC_KIND_VMM_SPAN = 4,
    /* cuMemCreate memory made with the fabric handle type and no descriptor type (what NVLink-domain
     * allocators make): its fabric handle, which any process of the IMEX domain holding the bytes and an IMEX
     * channel may import. Added without a version change, as POOL_FD was (cux_ipc_fabric.h). */
    CUX_IPC_KIND_VMM_FABRIC = 5,
    /* Memory of a pool created with the fabric handle type and no descriptor type (cudaMallocAsync users on
     * NVLink-domain systems): the pool's fabric handle (pool_fabric) and the allocation's export data, imported
     * as POOL_FD's are (cux_ipc_fabric.h). */
    CUX_IPC_KIND_POOL_FABRIC = 6
};

/* Most allocations one VMM_SPAN key names. */
#define CUX_IPC_SPAN_MAX 64

/* One allocation of a span, as the exporter keeps it in its table. */
typedef struct cux_ipc_span_piece {
    uint64_t base;       /* the allocation's start in the exporter: the previous piece's end */
    uint64_t length;
    uint64_t buffer_id;
    int32_t  fd;         /* its descriptor in the exporter */
    int32_t  reserved;
} cux_ipc_span_piece_t;

typedef struct cux_ipc_rkey {
    uint32_t       magic;
    uint16_t       version;
    uint16_t       kind;        /* CUX_IPC_KIND_* */
    uint64_t       system_id;   /* exporting host (ucs_get_system_id) */
    int32_t        pid;         /* exporting process */
    int32_t        export_fd;   /* VMM_FD, POOL_FD: the descriptor number in the exporting process */
    uint64_t       record;      /* its slot in the exporter's table of keys out, where the importer reads it back */
    uint64_t       secret;      /* keyed hash of the allocation (cux_ipc_proof.h): a peer cannot make one up */
    CUuuid         dev_uuid;    /* device that owns the allocation */
    union {
        CUipcMemHandle         handle;   /* LEGACY (VMM_FD: zero, or its fabric handle) */
        CUmemPoolPtrExportData pool_ptr; /* POOL_FD: the allocation in its pool */
        CUmemFabricHandle      fabric;   /* VMM_FABRIC; VMM_FD in a multi-node NVLink domain */
        struct {
            uint64_t pieces;             /* VMM_SPAN: a hash of every piece's range and buffer id: with count, what
                                            tells this span from another (not where its table is) */
            uint32_t count;              /* how many pieces, 2..CUX_IPC_SPAN_MAX */
            uint32_t reserved;
            uint64_t table;              /* where the exporter keeps them (cux_ipc_span_piece_t) */
        } span;
    };
    uint64_t       base;        /* allocation start in the exporter's address space (VMM_SPAN: the first piece's) */
    uint64_t       length;      /* allocation length (VMM_SPAN: all pieces') */
    uint64_t       buffer_id;   /* tells a re-allocation at the same address from the old one */
    uint64_t       pid_ns;      /* the exporter's PID namespace: its pid names it only there */
    CUmemFabricHandle pool_fabric; /* POOL_FABRIC; POOL_FD in a multi-node NVLink domain: its pool's fabric
                                      handle (zero otherwise) */
    uint32_t       checksum;    /* over everything before it */
} __attribute__((packed)) cux_ipc_rkey_t;

/* Fill magic, version and checksum of an otherwise complete key. */
void cux_ipc_rkey_seal(cux_ipc_rkey_t *rkey);

/*
 * Check a packed key received from a peer. Every key that cannot be used is UCS_ERR_UNREACHABLE, the one status
 * on which every UCP release leaves cuda_ipc out of the transfer and carries on (UCP 1.13 aborts the process on
 * any other unpack error): a corrupt, truncated or older-format key (checksum, magic, version, kind, empty
 * range; the first one logged as an error, later ones at debug level), a key of another host (but one that
 * carries a fabric handle, where other_hosts says this process is in a multi-node NVLink domain:
 * cux_ipc_domain.h), or of memory that cannot be shared (debug level). A key of this very process passes: it is
 * usable only on an endpoint to this process, and only once proven in this process's memory, like every key.
 */
ucs_status_t cux_ipc_rkey_check(const cux_ipc_rkey_t *rkey, uint64_t local_system_id, int other_hosts);

/* Does the key carry a fabric handle, the one thing that goes between hosts by itself? (Memory made with the
 * descriptor type as well is VMM_FD or POOL_FD, and carries its fabric handle too where this process is in a
 * multi-node NVLink domain: importers of this host go by the descriptor, those of other hosts by the handle.) */
static inline int cux_ipc_rkey_crosses_hosts(const cux_ipc_rkey_t *rkey)
{
    static const CUmemFabricHandle none = {0};

    return (rkey->kind == CUX_IPC_KIND_VMM_FABRIC) || (rkey->kind == CUX_IPC_KIND_POOL_FABRIC) ||
           ((rkey->kind == CUX_IPC_KIND_VMM_FD) && memcmp(&rkey->fabric, &none, sizeof(none))) ||
           ((rkey->kind == CUX_IPC_KIND_POOL_FD) && memcmp(&rkey->pool_fabric, &none, sizeof(none)));
}

/* Is [address, address + length) inside the key's allocation? */
static inline int cux_ipc_rkey_covers(const cux_ipc_rkey_t *rkey, uint64_t address, size_t length)
{
    return (address >= rkey->base) && (length <= rkey->length) &&
           (address - rkey->base <= rkey->length - length);
}

/* What tells a span's pieces from others' (key.span.pieces): every piece's range and buffer id, hashed. Both
 * sides compute it: the importer checks the table it read against the key. */
uint64_t cux_ipc_span_pieces_id(const cux_ipc_span_piece_t *piece, unsigned count);

/* Do two keys name the same allocation of the same process, with the same handle and secret? (Two
 * registrations of one allocation differ only in where the exporter keeps the key and, for VMM, in the
 * descriptor number; two spans of the same pieces, in where their tables are.) */
int cux_ipc_rkey_same_allocation(const cux_ipc_rkey_t *a, const cux_ipc_rkey_t *b);

#endif
