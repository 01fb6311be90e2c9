/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: see cux_ipc_span.h.
 */
#include "ipc/export/cux_ipc_span.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "ipc/export/cux_ipc_identity.h"
#include "base/cux_ptr.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <inttypes.h>
#include <string.h>

void cux_ipc_span_withdraw(cux_ipc_fd_exports_t *exports, cux_ipc_span_t *span)
{
    unsigned i;

    cux_ipc_key_table_remove(&span->key);
    for (i = 0; i < CUX_IPC_SPAN_MAX; ++i) {
        cux_ipc_fd_export_put(exports, span->fdx[i]);
        span->fdx[i] = NULL;
    }
    span->withdrawn = 1;
}

void cux_ipc_span_release(cux_ipc_fd_exports_t *exports, cux_ipc_span_t *span)
{
    if (span == NULL) {
        return;
    }
    if (!span->withdrawn) {
        cux_ipc_span_withdraw(exports, span);
    }
    explicit_bzero(&span->key, sizeof(span->key));
    ucs_free(span);
}

int cux_ipc_span_is_current(const cux_ipc_span_t *span)
{
    cux_ptr_info_t info;
    unsigned i;

    for (i = 0; i < span->key.span.count; ++i) {
        if ((cux_ptr_query((void*)(uintptr_t)span->piece[i].base, &info) != UCS_OK) ||
            ((uintptr_t)info.base != span->piece[i].base) || (info.length != span->piece[i].length) ||
            (info.buffer_id != span->piece[i].buffer_id)) {
            ucs_debug("cuda_ipc: piece %u of span 0x%" PRIx64 "+%" PRIu64 " is another allocation now (id %llu, "
                      "was %" PRIu64 "): the span is withdrawn", i, span->key.base, span->key.length,
                      info.buffer_id, span->piece[i].buffer_id);
            return 0;
        }
    }
    return 1;
}

/* The allocation at address, which must start there, as the span's next piece. */
static ucs_status_t cux_ipc_span_add(cux_ipc_fd_exports_t *exports, cux_ipc_span_t *span, unsigned i,
                                     uintptr_t address, int device)
{
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_ptr_query((void*)address, &info);
    if ((status == UCS_OK) &&
        ((info.mem_type != UCS_MEMORY_TYPE_CUDA) || ((uintptr_t)info.base != address) || (info.length == 0) ||
         (info.device != device))) {
        status = UCS_ERR_UNSUPPORTED; /* not the next allocation of the range, or on another GPU */
    }
    if (status == UCS_OK) {
        status = cux_ipc_fd_export_vmm(exports, &info, &span->fdx[i]);
    }
    if (status != UCS_OK) {
        return status;
    }
    span->piece[i] = (cux_ipc_span_piece_t){.base = address, .length = info.length, .buffer_id = info.buffer_id,
                                            .fd = span->fdx[i]->fd};
    return UCS_OK;
}

ucs_status_t cux_ipc_span_make(cux_ipc_fd_exports_t *exports, const cux_ipc_rkey_t *first, int device,
                               const void *start, size_t length, cux_ipc_span_t **span_p)
{
    uintptr_t end = (uintptr_t)start + length, at = first->base;
    cux_ipc_span_t *span;
    cux_ctx_guard_t guard;
    ucs_status_t status;
    unsigned count;

    span = ucs_calloc(1, sizeof(*span), "cux_ipc_span");
    if (span == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = cux_device_ctx_enter(device, &guard);
    if (status != UCS_OK) {
        ucs_free(span);
        return status;
    }
    for (count = 0; at < end; ++count) {
        status = (count < CUX_IPC_SPAN_MAX) ? cux_ipc_span_add(exports, span, count, at, device) :
                 UCS_ERR_UNSUPPORTED;
        if (status != UCS_OK) {
            break;
        }
        at += span->piece[count].length;
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc: %p+%zu runs over allocations that cannot all be exported (%s, at 0x%" PRIxPTR
                  "): another path carries it", start, length, ucs_status_string(status), at);
        cux_ipc_span_release(exports, span);
        return UCS_ERR_UNSUPPORTED;
    }

    span->key             = *first;
    span->key.kind        = CUX_IPC_KIND_VMM_SPAN;
    span->key.export_fd   = -1;
    span->key.length      = at - first->base;
    memset(&span->key.handle, 0, sizeof(span->key.handle));
    span->key.span.pieces = cux_ipc_span_pieces_id(span->piece, count);
    span->key.span.count  = count;
    span->key.secret      = cux_ipc_proof_key_secret(&span->key); /* of the pieces, not of the table's place */
    span->key.span.table  = (uintptr_t)span->piece;
    status                = cux_ipc_key_table_add(&span->key); /* sealed there, with its slot */
    if (status != UCS_OK) {
        explicit_bzero(&span->key, sizeof(span->key));
        cux_ipc_span_release(exports, span);
        return status;
    }
    *span_p = span;
    return UCS_OK;
}
