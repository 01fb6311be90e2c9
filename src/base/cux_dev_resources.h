/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An interface's per-device resources, created on first use: the device's primary context, an event pool
 * and a number of stream queues whose meaning the transport decides (copy directions for cuda_copy, peer
 * devices for cuda_ipc).
 */
#ifndef CUX_DEV_RESOURCES_H_
#define CUX_DEV_RESOURCES_H_

#include "cux_copy_batch.h"
#include "driver/cux_device.h"

typedef struct cux_dev_res {
    CUcontext          ctx;
    cux_event_pool_t   events;
    cux_stream_queue_t queues[];
} cux_dev_res_t;

typedef struct cux_dev_resources {
    cux_completion_t   *completion;
    unsigned      num_queues;
    cux_dev_res_t *devs[CUX_MAX_DEVICES];
} cux_dev_resources_t;

void cux_dev_resources_init(cux_dev_resources_t *table, cux_completion_t *completion, unsigned num_queues);

/* Waits for and releases every device's streams and events. */
void cux_dev_resources_cleanup(cux_dev_resources_t *table);

ucs_status_t cux_dev_resources_create(cux_dev_resources_t *table, int device);

static inline ucs_status_t cux_dev_resources_get(cux_dev_resources_t *table, int device, cux_dev_res_t **res_p)
{
    ucs_status_t status;

    if (ucs_unlikely((unsigned)device >= CUX_MAX_DEVICES)) {
        ucs_error("invalid cuda device ordinal %d", device);
        return UCS_ERR_NO_DEVICE;
    }
    if (ucs_unlikely(table->devs[device] == NULL)) {
        status = cux_dev_resources_create(table, device);
        if (status != UCS_OK) {
            return status;
        }
    }
    *res_p = table->devs[device];
    return UCS_OK;
}

/* How cux_dev_copy completes a copy. */
typedef enum {
    CUX_DEV_COPY_ASYNC,   /* tracked: comp is called from progress */
    CUX_DEV_COPY_BATCH,   /* the same, issued with others of its queue (cux_copy_batch_add) */
    CUX_DEV_COPY_BLOCK,   /* done on return, waiting in cuStreamSynchronize */
    CUX_DEV_COPY_SPIN     /* done on return, polling the stream (a short copy finishes in microseconds) */
} cux_dev_copy_mode_t;

static UCS_F_ALWAYS_INLINE ucs_status_t cux_dev_stream_spin(CUstream stream)
{
    CUresult res;

    do {
        res = cux_drv.cuStreamQuery(stream);
    } while (res == CUDA_ERROR_NOT_READY);
    return (res == CUDA_SUCCESS) ? UCS_OK : CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
}

/*
 * Issue one copy on a queue of a device, in that device's context: done on return (BLOCK, SPIN), or tracked
 * by the completion engine with comp and release (ASYNC, BATCH; see cux_completion_track for who releases when).
 * allocs (may be NULL): the allocations of both ends, for a batched copy to join an adjacent one.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t cux_dev_copy(cux_dev_res_t *res, unsigned queue, void *dst,
                                                     const void *src, size_t length, cux_dev_copy_mode_t mode,
                                                     const cux_copy_allocs_t *allocs, uct_completion_t *comp,
                                                     cux_completion_release_func_t release, void *release_arg)
{
    cux_stream_queue_t *sq = &res->queues[queue];
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUstream stream;

    status = cux_driver_check_fork("a copy");
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    if (mode == CUX_DEV_COPY_BATCH) {
        return cux_copy_batch_add(sq, dst, src, length, allocs, comp, release, release_arg);
    }

    status = cux_ctx_enter(res->ctx, &guard);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    status = cux_stream_queue_stream(sq, &stream);
    if (ucs_unlikely(status != UCS_OK)) {
        goto out;
    }

    status = cux_copy_async((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, length, allocs, stream);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_error("copy of %zu bytes %p -> %p failed", length, src, dst);
        goto out;
    }

    if (mode == CUX_DEV_COPY_SPIN) {
        status = cux_dev_stream_spin(stream);
    } else if (mode == CUX_DEV_COPY_BLOCK) {
        status = CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
    } else {
        status = cux_completion_track(sq, comp, release, release_arg);
    }

out:
    cux_ctx_leave(&guard);
    return status;
}

/* Events and streams created so far (tests check that they stay bounded). */
unsigned cux_dev_resources_num_events(const cux_dev_resources_t *table);
unsigned cux_dev_resources_num_streams(const cux_dev_resources_t *table);

#endif
