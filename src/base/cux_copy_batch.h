/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion engine's batches of copies (cux_completion.h): a transport hands a copy to a stream queue's
 * batch; the engine (cux_completion.c) issues the batches at progress, flush and arm. The batch code calls nothing
 * of cux_completion.c: it queues its descriptors with the inline helpers of cux_completion_desc.h.
 */
#ifndef CUX_COPY_BATCH_H_
#define CUX_COPY_BATCH_H_

#include "cux_completion.h"

/*
 * Accept a copy into sq's batch (issued by cux_copy_batch_submit_all, or at once when the batch is full); when it
 * is done, release(release_arg) and then comp are called, as for cux_completion_track. allocs (may be NULL) lets a
 * copy that continues the previous one in the same allocations join it. Needs no current context.
 * Returns UCS_INPROGRESS, or an error when nothing was accepted.
 */
ucs_status_t cux_copy_batch_add(cux_stream_queue_t *sq, void *dst, const void *src, size_t length,
                                const cux_copy_allocs_t *allocs, uct_completion_t *comp,
                                cux_completion_release_func_t release, void *release_arg);

/*
 * The two halves of cux_copy_batch_add, for an operation of many copies on one queue (a scatter-gather list):
 * each copy is accepted alone (joined to the previous one where it continues it, the batch issued when full), and
 * the operation ends with one descriptor behind its last copy, which the stream reaches after all of them.
 * cux_copy_batch_end_op returns UCS_INPROGRESS (release and comp follow), or UCS_OK/an error when it could not be
 * tracked: the copies were then issued and waited for, and nothing follows.
 */
void cux_copy_batch_add_copy(cux_stream_queue_t *sq, CUdeviceptr dst, CUdeviceptr src, size_t length,
                             const cux_copy_allocs_t *allocs);
ucs_status_t cux_copy_batch_end_op(cux_stream_queue_t *sq, uct_completion_t *comp,
                                   cux_completion_release_func_t release, void *release_arg);

/* One copy for the copy engines on stream (the caller's context current): between two known device allocations
 * as a device-to-device copy, as UCX's module issues it (the driver need not work out what either pointer is),
 * else through unified addressing (host memory on one side). allocs may be NULL. */
static inline ucs_status_t cux_copy_async(CUdeviceptr dst, CUdeviceptr src, size_t length,
                                          const cux_copy_allocs_t *allocs, CUstream stream)
{
    if ((allocs != NULL) && (allocs->dst != 0) && (allocs->src != 0)) {
        return CUX_DRV_CALL_ERR(cuMemcpyDtoDAsync, dst, src, length, stream);
    }
    return CUX_DRV_CALL_ERR(cuMemcpyAsync, dst, src, length, stream);
}

/* Whether sq holds accepted copies or operations not yet issued. */
static inline int cux_copy_batch_waiting(const cux_stream_queue_t *sq)
{
    return (sq->batch_count > 0) || (sq->batch_copies > 0);
}

/* Issue sq's accepted copies as one call, then one event for all of them. */
void cux_copy_batch_submit(cux_stream_queue_t *sq);

/* Issue every accepted copy of the engine's queues. Progress, flush and arm call it first. */
void cux_copy_batch_submit_all(cux_completion_t *completion);

#endif
