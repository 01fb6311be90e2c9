/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: keys of buffers that run across several cuMemCreate allocations mapped one after
 * another in one reserved range (PyTorch's expandable segments). A registration's key names one allocation;
 * when a buffer packed from it runs past that allocation, the registration gets a span: the allocations from
 * its own to the one the buffer ends in, each exported as a descriptor (cux_ipc_fd_export.h), in a table that
 * the span's key names. The importer proves the key as any other (it reads it back from the table of keys out),
 * reads the
 * table from this process's memory, proves the key again (the table lives as long as the key), and maps every
 * piece in order into one range of its own.
 */
#ifndef CUX_IPC_SPAN_H_
#define CUX_IPC_SPAN_H_

#include "ipc/export/cux_ipc_fd_export.h"
#include "ipc/common/cux_ipc_rkey.h"

typedef struct cux_ipc_span {
    struct cux_ipc_span  *next;                      /* the registration's older spans */
    int                  withdrawn;                  /* a piece was replaced: its key and descriptors are gone */
    cux_ipc_rkey_t       key;                        /* kind VMM_SPAN, in the table of keys out */
    cux_ipc_span_piece_t piece[CUX_IPC_SPAN_MAX];    /* the table key.span names */
    cux_ipc_fd_export_t  *fdx[CUX_IPC_SPAN_MAX];     /* the pieces' descriptors */
} cux_ipc_span_t;

/*
 * A span from the allocation of key first (a VMM_FD key) to the allocation [start, start + length) ends in.
 * UCS_ERR_UNSUPPORTED (at debug level) when a piece is not cuMemCreate memory with a POSIX descriptor on
 * first's device, or the buffer runs over more than CUX_IPC_SPAN_MAX allocations.
 */
ucs_status_t cux_ipc_span_make(cux_ipc_fd_exports_t *exports, const cux_ipc_rkey_t *first, int device,
                               const void *start, size_t length, cux_ipc_span_t **span_p);

/* Is every piece still the allocation mapped at its place? (An expandable segment that shrank and grew again has
 * another allocation there.) Driver queries: called without locks held. */
int cux_ipc_span_is_current(const cux_ipc_span_t *span);

/* Its key withdrawn first, so that no importer proves it any more; then its descriptors given back. The span
 * itself stays (another thread may be looking at it) until cux_ipc_span_release. */
void cux_ipc_span_withdraw(cux_ipc_fd_exports_t *exports, cux_ipc_span_t *span);

/* Withdrawn, and freed: at the end of the registration that holds it. */
void cux_ipc_span_release(cux_ipc_fd_exports_t *exports, cux_ipc_span_t *span);

#endif
