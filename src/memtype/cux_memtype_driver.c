/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: the driver's allocation calls, however a program reaches them.
 *
 * A program linked with libcuda calls them by name: the functions below interpose on the driver's exported
 * symbols. The static CUDA runtime (nvcc's default), the shared runtime underneath its own names, PyTorch's
 * cudaGetDriverEntryPoint and our own module reach the driver another way: they open it, look up
 * cuGetProcAddress in it (dlsym, cux_memtype_dlsym.c) and ask that for every entry point. So cuGetProcAddress is
 * interposed too, and hands out the same functions for the allocation calls, but only where the ABI returned
 * is the one they were written for (cux_memtype_calls.h): any other entry point, and any ABI not known
 * here, is returned untouched.
 *
 * Each of our functions calls one driver pointer of its ABI, kept in its slot (below): the exported one found
 * by the dynamic linker (RTLD_NEXT), or one a cuGetProcAddress or dlsym returned.
 */
#define _GNU_SOURCE
#include "memtype/cux_memtype_driver.h"
#include "memtype/cux_memtype_calls.h"
#include "memtype/cux_memtype_report.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* cuGetProcAddress as CUDA 11.3-11.8 define it (the name's ABI for versions below 12000). */
typedef CUresult (*cux_mt_get_proc_v1_t)(const char *symbol, void **pfn, int version, cuuint64_t flags);
typedef CUresult (*cux_mt_get_proc_v2_t)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *status);

