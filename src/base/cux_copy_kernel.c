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
#include <string.h>

#define CUX_COPY_KERNEL_THREADS 256
#define CUX_COPY_KERNEL_X_MAX   64   /* x blocks per copy: 64 x 256 threads x 16 bytes = 256 KB per pass */

/* The kernels' parameter: as cux_copy_kernel.cu declares it, CUX_COPY_KERNEL_MAX or CUX_COPY_KERNEL_MAX_LARGE
 * copies. The driver copies the whole declared block at each launch, whatever the count. */
typedef struct {
    unsigned long long src, dst, size;
} cux_copy_kernel_desc_t;

typedef struct {
    cux_copy_kernel_desc_t copy[CUX_COPY_KERNEL_MAX];
} cux_copy_kernel_batch_t;

typedef struct {
    cux_copy_kernel_desc_t copy[CUX_COPY_KERNEL_MAX_LARGE];
} cux_copy_kernel_batch_large_t;

/* The kernels in each context they were loaded in: a context gets a slot on its first launch. */
typedef struct {
    CUcontext  ctx;
    CUfunction small; /* NULL: no kernel loads in this context */
    CUfunction large; /* NULL: the driver takes no parameters over 4 KB (before CUDA 12.1), or no kernel loads */
} cux_copy_kernel_slot_t;

static cux_copy_kernel_slot_t cux_copy_kernel_slots[2 * CUX_MAX_DEVICES];
static unsigned cux_copy_kernel_num_slots;
static pthread_mutex_t cux_copy_kernel_lock = PTHREAD_MUTEX_INITIALIZER;

/* One kernel of the PTX image, or NULL where it does not load (the module stays loaded with the context: one
 * per context and image at most). */
static CUfunction cux_copy_kernel_load_one(CUcontext ctx, const char *image, const char *name)
{
    CUfunction function = NULL;
    CUmodule module;

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuModuleLoadData, &module, image) != UCS_OK) {
        ucs_debug("the copy kernel %s does not load in context %p", name, ctx);
    } else if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuModuleGetFunction, &function, module, name) != UCS_OK) {
        function = NULL;
    }
    return function;
}

static cux_copy_kernel_slot_t cux_copy_kernel_load(CUcontext ctx)
{
    cux_copy_kernel_slot_t slot = {ctx, NULL, NULL};

    if ((cux_drv.cuModuleLoadData == NULL) || (cux_drv.cuModuleGetFunction == NULL) ||
        (cux_drv.cuLaunchKernel == NULL)) {
        ucs_debug("the driver has no module entry points: small copies go to the copy engines");
        return slot;
    }
    slot.small = cux_copy_kernel_load_one(ctx, cux_copy_kernel_ptx, "cux_copy_batch");
    if (slot.small == NULL) {
        ucs_debug("no copy kernel in context %p: its small copies go to the copy engines", ctx);
        return slot;
    }
    slot.large = cux_copy_kernel_load_one(ctx, cux_copy_kernel_ptx_large, "cux_copy_batch_large");
    ucs_debug("copy kernel loaded in context %p: %u copies a launch", ctx,
              (slot.large != NULL) ? CUX_COPY_KERNEL_MAX_LARGE : CUX_COPY_KERNEL_MAX);
    return slot;
}

/* The kernels of ctx, loaded on its first use. They live as long as the context (a primary context, retained
 * for the process's life). */
static const cux_copy_kernel_slot_t *cux_copy_kernel_get(CUcontext ctx)
{
    static const cux_copy_kernel_slot_t none = {NULL, NULL, NULL};
    unsigned i, n = __atomic_load_n(&cux_copy_kernel_num_slots, __ATOMIC_ACQUIRE);
    const cux_copy_kernel_slot_t *slot = &none;

    for (i = 0; i < n; ++i) {
        if (cux_copy_kernel_slots[i].ctx == ctx) {
            return &cux_copy_kernel_slots[i];
        }
    }
    pthread_mutex_lock(&cux_copy_kernel_lock);
    for (i = 0; i < cux_copy_kernel_num_slots; ++i) {
        if (cux_copy_kernel_slots[i].ctx == ctx) {
            slot = &cux_copy_kernel_slots[i];
            break;
        }
    }
    if ((slot == &none) && (i < sizeof(cux_copy_kernel_slots) / sizeof(cux_copy_kernel_slots[0]))) {
        cux_copy_kernel_slots[i] = cux_copy_kernel_load(ctx);
        slot                     = &cux_copy_kernel_slots[i];
        __atomic_store_n(&cux_copy_kernel_num_slots, i + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&cux_copy_kernel_lock);
    return slot;
}

unsigned cux_copy_kernel_capacity(CUcontext ctx)
{
    const cux_copy_kernel_slot_t *slot = cux_copy_kernel_get(ctx);

    return (slot->large != NULL) ? CUX_COPY_KERNEL_MAX_LARGE : (slot->small != NULL) ? CUX_COPY_KERNEL_MAX : 0;
}

/* Fills the kernel's table and returns the x blocks each copy gets. */
static unsigned cux_copy_kernel_fill(cux_copy_kernel_desc_t *table, const CUdeviceptr *dst, const CUdeviceptr *src,
                                     const size_t *size, unsigned count)
{
    size_t largest = 0;
    unsigned i, x;

    for (i = 0; i < count; ++i) {
        table[i] = (cux_copy_kernel_desc_t){src[i], dst[i], size[i]};
        largest  = (size[i] > largest) ? size[i] : largest;
    }
    x = (unsigned)((largest / 16 + CUX_COPY_KERNEL_THREADS - 1) / CUX_COPY_KERNEL_THREADS);
    return (x < 1) ? 1 : (x > CUX_COPY_KERNEL_X_MAX) ? CUX_COPY_KERNEL_X_MAX : x;
}

ucs_status_t cux_copy_kernel_launch(CUcontext ctx, CUstream stream, const CUdeviceptr *dst, const CUdeviceptr *src,
                                    const size_t *size, unsigned count)
{
    const cux_copy_kernel_slot_t *slot = cux_copy_kernel_get(ctx);
    cux_copy_kernel_batch_large_t large; /* unset beyond count (the kernel reads count entries): 24 KB not cleared */
    cux_copy_kernel_batch_t batch;
    void *params[1];
    CUfunction function;
    unsigned x;

    if ((count == 0) || (slot->small == NULL) ||
        (count > ((slot->large != NULL) ? CUX_COPY_KERNEL_MAX_LARGE : CUX_COPY_KERNEL_MAX))) {
        return UCS_ERR_UNSUPPORTED;
    }
    /* up to 128 copies take the small kernel: the driver copies 3 KB instead of 24 */
    if (count <= CUX_COPY_KERNEL_MAX) {
        memset(&batch, 0, sizeof(batch));
        x         = cux_copy_kernel_fill(batch.copy, dst, src, size, count);
        function  = slot->small;
        params[0] = &batch;
    } else {
        x         = cux_copy_kernel_fill(large.copy, dst, src, size, count);
        function  = slot->large;
        params[0] = &large;
    }
    return CUX_DRV_CALL_ERR(cuLaunchKernel, function, x, count, 1, CUX_COPY_KERNEL_THREADS, 1, 1, 0, stream, params,
                            NULL);
}
