/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small copies as one kernel launch: see cux_copy_kernel.h.
 */
#include "cux_copy_kernel.h"
#include "cux_copy_kernel_ptx.h"
#include "driver/cux_device.h"
#include "driver/cux_driver.h"

#include <ucs/debug/log.h>
#include <pthread.h>

#define CUX_COPY_KERNEL_THREADS 256
#define CUX_COPY_KERNEL_X_MAX   64   /* x blocks per copy: 64 x 256 threads x 16 bytes = 256 KB per pass */

/* The kernel's parameter: as cux_copy_kernel.cu declares it. */
typedef struct {
    unsigned long long src, dst, size;
} cux_copy_kernel_desc_t;

typedef struct {
    cux_copy_kernel_desc_t copy[CUX_COPY_KERNEL_MAX];
} cux_copy_kernel_batch_t;

/* The kernel in each context it was loaded in: a context gets a slot on its first launch. */
typedef struct {
    CUcontext  ctx;
    CUfunction function;  /* NULL: the kernel cannot be loaded in this context */
} cux_copy_kernel_slot_t;

static cux_copy_kernel_slot_t cux_copy_kernel_slots[2 * CUX_MAX_DEVICES];
static unsigned cux_copy_kernel_num_slots;
static pthread_mutex_t cux_copy_kernel_lock = PTHREAD_MUTEX_INITIALIZER;

static CUfunction cux_copy_kernel_load(CUcontext ctx)
{
    CUfunction function = NULL;
    CUmodule module;

    if ((cux_drv.cuModuleLoadData == NULL) || (cux_drv.cuModuleGetFunction == NULL) ||
        (cux_drv.cuLaunchKernel == NULL)) {
        ucs_debug("the driver has no module entry points: small copies go to the copy engines");
    } else if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuModuleLoadData, &module, cux_copy_kernel_ptx) != UCS_OK) {
        ucs_debug("the copy kernel does not load in context %p: its small copies go to the copy engines", ctx);
    } else if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuModuleGetFunction, &function, module, "cux_copy_batch") !=
               UCS_OK) {
        function = NULL; /* the module stays loaded with the context: one per context at most */
    }
    return function;
}

/* The kernel of ctx, loaded on its first use; NULL if it cannot be. The module lives as long as the context
 * (a primary context, retained for the process's life). */
static CUfunction cux_copy_kernel_get(CUcontext ctx)
{
    unsigned i, n = __atomic_load_n(&cux_copy_kernel_num_slots, __ATOMIC_ACQUIRE);
    CUfunction function;

    for (i = 0; i < n; ++i) {
        if (cux_copy_kernel_slots[i].ctx == ctx) {
            return cux_copy_kernel_slots[i].function;
        }
    }
    pthread_mutex_lock(&cux_copy_kernel_lock);
    for (i = 0; i < cux_copy_kernel_num_slots; ++i) {
        if (cux_copy_kernel_slots[i].ctx == ctx) {
            function = cux_copy_kernel_slots[i].function;
            pthread_mutex_unlock(&cux_copy_kernel_lock);
            return function;
        }
    }
    function = cux_copy_kernel_load(ctx);
    if (i < sizeof(cux_copy_kernel_slots) / sizeof(cux_copy_kernel_slots[0])) {
        cux_copy_kernel_slots[i] = (cux_copy_kernel_slot_t){ctx, function};
        __atomic_store_n(&cux_copy_kernel_num_slots, i + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cux_copy_kernel_lock);
    return function;
}

ucs_status_t cux_copy_kernel_launch(CUcontext ctx, CUstream stream, const CUdeviceptr *dst, const CUdeviceptr *src,
                                    const size_t *size, unsigned count)
{
    CUfunction function = cux_copy_kernel_get(ctx);
    cux_copy_kernel_batch_t batch = {0}; /* the driver copies the whole parameter block */
    void *params[]                = {&batch};
    size_t largest = 0;
    unsigned i, x;

    if ((function == NULL) || (count == 0) || (count > CUX_COPY_KERNEL_MAX)) {
        return UCS_ERR_UNSUPPORTED;
    }
    for (i = 0; i < count; ++i) {
        batch.copy[i] = (cux_copy_kernel_desc_t){src[i], dst[i], size[i]};
        largest       = (size[i] > largest) ? size[i] : largest;
    }
    x = (unsigned)((largest / 16 + CUX_COPY_KERNEL_THREADS - 1) / CUX_COPY_KERNEL_THREADS);
    x = (x < 1) ? 1 : (x > CUX_COPY_KERNEL_X_MAX) ? CUX_COPY_KERNEL_X_MAX : x;
    return CUX_DRV_CALL_ERR(cuLaunchKernel, function, x, count, 1, CUX_COPY_KERNEL_THREADS, 1, 1, 0, stream, params,
                            NULL);
}
