/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous completion engine shared by the transports.
 *
 * Work is issued on CUDA streams, each wrapped in a stream queue. After each operation an event from the
 * context's pool is recorded and a descriptor queued; the stream runs its work in order, so progress only
 * ever queries the head of each queue. Only queues with work in flight are visited. Flush places a marker
 * behind the current tail of every busy queue and completes when all markers reach the head. Event arming
 * enqueues a host function that writes an eventfd, so a sleeping worker wakes when the GPU finishes.
 *
 * Copies may also be accepted into a queue's batch instead of being issued at once: the batch goes to the
 * driver as one call (cuMemcpyBatchAsync) with one event at the next progress, flush or arm, or when it is
 * full. A peer copy costs the CPU about 2 us to issue alone and 0.8 us in a batch of 16, and an event query
 * about 1.3 us (bench/cux_opcost on H200): batching pays where many copies are in flight. A copy that
 * continues the batch's last one on both sides, within the same two allocations, extends it: a GPU spends
 * about 5 us on every copy between two processes whatever its size (bench/cux_blocks on one H200), so the
 * adjacent blocks of a KV-cache transfer go faster as one copy.
 *
 * cux_completion.c holds the queues, progress, flush, pending requests and arming; cux_copy_batch.c the batches
 * (cux_copy_batch.h), which the transports fill and cux_completion.c issues: calls between the two files go one
 * way, from cux_completion.c to cux_copy_batch.c.
 */
#ifndef CUX_COMPLETION_H_
#define CUX_COMPLETION_H_

#include "cux_copy_kernel.h"
#include "cux_event_pool.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue.h>

typedef struct cux_completion cux_completion_t;
struct cux_desc;

/* Most operations in one batch (MAX_BATCH's bound). */
#define CUX_BATCH_MAX 128

/* Most copies in one batch: a scatter-gather list is one operation of many copies, which go to the driver in
 * calls of up to this many (one launch of the large copy kernel). */
#define CUX_BATCH_COPIES_MAX 1024

/* Where the two ends of a copy lie: the start of the allocation that holds each (0: not known). Copies
 * within the same two allocations may be merged; one copy never spans two allocations. */
typedef struct cux_copy_allocs {
    uintptr_t dst, src;
} cux_copy_allocs_t;

typedef struct cux_stream_queue {
    cux_completion_t      *completion;
    CUcontext        ctx;
    CUstream         stream;     /* created on first use */
    cux_event_pool_t *events;
    ucs_queue_head_t descs;      /* in stream order */
    ucs_list_link_t  active;     /* in completion->active while descs is not empty */
    volatile int     armed;      /* a wake-up host function is queued on the stream */
    unsigned         batch_count;               /* operations accepted, not yet issued */
    unsigned         batch_copies;              /* the copies they make: adjacent ones are merged */
    int              batch_open;                /* copies accepted since the last operation's end: an operation
                                                   whose descriptor is still to come (one at a time per queue) */
    ucs_status_t     batch_status;              /* a failure of that operation's copies issued ahead of its end */
    ucs_list_link_t  batch_link;                /* in completion->batched while anything waits in the batch */
    cux_copy_kernel_desc_t batch_copy[CUX_BATCH_COPIES_MAX]; /* in the copy kernel's layout: a launch reads it */
    cux_copy_allocs_t batch_allocs[CUX_BATCH_COPIES_MAX];
    struct cux_desc  *batch_desc[CUX_BATCH_MAX];
} cux_stream_queue_t;

struct cux_completion {
    ucs_list_link_t  active;        /* stream queues with descriptors */
    ucs_queue_head_t free_descs;
    unsigned         num_descs;     /* allocated descriptors, idle or queued */
    unsigned         num_inflight;  /* operations not yet completed */
    unsigned         max_inflight;  /* beyond this, operations return UCS_ERR_NO_RESOURCE */
    unsigned         max_poll;      /* completions handled per progress call */
    ucs_queue_head_t pending;       /* uct_pending_req_t waiting for resources, and flushes asked behind them */
    int              dispatching;   /* a pending request is being dispatched: what waits behind it came later */
    int              event_fd;      /* -1 until asked for */
    ucs_list_link_t  batched;       /* stream queues with accepted copies */
    unsigned         max_batch;     /* operations per batch, at most CUX_BATCH_MAX */
    unsigned         max_copies;    /* copies per batch (a list's), at most CUX_BATCH_COPIES_MAX */
    size_t           kernel_max;    /* a batch of copies this small, device memory on both sides, goes as one
                                       kernel launch (cux_copy_kernel.h); 0: never */
};

