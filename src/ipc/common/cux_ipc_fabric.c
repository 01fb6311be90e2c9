/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc and fabric handles: see cux_ipc_fabric.h.
 */
#include "ipc/common/cux_ipc_fabric.h"
#include "cux_introspection.h"
#include "driver/cux_driver.h"

#include <ucs/debug/log.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cux_ipc_fabric_channel = -1; /* -1: not asked yet */
static int cux_ipc_fabric_pool_logged;

static int cux_ipc_fabric_find_channel(void)
{
    const char *dir_path = getenv(CUX_IPC_FABRIC_CHANNELS_DIR_ENV);
    struct dirent *entry;
    int found = 0;
    DIR *dir;

    if ((dir_path == NULL) || (*dir_path == '\0')) {
        dir_path = CUX_IPC_FABRIC_CHANNELS_DIR;
    }
    dir = opendir(dir_path);
    if (dir == NULL) {
        ucs_debug("cuda_ipc: no IMEX channels (%s: %m): fabric handles are not used", dir_path);
        return 0;
    }
    while (!found && ((entry = readdir(dir)) != NULL)) {
        found = !strncmp(entry->d_name, "channel", 7) &&
                (faccessat(dirfd(dir), entry->d_name, R_OK | W_OK, 0) == 0);
        if (found) {
            ucs_debug("cuda_ipc: IMEX channel %s/%s: fabric handles are used for memory that has no other way",
                      dir_path, entry->d_name);
        }
    }
    closedir(dir);
    if (!found) {
        ucs_debug("cuda_ipc: no IMEX channel in %s that this process may use: fabric handles are not used",
                  dir_path);
    }
    return found;
}

int cux_ipc_fabric_channel_present(void)
{
    int channel = __atomic_load_n(&cux_ipc_fabric_channel, __ATOMIC_RELAXED);

    if (channel < 0) { /* two threads may both look: they find the same */
        channel = cux_ipc_fabric_find_channel();
        __atomic_store_n(&cux_ipc_fabric_channel, channel, __ATOMIC_RELAXED);
    }
    return channel;
}

void cux_ipc_fabric_ask_again(void)
{
    __atomic_store_n(&cux_ipc_fabric_channel, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&cux_ipc_fabric_pool_logged, 0, __ATOMIC_RELAXED);
}

ucs_status_t cux_ipc_fabric_export(uintptr_t base, CUmemFabricHandle *fabric)
{
    if (!cux_ipc_fabric_channel_present()) {
        return UCS_ERR_UNSUPPORTED;
    }
    return cux_driver_export_allocation(base, CU_MEM_HANDLE_TYPE_FABRIC, fabric);
}

ucs_status_t cux_ipc_fabric_import(const CUmemFabricHandle *fabric, CUmemGenericAllocationHandle *handle)
{
    CUmemFabricHandle bytes = *fabric; /* the driver's argument is not const */

    if (!cux_ipc_fabric_channel_present()) {
        ucs_debug("cuda_ipc: a fabric handle, and no IMEX channel here: refused");
        return UCS_ERR_UNREACHABLE;
    }
    return CUX_DRV_CALL_ERR(cuMemImportFromShareableHandle, handle, &bytes, CU_MEM_HANDLE_TYPE_FABRIC);
}

void cux_ipc_fabric_pool_said(void)
{
    if (!__atomic_exchange_n(&cux_ipc_fabric_pool_logged, 1, __ATOMIC_RELAXED)) {
        ucs_diag("cuda_ipc: memory of a pool made with the fabric handle type alone goes between processes over "
                 "another transport (pools are not exported as fabric); create the pool with "
                 "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR as well to share it over cuda_ipc");
    }
}
