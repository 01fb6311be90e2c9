/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DMA-BUF descriptors for GPU memory: see cux_copy_dmabuf.h.
 */
#include "cux_copy_dmabuf.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <pthread.h>
#include <unistd.h>

static pthread_once_t cux_dmabuf_once = PTHREAD_ONCE_INIT;
static int            cux_dmabuf_devices_support;
static char           cux_dmabuf_why_not[128];

static void cux_copy_dmabuf_probe(void)
{
    int i, value;

    if (cux_drv.cuMemGetHandleForAddressRange == NULL) {
        ucs_snprintf_zero(cux_dmabuf_why_not, sizeof(cux_dmabuf_why_not),
                          "the driver has no cuMemGetHandleForAddressRange");
        return;
    }
    for (i = 0; i < cux_device_count(); ++i) {
        value = 0;
        if ((cux_drv.cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                                          cux_device_get(i)->cu_dev) != CUDA_SUCCESS) || !value) {
            ucs_snprintf_zero(cux_dmabuf_why_not, sizeof(cux_dmabuf_why_not),
                              "device %d does not support dma-buf (kernel or driver too old)", i);
            return;
        }
    }
    if (cux_device_count() == 0) {
        ucs_snprintf_zero(cux_dmabuf_why_not, sizeof(cux_dmabuf_why_not), "no GPU");
        return;
    }
    cux_dmabuf_devices_support = 1;
}

int cux_copy_dmabuf_supported(ucs_on_off_auto_value_t setting)
{
    static int warned = 0; /* once per process, not per memory domain */

    if (setting == UCS_CONFIG_OFF) {
        return 0;
    }
    pthread_once(&cux_dmabuf_once, cux_copy_dmabuf_probe);
    if (!cux_dmabuf_devices_support && (setting == UCS_CONFIG_ON) && !warned) {
        warned = 1;
        ucs_warn("UCX_CUDA_COPY_DMABUF=on, but no DMA-BUF descriptors can be given: %s", cux_dmabuf_why_not);
    }
    return cux_dmabuf_devices_support;
}

void cux_copy_dmabuf_export(const void *address, size_t length, const cux_ptr_info_t *info, int *fd_p,
                            size_t *offset_p)
{
    size_t page = ucs_get_page_size();
    uintptr_t start, end;
    cux_ctx_guard_t guard;
    CUcontext ctx;
    int fd = -1;
    CUresult res;

    *fd_p     = -1;
    *offset_p = 0;
    if ((info->mem_type != UCS_MEMORY_TYPE_CUDA) || (info->base == NULL)) {
        return; /* managed memory has no descriptor */
    }
    /* The buffer's pages: within the allocation's pages, since the buffer lies inside the allocation. */
    start = (uintptr_t)address & ~(uintptr_t)(page - 1);
    end   = ((uintptr_t)address + ucs_max(length, (size_t)1) + page - 1) & ~(uintptr_t)(page - 1);
    if ((cux_device_ctx(info->device, &ctx) != UCS_OK) || (cux_ctx_enter(ctx, &guard) != UCS_OK)) {
        return;
    }
    res = cux_drv.cuMemGetHandleForAddressRange(&fd, (CUdeviceptr)start, end - start,
                                                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    cux_ctx_leave(&guard);
    if (res != CUDA_SUCCESS) {
        ucs_debug("cuMemGetHandleForAddressRange(0x%lx, %zu) failed (%d): no dma-buf descriptor for %p", start,
                  (size_t)(end - start), (int)res, address);
        return;
    }
    *fd_p     = fd;
    *offset_p = (uintptr_t)address - start;
}
