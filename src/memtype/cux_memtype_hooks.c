/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: GPU allocations reported to UCX's memory-type cache, for a UCX built without CUDA.
 *
 * Such a UCX has no libucm_cuda, so UCP's memory-type cache never hears of GPU buffers and takes them for
 * host memory. Preloaded (ucx-cuda-run with CUX_MEMTYPE=hooks), this library interposes the allocation calls
 * of the CUDA driver and runtime and reports every buffer through UCM's event interface, as UCX's own hooks
 * would. The alternative (CUX_MEMTYPE=query, the default) turns the cache off so that UCP asks our memory
 * domain about every buffer.
 *
 * What it sees: calls that go through the dynamic linker (programs linked with libcuda or the shared
 * libcudart, or that resolve the symbols globally). What it cannot see: the static libcudart (which reaches
 * the driver through cuGetProcAddress) and libraries that dlsym the driver through their own handle.
 *
 * Buffers that UCP allocates through our memory domain reach the cache from the domain itself.
 * Allocations made before UCX starts are kept in a table and replayed to the cache when UCX subscribes
 * (UCM_EVENT_FLAG_EXISTING_ALLOC), by interposing ucm_set_event_handler too.
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ucm/api/ucm.h>
#include "compat/cux_ucx_compat.h"

/* Exported by libucm.so.0, declared only in UCX's internal headers. */
typedef void (*cux_ucm_dispatch_fn_t)(ucm_event_type_t event_type, ucm_event_t *event);
typedef ucs_status_t (*cux_ucm_set_handler_fn_t)(int events, int priority, ucm_event_callback_t cb, void *arg);

/* The CUDA runtime's error type is an enum; its ABI is an int. Declared here so no runtime header is needed. */
typedef int cux_cudart_status_t;
#define CUX_CUDART_SUCCESS           0
#define CUX_CUDART_ERROR_NOT_SUPPORTED 801

/* ------------------------------------------------------------------ table of live allocations */

typedef struct cux_mt_entry {
    struct cux_mt_entry *next;
    uintptr_t            address;
    size_t               size;
    ucs_memory_type_t    mem_type;
} cux_mt_entry_t;

#define CUX_MT_BUCKETS 4096

static cux_mt_entry_t *cux_mt_table[CUX_MT_BUCKETS];
static pthread_mutex_t cux_mt_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned cux_mt_bucket(uintptr_t address)
{
    return (unsigned)((address >> 12) * 0x9e3779b97f4a7c15ull >> 52) % CUX_MT_BUCKETS;
}

static void cux_mt_dispatch(ucm_event_type_t type, uintptr_t address, size_t size, ucs_memory_type_t mem_type)
{
    static cux_ucm_dispatch_fn_t dispatch;
    ucm_event_t event;

    if (dispatch == NULL) {
        /* Only once libucm is there (it may be dlopened late, by an MPI library): earlier allocations reach
         * the cache through the replay below. */
        dispatch = (cux_ucm_dispatch_fn_t)dlsym(RTLD_DEFAULT, "ucm_event_dispatch");
        if (dispatch == NULL) {
            return;
        }
    }
    /* UCX 1.16+ events carry the system device and memory flags: left zero (unknown, nothing claimed), so that
     * UCP asks a memory domain for them before it relies on them, as for UCX's own hooks' "unknown" */
    memset(&event, 0, sizeof(event));
    event.mem_type.address  = (void*)address;
    event.mem_type.size     = size;
    event.mem_type.mem_type = mem_type;
    CUX_UCM_EVENT_ATTRS_UNKNOWN(&event);
    dispatch(type, &event);
}

/* ------------------------------------------------------------------ synchronous memory operations */

/*
 * A buffer reported here reaches UCP without our memory domain ever being asked about it, so what the domain
 * does for the buffers it learns of (src/base/cux_sync_memops.h) happens here, at allocation: the allocating
 * context gets CU_CTX_SYNC_MEMOPS (or, on a driver without cuCtxSetFlags, the allocation the pointer
 * attribute), so that a synchronous fill has landed before UCX copies the buffer. CUX_SYNC_MEMOPS=n skips it.
 */
static struct {
    CUresult (*ctx_get_flags)(unsigned*);
    CUresult (*ctx_set_flags)(unsigned);
    CUresult (*pointer_set_attribute)(const void*, CUpointer_attribute, CUdeviceptr);
    int      disabled;
} cux_mt_drv;

static pthread_once_t cux_mt_drv_once = PTHREAD_ONCE_INIT;