void cux_completion_init(cux_completion_t *completion, unsigned max_inflight, unsigned max_poll, unsigned max_batch);

/* Operations per batch, 1..CUX_BATCH_MAX, and copies per batch (those of a list), 1..CUX_BATCH_COPIES_MAX; each
 * bound by itself: a max_batch of 1 issues each operation at once, a max_copies of 1 each copy. */
static inline void cux_completion_set_max_batch(cux_completion_t *completion, unsigned max_batch,
                                                unsigned max_copies)
{
    completion->max_batch  = (max_batch < 1) ? 1 : (max_batch > CUX_BATCH_MAX) ? CUX_BATCH_MAX : max_batch;
    completion->max_copies = (max_copies < 1) ? 1 :
                             (max_copies > CUX_BATCH_COPIES_MAX) ? CUX_BATCH_COPIES_MAX : max_copies;
}

/* The largest copy a batch may hold to go as one kernel launch; 0 keeps every copy on the copy engines. */
static inline void cux_completion_set_kernel_max(cux_completion_t *completion, size_t kernel_max)
{
    completion->kernel_max = kernel_max;
}

/* All stream queues must have been cleaned up first. */
void cux_completion_cleanup(cux_completion_t *completion);

void cux_stream_queue_init(cux_stream_queue_t *sq, cux_completion_t *completion, CUcontext ctx,
                           cux_event_pool_t *events);

/* Waits for the stream, drops its descriptors without calling their completions, destroys the stream. */
void cux_stream_queue_cleanup(cux_stream_queue_t *sq);

/* The queue's stream, created on first use. Caller has sq->ctx current. */
static inline ucs_status_t cux_stream_queue_stream(cux_stream_queue_t *sq, CUstream *stream_p)
{
    ucs_status_t status;

    if (ucs_unlikely(sq->stream == NULL)) {
        status = CUX_DRV_CALL_ERR(cuStreamCreate, &sq->stream, CU_STREAM_NON_BLOCKING);
        if (status != UCS_OK) {
            return status;
        }
    }
    *stream_p = sq->stream;
    return UCS_OK;
}

static inline int cux_completion_has_resources(const cux_completion_t *completion)
{
    return completion->num_inflight < completion->max_inflight;
}

/* Called when a tracked operation is done (or dropped at close), before its completion. */
typedef void (*cux_completion_release_func_t)(void *arg);

/*
 * Track work just issued on sq->stream: records an event and queues a descriptor that, when the event
 * completes, calls release(release_arg) (may be NULL) and then comp (may be NULL). Caller has sq->ctx current.
 * Returns UCS_INPROGRESS, or an error when nothing could be tracked (the stream is then synchronised, so the
 * work is complete either way). Only on UCS_INPROGRESS does the engine take over the release.
 */
ucs_status_t cux_completion_track(cux_stream_queue_t *sq, uct_completion_t *comp, cux_completion_release_func_t release,
                             void *release_arg);

unsigned cux_completion_progress(cux_completion_t *completion);

/*
 * UCS_OK when nothing is in flight and nothing waits in the pending queue, else UCS_INPROGRESS (and comp, if given,
 * is called when all of it is done). A flush asked while requests wait for resources joins the pending queue
 * behind them (ep: the endpoint whose purge cancels it; NULL for the interface's), so that it covers them too.
 */
ucs_status_t cux_completion_flush(cux_completion_t *completion, uct_ep_h ep, uct_completion_t *comp);

ucs_status_t cux_completion_event_fd(cux_completion_t *completion, int *fd_p);

ucs_status_t cux_completion_event_arm(cux_completion_t *completion, unsigned events);

ucs_status_t cux_completion_pending_add(cux_completion_t *completion, uct_ep_h ep, uct_pending_req_t *req);

void cux_completion_pending_purge(cux_completion_t *completion, uct_ep_h ep, uct_pending_purge_callback_t cb,
                                  void *arg);

#endif
