/*
 * cuda_copy interface: copies between host and GPU memory, or between GPUs, inside one process.
 *
 * Resources are per device and created on first use (cux_dev_table): the device's primary context, an event
 * pool and one stream queue per copy direction (so host-to-device and device-to-host copies overlap on the two copy
 * engines), plus a stream for synchronous short operations.
 */
#ifndef CUX_COPY_IFACE_H_
#define CUX_COPY_IFACE_H_

#include "cux_copy_md.h"
#include "base/cux_dev_table.h"

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

typedef struct cux_copy_iface {
    uct_base_iface_t   super;
    uint64_t           id;        /* identifies this process: endpoints only reach the same process */
    int                num_devices;
    cux_async_t        async;
    cux_dev_table_t    devs;      /* queues: CUX_COPY_QUEUE_* */
    struct {
        double         bandwidth;
        double         latency;
        double         overhead;
    } config;
} cux_copy_iface_t;

/* Number of CUDA events the interface has created (for tests: bounded by the operations in flight). */
unsigned cux_copy_iface_num_events(uct_iface_h tl_iface);

/* Number of CUDA streams the interface has created. */
unsigned cux_copy_iface_num_streams(uct_iface_h tl_iface);

#endif
