/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-context pool of CUDA events (created without timing, which makes record and query cheaper). Events
 * are created on demand and recycled, so their number is bounded by the peak of operations in flight.
 */
#ifndef CUX_EVENT_POOL_H_
#define CUX_EVENT_POOL_H_

#include "driver/cux_driver.h"

typedef struct cux_event_pool {
    CUcontext ctx;
    CUevent   *free;      /* stack of idle events */
    unsigned  num_free;
    unsigned  capacity;
    unsigned  created;    /* all events of this pool, idle or in flight */
} cux_event_pool_t;

void cux_event_pool_init(cux_event_pool_t *pool, CUcontext ctx);

/* Destroys the idle events; every event must have been returned. */
void cux_event_pool_cleanup(cux_event_pool_t *pool);

/* Caller has pool->ctx current. */
ucs_status_t cux_event_pool_get(cux_event_pool_t *pool, CUevent *event_p);

void cux_event_pool_put(cux_event_pool_t *pool, CUevent event);

#endif
