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

/* How many copies one launch takes in ctx (ctx current): CUX_COPY_KERNEL_MAX_LARGE, CUX_COPY_KERNEL_MAX where the
 * driver takes no large parameters, 0 where no kernel loads. Loads the kernels on the context's first use. */
unsigned cux_copy_kernel_capacity(CUcontext ctx);

/*
 * Issues count copies (1..cux_copy_kernel_capacity(ctx)) between device memory that the current context reaches, as one
 * launch on stream; ctx must be current. UCS_ERR_UNSUPPORTED (logged once, at debug level) where the kernel
 * cannot be loaded in ctx: the caller then uses the copy engines.
 */
ucs_status_t cux_copy_kernel_launch(CUcontext ctx, CUstream stream, const CUdeviceptr *dst, const CUdeviceptr *src,
                                    const size_t *size, unsigned count);

#endif
