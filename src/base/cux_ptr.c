/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pointer attribute queries: see cux_ptr.h.
 */
#include "cux_ptr.h"
#include "driver/cux_device.h"

#include <string.h>

/* Whether the driver answers the mapping and pool attributes (the last CUX_PTR_LATE_ATTRS); cleared at the first
 * refusal. */
#define CUX_PTR_LATE_ATTRS 3
static int cux_ptr_asks_mapping = 1;

ucs_status_t cux_ptr_query(const void *address, cux_ptr_info_t *info)
{
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,     CU_POINTER_ATTRIBUTE_BUFFER_ID,
        CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
        CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    };
    unsigned int cu_type   = 0;
    unsigned int managed   = 0;
    int ordinal            = -1;
    CUdeviceptr base       = 0;
    size_t size            = 0;
    unsigned long long bid = 0;
    CUdeviceptr map_base   = 0;
    size_t map_size        = 0;
    uint64_t pool          = 0;
    void *data[]           = {&cu_type, &managed, &ordinal, &base, &size, &bid, &map_base, &map_size, &pool};
    unsigned num_attrs     = sizeof(attrs) / sizeof(attrs[0]);
    cux_device_t *dev;
    ucs_status_t status;

    /* Unlike cuPointerGetAttribute(), this returns success with zeroed values for unknown host memory. */
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes,
                          num_attrs - (cux_ptr_asks_mapping ? 0 : CUX_PTR_LATE_ATTRS), attrs, data,
                          (CUdeviceptr)(uintptr_t)address);
    if ((status != UCS_OK) && cux_ptr_asks_mapping) {
        status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, num_attrs - CUX_PTR_LATE_ATTRS, attrs, data,
                              (CUdeviceptr)(uintptr_t)address);
        cux_ptr_asks_mapping = (status != UCS_OK); /* answered without them: a driver that lacks them */
    }
    if (status != UCS_OK) {
        return status;
    }
    /* A range that holds several cuMemCreate allocations (PyTorch's expandable segments) is the allocation
     * range the driver gives for each; the allocation is the one mapping at address, which a handle holds.
     * For other memory the mapping is the range, or more (the driver's own chunk), or, in a memory pool, less:
     * the pool's 32 MB chunk at address (bench/cux_pool_probe), while the pool exports and imports the whole
     * range as one allocation: the range stays. */
    if ((map_size != 0) && (pool == 0) && (map_base >= base) && (map_base + map_size <= base + size) &&
        (map_size < size)) {
        base = map_base;
        size = map_size;
    }

    memset(info, 0, sizeof(*info));
    info->sys_dev = UCS_SYS_DEVICE_ID_UNKNOWN;
    if (managed) {
        info->mem_type = UCS_MEMORY_TYPE_CUDA_MANAGED;
    } else if (cu_type == CU_MEMORYTYPE_DEVICE) {
        info->mem_type = UCS_MEMORY_TYPE_CUDA;
    } else {
        info->mem_type = UCS_MEMORY_TYPE_HOST;
        info->device   = -1;
        info->pinned   = (cu_type == CU_MEMORYTYPE_HOST);
        return UCS_OK;
    }

    info->device    = ordinal;
    dev             = cux_device_get(ordinal);
    info->sys_dev   = (dev != NULL) ? dev->sys_dev : UCS_SYS_DEVICE_ID_UNKNOWN;
    info->base      = (void*)(uintptr_t)base;
    info->length    = size;
    info->buffer_id = bid;
    info->pool      = (CUmemoryPool)(uintptr_t)pool;
    return UCS_OK;
}
