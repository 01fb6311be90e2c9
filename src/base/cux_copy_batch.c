/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The completion engine's batches of copies (cux_copy_batch.h): copies a stream queue accepts wait to be issued
 * together, adjacent ones of the same two allocations merged into one, and go to the GPU as one launch of the
 * copy kernel or one call for the copy engines, with one event for the batch.
 */
#include "cux_copy_batch.h"
#include "cux_completion_desc.h"
#include "cux_copy_kernel.h"
#include "driver/cux_device.h"
#include "cux_profile.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>

/* A batch's copies fit one launch of the large copy kernel, which reads its whole table from the queue's array:
 * a launch of 1,024 starts at the array's first copy, one of 128 at a multiple of 128. */
_Static_assert(CUX_BATCH_COPIES_MAX == CUX_COPY_KERNEL_MAX_LARGE, "a launch reads the queue's whole array");
_Static_assert(CUX_BATCH_COPIES_MAX % CUX_COPY_KERNEL_MAX == 0, "launches of 128 stay within the queue's array");

/* Copies for the copy engines go to cuMemcpyBatchAsync in calls of this many, gathered from the queue's array (a
 * copy engine spends microseconds on each copy: a call per 128 is lost in them). */
#define CUX_COPY_ENGINE_CALL_MAX 128

/* Whether copies first.. first+count-1 go as one kernel launch: more than one copy (a lone copy completes sooner
 * on a copy engine), each within the bound, and device memory on both sides (the copy's two allocations are
 * known). *largest_p: the largest copy's size. */
static int cux_stream_queue_kernel_fits(const cux_stream_queue_t *sq, unsigned first, unsigned count,
                                        size_t *largest_p)
{
    size_t largest = 0;
    unsigned i;

    if (count < 2) {
        return 0;
    }
    for (i = first; i < first + count; ++i) {
        if ((sq->batch_copy[i].size > sq->completion->kernel_max) || (sq->batch_allocs[i].dst == 0) ||
            (sq->batch_allocs[i].src == 0)) {
            return 0;
        }
        largest = ucs_max(largest, sq->batch_copy[i].size);
    }
    *largest_p = largest;
    return 1;
}

/* Copies first.. first+count-1 for the copy engines: calls of up to CUX_COPY_ENGINE_CALL_MAX where the driver takes
 * batches, else copy by copy. */
static ucs_status_t cux_stream_queue_issue_copies(cux_stream_queue_t *sq, CUstream stream, unsigned first,
                                                  unsigned count)
{
    CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    CUdeviceptr dst[CUX_COPY_ENGINE_CALL_MAX], src[CUX_COPY_ENGINE_CALL_MAX];
    size_t size[CUX_COPY_ENGINE_CALL_MAX];
    size_t attr_index       = 0;
    ucs_status_t status     = UCS_OK;
    unsigned i, n, end      = first + count;
    const cux_copy_kernel_desc_t *c;

    if ((count > 1) && (cux_drv.cuMemcpyBatchAsync != NULL)) {
        for (; (first < end) && (status == UCS_OK); first += n) {
            n = ucs_min(end - first, CUX_COPY_ENGINE_CALL_MAX);
            for (i = 0; i < n; ++i) {
                c       = &sq->batch_copy[first + i];
                dst[i]  = c->dst;
                src[i]  = c->src;
                size[i] = c->size;
            }
            status = (n == 1) ? cux_copy_async(dst[0], src[0], size[0], &sq->batch_allocs[first], stream) :
                     CUX_DRV_CALL_ERR(cuMemcpyBatchAsync, dst, src, size, n, &attr, &attr_index, 1, stream);
        }
        return status;
    }
    for (i = first; (i < end) && (status == UCS_OK); ++i) {
        c      = &sq->batch_copy[i];
        status = cux_copy_async(c->dst, c->src, c->size, &sq->batch_allocs[i], stream);
    }
    return status;
}

/* The batch's copies on stream, in as few calls as the driver takes: launches of the copy kernel of as many copies
 * as one takes (1,024, or 128 where the driver takes no large parameters), each for the copy engines instead
 * where one of its copies does not fit the kernel. The context's kernels are looked up once, for every launch. */
