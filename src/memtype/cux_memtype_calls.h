/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: the driver calls that allocate and release GPU memory, one line per ABI, for both ways a
 * program reaches them: by name and through cuGetProcAddress (cux_memtype_driver.c).
 *
 *   _X(SYMBOL, "API", SINCE, PTDS, MEM_TYPE, (PARAMS), (ARGS), ADDRESS, SIZE)   an allocation
 *   _F(SYMBOL, "API", SINCE, PTDS, (PARAMS), (ARGS), ADDRESS)                   a release
 *
 * SYMBOL is the name the driver exports for this ABI; API the name cuGetProcAddress takes, which returns this
 * ABI for a requested CUDA version of at least SINCE (cudaTypedefs.h: PFN_cuMemAlloc_v3020) and, for a call
 * that takes a stream, with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM when PTDS is 1 (the "_ptsz" twin).
 * ADDRESS and SIZE are expressions of the parameters once the call succeeded.
 */
#ifndef CUX_MEMTYPE_CALLS_H
#define CUX_MEMTYPE_CALLS_H

#define CUX_MT_DRIVER_CALLS(_X, _F) \
    _X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, UCS_MEMORY_TYPE_CUDA, (CUdeviceptr *p, size_t n), (p, n), *p, n) \
    _X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem), (p, pitch, w, h, elem), *p, *pitch * h) \
    _X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, UCS_MEMORY_TYPE_CUDA_MANAGED, \
       (CUdeviceptr *p, size_t n, unsigned flags), (p, n, flags), *p, n) \
    _X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr *p, size_t n, CUstream s), (p, n, s), *p, n) \
    _X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 1, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr *p, size_t n, CUstream s), (p, n, s), *p, n) \
    _X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), (p, n, pool, s), *p, n) \
    _X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 1, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), (p, n, pool, s), *p, n) \
    _X(cuMemMap, "cuMemMap", 10020, 0, UCS_MEMORY_TYPE_CUDA, \
       (CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags), \
       (p, n, offset, h, flags), p, n) \
    _F(cuMemFree_v2, "cuMemFree", 3020, 0, (CUdeviceptr p), (p), p) \
    _F(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, (CUdeviceptr p, CUstream s), (p, s), p) \
    _F(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 1, (CUdeviceptr p, CUstream s), (p, s), p) \
    _F(cuMemUnmap, "cuMemUnmap", 10020, 0, (CUdeviceptr p, size_t n), (p, n), p)

#endif
