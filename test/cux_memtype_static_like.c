/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that reaches the driver as the static CUDA runtime does (issue 61): it opens the driver with a
 * handle of its own (RTLD_LOCAL: nothing of it in the global scope), looks up cuGetProcAddress there with dlsym
 * and gets every entry point from that, then allocates and frees each kind of GPU memory while UCX listens for
 * memory-type events, as UCX's test_cuda_hook does. Prints one line per call and what UCX heard.
 *
 *   cux_memtype_static_like [--expect-events]
 *
 * The driver is CUX_DRIVER_PATH (the mock in CI) or libcuda.so.1. With --expect-events (run with
 * CUX_MEMTYPE=hooks) every allocation must give one event and every release one, and lookups that depend on
 * their caller must still answer for the caller; without, the events are only counted. Exit 0 when all held.
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>

typedef CUresult (*get_proc_v2_t)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
typedef CUresult (*get_proc_v1_t)(const char*, void**, int, cuuint64_t);

static struct {
    int      allocs, frees;
    uintptr_t last_alloc, last_free;
} heard;
static int failures;
static int expect_events;

static void on_event(ucm_event_type_t type, ucm_event_t *event, void *arg)
{
    if (type == UCM_EVENT_MEM_TYPE_ALLOC) {
        ++heard.allocs;
        heard.last_alloc = (uintptr_t)event->mem_type.address;
    } else if (type == UCM_EVENT_MEM_TYPE_FREE) {
        ++heard.frees;
        heard.last_free = (uintptr_t)event->mem_type.address;
    }
}

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

/* One allocation and its release, by whatever calls: UCX must have heard of exactly one of each. */
static void expect_heard(const char *what, uintptr_t address, int allocs_before, int frees_before)
{
    char line[256];
    int allocs = heard.allocs - allocs_before, frees = heard.frees - frees_before;

    snprintf(line, sizeof(line), "%s: %d allocation and %d release events (address 0x%lx)", what, allocs, frees,
             (unsigned long)address);
    if (!expect_events) {
        printf("seen: %s\n", line);
        return;
    }
    check((allocs == 1) && (frees == 1) && (heard.last_alloc == address) && (heard.last_free == address), line);
}

#define GET(_fn, _api, _version, _flags) \
    do { \
        CUdriverProcAddressQueryResult _st; \
        if ((get_proc(_api, (void**)&(_fn), _version, _flags, &_st) != CUDA_SUCCESS) || ((_fn) == NULL)) { \
            printf("FAIL: cuGetProcAddress(%s, %d)\n", _api, _version); \
            return 1; \
        } \
    } while (0)