static ucs_status_t cux_stream_queue_issue(cux_stream_queue_t *sq, CUstream stream, unsigned copies)
{
    const cux_copy_kernel_t *kernel = NULL;
    ucs_status_t status             = UCS_OK;
    unsigned chunk                  = 0;
    unsigned first, count;
    size_t largest;

    if ((copies > 1) && (sq->completion->kernel_max > 0)) {
        kernel = cux_copy_kernel_get(sq->ctx);
        chunk  = cux_copy_kernel_capacity(kernel);
    }
    if (chunk == 0) {
        return cux_stream_queue_issue_copies(sq, stream, 0, copies);
    }
    for (first = 0; (first < copies) && (status == UCS_OK); first += count) {
        count  = ucs_min(copies - first, chunk);
        status = cux_stream_queue_kernel_fits(sq, first, count, &largest) ?
                 cux_copy_kernel_launch(kernel, stream, sq->batch_copy + first, count, largest) :
                 UCS_ERR_UNSUPPORTED;
        if (status == UCS_ERR_UNSUPPORTED) {
            status = cux_stream_queue_issue_copies(sq, stream, first, count);
        }
    }
    return status;
}

/* Issue the accepted copies as one call (a kernel launch, or a batch for the copy engines), then one event for
 * the operations that end in this batch (none where the batch holds only the first copies of a longer one: the
 * stream runs in order, so the event behind its last copy covers them). A failure completes every operation of
 * the batch, and the next to end on this queue if its first copies were in it, with its status at the next
 * progress (never from inside the call that accepted it). */
void cux_copy_batch_submit(cux_stream_queue_t *sq)
{
    unsigned i, count       = sq->batch_count;
    unsigned copies         = sq->batch_copies;
    CUevent event           = NULL;
    cux_ctx_guard_t guard;
    ucs_status_t status, issued;
    CUstream stream;
    cux_desc_t *desc;

    CUX_PROF_START(t0);
    sq->batch_count  = 0;
    sq->batch_copies = 0;
    ucs_list_del(&sq->batch_link);

    status = cux_ctx_enter(sq->ctx, &guard);
    if (status != UCS_OK) {
        goto out_push;
    }
    status = cux_stream_queue_stream(sq, &stream);
    if (status != UCS_OK) {
        goto out_leave;
    }
    if (copies > 0) {
        status = cux_stream_queue_issue(sq, stream, copies);
    }
    if (status != UCS_OK) {
        ucs_error("batch of %u copies (%u operations) failed: %s", copies, count, ucs_status_string(status));
        /* what was issued must be finished before the buffers go back to their owners */
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuStreamSynchronize, stream);
        goto out_leave;
    }
    if (count == 0) {
        goto out_leave;
    }
    if (UCS_STATUS_IS_ERR(sq->batch_status)) {
        /* earlier copies of the first operation ending here failed: the operations complete with that once
         * this batch is done, without an event */
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuStreamSynchronize, stream);
        goto out_leave;
    }
    if ((cux_event_pool_get(sq->events, &event) != UCS_OK) ||
        (CUX_DRV_CALL_ERR(cuEventRecord, event, stream) != UCS_OK)) {
        if (event != NULL) {
            cux_event_pool_put(sq->events, event);
            event = NULL;
        }
        status = CUX_DRV_CALL_ERR(cuStreamSynchronize, stream); /* done now: complete without an event */
    }
out_leave:
    cux_ctx_leave(&guard);
out_push:
    /* the operations ending here take an earlier failure of the first of them, else this batch's outcome; a
     * failure of copies of the operation still open is kept for its end */
    issued = status;
    if (UCS_STATUS_IS_ERR(sq->batch_status)) {
        status = sq->batch_status;
    }
    for (i = 0; i < count; ++i) {
        desc             = sq->batch_desc[i];
        desc->event      = (status == UCS_OK) ? event : NULL;
        desc->owns_event = (desc->event != NULL) && (i == count - 1);
        desc->status     = status;
        cux_stream_queue_push(sq, desc);
    }
    if (sq->batch_open && UCS_STATUS_IS_ERR(issued)) {
        sq->batch_status = issued;
    } else if (count > 0) {
        sq->batch_status = UCS_OK;
    }
    CUX_PROF_END(CUX_PROF_SUBMIT, t0, copies);
}

/* Whether a copy continues the batch's last copy on both sides, in the same two known allocations. */
static UCS_F_ALWAYS_INLINE int cux_stream_queue_continues(const cux_stream_queue_t *sq, CUdeviceptr dst,
                                                          CUdeviceptr src, const cux_copy_allocs_t *allocs)
{
    unsigned last = sq->batch_copies - 1;

    return (sq->batch_copies > 0) && (allocs != NULL) && (allocs->dst != 0) && (allocs->src != 0) &&
           (sq->batch_allocs[last].dst == allocs->dst) && (sq->batch_allocs[last].src == allocs->src) &&
           (sq->batch_copy[last].dst + sq->batch_copy[last].size == dst) &&
           (sq->batch_copy[last].src + sq->batch_copy[last].size == src);
}

