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

/* The table as each kernel's parameter declares it: the driver copies the whole block at each launch. */
_Static_assert(sizeof(cux_copy_kernel_desc_t) == 24, "the kernel's table is 24 bytes a copy");

/* The kernels in each context they were loaded in: a context gets a slot on its first launch. */
struct cux_copy_kernel {
    CUcontext  ctx;
    CUfunction small;    /* NULL: no kernel loads in this context */
    CUfunction large;    /* NULL: the driver takes no parameters over 4 KB (before CUDA 12.1), or no kernel loads */
    unsigned   capacity; /* copies a launch: 1024 with large, 128 with small only, 0 */
};

static cux_copy_kernel_t cux_copy_kernel_slots[2 * CUX_MAX_DEVICES];
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

static cux_copy_kernel_t cux_copy_kernel_load(CUcontext ctx)
{
    cux_copy_kernel_t slot = {ctx, NULL, NULL, 0};

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
    slot.large    = cux_copy_kernel_load_one(ctx, cux_copy_kernel_ptx_large, "cux_copy_batch_large");
    slot.capacity = (slot.large != NULL) ? CUX_COPY_KERNEL_MAX_LARGE : CUX_COPY_KERNEL_MAX;
    ucs_debug("copy kernel loaded in context %p: %u copies a launch", ctx, slot.capacity);
    return slot;
}

/* The kernels of ctx, loaded on its first use. They live as long as the context (a primary context, retained
 * for the process's life). */
const cux_copy_kernel_t *cux_copy_kernel_get(CUcontext ctx)
{
    static const cux_copy_kernel_t none = {NULL, NULL, NULL, 0};
    unsigned i, n = __atomic_load_n(&cux_copy_kernel_num_slots, __ATOMIC_ACQUIRE);
    const cux_copy_kernel_t *slot = &none;

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

unsigned cux_copy_kernel_capacity(const cux_copy_kernel_t *kernel)
{
    return kernel->capacity;
}

ucs_status_t cux_copy_kernel_launch(const cux_copy_kernel_t *kernel, CUstream stream,
                                    const cux_copy_kernel_desc_t *table, unsigned count, size_t largest)
{
    /* 16 bytes a thread: x blocks enough for the largest copy, within the bound */
    size_t x        = (largest / 16 + CUX_COPY_KERNEL_THREADS - 1) / CUX_COPY_KERNEL_THREADS;
    void *params[1] = {(void*)table};
    CUfunction function;

    if ((count == 0) || (count > kernel->capacity)) {
        return UCS_ERR_UNSUPPORTED;
    }
    /* up to 128 copies take the small kernel: the driver copies 3 KB instead of 24 */
    function = (count <= CUX_COPY_KERNEL_MAX) ? kernel->small : kernel->large;
    x        = (x < 1) ? 1 : (x > CUX_COPY_KERNEL_X_MAX) ? CUX_COPY_KERNEL_X_MAX : x;
    return CUX_DRV_CALL_ERR(cuLaunchKernel, function, (unsigned)x, count, 1, CUX_COPY_KERNEL_THREADS, 1, 1, 0,
                            stream, params, NULL);
}
