/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy interface: copies between host and GPU memory, or between GPUs, inside one process.
 *
 * Per device (cux_dev_resources, created on first use) there is one stream queue per copy direction, so
 * host-to-device and device-to-host copies overlap on the two copy engines, plus a stream for synchronous
 * short operations.
 */
#ifndef CUX_COPY_IFACE_H_
#define CUX_COPY_IFACE_H_

#include "cux_copy_md.h"
#include "base/cux_iface.h"

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
    cux_iface_config_t super;
    int                short_wait;   /* SHORT_WAIT, an index into its names: 0 spin, 1 block */
    int                host_staging; /* HOST_STAGING */
} cux_copy_iface_config_t;

typedef struct cux_copy_iface {
    cux_iface_t super;
    uint64_t    id;           /* identifies this interface: an endpoint connects an interface to itself */
    int         short_wait;   /* how short operations wait for their copy: a CUX_DEV_COPY_* mode */
    int         host_staging; /* host<->GPU estimates may exceed UCX's module's (UCP then stages host messages) */
} cux_copy_iface_t;

#endif