#define CALL(_call) \
    do { \
        CUresult _res = (_call); \
        if (_res != CUDA_SUCCESS) { \
            printf("FAIL: %s: %d\n", #_call, (int)_res); \
            return 1; \
        } \
    } while (0)

int main(int argc, char **argv)
{
    const char *path = getenv("CUX_DRIVER_PATH");
    CUresult (*init)(unsigned), (*primary_retain)(CUcontext*, CUdevice), (*push)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr*, size_t), (*mem_free)(CUdeviceptr);
    CUresult (*alloc_managed)(CUdeviceptr*, size_t, unsigned);
    CUresult (*alloc_async)(CUdeviceptr*, size_t, CUstream), (*free_async)(CUdeviceptr, CUstream);
    CUresult (*alloc_from_pool)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
    CUresult (*default_pool)(CUmemoryPool*, CUdevice), (*stream_sync)(CUstream);
    CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
    CUresult (*direct_alloc)(CUdeviceptr*, size_t), (*direct_free)(CUdeviceptr);
    CUmemAllocationProp prop = {0};
    CUmemGenericAllocationHandle handle;
    ucs_status_t (*set_handler)(int, int, ucm_event_callback_t, void*);
    void (*unset_handler)(int, ucm_event_callback_t, void*);
    get_proc_v2_t get_proc, get_proc_again;
    get_proc_v1_t get_proc_v1;
    CUdeviceptr p, base;
    CUmemoryPool pool;
    CUcontext ctx;
    ucp_context_h ucp;
    ucp_params_t params = {0};
    size_t gran;
    int a, f;
    void *driver, *self_next, *old_abi = NULL;
    Dl_info info;

    expect_events = (argc > 1) && !strcmp(argv[1], "--expect-events");
    driver = dlopen(((path != NULL) && (*path != '\0')) ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == NULL) {
        printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    *(void**)&init     = dlsym(driver, "cuInit");
    *(void**)&get_proc = dlsym(driver, "cuGetProcAddress_v2");
    if ((init == NULL) || (get_proc == NULL)) {
        printf("FAIL: the driver has no cuInit or cuGetProcAddress_v2\n");
        return 1;
    }
    CALL(init(0));

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG;
    if (ucp_init(&params, NULL, &ucp) != UCS_OK) {
        printf("FAIL: ucp_init\n");
        return 1;
    }
    /* libucm is libucs's dependency, not a development library everywhere: found where the process has it */
    *(void**)&set_handler   = dlsym(RTLD_DEFAULT, "ucm_set_event_handler");
    *(void**)&unset_handler = dlsym(RTLD_DEFAULT, "ucm_unset_event_handler");
    if ((set_handler == NULL) || (unset_handler == NULL) ||
        (set_handler(UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE, 1000, on_event, NULL) != UCS_OK)) {
        printf("FAIL: ucm_set_event_handler\n");
        return 1;
    }

    GET(primary_retain, "cuDevicePrimaryCtxRetain", 7000, 0);
    GET(push, "cuCtxPushCurrent", 4000, 0);
    CALL(primary_retain(&ctx, 0));
    CALL(push(ctx));

    /* cuMemAlloc and cuMemFree, as cudaMalloc and cudaFree reach them */
    GET(mem_alloc, "cuMemAlloc", 3020, 0);
    GET(mem_free, "cuMemFree", 3020, 0);
    a = heard.allocs, f = heard.frees;
    CALL(mem_alloc(&p, 1 << 20));
    CALL(mem_free(p));
    expect_heard("cuMemAlloc/cuMemFree through cuGetProcAddress", p, a, f);

    /* cuGetProcAddress asked for itself, at the CUDA version of the declarations */
    GET(get_proc_again, "cuGetProcAddress", CUDA_VERSION, 0);
    get_proc = get_proc_again;
    GET(mem_alloc, "cuMemAlloc", CUDA_VERSION, 0);
    GET(mem_free, "cuMemFree", CUDA_VERSION, 0);
    a = heard.allocs, f = heard.frees;
    CALL(mem_alloc(&p, 4096));
    CALL(mem_free(p));
    expect_heard("cuMemAlloc/cuMemFree through cuGetProcAddress from cuGetProcAddress", p, a, f);

    GET(alloc_managed, "cuMemAllocManaged", 6000, 0);
    a = heard.allocs, f = heard.frees;
    CALL(alloc_managed(&p, 65536, 1 /* CU_MEM_ATTACH_GLOBAL */));
    CALL(mem_free(p));
    expect_heard("cuMemAllocManaged/cuMemFree", p, a, f);

    /* the stream-ordered allocator, as cudaMallocAsync and pools reach it, per-thread default stream too */
    GET(alloc_async, "cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(free_async, "cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(stream_sync, "cuStreamSynchronize", 2000, 0);
    a = heard.allocs, f = heard.frees;
    CALL(alloc_async(&p, 65536, NULL));
    CALL(free_async(p, NULL));
    CALL(stream_sync(NULL));
    expect_heard("cuMemAllocAsync/cuMemFreeAsync (per-thread default stream)", p, a, f);
    GET(default_pool, "cuDeviceGetDefaultMemPool", 11020, 0);
    GET(alloc_from_pool, "cuMemAllocFromPoolAsync", 11020, 0);
    GET(free_async, "cuMemFreeAsync", 11020, 0);
    CALL(default_pool(&pool, 0));
    a = heard.allocs, f = heard.frees;
    CALL(alloc_from_pool(&p, 65536, pool, NULL));
    CALL(free_async(p, NULL));
    CALL(stream_sync(NULL));
    expect_heard("cuMemAllocFromPoolAsync/cuMemFreeAsync", p, a, f);

    /* VMM, as expandable segments map memory into a reserved range */
    GET(granularity, "cuMemGetAllocationGranularity", 10020, 0);
    GET(reserve, "cuMemAddressReserve", 10020, 0);
    GET(address_free, "cuMemAddressFree", 10020, 0);
    GET(create, "cuMemCreate", 10020, 0);
    GET(release, "cuMemRelease", 10020, 0);
    GET(map, "cuMemMap", 10020, 0);
    GET(unmap, "cuMemUnmap", 10020, 0);
    prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id   = 0;
    CALL(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CALL(reserve(&base, 4 * gran, 0, 0, 0));
    CALL(create(&handle, gran, &prop, 0));
    a = heard.allocs, f = heard.frees;
    CALL(map(base + gran, gran, 0, handle, 0));
    CALL(unmap(base + gran, gran));
    expect_heard("cuMemMap/cuMemUnmap", base + gran, a, f);
    CALL(release(handle));
    CALL(address_free(base, 4 * gran));

    /* entry points looked up one by one in the handle, as a runtime without cuGetProcAddress would */
    *(void**)&direct_alloc = dlsym(driver, "cuMemAlloc_v2");
    *(void**)&direct_free  = dlsym(driver, "cuMemFree_v2");
    if ((direct_alloc != NULL) && (direct_free != NULL)) {
        a = heard.allocs, f = heard.frees;
        CALL(direct_alloc(&p, 8192));
        CALL(direct_free(p));
        expect_heard("cuMemAlloc_v2/cuMemFree_v2 by dlsym in the handle", p, a, f);
    }

    /* CUDA 11's cuGetProcAddress (four parameters), where the driver still exports it */
    *(void**)&get_proc_v1 = dlsym(driver, "cuGetProcAddress");
    if (get_proc_v1 != NULL) {
        CALL(get_proc_v1("cuMemAlloc", (void**)&mem_alloc, 11030, 0));
        a = heard.allocs, f = heard.frees;
        CALL(mem_alloc(&p, 4096));
        CALL(mem_free(p));
        expect_heard("cuMemAlloc through CUDA 11's cuGetProcAddress", p, a, f);
    }

    /* an ABI the hooks do not know is handed back untouched: cuMemAlloc before CUDA 3.2 took 32-bit sizes */
    if (expect_events) {
        CUdriverProcAddressQueryResult st;
        if ((get_proc("cuMemAlloc", &old_abi, 2000, 0, &st) == CUDA_SUCCESS) && (old_abi != NULL)) {
            check((dladdr(old_abi, &info) != 0) && (info.dli_fname != NULL) &&
                  (strstr(info.dli_fname, "memtype") == NULL),
                  "cuMemAlloc at version 2000 (another ABI) is the driver's own");
        }
        /* a lookup whose answer depends on its caller still answers for the caller: the next
         * ucm_set_event_handler after this program is the preloaded hooks' own */
        self_next = dlsym(RTLD_NEXT, "ucm_set_event_handler");
        check((self_next != NULL) && (dladdr(self_next, &info) != 0) && (info.dli_fname != NULL) &&
              (strstr(info.dli_fname, "libcux_memtype") != NULL),
              "dlsym(RTLD_NEXT) answers for its caller");
        check(dlsym(RTLD_DEFAULT, "cuda_hooks_no_such_symbol") == NULL, "dlsym(RTLD_DEFAULT) of nothing is NULL");
    }

    unset_handler(UCM_EVENT_MEM_TYPE_ALLOC | UCM_EVENT_MEM_TYPE_FREE, on_event, NULL);
    ucp_cleanup(ucp);
    printf("%d allocation and %d release events heard; %s\n", heard.allocs, heard.frees,
           failures ? "FAILED" : "PASS");
    return failures ? 1 : 0;
}
