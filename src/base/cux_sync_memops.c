/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Synchronous memory operations: see cux_sync_memops.h.
 */
#include "cux_sync_memops.h"
#include "driver/cux_device.h"

#include <ucs/debug/log.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int cux_sync_memops_enabled = 1;
static pthread_once_t cux_sync_memops_once = PTHREAD_ONCE_INIT;

/* Primary contexts already given the flag, by device ordinal. */
static int cux_sync_memops_primary_done[CUX_MAX_DEVICES];

/* The contexts this thread has settled: given the flag, or found with it, and synchronised once from this
 * thread. The last one first: a thread that keeps one context pays one cuCtxGetCurrent per call. */
#define CUX_SYNC_MEMOPS_THREAD_CTXS 8
static __thread CUcontext cux_sync_memops_last_ctx;
static __thread CUcontext cux_sync_memops_thread_ctxs[CUX_SYNC_MEMOPS_THREAD_CTXS];
static __thread unsigned cux_sync_memops_thread_next;

static void cux_sync_memops_read_env(void)
{
    const char *value = getenv(CUX_SYNC_MEMOPS_ENV);

    if ((value != NULL) && (!strcasecmp(value, "n") || !strcasecmp(value, "no") || !strcmp(value, "0"))) {
        cux_sync_memops_enabled = 0;
        ucs_debug("%s=%s: synchronous memory operations are not enforced on GPU buffers", CUX_SYNC_MEMOPS_ENV,
                  value);
    }
}

/* Give the current context CU_CTX_SYNC_MEMOPS if it lacks it, and then let what was issued before land. With
 * `found_too`, also when the context had the flag already: another thread may have set it a moment after this
 * thread's own fill began, and synchronised before that fill was queued. Returns whether the context has the
 * flag. */
static int cux_sync_memops_ctx(int found_too)
{
    unsigned flags;

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuCtxGetFlags, &flags) != UCS_OK) {
        return 0;
    }
    if (!(flags & CU_CTX_SYNC_MEMOPS)) {
        if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuCtxSetFlags, flags | CU_CTX_SYNC_MEMOPS) != UCS_OK) {
            return 0;
        }
    } else if (!found_too) {
        return 1;
    }
    /* a synchronous fill issued before now may still be landing */
    (void)CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuCtxSynchronize);
    return 1;
}

/* The calling thread's current context, settled once per thread: its fills issued before the flag have landed. */
static void cux_sync_memops_thread_ctx(CUcontext current)
{
    unsigned i;

    for (i = 0; i < CUX_SYNC_MEMOPS_THREAD_CTXS; ++i) {
        if (cux_sync_memops_thread_ctxs[i] == current) {
            return;
        }
    }
    if (cux_drv.cuCtxSetFlags == NULL) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuCtxSynchronize); /* the allocations' attributes do the rest */
    } else if (!cux_sync_memops_ctx(1)) {
        return;
    }
    {
        /* a thread that goes through more contexts than it remembers settles the oldest again: one more sync */
        cux_sync_memops_thread_ctxs[cux_sync_memops_thread_next] = current;
        cux_sync_memops_thread_next = (cux_sync_memops_thread_next + 1) % CUX_SYNC_MEMOPS_THREAD_CTXS;
    }
}

/* A 12.0 driver, or a context that refused the flag: the allocation's attribute, asked at every call. */
static void cux_sync_memops_pointer(const void *address, int device)
{
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
    unsigned set = 0, one = 1;
    void *data   = &set;
    cux_ctx_guard_t guard;

    if ((CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, 1, &attr, &data,
                      (CUdeviceptr)(uintptr_t)address) == UCS_OK) && set) {
        return;
    }
    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerSetAttribute, &one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                     (CUdeviceptr)(uintptr_t)address) != UCS_OK) {
        return;
    }
    /* once per allocation: a synchronous fill issued before now may still be landing */
    if (cux_device_ctx_enter(device, &guard) == UCS_OK) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuCtxSynchronize);
        cux_ctx_leave(&guard);
    }
}

void cux_sync_memops(const void *address, int device)
{
    cux_ctx_guard_t guard;
    CUcontext current;
    int done;

    pthread_once(&cux_sync_memops_once, cux_sync_memops_read_env);
    if (!cux_sync_memops_enabled) {
        return;
    }

    /* The application's own context, where its fills are most likely issued. */
    if ((cux_drv.cuCtxGetCurrent(&current) == CUDA_SUCCESS) && (current != NULL) &&
        (current != cux_sync_memops_last_ctx)) {
        cux_sync_memops_thread_ctx(current);
        cux_sync_memops_last_ctx = current;
    }
    if (cux_drv.cuCtxSetFlags == NULL) {
        cux_sync_memops_pointer(address, device);
        return;
    }

    /* The primary context of the buffer's device: the CUDA runtime's, and ours. */
    if ((cux_device_get(device) == NULL) ||
        __atomic_load_n(&cux_sync_memops_primary_done[device], __ATOMIC_ACQUIRE)) {
        return;
    }
    if (cux_device_ctx_enter(device, &guard) != UCS_OK) {
        return;
    }
    done = cux_sync_memops_ctx(0);
    cux_ctx_leave(&guard);
    if (done) {
        __atomic_store_n(&cux_sync_memops_primary_done[device], 1, __ATOMIC_RELEASE);
    } else {
        cux_sync_memops_pointer(address, device);
    }
}
