/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy allocations of fabric memory: see cux_copy_fabric_alloc.h.
 */
#include "copy/cux_copy_fabric_alloc.h"
#include "base/cux_imex.h"
#include "driver/cux_device.h"
#include "driver/cux_driver.h"

#include <ucs/config/types.h>
#include <ucs/debug/log.h>

int cux_copy_fabric_wanted(int setting, ucs_status_t *status_p)
{
    *status_p = UCS_OK;
    if (setting == UCS_NO) {
        return 0;
    }
    if (cux_imex_channel_present() && (cux_drv.cuMemCreate != NULL) &&
        ((setting == UCS_YES) || !cux_imex_allocations_refused())) {
        return 1;
    }
    if (setting == UCS_YES) {
        ucs_error("cuda_copy: UCX_CUDA_COPY_ENABLE_FABRIC=y, but this process has no IMEX channel (%s/channelN) or "
                  "its driver no cuMemCreate: no fabric memory can be made", CUX_IMEX_CHANNELS_DIR);
        *status_p = UCS_ERR_UNSUPPORTED;
    }
    return 0;
}

ucs_status_t cux_copy_fabric_alloc(int device, size_t *length_p, CUdeviceptr *dptr_p)
{
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    size_t granularity, length;
    ucs_status_t status;
    CUdeviceptr dptr;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = cux_device_get(device)->cu_dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    status = CUX_DRV_CALL_ERR(cuMemGetAllocationGranularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (status != UCS_OK) {
        return status;
    }
    granularity = (granularity != 0) ? granularity : 1;
    length      = (*length_p + granularity - 1) / granularity * granularity;
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemCreate, &handle, length, &prop, 0);
    if (status != UCS_OK) {
        /* a channel, and yet no fabric memory (the IMEX service, or the channel's permissions): said once */
        if (cux_imex_allocation_refused()) {
            ucs_diag("cuda_copy: the driver makes no fabric memory here (%s) though an IMEX channel is present: "
                     "GPU memory is allocated without the fabric type", ucs_status_string(status));
        }
        return status;
    }
    status = CUX_DRV_CALL_ERR(cuMemAddressReserve, &dptr, length, 0, 0, 0);
    if (status == UCS_OK) {
        status = CUX_DRV_CALL_ERR(cuMemMap, dptr, length, 0, handle, 0);
        if (status != UCS_OK) {
            (void)CUX_DRV_CALL_ERR(cuMemAddressFree, dptr, length);
        }
    }
    (void)CUX_DRV_CALL_ERR(cuMemRelease, handle); /* the mapping holds the allocation */
    if (status != UCS_OK) {
        return status;
    }
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = CUX_DRV_CALL_ERR(cuMemSetAccess, dptr, length, &access, 1);
    if (status != UCS_OK) {
        (void)cux_copy_fabric_free(dptr, length);
        return status;
    }
    *length_p = length;
    *dptr_p   = dptr;
    return UCS_OK;
}

ucs_status_t cux_copy_fabric_free(CUdeviceptr dptr, size_t length)
{
    ucs_status_t status = CUX_DRV_CALL_ERR(cuMemUnmap, dptr, length);

    if (status == UCS_OK) {
        status = CUX_DRV_CALL_ERR(cuMemAddressFree, dptr, length);
    }
    return status;
}
