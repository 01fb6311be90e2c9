/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process-wide table of CUDA devices: ordinal, UUID, UCX system device, and the primary context (retained on
 * first use). Everything that issues driver work for a buffer does it in that buffer's device context.
 */
#ifndef CUX_DEVICE_H_
#define CUX_DEVICE_H_

#include "driver/cux_driver.h"

#include <ucs/sys/topo/base/topo.h>

#define CUX_MAX_DEVICES 64

typedef struct cux_device {
    CUdevice         cu_dev;
    CUcontext        ctx;        /* primary context, NULL until first retained */
    CUuuid           uuid;
    ucs_sys_device_t sys_dev;
    char             name[64];
} cux_device_t;

/* Load the driver and enumerate devices once. Returns UCS_ERR_NO_DEVICE when there are none. */
ucs_status_t cux_devices_init(void);

/* Number of devices (0 when the driver or the devices are missing). */
int cux_device_count(void);

cux_device_t *cux_device_get(int ordinal);

/* The device's primary context, retained on first use and kept for the life of the process. */
ucs_status_t cux_device_ctx(int ordinal, CUcontext *ctx_p);

/* Ordinal of a device given its UUID, or -1. */
int cux_device_by_uuid(const CUuuid *uuid);

/* Ordinal of the device at a UCX system device, or -1 (also for UCS_SYS_DEVICE_ID_UNKNOWN). */
int cux_device_by_sys_dev(ucs_sys_device_t sys_dev);

/* Ordinal of the device of the calling thread's current context (devices are numbered as the driver does),
 * or -1 when the thread has none. */
int cux_device_current(void);

/* Copy a few host bytes to GPU memory of the calling thread's device (else device 0), synchronously, in its
 * primary context: set-up data a kernel reads, such as UCX 1.20's device-API memory elements. */
ucs_status_t cux_device_store(void *dst, const void *src, size_t length);

/*
 * Make a context current for a short stretch of work and put the caller's back afterwards, also when the
 * caller had none: an application's thread must find its CUDA state as it left it (UCX's own module never
 * changes the current context).
 */
typedef struct cux_ctx_guard {
    int pushed;
} cux_ctx_guard_t;

static inline ucs_status_t cux_ctx_enter(CUcontext ctx, cux_ctx_guard_t *guard)
{
    CUcontext cur = NULL;

    guard->pushed = 0;
    if ((cux_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS) && (cur == ctx)) {
        return UCS_OK;
    }
    if (CUX_DRV_CALL_ERR(cuCtxPushCurrent, ctx) != UCS_OK) {
        return UCS_ERR_IO_ERROR;
    }
    guard->pushed = 1;
    return UCS_OK;
}

/* Enter the primary context of a device (retained on first use). */
static inline ucs_status_t cux_device_ctx_enter(int ordinal, cux_ctx_guard_t *guard)
{
    CUcontext ctx;
    ucs_status_t status = cux_device_ctx(ordinal, &ctx);

    return (status == UCS_OK) ? cux_ctx_enter(ctx, guard) : status;
}

static inline void cux_ctx_leave(cux_ctx_guard_t *guard)
{
    CUcontext popped;

    if (guard->pushed) {
        (void)CUX_DRV_CALL_ERR(cuCtxPopCurrent, &popped);
    }
}

#endif
