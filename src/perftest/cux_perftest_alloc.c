/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA memory for a stock ucx_perftest (built without CUDA): preloaded, this library fills the cuda and
 * cuda-managed slots of the program's ucx_perf_mem_type_allocators table, so `-m cuda` works with the UCX of
 * the distribution. Buffers of UCP tests are allocated by UCP through our cuda_cpy memory domain; this
 * module selects the GPU, allocates for UCT tests, and copies and sets memory for perftest.
 *
 * The table is referenced weakly: preloaded into any other program, the library does nothing.
 */
#include "driver/cux_device.h"

#include <tools/perf/lib/libperf_int.h>
#include <ucs/debug/log.h>
#include <stdlib.h>
#include <string.h>

extern const ucx_perf_allocator_t *ucx_perf_mem_type_allocators[] __attribute__((weak));

/* One GPU per process in the test group, as UCX's own CUDA allocator does. */
static ucs_status_t cux_perf_init(ucx_perf_context_t *perf)
{
    unsigned group_index = rte_call(perf, group_index);
    ucs_status_t status;
    CUcontext ctx;
    int count;

    status = cux_devices_init();
    if (status != UCS_OK) {
        ucs_error("ucx_perftest: no CUDA device for -m cuda: %s", cux_driver_error());
        return status;
    }
    count  = cux_device_count();
    status = cux_device_ctx(group_index % count, &ctx);
    if (status != UCS_OK) {
        return status;
    }
    return CUX_DRV_CALL_ERR(cuCtxSetCurrent, ctx);
}

/* Copies and fills run on a stream of the calling thread's context, and wait for it. */
static void cux_perf_copy(void *dst, const void *src, size_t count)
{
    static __thread CUstream stream;
    static __thread CUcontext stream_ctx;
    CUcontext ctx = NULL;

    if ((cux_drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) || (ctx == NULL)) {
        if (cux_device_ctx(0, &ctx) != UCS_OK) {
            return;
        }
        cux_drv.cuCtxSetCurrent(ctx);
    }
    if ((stream == NULL) || (stream_ctx != ctx)) {
        if (CUX_DRV_CALL_ERR(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING) != UCS_OK) {
            return;
        }
        stream_ctx = ctx;
    }
    if (CUX_DRV_CALL_ERR(cuMemcpyAsync, (CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, count,
                         stream) == UCS_OK) {
        (void)CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
    }
}

static void cux_perf_memcpy(void *dst, ucs_memory_type_t dst_mem_type, const void *src,
                            ucs_memory_type_t src_mem_type, size_t count)
{
    cux_perf_copy(dst, src, count);
}

static void *cux_perf_memset(void *dst, int value, size_t count)
{
    void *tmp = malloc(count);

    if (tmp != NULL) {
        memset(tmp, value, count);
        cux_perf_copy(dst, tmp, count);
        free(tmp);
    }
    return dst;
}

static ucs_status_t cux_perf_uct_alloc_type(const ucx_perf_context_t *perf, size_t length, unsigned flags,
                                            uct_allocated_memory_t *mem, ucs_memory_type_t mem_type)
{
    CUdeviceptr dptr;
    ucs_status_t status;

    status = (mem_type == UCS_MEMORY_TYPE_CUDA) ?
             CUX_DRV_CALL_ERR(cuMemAlloc, &dptr, length) :
             CUX_DRV_CALL_ERR(cuMemAllocManaged, &dptr, length, CU_MEM_ATTACH_GLOBAL);
    if (status != UCS_OK) {
        return status;
    }

    mem->address  = (void*)(uintptr_t)dptr;
    mem->length   = length;
    mem->method   = UCT_ALLOC_METHOD_LAST;
    mem->mem_type = mem_type;
    mem->md       = perf->uct.md;
    mem->memh     = UCT_MEM_HANDLE_NULL;
    /* The transport under test may need a registration (a cuda_ipc key, say); others take none. */
    if (uct_md_mem_reg(perf->uct.md, mem->address, length, flags | UCT_MD_MEM_FLAG_HIDE_ERRORS,
                       &mem->memh) != UCS_OK) {
        mem->memh = UCT_MEM_HANDLE_NULL;
    }
    return UCS_OK;
}

static ucs_status_t cux_perf_uct_alloc(const ucx_perf_context_t *perf, size_t length, unsigned flags,
                                       uct_allocated_memory_t *mem)
{
    return cux_perf_uct_alloc_type(perf, length, flags, mem, UCS_MEMORY_TYPE_CUDA);
}

static ucs_status_t cux_perf_uct_alloc_managed(const ucx_perf_context_t *perf, size_t length, unsigned flags,
                                               uct_allocated_memory_t *mem)
{
    return cux_perf_uct_alloc_type(perf, length, flags, mem, UCS_MEMORY_TYPE_CUDA_MANAGED);
}

static void cux_perf_uct_free(const ucx_perf_context_t *perf, uct_allocated_memory_t *mem)
{
    if (mem->memh != UCT_MEM_HANDLE_NULL) {
        uct_md_mem_dereg(mem->md, mem->memh);
    }
    (void)CUX_DRV_CALL_ERR(cuMemFree, (CUdeviceptr)(uintptr_t)mem->address);
}

static const ucx_perf_allocator_t cux_perf_cuda_allocator = {
    .mem_type  = UCS_MEMORY_TYPE_CUDA,
    .init      = cux_perf_init,
    .uct_alloc = cux_perf_uct_alloc,
    .uct_free  = cux_perf_uct_free,
    .memcpy    = cux_perf_memcpy,
    .memset    = cux_perf_memset
};

static const ucx_perf_allocator_t cux_perf_cuda_managed_allocator = {
    .mem_type  = UCS_MEMORY_TYPE_CUDA_MANAGED,
    .init      = cux_perf_init,
    .uct_alloc = cux_perf_uct_alloc_managed,
    .uct_free  = cux_perf_uct_free,
    .memcpy    = cux_perf_memcpy,
    .memset    = cux_perf_memset
};

static void __attribute__((constructor)) cux_perf_register(void)
{
    if (ucx_perf_mem_type_allocators == NULL) {
        return; /* not ucx_perftest */
    }
    /* Leave a CUDA allocator of the program's own (a UCX built with CUDA) in place. */
    if (ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA] == NULL) {
        ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA] = &cux_perf_cuda_allocator;
    }
    if (ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA_MANAGED] == NULL) {
        ucx_perf_mem_type_allocators[UCS_MEMORY_TYPE_CUDA_MANAGED] = &cux_perf_cuda_managed_allocator;
    }
}
