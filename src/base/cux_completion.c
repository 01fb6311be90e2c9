/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Asynchronous completion engine: see cux_completion.h.
 */
#include "cux_completion_desc.h"
#include "cux_copy_batch.h"
#include "driver/cux_device.h"
#include "cux_profile.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <sys/eventfd.h>
#include <errno.h>
#include <unistd.h>

/* Private part of a pending request: queue link and the endpoint, for purge (NULL: a flush of the engine's own). */
typedef struct cux_pending_priv {
    ucs_queue_elem_t qe;
    uct_ep_h         ep;
} cux_pending_priv_t;

_Static_assert(sizeof(cux_pending_priv_t) <= UCT_PENDING_REQ_PRIV_LEN, "pending priv too large");

#define cux_pending_priv(_req) ((cux_pending_priv_t*)(_req)->priv)

/* A flush asked while requests wait for resources: it waits in the pending queue behind them, and places its
 * markers when it reaches the head, once every request ahead of it has been issued. */
typedef struct cux_deferred_flush {
    uct_pending_req_t req;
    cux_completion_t  *completion;
    uct_ep_h          ep;   /* whose purge cancels it; NULL for an interface flush */
    uct_completion_t  *comp;
} cux_deferred_flush_t;

static ucs_status_t cux_deferred_flush_progress(uct_pending_req_t *req);

static int cux_pending_is_deferred_flush(uct_pending_req_t *req)
{
    return req->func == cux_deferred_flush_progress;
}


void cux_completion_init(cux_completion_t *completion, unsigned max_inflight, unsigned max_poll, unsigned max_batch)
{
    ucs_list_head_init(&completion->active);
    ucs_list_head_init(&completion->batched);
    cux_completion_set_max_batch(completion, max_batch, CUX_BATCH_COPIES_MAX);
    completion->kernel_max = 0;
    ucs_queue_head_init(&completion->free_descs);
    ucs_queue_head_init(&completion->pending);
    completion->num_descs    = 0;
    completion->num_inflight = 0;
    completion->max_inflight = ucs_max(max_inflight, 1u);
    completion->max_poll     = ucs_max(max_poll, 1u);
    completion->event_fd     = -1;
    completion->dispatching  = 0;
}

void cux_completion_cleanup(cux_completion_t *completion)
{
    cux_desc_t *desc;

    ucs_assertv(ucs_list_is_empty(&completion->active), "completion %p has busy stream queues", completion);
    ucs_assertv(ucs_list_is_empty(&completion->batched), "completion %p has copies not issued", completion);
    while (!ucs_queue_is_empty(&completion->free_descs)) {
        desc = ucs_queue_pull_elem_non_empty(&completion->free_descs, cux_desc_t, qe);
        ucs_free(desc);
        --completion->num_descs;
    }
    ucs_assertv(completion->num_descs == 0, "%u descriptors leaked", completion->num_descs);
    if (!ucs_queue_is_empty(&completion->pending)) {
        ucs_warn("completion %p: pending requests dropped at close", completion);
        cux_completion_pending_purge(completion, NULL, NULL, NULL); /* frees the engine's own flushes */
    }
    if (completion->event_fd >= 0) {
        close(completion->event_fd);
        completion->event_fd = -1;
    }
}


/* Removes the head descriptor; returns 1 when a flush request it belonged to is now finished. */
static int cux_stream_queue_pop(cux_stream_queue_t *sq, cux_desc_t *desc)
{
    cux_completion_t *completion = sq->completion;
    int flushed        = 0;

    ucs_queue_pull_non_empty(&sq->descs);
    if (ucs_queue_is_empty(&sq->descs)) {
        ucs_list_del(&sq->active);
    }
    if (!desc->is_marker) {
        if (desc->owns_event) {
            cux_event_pool_put(sq->events, desc->event);
        }
        --completion->num_inflight;
        if (desc->release != NULL) {
            desc->release(desc->release_arg);
        }
    } else {
        flushed = (--desc->flush->markers == 0);
    }
    cux_desc_put(completion, desc);
    return flushed;
}

void cux_stream_queue_init(cux_stream_queue_t *sq, cux_completion_t *completion, CUcontext ctx,
                           cux_event_pool_t *events)
{
    sq->completion  = completion;
    sq->ctx    = ctx;
    sq->stream = NULL;
    sq->events = events;
    sq->armed  = 0;
    sq->batch_count  = 0;
    sq->batch_copies = 0;
    sq->batch_open   = 0;
    sq->batch_status = UCS_OK;
    ucs_queue_head_init(&sq->descs);
}

