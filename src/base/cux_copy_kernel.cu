/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copy kernel of cux_copy_kernel.c: every copy of a batch in one launch, the batch's table passed by value as
 * the kernel's parameter. Not built with the module (which needs no CUDA compiler): tools/gen-copy-kernel-ptx.sh
 * turns it into cux_copy_kernel_ptx.h, PTX that the driver compiles for the GPU at load, twice: with
 * CUX_COPY_KERNEL_MAX 128 (a 3 KB table, which every driver takes) as cux_copy_batch, and with 1024 (24 KB: the
 * large parameters of CUDA 12.1 drivers, PTX ISA 8.1) as cux_copy_batch_large.
 *
 * blockIdx.y picks the copy, the x blocks stride over its bytes: 16 bytes at a time when source, destination
 * and size allow it, else byte by byte.
 */
#ifndef CUX_COPY_KERNEL_MAX
#define CUX_COPY_KERNEL_MAX 128
#endif
#ifndef CUX_COPY_KERNEL_NAME
#define CUX_COPY_KERNEL_NAME cux_copy_batch
#endif

struct cux_copy_kernel_desc {
    unsigned long long src, dst, size;
};

struct cux_copy_kernel_batch {
    cux_copy_kernel_desc copy[CUX_COPY_KERNEL_MAX];
};

extern "C" __global__ void CUX_COPY_KERNEL_NAME(cux_copy_kernel_batch batch)
{
    const cux_copy_kernel_desc c    = batch.copy[blockIdx.y];
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i            = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (((c.src | c.dst | c.size) & 15) == 0) {
        const uint4 *s = (const uint4*)c.src;
        uint4 *d       = (uint4*)c.dst;
        for (unsigned long long n = c.size / 16; i < n; i += stride) {
            d[i] = s[i];
        }
    } else {
        const unsigned char *s = (const unsigned char*)c.src;
        unsigned char *d       = (unsigned char*)c.dst;
        for (; i < c.size; i += stride) {
            d[i] = s[i];
        }
    }
}
