/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What UCX's other CUDA modules call in the library that UCX knows as libuct_cuda.so.0. Installed in place of
 * UCX's own module, this library is the one they link against:
 *   - the uct_cuda framework's submodule gdr_copy (libuct_cuda_gdrcopy.so.0) calls
 *     uct_cuda_base_query_md_resources and uct_cuda_base_query_devices (every release) and
 *     uct_cuda_base_check_device_name (1.16+);
 *   - UCX 1.22's GPU-initiated InfiniBand module calls uct_cuda_get_sys_dev, the primary-context push and pop,
 *     and the cuda_copy dma-buf helpers.
 * UCX opens modules with RTLD_LAZY, so a missing name would end the process at its first call. Each function
 * does what UCX's own does (read from its sources, 1.13.1 to 1.22.0) with this library's driver loader and
 * device table. These names, ucs_module_global_init and the launcher's marker are the library's whole export
 * list (src/libuct_cuda.map).
 */
#include "driver/cux_device.h"
#include "base/cux_md.h"
#include "compat/cux_ucx_compat.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <string.h>

#define CUX_EXPORT __attribute__((visibility("default")))

/* UCX's name of the single CUDA device of a transport ("cuda"), and its invalid dma-buf descriptor */
#define CUX_UCT_CUDA_DEV_NAME "cuda"
#define CUX_UCT_DMABUF_FD_INVALID (-1)

/* The launcher (ucx-cuda-check) tells this module from UCX's own by this name. */
CUX_EXPORT const char cux_module_version[] = PACKAGE_VERSION;

/* One memory-domain resource, named after the calling component, when the driver and a GPU are there. */
CUX_EXPORT ucs_status_t uct_cuda_base_query_md_resources(uct_component_t *component,
                                                         uct_md_resource_desc_t **resources_p,
                                                         unsigned *num_resources_p)
{
    return cux_query_md_resources(component, resources_p, num_resources_p);
}

/* One transport device, "cuda", of type ACC, at the system device of the calling thread's current GPU (unknown
 * when the thread has no context). */
CUX_EXPORT ucs_status_t uct_cuda_base_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                                    unsigned *num_devices_p)
{
    int current              = cux_device_current();
    ucs_sys_device_t sys_dev = (current >= 0) ? cux_device_get(current)->sys_dev : UCS_SYS_DEVICE_ID_UNKNOWN;

    return uct_single_device_resource(md, CUX_UCT_CUDA_DEV_NAME, UCT_DEVICE_TYPE_ACC, sys_dev, devices_p,
                                      num_devices_p);
}

/* An interface opened by device must name the "cuda" device. */
CUX_EXPORT ucs_status_t uct_cuda_base_check_device_name(const uct_iface_params_t *params)
{
    if (!(params->field_mask & UCT_IFACE_PARAM_FIELD_DEVICE)) {
        ucs_error("UCT_IFACE_PARAM_FIELD_DEVICE is not defined");
        return UCS_ERR_INVALID_PARAM;
    }
    if (strncmp(params->mode.device.dev_name, CUX_UCT_CUDA_DEV_NAME, strlen(CUX_UCT_CUDA_DEV_NAME)) != 0) {
        ucs_error("no device was found: %s", params->mode.device.dev_name);
        return UCS_ERR_NO_DEVICE;
    }
    return UCS_OK;
}

/* The UCX system device of a CUDA device (unknown for a device this process does not see). */
CUX_EXPORT ucs_sys_device_t uct_cuda_get_sys_dev(CUdevice cuda_device)
{
    int i;

    for (i = 0; i < cux_device_count(); ++i) {
        if (cux_device_get(i)->cu_dev == cuda_device) {
            return cux_device_get(i)->sys_dev;
        }
    }
    return UCS_SYS_DEVICE_ID_UNKNOWN;
}

/* Retain the device's primary context and push it on the calling thread. Unless retain_inactive, a primary
 * context nobody has made active is UCS_ERR_NO_DEVICE (debug log), as in UCX. */
