/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process-wide CUDA device table: see cux_device.h.
 */
#include "cux_device.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static cux_device_t cux_devices[CUX_MAX_DEVICES];
static int cux_num_devices;
static ucs_status_t cux_devices_status = UCS_ERR_NO_DEVICE;
static pthread_once_t cux_devices_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t cux_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

/* UCX's topology needs the PCI address of the device to place it (distances, sys_dev in mem_query). */
static ucs_sys_device_t cux_device_sys_dev(CUdevice cu_dev)
{
    ucs_sys_device_t sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    unsigned domain, bus, slot, function;
    ucs_sys_bus_id_t bus_id;
    char busid_str[32];

    if ((cux_drv.cuDeviceGetPCIBusId(busid_str, sizeof(busid_str), cu_dev) != CUDA_SUCCESS) ||
        (sscanf(busid_str, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4)) {
        return UCS_SYS_DEVICE_ID_UNKNOWN;
    }

    bus_id.domain   = domain;
    bus_id.bus      = bus;
    bus_id.slot     = slot;
    bus_id.function = function;
    if (ucs_topo_find_device_by_bus_id(&bus_id, &sys_dev) != UCS_OK) {
        return UCS_SYS_DEVICE_ID_UNKNOWN;
    }
    return sys_dev;
}

static void cux_devices_do_init(void)
{
    cux_device_t *dev;
    int count, i;

    cux_devices_status = cux_driver_load();
    if (cux_devices_status != UCS_OK) {
        return;
    }

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetCount, &count) != UCS_OK) {
        count = 0;
    }
    if (count > CUX_MAX_DEVICES) {
        ucs_warn("%d cuda devices found, using the first %d", count, CUX_MAX_DEVICES);
        count = CUX_MAX_DEVICES;
    }

    for (i = 0; i < count; ++i) {
        dev = &cux_devices[cux_num_devices];
        if ((CUX_DRV_CALL_ERR(cuDeviceGet, &dev->cu_dev, i) != UCS_OK) ||
            (CUX_DRV_CALL_ERR(cuDeviceGetUuid, &dev->uuid, dev->cu_dev) != UCS_OK)) {
            break;
        }
        if (cux_drv.cuDeviceGetName(dev->name, sizeof(dev->name), dev->cu_dev) != CUDA_SUCCESS) {
            snprintf(dev->name, sizeof(dev->name), "cuda%d", i);
        }
        dev->sys_dev = cux_device_sys_dev(dev->cu_dev);
        ucs_debug("cuda device %d: %s, sys_dev %d", i, dev->name, (int)dev->sys_dev);
        ++cux_num_devices;
    }

    if (cux_num_devices == 0) {
        ucs_debug("cuda driver loaded but no devices are visible");
        cux_devices_status = UCS_ERR_NO_DEVICE;
    }
}

ucs_status_t cux_devices_init(void)
{
    pthread_once(&cux_devices_once, cux_devices_do_init);
    return cux_devices_status;
}

int cux_device_count(void)
{
    return (cux_devices_init() == UCS_OK) ? cux_num_devices : 0;
}

cux_device_t *cux_device_get(int ordinal)
{
    return ((ordinal >= 0) && (ordinal < cux_device_count())) ? &cux_devices[ordinal] : NULL;
}

ucs_status_t cux_device_ctx(int ordinal, CUcontext *ctx_p)
{
    cux_device_t *dev = cux_device_get(ordinal);
    ucs_status_t status = UCS_OK;

    if (dev == NULL) {
        ucs_error("invalid cuda device ordinal %d (%d devices)", ordinal, cux_device_count());
        return UCS_ERR_NO_DEVICE;
    }

    pthread_mutex_lock(&cux_ctx_lock);
    if (dev->ctx == NULL) {
        /* Never released: the primary context must outlive every buffer and stream that refers to it. */
        status = CUX_DRV_CALL_ERR(cuDevicePrimaryCtxRetain, &dev->ctx, dev->cu_dev);
    }
    pthread_mutex_unlock(&cux_ctx_lock);

    *ctx_p = dev->ctx;
    return status;
}

int cux_device_current(void)
{
    CUcontext ctx = NULL;
    CUdevice cu_dev;

    /* cuCtxGetDevice without a current context is an error (and one in compute-sanitizer's report): ask first */
    if ((cux_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) || (ctx == NULL)) {
        return -1;
    }
    return (cux_drv.cuCtxGetDevice(&cu_dev) == CUDA_SUCCESS) ? (int)cu_dev : -1;
}

ucs_status_t cux_device_store(void *dst, const void *src, size_t length)
{
    cux_ctx_guard_t guard;
    ucs_status_t status;

    status = cux_device_ctx_enter(ucs_max(cux_device_current(), 0), &guard);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL_ERR(cuMemcpyAsync, (CUdeviceptr)dst, (CUdeviceptr)src, length, NULL);
    if (status == UCS_OK) {
        status = CUX_DRV_CALL_ERR(cuStreamSynchronize, NULL);
    }
    cux_ctx_leave(&guard);
    return status;
}

int cux_device_by_uuid(const CUuuid *uuid)
{
    int i;

    for (i = 0; i < cux_device_count(); ++i) {
        if (!memcmp(&cux_devices[i].uuid, uuid, sizeof(*uuid))) {
            return i;
        }
    }
    return -1;
}

int cux_device_by_sys_dev(ucs_sys_device_t sys_dev)
{
    int i;

    for (i = 0; (sys_dev != UCS_SYS_DEVICE_ID_UNKNOWN) && (i < cux_device_count()); ++i) {
        if (cux_devices[i].sys_dev == sys_dev) {
            return i;
        }
    }
    return -1;
}
