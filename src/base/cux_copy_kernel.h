/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small copies between device memory, a batch of them in one kernel launch. A GPU's copy engines take a few
 * microseconds per copy however small (about 5 us per 4 KB copy on one H200, back to back, one stream or
 * four); one launch of the kernel of cux_copy_kernel.cu copies 16 such blocks in about as long as one
 * (0.3 us per copy). The kernel runs on the GPU's SMs beside the application's kernels, which the copy
 * engines do not: the interface that uses it bounds the copies it takes (cuda_ipc: COPY_KERNEL_MAX).
 *
 * The PTX is loaded once per context, on first use; where the driver cannot load it, copies go to the copy
 * engines as before.
 */
#ifndef CUX_COPY_KERNEL_H_
#define CUX_COPY_KERNEL_H_

#include "driver/cux_cuda.h"
#include <stddef.h>
#include <ucs/type/status.h>

/* Most copies of one launch: the kernel's parameter block holds this many (3 KB, any driver); the large kernel's
 * (24 KB) where the driver takes parameters over 4 KB (CUDA 12.1 on). */
#define CUX_COPY_KERNEL_MAX       128
#define CUX_COPY_KERNEL_MAX_LARGE 1024

/* One copy as the kernel's table holds it (cux_copy_kernel.cu): a stream queue keeps its batch in this layout, so
 * that a launch hands the queue's own array to the driver. */
typedef struct cux_copy_kernel_desc {
    unsigned long long src, dst, size;
} cux_copy_kernel_desc_t;

/* The copy kernels of one context. */
typedef struct cux_copy_kernel cux_copy_kernel_t;

/* The kernels of ctx (ctx current), loaded on the context's first use; never NULL. A queue looks them up once per
 * batch and hands them to each launch. */
const cux_copy_kernel_t *cux_copy_kernel_get(CUcontext ctx);

/* How many copies one launch takes: CUX_COPY_KERNEL_MAX_LARGE, CUX_COPY_KERNEL_MAX where the driver takes no large
 * parameters, 0 where no kernel loads. */
unsigned cux_copy_kernel_capacity(const cux_copy_kernel_t *kernel);

/*
 * Issues the first count copies of table (1..cux_copy_kernel_capacity) between device memory that the current
 * context reaches, as one launch on stream, each copy's blocks sized for largest (the largest copy's size). The
 * driver reads the kernel's whole declared parameter from table: CUX_COPY_KERNEL_MAX entries where count is at most
 * that, else CUX_COPY_KERNEL_MAX_LARGE, must lie in the caller's array (entries beyond count are not used).
 * UCS_ERR_UNSUPPORTED where no kernel loads, or count does not fit: the caller then uses the copy engines.
 */
ucs_status_t cux_copy_kernel_launch(const cux_copy_kernel_t *kernel, CUstream stream,
                                    const cux_copy_kernel_desc_t *table, unsigned count, size_t largest);

#endif