CUX_EXPORT ucs_status_t uct_cuda_ctx_primary_push(CUdevice cuda_device, int retain_inactive,
                                                  ucs_log_level_t log_level)
{
    unsigned flags;
    int active;
    CUcontext ctx;
    ucs_status_t status;

    if ((status = cux_devices_init()) != UCS_OK) {
        return status;
    }
    if (!retain_inactive) {
        status = CUX_DRV_CALL_ERR(cuDevicePrimaryCtxGetState, cuda_device, &flags, &active);
        if (status != UCS_OK) {
            return status;
        }
        if (!active) {
            ucs_debug("cuda primary context is inactive on device %d", cuda_device);
            return UCS_ERR_NO_DEVICE;
        }
    }
    status = CUX_DRV_CALL_ERR(cuDevicePrimaryCtxRetain, &ctx, cuda_device);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL(log_level, cuCtxPushCurrent, ctx);
    if (status != UCS_OK) {
        (void)CUX_DRV_CALL(log_level, cuDevicePrimaryCtxRelease, cuda_device);
    }
    return status;
}

/* Push the primary context of the first device, in the driver's order, whose primary context is active. */
CUX_EXPORT ucs_status_t uct_cuda_ctx_primary_push_first_active(CUdevice *cuda_device_p)
{
    ucs_status_t status;
    CUdevice cuda_device;
    int i, count;

    if (((status = cux_devices_init()) != UCS_OK) ||
        ((status = CUX_DRV_CALL_ERR(cuDeviceGetCount, &count)) != UCS_OK)) {
        return status;
    }
    for (i = 0; i < count; ++i) {
        status = CUX_DRV_CALL_ERR(cuDeviceGet, &cuda_device, i);
        if (status != UCS_OK) {
            return status;
        }
        status = uct_cuda_ctx_primary_push(cuda_device, 0, UCS_LOG_LEVEL_ERROR);
        if (status == UCS_OK) {
            *cuda_device_p = cuda_device;
            return UCS_OK;
        } else if (status != UCS_ERR_NO_DEVICE) {
            return status;
        }
    }
    return UCS_ERR_NO_DEVICE;
}

/* Pop the calling thread's current context and release the device's primary context (the push's retain). */
CUX_EXPORT void uct_cuda_ctx_primary_pop_and_release(CUdevice cuda_device)
{
    CUcontext popped;

    (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuCtxPopCurrent, &popped);
    (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuDevicePrimaryCtxRelease, cuda_device);
}

/* Does device 0 support dma-buf? (UCX assumes every device answers alike.) */
CUX_EXPORT int uct_cuda_copy_md_is_dmabuf_supported(void)
{
    int supported = 0;
    CUdevice dev;

    if ((cux_devices_init() != UCS_OK) || (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGet, &dev, 0) != UCS_OK) ||
        (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuDeviceGetAttribute, &supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                      dev) != UCS_OK)) {
        return 0;
    }
    ucs_debug("dmabuf is%s supported on cuda device %d", supported ? "" : " not", dev);
    return supported;
}

/* UCX's uct_cuda_copy_md_dmabuf_t: a dma-buf descriptor of the pages around a range, and the range's offset in it. */
typedef struct {
    int    fd;
    size_t offset;
} cux_uct_cuda_dmabuf_t;

/* A dma-buf descriptor of the pages covering [address, address + length) (CUX_UCT_DMABUF_FD_INVALID when the
 * driver gives none), for a NIC to register. sys_dev names the NIC's device; the descriptor serves any. */
CUX_EXPORT cux_uct_cuda_dmabuf_t uct_cuda_copy_md_get_dmabuf(const void *address, size_t length,
                                                            ucs_sys_device_t sys_dev)
{
    uintptr_t page  = ucs_get_page_size(); /* a power of two */
    uintptr_t start = (uintptr_t)address & ~(page - 1);
    uintptr_t end   = ((uintptr_t)address + length + page - 1) & ~(page - 1);
    cux_uct_cuda_dmabuf_t dmabuf = {CUX_UCT_DMABUF_FD_INVALID, (uintptr_t)address - start};

    if ((cux_devices_init() != UCS_OK) || (cux_drv.cuMemGetHandleForAddressRange == NULL) ||
        (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemGetHandleForAddressRange, &dmabuf.fd, (CUdeviceptr)start,
                      end - start, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != UCS_OK)) {
        dmabuf.fd = CUX_UCT_DMABUF_FD_INVALID;
    }
    return dmabuf;
}
