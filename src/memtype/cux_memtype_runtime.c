/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: the shared CUDA runtime's allocation calls, by name.
 *
 * A program linked with libcudart.so calls these through the dynamic linker. The runtime allocates through
 * the driver, which cux_memtype_driver.c sees as well: a buffer reported by both reaches UCX once. The static
 * runtime's own functions are inside the program, out of any preload's reach: its calls are seen in the driver.
 */
#define _GNU_SOURCE
#include "memtype/cux_memtype_report.h"
#include <dlfcn.h>

/* The runtime's error type is an enum; its ABI is an int. Declared here so that no runtime header is needed. */
typedef int cux_cudart_status_t;
#define CUX_CUDART_SUCCESS             0
#define CUX_CUDART_ERROR_NOT_SUPPORTED 801

/* The runtime's own definition of a function, found once. */
#define CUX_MT_RUNTIME_NEXT(_name, _params) \
    static cux_cudart_status_t (*next) _params; \
    if (next == NULL) { \
        *(void**)&next = cux_memtype_real_dlsym(RTLD_NEXT, #_name); \
        if (next == NULL) { \
            return CUX_CUDART_ERROR_NOT_SUPPORTED; \
        } \
    }

#define CUX_MT_RUNTIME_ALLOC(_name, _mem_type, _params, _args, _address, _size) \
    cux_cudart_status_t _name _params; \
    cux_cudart_status_t _name _params \
    { \
        cux_cudart_status_t res; \
        CUX_MT_RUNTIME_NEXT(_name, _params) \
        res = next _args; \
        if (res == CUX_CUDART_SUCCESS) { \
            cux_memtype_alloc((uintptr_t)(_address), (_size), (_mem_type)); \
        } \
        return res; \
    }

/* A release: the buffer reported gone first (a new buffer at its address must not meet a stale entry). */
#define CUX_MT_RUNTIME_FREE(_name, _params, _args, _address) \
    cux_cudart_status_t _name _params; \
    cux_cudart_status_t _name _params \
    { \
        CUX_MT_RUNTIME_NEXT(_name, _params) \
        cux_memtype_free((uintptr_t)(_address)); \
        return next _args; \
    }

CUX_MT_RUNTIME_ALLOC(cudaMalloc, UCS_MEMORY_TYPE_CUDA, (void **p, size_t n), (p, n), *p, n)
CUX_MT_RUNTIME_ALLOC(cudaMallocManaged, UCS_MEMORY_TYPE_CUDA_MANAGED, (void **p, size_t n, unsigned flags),
                     (p, n, flags), *p, n)
CUX_MT_RUNTIME_ALLOC(cudaMallocPitch, UCS_MEMORY_TYPE_CUDA, (void **p, size_t *pitch, size_t w, size_t h),
                     (p, pitch, w, h), *p, *pitch * h)
CUX_MT_RUNTIME_ALLOC(cudaMallocAsync, UCS_MEMORY_TYPE_CUDA, (void **p, size_t n, void *stream),
                     (p, n, stream), *p, n)
CUX_MT_RUNTIME_ALLOC(cudaMallocFromPoolAsync, UCS_MEMORY_TYPE_CUDA,
                     (void **p, size_t n, void *pool, void *stream), (p, n, pool, stream), *p, n)
CUX_MT_RUNTIME_FREE(cudaFree, (void *p), (p), p)
CUX_MT_RUNTIME_FREE(cudaFreeAsync, (void *p, void *stream), (p, stream), p)