/* exported as cuGetProcAddress */
CUresult cuGetProcAddress_v1_abi(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");

/*
 * Each call has CUX_MT_SLOTS functions of its ABI, each calling its own driver pointer: the one exported under
 * its name (slot 0, by the dynamic linker: for calls by name) and the first others handed to us (cuGetProcAddress
 * may return another address than the symbol table's, and cuGetProcAddress asked for itself does). A pointer
 * beyond those is handed back untouched: its calls are not reported.
 */
#define CUX_MT_SLOTS 4

/* Slot 0 looked up and not found (a driver opened RTLD_LOCAL alone, as the static runtime does): asked once. */
static char cux_mt_none;

static void *cux_mt_slot(void **slots, unsigned slot, const char *symbol)
{
    void *next = __atomic_load_n(&slots[slot], __ATOMIC_ACQUIRE);

    if ((next == NULL) && (slot == 0)) {
        next = cux_memtype_real_dlsym(RTLD_NEXT, symbol); /* the same answer for every thread */
        __atomic_store_n(&slots[0], (next != NULL) ? next : &cux_mt_none, __ATOMIC_RELEASE);
    }
    return (next == &cux_mt_none) ? NULL : next;
}

/* ------------------------------------------------------------------ the allocation calls */

#define CUX_MT_ALLOC_FN(_fn, _sym, _slot, _mem_type, _params, _args, _address, _size) \
    CUresult _fn _params \
    { \
        CUresult (*next) _params = (CUresult (*) _params)cux_mt_slot(cux_mt_next_##_sym, _slot, #_sym); \
        CUresult res; \
        if (next == NULL) { \
            return CUDA_ERROR_NOT_SUPPORTED; \
        } \
        res = next _args; \
        if (res == CUDA_SUCCESS) { \
            cux_memtype_alloc((uintptr_t)(_address), (_size), (_mem_type)); \
        } \
        return res; \
    }

/* A release: the buffer reported gone first (a new buffer at its address must not meet a stale entry). */
#define CUX_MT_FREE_FN(_fn, _sym, _slot, _params, _args, _address) \
    CUresult _fn _params \
    { \
        CUresult (*next) _params = (CUresult (*) _params)cux_mt_slot(cux_mt_next_##_sym, _slot, #_sym); \
        if (next == NULL) { \
            return CUDA_ERROR_NOT_SUPPORTED; \
        } \
        cux_memtype_free((uintptr_t)(_address)); \
        return next _args; \
    }

/* The exported function of a call and its three others. */
#define CUX_MT_FUNCTIONS(_fn, _sym, _params, ...) \
    static void *cux_mt_next_##_sym[CUX_MT_SLOTS]; \
    CUresult _sym _params; \
    _fn(_sym, _sym, 0, __VA_ARGS__) \
    static _fn(cux_mt_##_sym##_1, _sym, 1, __VA_ARGS__) \
    static _fn(cux_mt_##_sym##_2, _sym, 2, __VA_ARGS__) \
    static _fn(cux_mt_##_sym##_3, _sym, 3, __VA_ARGS__)

#define CUX_MT_DRIVER_ALLOC(_sym, _api, _since, _ptds, _mem_type, _params, _args, _address, _size) \
    CUX_MT_FUNCTIONS(CUX_MT_ALLOC_FN, _sym, _params, _mem_type, _params, _args, _address, _size)
#define CUX_MT_DRIVER_FREE(_sym, _api, _since, _ptds, _params, _args, _address) \
    CUX_MT_FUNCTIONS(CUX_MT_FREE_FN, _sym, _params, _params, _args, _address)

CUX_MT_DRIVER_CALLS(CUX_MT_DRIVER_ALLOC, CUX_MT_DRIVER_FREE)

/* ------------------------------------------------------------------ cuGetProcAddress itself */

static void *cux_mt_wrap_proc(const char *api, void *pointer, int version, cuuint64_t flags);

#define CUX_MT_GET_PROC_V2_FN(_fn, _sym, _slot, _params, _args, _unused) \
    CUresult _fn _params \
    { \
        cux_mt_get_proc_v2_t next = (cux_mt_get_proc_v2_t)cux_mt_slot(cux_mt_next_##_sym, _slot, #_sym); \
        CUresult res; \
        if (next == NULL) { \
            return CUDA_ERROR_NOT_SUPPORTED; \
        } \
        res = next(symbol, pfn, version, flags, status); \
        if ((res == CUDA_SUCCESS) && (pfn != NULL)) { \
            *pfn = cux_mt_wrap_proc(symbol, *pfn, version, flags); \
        } \
        return res; \
    }

#define CUX_MT_GET_PROC_V1_FN(_fn, _sym, _slot, _params, _args, _unused) \
    CUresult _fn _params \
    { \
        cux_mt_get_proc_v1_t next = (cux_mt_get_proc_v1_t)cux_mt_slot(cux_mt_next_##_sym, _slot, "cuGetProcAddress"); \
        CUresult res; \
        if (next == NULL) { \
            return CUDA_ERROR_NOT_SUPPORTED; \
        } \
        res = next(symbol, pfn, version, flags); \
        if ((res == CUDA_SUCCESS) && (pfn != NULL)) { \
            *pfn = cux_mt_wrap_proc(symbol, *pfn, version, flags); \
        } \
        return res; \
    }

#define CUX_MT_GET_PROC_V2_PARAMS \
    (const char *symbol, void **pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status)
#define CUX_MT_GET_PROC_V1_PARAMS (const char *symbol, void **pfn, int version, cuuint64_t flags)

CUX_MT_FUNCTIONS(CUX_MT_GET_PROC_V2_FN, cuGetProcAddress_v2, CUX_MT_GET_PROC_V2_PARAMS, CUX_MT_GET_PROC_V2_PARAMS,
                 (), 0)
/* CUDA 11.3's cuGetProcAddress: the driver still exports it under the plain name */
CUX_MT_FUNCTIONS(CUX_MT_GET_PROC_V1_FN, cuGetProcAddress_v1_abi, CUX_MT_GET_PROC_V1_PARAMS,
                 CUX_MT_GET_PROC_V1_PARAMS, (), 0)

/* ------------------------------------------------------------------ which ABI a pointer is */

typedef struct {
    const char *symbol;                 /* the driver's exported name of this ABI */
    const char *api;                    /* the name cuGetProcAddress takes */
    int         since;                  /* the first version cuGetProcAddress returns this ABI for */
    int         ptds;                   /* the per-thread default stream twin */
    void       *wrapper[CUX_MT_SLOTS];  /* ours, of the same ABI */
    void      **next;                   /* the driver's, once known */
} cux_mt_call_t;

#define CUX_MT_CALL_ENTRY_OF(_sym, _name, _api, _since, _ptds) \
    {_name, _api, _since, _ptds, \
     {(void*)_sym, (void*)cux_mt_##_sym##_1, (void*)cux_mt_##_sym##_2, (void*)cux_mt_##_sym##_3}, \
     cux_mt_next_##_sym},
#define CUX_MT_CALL_ENTRY(_sym, _api, _since, _ptds, ...) CUX_MT_CALL_ENTRY_OF(_sym, #_sym, _api, _since, _ptds)

static const cux_mt_call_t cux_mt_calls[] = {
    CUX_MT_DRIVER_CALLS(CUX_MT_CALL_ENTRY, CUX_MT_CALL_ENTRY)
    CUX_MT_CALL_ENTRY_OF(cuGetProcAddress_v1_abi, "cuGetProcAddress", "cuGetProcAddress", 11030, 0)
    CUX_MT_CALL_ENTRY_OF(cuGetProcAddress_v2, "cuGetProcAddress_v2", "cuGetProcAddress", 12000, 0)
};

#define CUX_MT_NUM_CALLS (sizeof(cux_mt_calls) / sizeof(cux_mt_calls[0]))

static int cux_mt_slots_full;

/* Ours in place of a driver pointer of call's ABI: the function whose slot holds it, or a free one's. */
static void *cux_mt_wrap(const cux_mt_call_t *call, void *pointer)
{
    unsigned slot;
    void *held;

    for (slot = 0; slot < CUX_MT_SLOTS; ++slot) {
        if (pointer == call->wrapper[slot]) {
            return pointer;
        }
    }
    if (cux_mt_slot(call->next, 0, call->symbol) == pointer) {
        return call->wrapper[0];
    }
    for (slot = 1; slot < CUX_MT_SLOTS; ++slot) {
        held = NULL;
        if (__atomic_compare_exchange_n(&call->next[slot], &held, pointer, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE) || (held == pointer)) {
            return call->wrapper[slot];
        }
    }
    /* more pointers than slots (never seen: driver 580 returns its exports): left alone, and said once */
    if (!__atomic_exchange_n(&cux_mt_slots_full, 1, __ATOMIC_RELAXED)) {
        fprintf(stderr, "libcux_memtype: more than %d entry points of %s; allocations through the others are not "
                        "reported (use CUX_MEMTYPE=query)\n", CUX_MT_SLOTS, call->symbol);
    }
    return pointer;
}

void *cux_memtype_wrap_symbol(const char *name, void *pointer)
{
    unsigned i;

    if ((pointer == NULL) || (strncmp(name, "cu", 2) != 0)) {
        return pointer;
    }
    for (i = 0; i < CUX_MT_NUM_CALLS; ++i) {
        if (!strcmp(name, cux_mt_calls[i].symbol)) {
            return cux_mt_wrap(&cux_mt_calls[i], pointer);
        }
    }
    return pointer;
}

/* Does a request in this stream mode get call's twin rather than call? Only a call that takes a stream has a
 * per-thread default stream twin. */
static int cux_mt_twin_taken(const cux_mt_call_t *call, int ptds)
{
    const cux_mt_call_t *twin;

    if (call->ptds == ptds) {
        return 0;
    }
    for (twin = cux_mt_calls; twin < cux_mt_calls + CUX_MT_NUM_CALLS; ++twin) {
        if ((twin != call) && !strcmp(twin->api, call->api) && (twin->since == call->since)) {
            return 1;
        }
    }
    return 0;
}

/* Is this pointer, returned for call's API at version, call's ABI? Up to the version of the declarations we
 * were built with, the versions say it (cudaTypedefs.h); past it, a later ABI may have come, so only the
 * driver's own symbol table can: the pointer must be the very address it exports under call's name. */
static int cux_mt_is_abi(const cux_mt_call_t *call, void *pointer, int version, int ptds)
{
    const cux_mt_call_t *later;
    Dl_info info;

    if ((version < call->since) || cux_mt_twin_taken(call, ptds)) {
        return 0;
    }
    for (later = cux_mt_calls; later < cux_mt_calls + CUX_MT_NUM_CALLS; ++later) {
        if (!strcmp(later->api, call->api) && (later->since > call->since) && (version >= later->since)) {
            return 0; /* a newer ABI of the same name, known here */
        }
    }
    if (version <= CUDA_VERSION) {
        return 1;
    }
    return (dladdr(pointer, &info) != 0) && (info.dli_saddr == pointer) && (info.dli_sname != NULL) &&
           !strcmp(info.dli_sname, call->symbol);
}

static void *cux_mt_wrap_proc(const char *api, void *pointer, int version, cuuint64_t flags)
{
    int ptds = !!(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    const cux_mt_call_t *call;

    if ((pointer == NULL) || (api == NULL) || (strncmp(api, "cu", 2) != 0)) {
        return pointer;
    }
    for (call = cux_mt_calls; call < cux_mt_calls + CUX_MT_NUM_CALLS; ++call) {
        if (!strcmp(api, call->api) && cux_mt_is_abi(call, pointer, version, ptds)) {
            return cux_mt_wrap(call, pointer);
        }
    }
    return pointer;
}
