/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-device interface resources: see cux_dev_resources.h.
 */
#include "cux_dev_resources.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <string.h>

void cux_dev_resources_init(cux_dev_resources_t *table, cux_completion_t *completion, unsigned num_queues)
{
    table->completion      = completion;
    table->num_queues = num_queues;
    memset(table->devs, 0, sizeof(table->devs));
}

ucs_status_t cux_dev_resources_create(cux_dev_resources_t *table, int device)
{
    cux_dev_res_t *res;
    ucs_status_t status;
    CUcontext ctx;
    unsigned i;

    status = cux_device_ctx(device, &ctx);
    if (status != UCS_OK) {
        return status;
    }

    res = ucs_calloc(1, sizeof(*res) + table->num_queues * sizeof(res->queues[0]), "cux_dev_res");
    if (res == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    res->ctx = ctx;
    cux_event_pool_init(&res->events, ctx);
    for (i = 0; i < table->num_queues; ++i) {
        cux_stream_queue_init(&res->queues[i], table->completion, ctx, &res->events);
    }
    table->devs[device] = res;
    ucs_debug("resources for cuda device %d created (%u stream queues)", device, table->num_queues);
    return UCS_OK;
}

void cux_dev_resources_cleanup(cux_dev_resources_t *table)
{
    cux_dev_res_t *res;
    unsigned dev, i;

    for (dev = 0; dev < CUX_MAX_DEVICES; ++dev) {
        if ((res = table->devs[dev]) == NULL) {
            continue;
        }
        for (i = 0; i < table->num_queues; ++i) {
            cux_stream_queue_cleanup(&res->queues[i]);
        }
        cux_event_pool_cleanup(&res->events);
        ucs_free(res);
        table->devs[dev] = NULL;
    }
}

unsigned cux_dev_resources_num_events(const cux_dev_resources_t *table)
{
    unsigned count = 0, dev;

    for (dev = 0; dev < CUX_MAX_DEVICES; ++dev) {
        count += (table->devs[dev] != NULL) ? table->devs[dev]->events.created : 0;
    }
    return count;
}

unsigned cux_dev_resources_num_streams(const cux_dev_resources_t *table)
{
    unsigned count = 0, dev, i;

    for (dev = 0; dev < CUX_MAX_DEVICES; ++dev) {
        for (i = 0; (table->devs[dev] != NULL) && (i < table->num_queues); ++i) {
            count += (table->devs[dev]->queues[i].stream != NULL);
        }
    }
    return count;
}