/* The driver is loaded by now (it just allocated); look in it, wherever the program's scope is. */
static void cux_mt_drv_resolve(void)
{
    const char *path  = getenv("CUX_DRIVER_PATH");
    const char *value = getenv("CUX_SYNC_MEMOPS");
    void *handle;

    cux_mt_drv.disabled = (value != NULL) && (!strcasecmp(value, "n") || !strcasecmp(value, "no") ||
                                              !strcmp(value, "0"));
    handle = dlopen(((path != NULL) && (*path != '\0')) ? path : "libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL) {
        return;
    }
    *(void**)&cux_mt_drv.ctx_get_flags         = dlsym(handle, "cuCtxGetFlags");
    *(void**)&cux_mt_drv.ctx_set_flags         = dlsym(handle, "cuCtxSetFlags");
    *(void**)&cux_mt_drv.pointer_set_attribute = dlsym(handle, "cuPointerSetAttribute");
}

static void cux_mt_sync_memops(uintptr_t address)
{
    unsigned flags, one = 1;

    pthread_once(&cux_mt_drv_once, cux_mt_drv_resolve);
    if (cux_mt_drv.disabled) {
        return;
    }
    if ((cux_mt_drv.ctx_get_flags != NULL) && (cux_mt_drv.ctx_set_flags != NULL) &&
        (cux_mt_drv.ctx_get_flags(&flags) == CUDA_SUCCESS) &&
        ((flags & CU_CTX_SYNC_MEMOPS) || (cux_mt_drv.ctx_set_flags(flags | CU_CTX_SYNC_MEMOPS) == CUDA_SUCCESS))) {
        return;
    }
    if (cux_mt_drv.pointer_set_attribute != NULL) {
        cux_mt_drv.pointer_set_attribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, (CUdeviceptr)address);
    }
}

static void cux_memtype_alloc(uintptr_t address, size_t size, ucs_memory_type_t mem_type)
{
    unsigned b = cux_mt_bucket(address);
    cux_mt_entry_t *entry;

    if ((address == 0) || (size == 0)) {
        return;
    }
    cux_mt_sync_memops(address);
    entry = malloc(sizeof(*entry));
    if (entry != NULL) {
        entry->address  = address;
        entry->size     = size;
        entry->mem_type = mem_type;
        pthread_mutex_lock(&cux_mt_lock);
        entry->next      = cux_mt_table[b];
        cux_mt_table[b]  = entry;
        pthread_mutex_unlock(&cux_mt_lock);
    }
    cux_mt_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, address, size, mem_type);
}