void cux_stream_queue_cleanup(cux_stream_queue_t *sq)
{
    cux_ctx_guard_t guard;
    cux_flush_req_t *flush;
    cux_desc_t *desc;

    int entered;

    if (cux_copy_batch_waiting(sq)) {
        cux_copy_batch_submit(sq); /* issued, then waited for below like everything else */
    }
    if (sq->stream == NULL) {
        return;
    }

    /* Waiting also covers a queued wake-up host function, which refers to the completion engine. */
    entered = (cux_ctx_enter(sq->ctx, &guard) == UCS_OK);
    if (entered) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuStreamSynchronize, sq->stream);
    }

    /* Descriptors go back even when the context is gone, so nothing of ours leaks. */
    while (!ucs_queue_is_empty(&sq->descs)) {
        desc  = ucs_queue_head_elem_non_empty(&sq->descs, cux_desc_t, qe);
        flush = desc->flush;
        if (cux_stream_queue_pop(sq, desc)) {
            ucs_free(flush);
        }
    }

    if (entered) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuStreamDestroy, sq->stream);
        cux_ctx_leave(&guard);
    }
    sq->stream = NULL;
}

ucs_status_t cux_completion_track(cux_stream_queue_t *sq, uct_completion_t *comp, cux_completion_release_func_t release,
                             void *release_arg)
{
    cux_desc_t *desc;
    ucs_status_t status;
    CUevent event;

    desc = cux_desc_get(sq->completion);
    if (ucs_unlikely(desc == NULL)) {
        status = UCS_ERR_NO_MEMORY;
        goto err_sync;
    }

    status = cux_event_pool_get(sq->events, &event);
    if (ucs_unlikely(status != UCS_OK)) {
        goto err_put_desc;
    }

    status = CUX_DRV_CALL_ERR(cuEventRecord, event, sq->stream);
    if (ucs_unlikely(status != UCS_OK)) {
        cux_event_pool_put(sq->events, event);
        goto err_put_desc;
    }

    cux_desc_init_op(desc, event, 1, comp, release, release_arg);
    cux_stream_queue_push(sq, desc);
    ++sq->completion->num_inflight;
    return UCS_INPROGRESS;

err_put_desc:
    cux_desc_put(sq->completion, desc);
err_sync:
    /* The work is already on the stream: wait for it so the caller's buffers are safe to reuse. */
    return (CUX_DRV_CALL_ERR(cuStreamSynchronize, sq->stream) == UCS_OK) ? UCS_OK : status;
}


static void cux_completion_dispatch_pending(cux_completion_t *completion)
{
    uct_pending_req_t *req;
    cux_pending_priv_t *priv;
    ucs_queue_elem_t *elem;
    ucs_status_t status;

    while (!ucs_queue_is_empty(&completion->pending) && cux_completion_has_resources(completion)) {
        elem   = ucs_queue_pull_non_empty(&completion->pending);
        priv   = ucs_container_of(elem, cux_pending_priv_t, qe);
        req    = ucs_container_of((void*)priv, uct_pending_req_t, priv);
        completion->dispatching = 1;
        status = req->func(req);
        completion->dispatching = 0;
        if (status == UCS_ERR_NO_RESOURCE) {
            ucs_queue_push_head(&completion->pending, &priv->qe);
            break;
        }
    }
}

unsigned cux_completion_progress(cux_completion_t *completion)
{
    ucs_status_t done_status;
    CUevent done_event;
    unsigned count = 0;
    cux_stream_queue_t *sq, *tmp;
    cux_flush_req_t *flush;
    uct_completion_t *comp;
    ucs_status_t status;
    cux_desc_t *desc;
    CUresult res;

    CUX_PROF_START(t0);
    if (ucs_unlikely(!ucs_list_is_empty(&completion->batched))) {
        cux_copy_batch_submit_all(completion);
    }

    ucs_list_for_each_safe(sq, tmp, &completion->active, active) {
        /* the event of the batch being completed and its outcome: asked once, given to every copy of it */
        done_event  = NULL;
        done_status = UCS_OK;
        /* The queue may leave the active list when it drains: stop before touching it again. */
        while ((count < completion->max_poll) && !ucs_queue_is_empty(&sq->descs)) {
            desc = ucs_queue_head_elem_non_empty(&sq->descs, cux_desc_t, qe);
            if (desc->is_marker) {
                flush = desc->flush;
                if (cux_stream_queue_pop(sq, desc)) {
                    uct_invoke_completion(flush->comp, UCS_OK);
                    ucs_free(flush);
                }
                continue;
            }

            if (desc->event == NULL) {
                status = desc->status;
            } else if (desc->event == done_event) {
                status = done_status;
            } else {
                res = cux_drv.cuEventQuery(desc->event);
                if (res == CUDA_ERROR_NOT_READY) {
                    break;
                }
                status      = (res == CUDA_SUCCESS) ? UCS_OK :
                              cux_driver_status(res, UCS_LOG_LEVEL_ERROR, "cuEventQuery", __FILE__, __LINE__);
                done_event  = desc->event;
                done_status = status;
            }
            if (desc->owns_event) {
                done_event = NULL; /* the event goes back to the pool and may be recorded again */
            }
            comp = desc->comp;
            cux_stream_queue_pop(sq, desc);
            if (comp != NULL) {
                uct_invoke_completion(comp, status);
            }
            ++count;
        }
    }

    if (ucs_unlikely(!ucs_queue_is_empty(&completion->pending))) {
        cux_completion_dispatch_pending(completion);
    }
    if (count > 0) {
        CUX_PROF_END(CUX_PROF_PROGRESS, t0, count);
    }
    return count;
}

