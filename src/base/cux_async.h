/*
 * Asynchronous completion engine shared by the transports.
 *
 * Work is issued on CUDA streams, each wrapped in a stream queue. After each operation an event from the
 * context's pool is recorded and a descriptor queued; the stream runs its work in order, so progress only
 * ever queries the head of each queue. Only queues with work in flight are visited. Flush places a marker
 * behind the current tail of every busy queue and completes when all markers reach the head. Event arming
 * enqueues a host function that writes an eventfd, so a sleeping worker wakes when the GPU finishes.
 */
#ifndef CUX_ASYNC_H_
#define CUX_ASYNC_H_

#include "cux_event_pool.h"

#include <uct/base/uct_iface.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/queue.h>

typedef struct cux_async cux_async_t;

typedef struct cux_stream_queue {
    cux_async_t      *async;
    CUcontext        ctx;
    CUstream         stream;     /* created on first use */
    cux_event_pool_t *events;
    ucs_queue_head_t descs;      /* in stream order */
    ucs_list_link_t  active;     /* in async->active while descs is not empty */
    volatile int     armed;      /* a wake-up host function is queued on the stream */
} cux_stream_queue_t;

struct cux_async {
    ucs_list_link_t  active;        /* stream queues with descriptors */
    ucs_queue_head_t free_descs;
    unsigned         num_descs;     /* allocated descriptors, idle or queued */
    unsigned         num_inflight;  /* operations not yet completed */
    unsigned         max_inflight;  /* beyond this, operations return UCS_ERR_NO_RESOURCE */
    unsigned         max_poll;      /* completions handled per progress call */
    ucs_queue_head_t pending;       /* uct_pending_req_t waiting for resources */
    int              event_fd;      /* -1 until asked for */
};

void cux_async_init(cux_async_t *async, unsigned max_inflight, unsigned max_poll);

/* All stream queues must have been cleaned up first. */
void cux_async_cleanup(cux_async_t *async);

void cux_stream_queue_init(cux_stream_queue_t *sq, cux_async_t *async, CUcontext ctx,
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

static inline int cux_async_has_resources(const cux_async_t *async)
{
    return async->num_inflight < async->max_inflight;
}

/* Called when a tracked operation is done (or dropped at close), before its completion. */
typedef void (*cux_async_release_func_t)(void *arg);

/*
 * Track work just issued on sq->stream: records an event and queues a descriptor that, when the event
 * completes, calls release(release_arg) (may be NULL) and then comp (may be NULL). Caller has sq->ctx current.
 * Returns UCS_INPROGRESS, or an error when nothing could be tracked (the stream is then synchronised, so the
 * work is complete either way). Only on UCS_INPROGRESS does the engine take over the release.
 */
ucs_status_t cux_async_track(cux_stream_queue_t *sq, uct_completion_t *comp, cux_async_release_func_t release,
                             void *release_arg);

unsigned cux_async_progress(cux_async_t *async);

/* UCS_OK when nothing is in flight, else UCS_INPROGRESS (and comp, if given, is called when all is done). */
ucs_status_t cux_async_flush(cux_async_t *async, uct_completion_t *comp);

ucs_status_t cux_async_event_fd(cux_async_t *async, int *fd_p);

ucs_status_t cux_async_event_arm(cux_async_t *async, unsigned events);

ucs_status_t cux_async_pending_add(cux_async_t *async, uct_ep_h ep, uct_pending_req_t *req);

void cux_async_pending_purge(cux_async_t *async, uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg);

#endif