static void cux_memtype_free(uintptr_t address)
{
    cux_mt_entry_t **p, *found = NULL;

    pthread_mutex_lock(&cux_mt_lock);
    for (p = &cux_mt_table[cux_mt_bucket(address)]; *p != NULL; p = &(*p)->next) {
        if ((*p)->address == address) {
            found = *p;
            *p    = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&cux_mt_lock);
    if (found != NULL) {
        /* before the memory goes back: a new buffer at this address must not meet a stale entry */
        cux_mt_dispatch(UCM_EVENT_MEM_TYPE_FREE, address, found->size, found->mem_type);
        free(found);
    }
}

ucs_status_t ucm_set_event_handler(int events, int priority, ucm_event_callback_t cb, void *arg)
{
    static cux_ucm_set_handler_fn_t next;
    cux_mt_entry_t *entry;
    ucm_event_t event;
    ucs_status_t status;
    unsigned b;

    if (next == NULL) {
        next = (cux_ucm_set_handler_fn_t)dlsym(RTLD_NEXT, "ucm_set_event_handler");
        if (next == NULL) {
            return UCS_ERR_UNSUPPORTED;
        }
    }
    status = next(events, priority, cb, arg);
    if ((status != UCS_OK) || !(events & UCM_EVENT_MEM_TYPE_ALLOC) ||
        !(events & UCM_EVENT_FLAG_EXISTING_ALLOC)) {
        return status;
    }
    pthread_mutex_lock(&cux_mt_lock);
    for (b = 0; b < CUX_MT_BUCKETS; ++b) {
        for (entry = cux_mt_table[b]; entry != NULL; entry = entry->next) {
            memset(&event, 0, sizeof(event));
            event.mem_type.address  = (void*)entry->address;
            event.mem_type.size     = entry->size;
            event.mem_type.mem_type = entry->mem_type;
            CUX_UCM_EVENT_ATTRS_UNKNOWN(&event);
            cb(UCM_EVENT_MEM_TYPE_ALLOC, &event, arg);
        }
    }
    pthread_mutex_unlock(&cux_mt_lock);
    return UCS_OK;
}

/* ------------------------------------------------------------------ interposed allocation calls */

/* The next definition of a function (the driver's or the runtime's), found once. */
#define CUX_MT_NEXT(_type, _name) \
    static _type next_##_name; \
    if (next_##_name == NULL) { \
        next_##_name = (_type)dlsym(RTLD_NEXT, #_name); \
    }

/* An allocation call: the next definition, then the new buffer reported. _ret_t, _ok and _unsupported are
 * the status type and codes of the API (the driver's CUresult or the runtime's). */
#define CUX_MT_ALLOC(_ret_t, _ok, _unsupported, _name, _mem_type, _params, _args, _ptr, _size) \
    typedef _ret_t (*cux_mt_##_name##_fn_t) _params; \
    _ret_t _name _params \
    { \
        _ret_t res; \
        CUX_MT_NEXT(cux_mt_##_name##_fn_t, _name); \
        if (next_##_name == NULL) { \
            return _unsupported; \
        } \
        res = next_##_name _args; \
        if (res == _ok) { \
            cux_memtype_alloc((uintptr_t)(_ptr), (_size), (_mem_type)); \
        } \
        return res; \
    }

/* A release call: the buffer reported gone first, then the next definition. */
#define CUX_MT_FREE(_ret_t, _unsupported, _name, _params, _args, _ptr) \
    typedef _ret_t (*cux_mt_##_name##_fn_t) _params; \
    _ret_t _name _params \
    { \
        CUX_MT_NEXT(cux_mt_##_name##_fn_t, _name); \
        if (next_##_name == NULL) { \
            return _unsupported; \
        } \
        cux_memtype_free((uintptr_t)(_ptr)); \
        return next_##_name _args; \
    }

/* Driver calls go by the real symbol names that the CUDA 12+ headers map the API names to. */
#define CUX_MT_DRIVER_ALLOC(...)  CUX_MT_ALLOC(CUresult, CUDA_SUCCESS, CUDA_ERROR_NOT_SUPPORTED, __VA_ARGS__)
#define CUX_MT_DRIVER_FREE(...)   CUX_MT_FREE(CUresult, CUDA_ERROR_NOT_SUPPORTED, __VA_ARGS__)
#define CUX_MT_RUNTIME_ALLOC(...) \
    CUX_MT_ALLOC(cux_cudart_status_t, CUX_CUDART_SUCCESS, CUX_CUDART_ERROR_NOT_SUPPORTED, __VA_ARGS__)
#define CUX_MT_RUNTIME_FREE(...)  CUX_MT_FREE(cux_cudart_status_t, CUX_CUDART_ERROR_NOT_SUPPORTED, __VA_ARGS__)

CUX_MT_DRIVER_ALLOC(cuMemAlloc_v2, UCS_MEMORY_TYPE_CUDA, (CUdeviceptr *p, size_t n), (p, n), *p, n)
CUX_MT_DRIVER_ALLOC(cuMemAllocPitch_v2, UCS_MEMORY_TYPE_CUDA,
                    (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem),
                    (p, pitch, w, h, elem), *p, *pitch * h)
CUX_MT_DRIVER_ALLOC(cuMemAllocManaged, UCS_MEMORY_TYPE_CUDA_MANAGED, (CUdeviceptr *p, size_t n, unsigned flags),
                    (p, n, flags), *p, n)
CUX_MT_DRIVER_ALLOC(cuMemAllocAsync, UCS_MEMORY_TYPE_CUDA, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s),
                    *p, n)
CUX_MT_DRIVER_ALLOC(cuMemAllocFromPoolAsync, UCS_MEMORY_TYPE_CUDA,
                    (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), (p, n, pool, s), *p, n)
CUX_MT_DRIVER_ALLOC(cuMemMap, UCS_MEMORY_TYPE_CUDA,
                    (CUdeviceptr p, size_t n, size_t offset, CUmemGenericAllocationHandle h,
                     unsigned long long flags), (p, n, offset, h, flags), p, n)
CUX_MT_DRIVER_FREE(cuMemFree_v2, (CUdeviceptr p), (p), p)
CUX_MT_DRIVER_FREE(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s), p)
CUX_MT_DRIVER_FREE(cuMemUnmap, (CUdeviceptr p, size_t n), (p, n), p)

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