/* Flushes what has been issued: markers behind the tail of every busy queue. */
static ucs_status_t cux_completion_flush_issued(cux_completion_t *completion, uct_completion_t *comp)
{
    ucs_queue_head_t markers;
    cux_flush_req_t *flush;
    cux_stream_queue_t *sq;
    cux_desc_t *desc;
    unsigned count = 0;

    cux_copy_batch_submit_all(completion); /* accepted copies come before the markers */
    if (ucs_list_is_empty(&completion->active)) {
        return UCS_OK;
    }
    if (comp == NULL) {
        return UCS_INPROGRESS;
    }

    /* Everything is taken before anything is queued: a flush that fails has queued nothing that could call
     * its completion later, and one that queued markers never reports an error. */
    flush = ucs_malloc(sizeof(*flush), "cux_flush_req");
    if (flush == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    ucs_queue_head_init(&markers);
    ucs_list_for_each(sq, &completion->active, active) {
        desc = cux_desc_get(completion);
        if (desc == NULL) {
            while (!ucs_queue_is_empty(&markers)) {
                cux_desc_put(completion, ucs_queue_pull_elem_non_empty(&markers, cux_desc_t, qe));
            }
            ucs_free(flush);
            return UCS_ERR_NO_MEMORY;
        }
        ucs_queue_push(&markers, &desc->qe);
        ++count;
    }

    flush->comp    = comp;
    flush->markers = count;
    ucs_list_for_each(sq, &completion->active, active) {
        desc             = ucs_queue_pull_elem_non_empty(&markers, cux_desc_t, qe);
        desc->is_marker  = 1;
        desc->event      = NULL;
        desc->owns_event = 0;
        desc->comp       = NULL;
        desc->flush      = flush;
        desc->release    = NULL;
        ucs_queue_push(&sq->descs, &desc->qe);
    }
    return UCS_INPROGRESS;
}

static ucs_status_t cux_deferred_flush_progress(uct_pending_req_t *req)
{
    cux_deferred_flush_t *flush = ucs_container_of(req, cux_deferred_flush_t, req);
    ucs_status_t status         = cux_completion_flush_issued(flush->completion, flush->comp);

    if (status != UCS_INPROGRESS) {
        uct_invoke_completion(flush->comp, status);
    }
    ucs_free(flush);
    return UCS_OK;
}

ucs_status_t cux_completion_flush(cux_completion_t *completion, uct_ep_h ep, uct_completion_t *comp)
{
    cux_deferred_flush_t *flush;

    /* While a pending request is dispatched, everything ahead of it has been issued; what waits came later. */
    if (ucs_queue_is_empty(&completion->pending) || completion->dispatching) {
        return cux_completion_flush_issued(completion, comp);
    }
    if (comp == NULL) {
        cux_copy_batch_submit_all(completion);
        return UCS_INPROGRESS;
    }
    flush = ucs_malloc(sizeof(*flush), "cux_deferred_flush");
    if (flush == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    flush->req.func   = cux_deferred_flush_progress;
    flush->completion = completion;
    flush->ep         = ep;
    flush->comp       = comp;
    cux_pending_priv(&flush->req)->ep = NULL;
    ucs_queue_push(&completion->pending, &cux_pending_priv(&flush->req)->qe);
    return UCS_INPROGRESS;
}

ucs_status_t cux_completion_event_fd(cux_completion_t *completion, int *fd_p)
{
    if (completion->event_fd < 0) {
        completion->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (completion->event_fd < 0) {
            ucs_error("eventfd() failed: %m");
            return UCS_ERR_IO_ERROR;
        }
    }
    *fd_p = completion->event_fd;
    return UCS_OK;
}

/* Runs on a driver thread once everything queued before it on the stream is done. No CUDA calls here. */
static void CUDA_CB cux_stream_queue_wakeup(void *arg)
{
    cux_stream_queue_t *sq = arg;
    uint64_t one           = 1;

    __atomic_store_n(&sq->armed, 0, __ATOMIC_RELEASE);
    if (write(sq->completion->event_fd, &one, sizeof(one)) != sizeof(one)) {
        /* The counter can only overflow after 2^64-1 unread wake-ups: nothing to do. */
    }
}

static int cux_stream_queue_head_done(cux_stream_queue_t *sq)
{
    cux_desc_t *desc = ucs_queue_head_elem_non_empty(&sq->descs, cux_desc_t, qe);

    return desc->is_marker || (desc->event == NULL) || (cux_drv.cuEventQuery(desc->event) != CUDA_ERROR_NOT_READY);
}

ucs_status_t cux_completion_event_arm(cux_completion_t *completion, unsigned events)
{
    cux_stream_queue_t *sq;
    cux_ctx_guard_t guard;
    ucs_status_t status;
    uint64_t count;
    int fd;

    if (!(events & UCT_EVENT_SEND_COMP)) {
        return UCS_OK;
    }

    status = cux_completion_event_fd(completion, &fd);
    if (status != UCS_OK) {
        return status;
    }
    while (read(fd, &count, sizeof(count)) == sizeof(count)) {
        /* consume earlier wake-ups */
    }
    cux_copy_batch_submit_all(completion); /* sleeping with copies not issued would never wake */

    /* Anything progress could complete right now must be handled before sleeping. */
    ucs_list_for_each(sq, &completion->active, active) {
        if (cux_stream_queue_head_done(sq)) {
            return UCS_ERR_BUSY;
        }
    }
    if (!ucs_queue_is_empty(&completion->pending) && cux_completion_has_resources(completion)) {
        return UCS_ERR_BUSY;
    }

    ucs_list_for_each(sq, &completion->active, active) {
        if (__atomic_load_n(&sq->armed, __ATOMIC_ACQUIRE)) {
            continue;
        }
        status = cux_ctx_enter(sq->ctx, &guard);
        if (status != UCS_OK) {
            return status;
        }
        sq->armed = 1;
        status    = CUX_DRV_CALL_ERR(cuLaunchHostFunc, sq->stream, cux_stream_queue_wakeup, sq);
        cux_ctx_leave(&guard);
        if (status != UCS_OK) {
            sq->armed = 0;
            return status;
        }
    }
    return UCS_OK;
}

ucs_status_t cux_completion_pending_add(cux_completion_t *completion, uct_ep_h ep, uct_pending_req_t *req)
{
    /* with others waiting, a request goes behind them even when resources came back: the order is kept */
    if (cux_completion_has_resources(completion) && ucs_queue_is_empty(&completion->pending)) {
        return UCS_ERR_BUSY;
    }
    cux_pending_priv(req)->ep = ep;
    ucs_queue_push(&completion->pending, &cux_pending_priv(req)->qe);
    return UCS_OK;
}

void cux_completion_pending_purge(cux_completion_t *completion, uct_ep_h ep, uct_pending_purge_callback_t cb, void *arg)
{
    cux_pending_priv_t *priv;
    ucs_queue_iter_t iter;

    uct_pending_req_t *req;
    cux_deferred_flush_t *flush;

    ucs_queue_for_each_safe(priv, iter, &completion->pending, qe) {
        req = ucs_container_of((void*)priv, uct_pending_req_t, priv);
        if (cux_pending_is_deferred_flush(req)) {
            /* the engine's own: cancelled with its endpoint, or all of them at close (ep NULL, no callback) */
            flush = ucs_container_of(req, cux_deferred_flush_t, req);
            if ((flush->ep == ep) || ((ep == NULL) && (cb == NULL))) {
                ucs_queue_del_iter(&completion->pending, iter);
                if (ep != NULL) {
                    uct_invoke_completion(flush->comp, UCS_ERR_CANCELED);
                }
                ucs_free(flush);
            }
        } else if (priv->ep == ep) {
            ucs_queue_del_iter(&completion->pending, iter);
            if (cb != NULL) {
                cb(req, arg);
            }
        }
    }
}
