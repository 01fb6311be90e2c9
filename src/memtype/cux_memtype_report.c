/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: GPU allocations reported to UCX's memory-type cache, for a UCX built without CUDA.
 *
 * Such a UCX has no libucm_cuda, so UCP's memory-type cache never hears of GPU buffers and takes them for
 * host memory. Preloaded (ucx-cuda-run with CUX_MEMTYPE=hooks), this library sees the allocation calls of
 * the CUDA driver and runtime (cux_memtype_driver.c, cux_memtype_runtime.c, cux_memtype_dlsym.c) and reports
 * every buffer here, through UCM's event interface, as UCX's own hooks would.
 *
 * Buffers that UCP allocates through our memory domain reach the cache from the domain itself.
 * Allocations made before UCX starts are kept in a table and replayed to the cache when UCX subscribes
 * (UCM_EVENT_FLAG_EXISTING_ALLOC), by interposing ucm_set_event_handler too.
 */
#define _GNU_SOURCE
#include "memtype/cux_memtype_report.h"
#include "driver/cux_cuda.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ucm/api/ucm.h>
#include "compat/cux_ucx_compat.h"

/* Exported by libucm.so.0, declared only in UCX's internal headers. */
typedef void (*cux_ucm_dispatch_fn_t)(ucm_event_type_t event_type, ucm_event_t *event);
typedef ucs_status_t (*cux_ucm_set_handler_fn_t)(int events, int priority, ucm_event_callback_t cb, void *arg);

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
        dispatch = (cux_ucm_dispatch_fn_t)cux_memtype_real_dlsym(RTLD_DEFAULT, "ucm_event_dispatch");
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
    *(void**)&cux_mt_drv.ctx_get_flags         = cux_memtype_real_dlsym(handle, "cuCtxGetFlags");
    *(void**)&cux_mt_drv.ctx_set_flags         = cux_memtype_real_dlsym(handle, "cuCtxSetFlags");
    *(void**)&cux_mt_drv.pointer_set_attribute = cux_memtype_real_dlsym(handle, "cuPointerSetAttribute");
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

void cux_memtype_alloc(uintptr_t address, size_t size, ucs_memory_type_t mem_type)
{
    unsigned b = cux_mt_bucket(address);
    cux_mt_entry_t *entry, *fresh;

    if ((address == 0) || (size == 0)) {
        return;
    }
    cux_mt_sync_memops(address);
    fresh = malloc(sizeof(*fresh));
    pthread_mutex_lock(&cux_mt_lock);
    for (entry = cux_mt_table[b]; entry != NULL; entry = entry->next) {
        if ((entry->address == address) && (entry->size == size) && (entry->mem_type == mem_type)) {
            /* reported already: the runtime's call and the driver's under it, or our own domain's */
            pthread_mutex_unlock(&cux_mt_lock);
            free(fresh);
            return;
        }
    }
    if (fresh != NULL) {
        fresh->address = address;
        fresh->size    = size;
        fresh->mem_type = mem_type;
        fresh->next    = cux_mt_table[b];
        cux_mt_table[b] = fresh;
    }
    pthread_mutex_unlock(&cux_mt_lock);
    cux_mt_dispatch(UCM_EVENT_MEM_TYPE_ALLOC, address, size, mem_type);
}

void cux_memtype_free(uintptr_t address)
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
        next = (cux_ucm_set_handler_fn_t)cux_memtype_real_dlsym(RTLD_NEXT, "ucm_set_event_handler");
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