/* The queue joins the engine's list of batches with something waiting when its first copy or operation comes. */
static UCS_F_ALWAYS_INLINE void cux_copy_batch_join(cux_stream_queue_t *sq)
{
    if (!cux_copy_batch_waiting(sq)) {
        ucs_list_add_tail(&sq->completion->batched, &sq->batch_link);
    }
}

/* cux_copy_batch_add_copy's work, inlined into cux_copy_batch_add too (one put's path makes no call for it) */
static UCS_F_ALWAYS_INLINE void cux_copy_batch_accept(cux_stream_queue_t *sq, CUdeviceptr dst, CUdeviceptr src,
                                                      size_t length, const cux_copy_allocs_t *allocs)
{
    unsigned c;

    if (cux_stream_queue_continues(sq, dst, src, allocs)) {
        sq->batch_copy[sq->batch_copies - 1].size += length; /* goes with that copy, and fails with it */
        sq->batch_open = 1;
        return;
    }
    if (sq->batch_copies >= sq->completion->max_copies) {
        cux_copy_batch_submit(sq); /* a full batch goes; this copy starts the next */
    }
    cux_copy_batch_join(sq);
    sq->batch_open      = 1;
    c                   = sq->batch_copies++;
    sq->batch_copy[c]   = (cux_copy_kernel_desc_t){src, dst, length};
    sq->batch_allocs[c] = (allocs != NULL) ? *allocs : (cux_copy_allocs_t){0, 0};
}

void cux_copy_batch_add_copy(cux_stream_queue_t *sq, CUdeviceptr dst, CUdeviceptr src, size_t length,
                             const cux_copy_allocs_t *allocs)
{
    cux_copy_batch_accept(sq, dst, src, length, allocs);
}

/* The operation's descriptor behind its copies. */
static ucs_status_t cux_copy_batch_end_with(cux_stream_queue_t *sq, cux_desc_t *desc, uct_completion_t *comp,
                                            cux_completion_release_func_t release, void *release_arg)
{
    cux_completion_t *completion = sq->completion;

    cux_desc_init_op(desc, NULL, 0, comp, release, release_arg); /* the event comes at submission */
    cux_copy_batch_join(sq);
    sq->batch_open                    = 0;
    sq->batch_desc[sq->batch_count++] = desc;
    /* An operation that finds nothing else in flight goes out now: no other copy is coming to share its call (a
     * rendezvous of one message, a ping-pong), so waiting for the next progress would only add latency. */
    if ((++completion->num_inflight == 1) || (sq->batch_count >= completion->max_batch)) {
        cux_copy_batch_submit(sq);
    }
    return UCS_INPROGRESS;
}

/* Copies that no descriptor can follow: issued, and waited for. */
static ucs_status_t cux_copy_batch_wait(cux_stream_queue_t *sq)
{
    ucs_status_t status = UCS_OK;
    cux_ctx_guard_t guard;

    if (cux_copy_batch_waiting(sq)) {
        cux_copy_batch_submit(sq);
    }
    if ((sq->stream != NULL) && ((status = cux_ctx_enter(sq->ctx, &guard)) == UCS_OK)) {
        status = CUX_DRV_CALL_ERR(cuStreamSynchronize, sq->stream);
        cux_ctx_leave(&guard);
    }
    if (UCS_STATUS_IS_ERR(sq->batch_status)) {
        status = sq->batch_status;
    }
    sq->batch_open   = 0;
    sq->batch_status = UCS_OK;
    return status;
}

ucs_status_t cux_copy_batch_end_op(cux_stream_queue_t *sq, uct_completion_t *comp,
                                   cux_completion_release_func_t release, void *release_arg)
{
    cux_desc_t *desc = cux_desc_get(sq->completion);

    if (ucs_unlikely(desc == NULL)) {
        return cux_copy_batch_wait(sq);
    }
    return cux_copy_batch_end_with(sq, desc, comp, release, release_arg);
}

ucs_status_t cux_copy_batch_add(cux_stream_queue_t *sq, void *dst, const void *src, size_t length,
                                const cux_copy_allocs_t *allocs, uct_completion_t *comp,
                                cux_completion_release_func_t release, void *release_arg)
{
    cux_desc_t *desc = cux_desc_get(sq->completion);

    if (ucs_unlikely(desc == NULL)) {
        return UCS_ERR_NO_MEMORY; /* nothing accepted */
    }
    cux_copy_batch_accept(sq, (CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, length, allocs);
    return cux_copy_batch_end_with(sq, desc, comp, release, release_arg);
}

void cux_copy_batch_submit_all(cux_completion_t *completion)
{
    cux_stream_queue_t *sq, *tmp;

    ucs_list_for_each_safe(sq, tmp, &completion->batched, batch_link) {
        cux_copy_batch_submit(sq);
    }
}
