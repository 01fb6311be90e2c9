/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-context CUDA event pool: see cux_event_pool.h.
 */
#include "cux_event_pool.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>

void cux_event_pool_init(cux_event_pool_t *pool, CUcontext ctx)
{
    pool->ctx      = ctx;
    pool->free     = NULL;
    pool->num_free = 0;
    pool->capacity = 0;
    pool->created  = 0;
}

void cux_event_pool_cleanup(cux_event_pool_t *pool)
{
    cux_ctx_guard_t guard;

    if (pool->num_free != pool->created) {
        ucs_warn("cuda event pool %p: %u of %u events still in use", pool, pool->created - pool->num_free,
                 pool->created);
    }
    if ((pool->num_free > 0) && (cux_ctx_enter(pool->ctx, &guard) == UCS_OK)) {
        while (pool->num_free > 0) {
            (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuEventDestroy, pool->free[--pool->num_free]);
        }
        cux_ctx_leave(&guard);
    }
    ucs_free(pool->free);
    pool->free = NULL;
}

ucs_status_t cux_event_pool_get(cux_event_pool_t *pool, CUevent *event_p)
{
    CUevent *stack;
    ucs_status_t status;
    unsigned capacity;

    if (ucs_likely(pool->num_free > 0)) {
        *event_p = pool->free[--pool->num_free];
        return UCS_OK;
    }

    /* Make room now so that returning the event later can never fail. */
    if (pool->created == pool->capacity) {
        capacity = (pool->capacity == 0) ? 64 : pool->capacity * 2;
        stack    = ucs_realloc(pool->free, capacity * sizeof(*stack), "cux_event_pool");
        if (stack == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        pool->free     = stack;
        pool->capacity = capacity;
    }

    status = CUX_DRV_CALL_ERR(cuEventCreate, event_p, CU_EVENT_DISABLE_TIMING);
    if (status == UCS_OK) {
        ++pool->created;
    }
    return status;
}

void cux_event_pool_put(cux_event_pool_t *pool, CUevent event)
{
    pool->free[pool->num_free++] = event;
}
