/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc: what the driver writes into and checks of a legacy IPC handle (cux_ipc_handle.h).
 */
#include "ipc/import/cux_ipc_handle.h"
#include "driver/cux_driver.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define CUX_IPC_HANDLE_PID_OFFSET 8

static int cux_ipc_handle_cleared_opens = -1; /* does the driver open a cleared handle? -1: not asked yet */

int32_t cux_ipc_handle_pid(const CUipcMemHandle *handle)
{
    int32_t pid;

    memcpy(&pid, handle->reserved + CUX_IPC_HANDLE_PID_OFFSET, sizeof(pid));
    return pid;
}

int cux_ipc_handle_layout_known(void)
{
    static int known = -1; /* -1: not checked yet */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    CUipcMemHandle handle;
    CUdeviceptr dptr;
    int result;

    pthread_mutex_lock(&lock);
    if (known < 0) {
        /* an allocation that fails now (out of memory) decides nothing: asked again next time */
        if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemAlloc, &dptr, 4096) == UCS_OK) {
            known = (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuIpcGetMemHandle, &handle, dptr) == UCS_OK) &&
                    (cux_ipc_handle_pid(&handle) == getpid());
            (void)CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemFree, dptr);
            ucs_debug("cuda_ipc: the driver's legacy IPC handles %s the exporting pid at bytes 8-11",
                      known ? "carry" : "do not carry");
        }
    }
    result = (known > 0);
    pthread_mutex_unlock(&lock);
    return result;
}

int cux_ipc_handle_for_open(const CUipcMemHandle *key_handle, CUipcMemHandle *handle)
{
    *handle = *key_handle;
    if ((cux_ipc_handle_pid(handle) != getpid()) || !cux_ipc_handle_layout_known()) {
        return 0;
    }
    /* 0 is no process's pid: the driver takes the handle for another process's and finds the exporter as ever */
    memset(handle->reserved + CUX_IPC_HANDLE_PID_OFFSET, 0, sizeof(int32_t));
    return 1;
}

/* Opens a peer's handle with its pid bytes cleared on device and closes it at once; the driver's answer. */
static CUresult cux_ipc_handle_try_cleared(const CUipcMemHandle *key_handle, int device)
{
    CUipcMemHandle handle;
    cux_ctx_guard_t guard;
    CUdeviceptr dptr;
    CUresult res;

    if (cux_device_ctx_enter(device, &guard) != UCS_OK) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (!cux_ipc_handle_for_open(key_handle, &handle)) {
        res = CUDA_ERROR_INVALID_CONTEXT; /* the driver writes no pid where we read it: nothing to clear */
    } else if ((res = cux_drv.cuIpcOpenMemHandle(&dptr, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) == CUDA_SUCCESS) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuIpcCloseMemHandle, dptr);
    }
    cux_ctx_leave(&guard);
    ucs_debug("cuda_ipc: a peer's legacy handle with this process's pid number, opened with its pid bytes cleared: "
              "CUresult %d", (int)res);
    return res;
}

/*
 * The verdict is the driver's word on the first handle it opens or takes for ours (CUDA_ERROR_INVALID_CONTEXT).
 * Other refusals (a handle made up, or of an allocation already freed: the key is not proven yet) decide nothing
 * and refuse that key alone; after CUX_IPC_HANDLE_TRIES of them, so that no key costs an open at every unpack,
 * they count as the driver's refusal too.
 */
#define CUX_IPC_HANDLE_TRIES 8

int cux_ipc_handle_own_pid_opens(const CUipcMemHandle *key_handle, int device)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static unsigned undecided;
    CUresult res;
    int verdict;

    pthread_mutex_lock(&lock);
    verdict = __atomic_load_n(&cux_ipc_handle_cleared_opens, __ATOMIC_RELAXED);
    if (verdict < 0) {
        res = cux_ipc_handle_try_cleared(key_handle, device);
        if ((res == CUDA_SUCCESS) || (res == CUDA_ERROR_INVALID_CONTEXT) || (++undecided >= CUX_IPC_HANDLE_TRIES)) {
            verdict = (res == CUDA_SUCCESS);
            __atomic_store_n(&cux_ipc_handle_cleared_opens, verdict, __ATOMIC_RELAXED);
        } else {
            verdict = 0; /* this key alone */
        }
    }
    pthread_mutex_unlock(&lock);
    return verdict;
}

void cux_ipc_handle_clear_refused(void)
{
    if (__atomic_exchange_n(&cux_ipc_handle_cleared_opens, 0, __ATOMIC_RELAXED) != 0) {
        ucs_error("cuda_ipc: this driver refused a peer's legacy IPC handle whose pid bytes (the peer's pid, equal "
                  "to ours in another PID namespace) were cleared; such keys now go over another transport");
    }
}
