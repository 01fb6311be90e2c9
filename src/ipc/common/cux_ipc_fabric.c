/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc and fabric handles: see cux_ipc_fabric.h.
 */
#include "ipc/common/cux_ipc_fabric.h"
#include "cux_introspection.h"
#include "driver/cux_driver.h"
#include "base/cux_imex.h"

#include <ucs/debug/log.h>
#include <string.h>

static int cux_ipc_fabric_pool_logged;

void cux_ipc_fabric_ask_again(void)
{
    cux_imex_ask_again();
    __atomic_store_n(&cux_ipc_fabric_pool_logged, 0, __ATOMIC_RELAXED);
}

ucs_status_t cux_ipc_fabric_export(uintptr_t base, CUmemFabricHandle *fabric)
{
    if (!cux_imex_channel_present()) {
        return UCS_ERR_UNSUPPORTED;
    }
    return cux_driver_export_allocation(base, CU_MEM_HANDLE_TYPE_FABRIC, fabric);
}

ucs_status_t cux_ipc_fabric_import(const CUmemFabricHandle *fabric, CUmemGenericAllocationHandle *handle)
{
    CUmemFabricHandle bytes = *fabric; /* the driver's argument is not const */

    if (!cux_imex_channel_present()) {
        ucs_debug("cuda_ipc: a fabric handle, and no IMEX channel here: refused");
        return UCS_ERR_UNREACHABLE;
    }
    /* a refusal is the caller's to report: it is the only check of a key from another host */
    return CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemImportFromShareableHandle, handle, &bytes, CU_MEM_HANDLE_TYPE_FABRIC);
}

ucs_status_t cux_ipc_fabric_export_pool(CUmemoryPool pool, CUmemFabricHandle *fabric)
{
    if (!cux_imex_channel_present() || (cux_drv.cuMemPoolExportToShareableHandle == NULL)) {
        return UCS_ERR_UNSUPPORTED;
    }
    return CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolExportToShareableHandle, fabric, pool,
                        CU_MEM_HANDLE_TYPE_FABRIC, 0);
}

ucs_status_t cux_ipc_fabric_import_pool(const CUmemFabricHandle *fabric, CUmemoryPool *pool)
{
    CUmemFabricHandle bytes = *fabric; /* the driver's argument is not const */

    if (!cux_imex_channel_present()) {
        ucs_debug("cuda_ipc: a pool's fabric handle, and no IMEX channel here: refused");
        return UCS_ERR_UNREACHABLE;
    }
    return CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolImportFromShareableHandle, pool, &bytes,
                        CU_MEM_HANDLE_TYPE_FABRIC, 0);
}

void cux_ipc_fabric_pool_said(void)
{
    if (!__atomic_exchange_n(&cux_ipc_fabric_pool_logged, 1, __ATOMIC_RELAXED)) {
        ucs_diag("cuda_ipc: memory of a pool made with the fabric handle type alone goes between processes over "
                 "another transport where this process has no IMEX channel; create the pool with "
                 "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR as well to share it over cuda_ipc within a host");
    }
}
