/*
 * cuda_copy interface: copies between host and GPU memory, or between GPUs, inside one process.
 *
 * Resources are per device and created on first use: the device's primary context, an event pool and one
 * stream queue per copy direction (so host-to-device and device-to-host copies overlap on the two copy
 * engines), plus a stream for synchronous short operations.
 */
#ifndef CUX_COPY_IFACE_H_
#define CUX_COPY_IFACE_H_

#include "cux_copy_md.h"
#include "base/cux_async.h"
#include "base/cux_device.h"

/* Queue index of a zero-copy operation: (source is GPU memory) * 2 + (destination is GPU memory). */
enum {
    CUX_COPY_QUEUE_H2H,
    CUX_COPY_QUEUE_H2D,
    CUX_COPY_QUEUE_D2H,
    CUX_COPY_QUEUE_D2D,
    CUX_COPY_QUEUE_SHORT,
    CUX_COPY_QUEUE_LAST
};

typedef struct cux_copy_iface_config {
    uct_iface_config_t super;
    unsigned           max_poll;
    unsigned           max_inflight;
    double             bandwidth;
    double             latency;
    double             overhead;
} cux_copy_iface_config_t;

typedef struct cux_copy_dev_res {
    CUcontext          ctx;
    cux_event_pool_t   events;
    cux_stream_queue_t queues[CUX_COPY_QUEUE_LAST];
} cux_copy_dev_res_t;

typedef struct cux_copy_iface {
    uct_base_iface_t   super;
    uint64_t           id;        /* identifies this process: endpoints only reach the same process */
    int                num_devices;
    cux_async_t        async;
    cux_copy_dev_res_t *devs[CUX_MAX_DEVICES];
    struct {
        double         bandwidth;
        double         latency;
        double         overhead;
    } config;
} cux_copy_iface_t;

ucs_status_t cux_copy_iface_dev_res_create(cux_copy_iface_t *iface, int device);

/* Resources of a device, created on first use. */
static inline ucs_status_t cux_copy_iface_dev_res(cux_copy_iface_t *iface, int device,
                                                  cux_copy_dev_res_t **res_p)
{
    ucs_status_t status;

    if (ucs_unlikely((unsigned)device >= CUX_MAX_DEVICES)) {
        ucs_error("cuda_copy: invalid device ordinal %d", device);
        return UCS_ERR_NO_DEVICE;
    }
    if (ucs_unlikely(iface->devs[device] == NULL)) {
        status = cux_copy_iface_dev_res_create(iface, device);
        if (status != UCS_OK) {
            return status;
        }
    }
    *res_p = iface->devs[device];
    return UCS_OK;
}

/* Number of CUDA events the interface has created (for tests: bounded by the operations in flight). */
unsigned cux_copy_iface_num_events(uct_iface_h tl_iface);

/* Number of CUDA streams the interface has created. */
unsigned cux_copy_iface_num_streams(uct_iface_h tl_iface);

#endif
