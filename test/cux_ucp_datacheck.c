/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cux_ucp_datacheck: data-checking UCP transfers between two processes, for every kind of GPU memory a program
 * may hand to UCP, as a user's program does it: buffers come straight from the CUDA driver or runtime (not
 * from UCX), and tag send/receive get no memory-type hint, so UCP must recognise the memory by itself.
 *
 *   cux_ucp_datacheck [--fill-sync] [--peer-errors [--kill-peer]] [--pid-namespace | --sibling-namespaces]
 *                 [--as-user UID:GID]
 *                 [--threads N] [--rounds N] [--timed N] [--wait-limit S] [--only I,J,...] [--sweep | SIZE...]
 *   cux_ucp_datacheck --list      (each case's index and name, tab-separated)
 *
 * Sizes: 8, 65539, 1 MiB and 16 MiB by default; --sweep takes every size across UCP's protocol thresholds
 * (1, 7-9, and 2^k-1, 2^k, 2^k+1 for k = 6..24). Each message sits inside a larger allocation, CHECK_LEAD
 * bytes from its start, with guard bytes before and after it that must stay untouched. One buffer on each
 * side goes back and forth: per size and round the first process fills its buffer and sends it, the second
 * poisons its own, receives, checks, changes the content and sends it back into the first one's buffer, which
 * checks it (default 2 rounds). --timed N then sends each size N times there and back with no fill or check
 * between, the first side printing the time per message (half a round trip: what the process start, the set-up
 * and the checks would drown), and checks its rounds once more after them. Every fill is a plain synchronous
 * cuMemcpy from pageable memory with nothing after it, as applications write; --fill-sync adds
 * cuCtxSynchronize after each fill. --peer-errors opens the endpoints with peer error handling
 * (UCP_ERR_HANDLING_MODE_PEER, as Python's UCX bindings do) and prints the first side's endpoint configuration,
 * to show which transports UCP chose in that mode; with --kill-peer the
 * second side then kills itself while the first has a rendezvous send to it outstanding, and that send must
 * end (in an error) instead of hanging. --only runs the cases
 * of those indices (0-based, in the order printed). --threads N: each process has one UCP worker in
 * UCS_THREAD_MODE_MULTI and N threads that use it at once, each with buffers and tags of its own; the first thread
 * of a process that fails ends the others' waits.
 *
 * Every case ends with a verdict in bounded time: a request or a step of the peer that does not complete within
 * --wait-limit seconds (default 120: far beyond any transfer here) fails the case with "no completion", whatever
 * lost it. CUX_TEST_DATACHECK_DROP=T makes the sending side's thread T skip its first send, as a lost message
 * would (for the test of that bound).
 *
 * The "across two allocations" cases map two cuMemCreate allocations one after another into one reserved range,
 * as PyTorch's expandable segments do, and every message longer than 4 KB spans the boundary.
 *
 * The VMM, two-allocation and shareable-pool cases (descriptors of cuMemCreate memory or of a pool) send their
 * sizes twice and fail if either process holds more descriptors after the second pass than after the first.
 *
 * --pid-namespace: the sending side runs as pid 1 of a PID namespace of its own, with its own mount namespace and
 * /proc, as in a container without a shared PID namespace (root; cuda_ipc reaches it with
 * UCX_CUDA_IPC_SOCKET_DIR set). --sibling-namespaces: each side runs as pid 1 of PID, mount, IPC and UTS namespaces of
 * its own, as two containers or pods do (both programs pid 1). --as-user UID:GID: each side then goes on as that
 * user and group with no capabilities (root, after the namespaces: a container's `runAsUser`), and makes its own
 * socket directory, UCX_CUDA_IPC_SOCKET_DIR, mode 0700, where it is not there yet (the recipes' `mkdir -p -m 700`
 * in a shared volume; docs/containers.md).
 *
 * Built as cux_ucp_datacheck_static_cudart with the CUDA runtime linked statically, it runs the runtime cases only.
 *
 * Each case runs in a fresh sender and receiver process, so a crash fails one case only. A case is skipped
 * when its memory kind is missing (no second GPU, no CUDA runtime, a driver without memory pools). Prints a
 * line per case and "N passed, N failed, N skipped"; exits 1 on any failure.
 *
 * The driver is opened with RTLD_GLOBAL and called through the global symbol scope, as a program linked
 * with libcuda would be (CUX_DRIVER_PATH picks another driver, such as the tests' mock).
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include "cux_own_pidns.h"
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <ucs/memory/memtype_cache.h>
#include <unistd.h>

#define CHECK_SKIP   77
#define CHECK_LEAD   4168    /* the message's offset in its allocation: bytes before it stay untouched */
#define CHECK_GUARD  64      /* bytes past the message that must stay untouched */
#define CHECK_POISON 0xa5

typedef enum {
    KIND_HOST, KIND_CUDA, KIND_MANAGED, KIND_POOL, KIND_RUNTIME, KIND_VMM, KIND_VMM_SPLIT, KIND_POOL_FD,
    KIND_RUNTIME_POOL_FD, KIND_VMM_FABRIC, KIND_POOL_FABRIC
} check_kind_t;

#ifdef CUX_CHECK_STATIC_CUDART
#define CHECK_RUNTIME_NAME "cudaMalloc (static runtime)"
#else
#define CHECK_RUNTIME_NAME "cudaMalloc"
#endif

static const char *kind_names[] = {"host", "cuMemAlloc", "cuMemAllocManaged", "cuMemAllocFromPoolAsync",
                                   CHECK_RUNTIME_NAME, "cuMemCreate (POSIX fd)",
                                   "two cuMemCreate in one range",
                                   "cuMemAllocFromPoolAsync (pool with POSIX fd)",
                                   "cudaMallocFromPoolAsync (runtime pool with POSIX fd)",
                                   "cuMemCreate (fabric)", "cuMemAllocFromPoolAsync (pool with fabric)"};
_Static_assert(sizeof(kind_names) / sizeof(kind_names[0]) == KIND_POOL_FABRIC + 1, "a kind without a name");

typedef struct {
    check_kind_t kind;
    int          device;
} check_mem_t;

typedef struct {
    const char *what;
    check_mem_t send, recv;
} check_case_t;

static const check_case_t check_cases[] = {
    {"GPU0 -> GPU1 (cuda_ipc)",           {KIND_CUDA, 0},    {KIND_CUDA, 1}},
    {"GPU0 -> GPU0, two processes",       {KIND_CUDA, 0},    {KIND_CUDA, 0}},
    {"host -> GPU0 (cuda_copy)",          {KIND_HOST, 0},    {KIND_CUDA, 0}},
    {"GPU0 -> host (cuda_copy)",          {KIND_CUDA, 0},    {KIND_HOST, 0}},
    {"managed GPU0 -> GPU1",              {KIND_MANAGED, 0}, {KIND_CUDA, 1}},
    {"GPU0 -> managed GPU1",              {KIND_CUDA, 0},    {KIND_MANAGED, 1}},
    {"pool GPU0 -> GPU1",                 {KIND_POOL, 0},    {KIND_CUDA, 1}},
    {"GPU0 -> pool GPU1",                 {KIND_CUDA, 0},    {KIND_POOL, 1}},
    {"runtime GPU0 -> runtime GPU1",      {KIND_RUNTIME, 0}, {KIND_RUNTIME, 1}},
    {"VMM GPU0 -> VMM GPU1",              {KIND_VMM, 0},     {KIND_VMM, 1}},
    {"VMM GPU0 -> VMM GPU0, two processes", {KIND_VMM, 0},   {KIND_VMM, 0}},
    {"VMM across two allocations GPU0 -> GPU1", {KIND_VMM_SPLIT, 0}, {KIND_VMM_SPLIT, 1}},
    {"VMM across two allocations GPU0 -> GPU0, two processes", {KIND_VMM_SPLIT, 0}, {KIND_VMM_SPLIT, 0}},
    {"shareable pool GPU0 -> shareable pool GPU1", {KIND_POOL_FD, 0}, {KIND_POOL_FD, 1}},
    {"shareable pool GPU0 -> GPU0, two processes", {KIND_POOL_FD, 0}, {KIND_POOL_FD, 0}},
    {"runtime shareable pool GPU0 -> runtime shareable pool GPU1", {KIND_RUNTIME_POOL_FD, 0},
                                                                   {KIND_RUNTIME_POOL_FD, 1}},
    {"runtime shareable pool GPU0 -> GPU0, two processes", {KIND_RUNTIME_POOL_FD, 0}, {KIND_RUNTIME_POOL_FD, 0}},
    /* the fabric handle type alone (NVLink-domain allocators): VMM memory only where the driver makes it (an IMEX
     * channel), pools everywhere (exported as fabric by UCX 1.22's module, and by ours where a channel is) */
    {"fabric VMM GPU0 -> fabric VMM GPU1", {KIND_VMM_FABRIC, 0}, {KIND_VMM_FABRIC, 1}},
    {"fabric VMM GPU0 -> GPU0, two processes", {KIND_VMM_FABRIC, 0}, {KIND_VMM_FABRIC, 0}},
    {"fabric pool GPU0 -> fabric pool GPU1", {KIND_POOL_FABRIC, 0}, {KIND_POOL_FABRIC, 1}},
};

#define CHECK_MAX_SIZES 128
#define CHECK_MAX_THREADS 16

static size_t check_sizes[CHECK_MAX_SIZES] = {8, 65539, 1 << 20, 16 << 20};
static int    check_num_sizes = 4;
static int    check_rounds    = 2;
static int    check_timed     = 0; /* --timed: untimed-check round trips per size after the checked ones */
static int    check_fill_sync = 0;
static double check_wait_limit = 120;  /* seconds a request or the peer's step may take before the case fails */
static int    check_drop_thread = -1;  /* CUX_TEST_DATACHECK_DROP: this sending thread skips its first send */
static int    check_thread_failed;     /* a thread of this process failed: the others stop waiting */
static int    check_peer_errors = 0;
static int    check_kill_peer   = 0;
static int    check_pid_namespace = 0; /* 1: the sender in a namespace of its own; 2: each side in its own */
static long   check_uid = -1, check_gid = -1; /* --as-user */
static int    check_threads     = 1;
static const char *check_only     = NULL; /* comma-separated case indices, NULL for all */
static CUcontext check_ctx;               /* made current in every thread */

/* ------------------------------------------------------------------ CUDA, through the global scope */

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_count)(int*);
    CUresult (*ctx_retain)(CUcontext*, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr*, size_t);
    CUresult (*alloc_managed)(CUdeviceptr*, size_t, unsigned);
    CUresult (*free)(CUdeviceptr);
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*ctx_sync)(void);
    CUresult (*default_pool)(CUmemoryPool*, CUdevice);
    CUresult (*pool_create)(CUmemoryPool*, const CUmemPoolProps*);
    CUresult (*alloc_pool)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*stream_sync)(CUstream);
    CUresult (*vmm_granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
    CUresult (*vmm_create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
    CUresult (*vmm_release)(CUmemGenericAllocationHandle);
    CUresult (*vmm_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*vmm_address_free)(CUdeviceptr, size_t);
    CUresult (*vmm_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*vmm_unmap)(CUdeviceptr, size_t);
    CUresult (*vmm_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
    int      (*rt_set_device)(int);
    int      (*rt_malloc)(void**, size_t);
    int      (*rt_free)(void*);
    /* the runtime's pools; its cudaMemPoolProps has the driver's CUmemPoolProps layout and values */
    int      (*rt_pool_create)(void**, const CUmemPoolProps*);
    int      (*rt_malloc_from_pool)(void**, size_t, void*, void*);
    int      (*rt_free_async)(void*, void*);
    int      (*rt_stream_sync)(void*);
} cu;

#define CHECK_SYM(_field, _name) *(void**)&cu._field = dlsym(RTLD_DEFAULT, _name)

#ifdef CUX_CHECK_STATIC_CUDART
/* The runtime is linked into this program: its calls never go through the dynamic linker. */
int cudaSetDevice(int device);
int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);
int cudaMemPoolCreate(void **pool, const CUmemPoolProps *props);
int cudaMallocFromPoolAsync(void **ptr, size_t size, void *pool, void *stream);
int cudaFreeAsync(void *ptr, void *stream);
int cudaStreamSynchronize(void *stream);
#endif

static int cuda_open(int device)
{
    const char *path = getenv("CUX_DRIVER_PATH");
    CUcontext ctx;
    int count = 0;

    if (dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == NULL) {
        fprintf(stderr, "no CUDA driver: %s\n", dlerror());
        return -1;
    }
#ifndef CUX_CHECK_STATIC_CUDART
    const char *runtimes[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    for (unsigned i = 0; i < 3 && !getenv("CUX_DRIVER_PATH"); ++i) { /* the runtime needs the real driver */
        if (dlopen(runtimes[i], RTLD_NOW | RTLD_GLOBAL) != NULL) {
            break;
        }
    }
#endif
    CHECK_SYM(init, "cuInit");
    CHECK_SYM(device_count, "cuDeviceGetCount");
    CHECK_SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
    CHECK_SYM(ctx_set, "cuCtxSetCurrent");
    CHECK_SYM(alloc, "cuMemAlloc_v2");
    CHECK_SYM(alloc_managed, "cuMemAllocManaged");
    CHECK_SYM(free, "cuMemFree_v2");
    CHECK_SYM(copy, "cuMemcpy");
    CHECK_SYM(ctx_sync, "cuCtxSynchronize");
    CHECK_SYM(default_pool, "cuDeviceGetDefaultMemPool");
    CHECK_SYM(pool_create, "cuMemPoolCreate");
    CHECK_SYM(alloc_pool, "cuMemAllocFromPoolAsync");
    CHECK_SYM(free_async, "cuMemFreeAsync");
    CHECK_SYM(stream_sync, "cuStreamSynchronize");
    CHECK_SYM(vmm_granularity, "cuMemGetAllocationGranularity");
    CHECK_SYM(vmm_create, "cuMemCreate");
    CHECK_SYM(vmm_release, "cuMemRelease");
    CHECK_SYM(vmm_reserve, "cuMemAddressReserve");
    CHECK_SYM(vmm_address_free, "cuMemAddressFree");
    CHECK_SYM(vmm_map, "cuMemMap");
    CHECK_SYM(vmm_unmap, "cuMemUnmap");
    CHECK_SYM(vmm_set_access, "cuMemSetAccess");
#ifdef CUX_CHECK_STATIC_CUDART
    cu.rt_set_device       = cudaSetDevice;
    cu.rt_malloc           = cudaMalloc;
    cu.rt_free             = cudaFree;
    cu.rt_pool_create      = cudaMemPoolCreate;
    cu.rt_malloc_from_pool = cudaMallocFromPoolAsync;
    cu.rt_free_async       = cudaFreeAsync;
    cu.rt_stream_sync      = cudaStreamSynchronize;
#else
    CHECK_SYM(rt_set_device, "cudaSetDevice");
    CHECK_SYM(rt_malloc, "cudaMalloc");
    CHECK_SYM(rt_free, "cudaFree");
    CHECK_SYM(rt_pool_create, "cudaMemPoolCreate");
    CHECK_SYM(rt_malloc_from_pool, "cudaMallocFromPoolAsync");
    CHECK_SYM(rt_free_async, "cudaFreeAsync");
    CHECK_SYM(rt_stream_sync, "cudaStreamSynchronize");
#endif
    if (!cu.init || !cu.device_count || !cu.ctx_retain || !cu.ctx_set || !cu.alloc || !cu.free || !cu.copy ||
        !cu.ctx_sync ||
        cu.init(0) || cu.device_count(&count)) {
        fprintf(stderr, "the CUDA driver lacks an entry point or does not initialise\n");
        return -1;
    }
    if (device >= count) {
        return CHECK_SKIP;
    }
    if (cu.ctx_retain(&ctx, device) || cu.ctx_set(ctx)) {
        fprintf(stderr, "no context on GPU%d\n", device);
        return -1;
    }
    check_ctx = ctx;
    return 0;
}

/* VMM memory as PyTorch's and other allocators make it: cuMemCreate with a POSIX descriptor handle type, mapped
 * into a reserved range, readable and writable from the device. The size is rounded up to the granularity and
 * kept in front of nothing: mem_free asks the driver nothing but the unmap of what was mapped. */
static size_t check_vmm_size(size_t size, const CUmemAllocationProp *prop)
{
    size_t granularity = 0;

    if (cu.vmm_granularity(&granularity, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || (granularity == 0)) {
        return 0;
    }
    return (size + granularity - 1) / granularity * granularity;
}

/* cuMemCreate memory of a device, exportable as a POSIX file descriptor (or, for KIND_VMM_FABRIC, as a fabric
 * handle only). */
static CUmemAllocationProp vmm_prop(int device, int kind)
{
    CUmemAllocationProp prop = {0};

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = device;
    prop.requestedHandleTypes = (kind == KIND_VMM_FABRIC) ? CU_MEM_HANDLE_TYPE_FABRIC :
                                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static int vmm_missing(void)
{
    return !cu.vmm_granularity || !cu.vmm_create || !cu.vmm_release || !cu.vmm_reserve || !cu.vmm_map ||
           !cu.vmm_set_access || !cu.vmm_unmap || !cu.vmm_address_free;
}

/* A new allocation of len bytes mapped at at, readable and writable from the device; the mapping holds it.
 * CHECK_SKIP where the driver refuses the kind's handle type (fabric without an IMEX channel). */
static int vmm_map_new(int device, int kind, CUdeviceptr at, size_t len)
{
    CUmemAllocationProp prop = vmm_prop(device, kind);
    CUmemAccessDesc access   = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle handle;
    CUresult res;
    int rc;

    res = cu.vmm_create(&handle, len, &prop, 0);
    if (res != CUDA_SUCCESS) {
        return ((kind == KIND_VMM_FABRIC) && (res == CUDA_ERROR_NOT_PERMITTED)) ? CHECK_SKIP : -1;
    }
    rc = (cu.vmm_map(at, len, 0, handle, 0) || cu.vmm_set_access(at, len, &access, 1)) ? -1 : 0;
    cu.vmm_release(handle);
    return rc;
}

static int vmm_alloc(int device, int kind, size_t size, CUdeviceptr *dptr)
{
    CUmemAllocationProp prop = vmm_prop(device, kind);
    int rc;

    if (vmm_missing()) {
        return CHECK_SKIP;
    }
    size = check_vmm_size(size, &prop);
    if ((size == 0) || cu.vmm_reserve(dptr, size, 0, 0, 0)) {
        return -1;
    }
    rc = vmm_map_new(device, kind, *dptr, size);
    if (rc != 0) {
        cu.vmm_address_free(*dptr, size);
    }
    return rc;
}

/* PyTorch's expandable segments: one reserved range, several cuMemCreate allocations mapped one after another,
 * a tensor across the boundary. Here two allocations; the buffer starts CHECK_LEAD + CHECK_SPLIT_AT bytes before
 * the boundary, so that every message longer than CHECK_SPLIT_AT bytes spans both. */
#define CHECK_SPLIT_AT 4096

static int vmm_split_layout(int device, size_t size, size_t *first_p, size_t *second_p, size_t *offset_p)
{
    CUmemAllocationProp prop = vmm_prop(device, KIND_VMM);

    *first_p  = check_vmm_size(CHECK_LEAD + CHECK_SPLIT_AT, &prop);
    *offset_p = *first_p - CHECK_LEAD - CHECK_SPLIT_AT;
    *second_p = check_vmm_size(*offset_p + size - *first_p + 1, &prop);
    return (*first_p != 0) && (*second_p != 0);
}

static int vmm_split_alloc(int device, size_t size, CUdeviceptr *dptr)
{
    size_t first, second, offset;
    CUdeviceptr base;

    if (vmm_missing()) {
        return CHECK_SKIP;
    }
    if (!vmm_split_layout(device, size, &first, &second, &offset) ||
        cu.vmm_reserve(&base, first + second, 0, 0, 0) || vmm_map_new(device, KIND_VMM, base, first) ||
        vmm_map_new(device, KIND_VMM, base + first, second)) {
        return -1;
    }
    *dptr = base + offset;
    return 0;
}

static void vmm_split_free(int device, CUdeviceptr dptr, size_t size)
{
    size_t first, second, offset;

    if (vmm_split_layout(device, size, &first, &second, &offset)) {
        cu.vmm_unmap(dptr - offset, first);
        cu.vmm_unmap(dptr - offset + first, second);
        cu.vmm_address_free(dptr - offset, first + second);
    }
}

static void vmm_free(int device, CUdeviceptr dptr, size_t size)
{
    CUmemAllocationProp prop = vmm_prop(device, KIND_VMM);

    size = check_vmm_size(size, &prop);
    cu.vmm_unmap(dptr, size);
    cu.vmm_address_free(dptr, size);
}

/* A pool on device whose memory other processes can import: the POSIX descriptor handle type. */
static CUmemPoolProps shareable_pool_props(int device)
{
    CUmemPoolProps props = {};

    props.allocType     = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes   = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id   = device;
    return props;
}

/* The pool of a KIND_POOL kind: the device's default pool (no shareable handle type), or one made once with the
 * POSIX descriptor handle type, as an application makes its pools shareable (RMM, PyTorch's pool IPC), or with
 * the fabric handle type (KIND_POOL_FABRIC), as NVLink-domain applications make theirs. */
static int mem_pool(const check_mem_t *mem, CUmemoryPool *pool)
{
    static CUmemoryPool shareable, fabric;
    CUmemoryPool *made   = (mem->kind == KIND_POOL_FABRIC) ? &fabric : &shareable;
    CUmemPoolProps props = shareable_pool_props(mem->device);

    if (!cu.alloc_pool || !cu.stream_sync || !cu.free_async) {
        return CHECK_SKIP;
    }
    if (mem->kind == KIND_POOL) {
        return (cu.default_pool && !cu.default_pool(pool, mem->device)) ? 0 : CHECK_SKIP;
    }
    if (mem->kind == KIND_POOL_FABRIC) {
        props.handleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    }
    if (*made == NULL) {
        if (!cu.pool_create || cu.pool_create(made, &props)) {
            return CHECK_SKIP;
        }
    }
    *pool = *made;
    return 0;
}

/* A KIND_RUNTIME_POOL_FD buffer: from a pool the CUDA runtime made with the POSIX descriptor handle type, as an
 * application using cudaMallocFromPoolAsync makes its pool shareable; the stream synchronised before UCX sees it. */
static int mem_runtime_pool_alloc(const check_mem_t *mem, size_t size, void **ptr)
{
    static void *pool;
    CUmemPoolProps props = shareable_pool_props(mem->device);

    if (!cu.rt_set_device || !cu.rt_pool_create || !cu.rt_malloc_from_pool || !cu.rt_free_async ||
        !cu.rt_stream_sync) {
        return CHECK_SKIP;
    }
    if (cu.rt_set_device(mem->device)) {
        return -1;
    }
    if (pool == NULL) {
        if (cu.rt_pool_create(&pool, &props)) {
            return CHECK_SKIP; /* the runtime cannot make shareable pools here */
        }
    }
    return (cu.rt_malloc_from_pool(ptr, size, pool, NULL) || cu.rt_stream_sync(NULL)) ? -1 : 0;
}

/* Returns 0, CHECK_SKIP when this kind of memory is not available here, or -1. */
static int mem_alloc(const check_mem_t *mem, size_t size, void **ptr)
{
    CUdeviceptr dptr = 0;
    CUmemoryPool pool;

    switch (mem->kind) {
    case KIND_HOST:
        *ptr = malloc(size);
        return (*ptr != NULL) ? 0 : -1;
    case KIND_CUDA:
        if (cu.alloc(&dptr, size)) {
            return -1;
        }
        break;
    case KIND_MANAGED:
        if (!cu.alloc_managed) {
            return CHECK_SKIP;
        }
        if (cu.alloc_managed(&dptr, size, CU_MEM_ATTACH_GLOBAL)) {
            return -1;
        }
        break;
    case KIND_POOL:
    case KIND_POOL_FD:
    case KIND_POOL_FABRIC: {
        int rc = mem_pool(mem, &pool);
        if (rc != 0) {
            return rc;
        }
        if (cu.alloc_pool(&dptr, size, pool, NULL) || cu.stream_sync(NULL)) {
            return -1;
        }
        break;
    }
    case KIND_VMM:
    case KIND_VMM_FABRIC:
    case KIND_VMM_SPLIT: {
        int rc = (mem->kind != KIND_VMM_SPLIT) ? vmm_alloc(mem->device, mem->kind, size, &dptr) :
                                                 vmm_split_alloc(mem->device, size, &dptr);
        if (rc != 0) {
            return rc;
        }
        break;
    }
    case KIND_RUNTIME_POOL_FD:
        return mem_runtime_pool_alloc(mem, size, ptr);
    case KIND_RUNTIME:
        if (!cu.rt_set_device || !cu.rt_malloc) {
            return CHECK_SKIP;
        }
        if (cu.rt_set_device(mem->device) || cu.rt_malloc(ptr, size)) {
            return -1;
        }
        return 0;
    }
    *ptr = (void*)(uintptr_t)dptr;
    return 0;
}

static void mem_free(const check_mem_t *mem, void *ptr, size_t size)
{
    switch (mem->kind) {
    case KIND_VMM:
    case KIND_VMM_FABRIC:
        vmm_free(mem->device, (uintptr_t)ptr, size);
        break;
    case KIND_VMM_SPLIT:
        vmm_split_free(mem->device, (uintptr_t)ptr, size);
        break;
    case KIND_HOST:
        free(ptr);
        break;
    case KIND_POOL:
    case KIND_POOL_FD:
    case KIND_POOL_FABRIC:
        cu.free_async((uintptr_t)ptr, NULL);
        cu.stream_sync(NULL);
        break;
    case KIND_RUNTIME:
        cu.rt_free(ptr);
        break;
    case KIND_RUNTIME_POOL_FD:
        cu.rt_free_async(ptr, NULL);
        cu.rt_stream_sync(NULL);
        break;
    default:
        cu.free((uintptr_t)ptr);
    }
}

/* With UCP's memory-type cache on, the buffer (allocated before UCP started) must be in it with its type, or as
 * "unknown" (UCX's own hooks): that is what allocation hooks are for. With the cache off there is nothing to
 * check. */
static int mem_check_cache(const check_mem_t *mem, void *ptr, size_t size)
{
    ucs_memory_type_t expect = (mem->kind == KIND_HOST) ? UCS_MEMORY_TYPE_HOST :
                               (mem->kind == KIND_MANAGED) ? UCS_MEMORY_TYPE_CUDA_MANAGED :
                               UCS_MEMORY_TYPE_CUDA;
    ucs_memory_info_t info;
    ucs_status_t status;

    status = ucs_memtype_cache_lookup(ptr, size, &info);
    if (status == UCS_ERR_UNSUPPORTED) {
        return 0; /* UCX_MEMTYPE_CACHE=n */
    } else if ((status == UCS_OK) && (info.type == UCS_MEMORY_TYPE_UNKNOWN)) {
        return 0; /* a CUDA build of UCX: its hooks report "unknown" and UCP asks the memory domains */
    } else if (status == UCS_ERR_NO_ELEM) {
        info.type = UCS_MEMORY_TYPE_HOST; /* what UCP assumes */
    } else if (status != UCS_OK) {
        info.type = UCS_MEMORY_TYPE_UNKNOWN;
    }
    if (info.type != expect) {
        fprintf(stderr, "UCP's memory-type cache says %s for %s memory\n", ucs_memory_type_names[info.type],
                kind_names[mem->kind]);
        return -1;
    }
    return 0;
}

/* A synchronous copy, as applications fill and read their buffers: cuMemcpy from or to pageable memory, and
 * nothing else unless --fill-sync asks for it. cuMemcpy from pageable memory may return before its DMA has
 * landed; UCX's own module makes such copies synchronous on GPU memory it knows of, and so must ours. */
static int mem_copy(const check_mem_t *mem, void *dst, const void *src, size_t size)
{
    if (mem->kind == KIND_HOST) {
        memcpy(dst, src, size);
        return 0;
    }
    return (cu.copy((uintptr_t)dst, (uintptr_t)src, size) || (check_fill_sync && cu.ctx_sync())) ? -1 : 0;
}

/* ------------------------------------------------------------------ one side of a case */

/* Content of a message: differs by size, by round and by direction, so stale data of any earlier message
 * shows. */
static uint8_t pattern_byte(size_t i, size_t size, unsigned fill)
{
    return (uint8_t)((i * 131 + size + fill * 29) ^ (i >> 9) ^ (fill << 3));
}

static int sock_xfer(int fd, void *buf, size_t len, int out)
{
    size_t done = 0;
    ssize_t n;

    while (done < len) {
        n = out ? send(fd, (char*)buf + done, len - done, MSG_NOSIGNAL) : recv(fd, (char*)buf + done, len - done, 0);
        if (n <= 0) {
            return -1;
        }
        done += n;
    }
    return 0;
}

/* The peer gave up: it exited, crashed, or reported a failed step (sync_step) while we wait for a message from
 * it, so nothing it owed will come. A step it finished well (a zero byte) is not giving up. */
static int peer_gone(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t n;
    char c;

    if (poll(&pfd, 1, 0) <= 0) {
        return 0;
    }
    n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return (n == 0) || ((n == 1) && (c != 0));
}

static int ucp_wait(ucp_worker_h worker, void *req, const char *what, int fd)
{
    struct timespec start, now;
    ucs_status_t status;
    unsigned long n = 0;

    if (UCS_PTR_IS_ERR(req)) {
        fprintf(stderr, "%s: %s\n", what, ucs_status_string(UCS_PTR_STATUS(req)));
        return -1;
    }
    if (req == NULL) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    while ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
        if (++n % 4096 != 0) {
            continue;
        }
        /* the request stays with UCP, which this process leaves soon after */
        if (peer_gone(fd)) {
            fprintf(stderr, "%s: the peer process gave up\n", what);
            return -1;
        }
        if (__atomic_load_n(&check_thread_failed, __ATOMIC_RELAXED)) {
            fprintf(stderr, "%s: another thread of this process failed\n", what);
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) > check_wait_limit) {
            fprintf(stderr, "%s: no completion after %.0f s (a lost message or completion)\n", what,
                    check_wait_limit);
            return -1;
        }
    }
    ucp_request_free(req);
    if (status != UCS_OK) {
        fprintf(stderr, "%s: %s\n", what, ucs_status_string(status));
        return -1;
    }
    return 0;
}

/* Fill the message with content number `fill`. */
static int fill_message(const check_mem_t *mem, uint8_t *msg, uint8_t *host, size_t size, unsigned fill)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        host[i] = pattern_byte(i, size, fill);
    }
    return mem_copy(mem, msg, host, size);
}

/* Read back the lead, the message and the guard, and compare: the message must hold content `fill`, the rest
 * the poison. Says where and what differs first. */
static int check_buffer(const check_mem_t *mem, uint8_t *buf, uint8_t *host, size_t size, unsigned fill,
                        const char *what)
{
    size_t total = CHECK_LEAD + size + CHECK_GUARD, i, msg;
    uint8_t expect;

    if (mem_copy(mem, host, buf, total)) {
        fprintf(stderr, "%s: reading the buffer back failed\n", what);
        return -1;
    }
    for (i = 0; i < total; ++i) {
        msg    = i - CHECK_LEAD;
        expect = ((i >= CHECK_LEAD) && (msg < size)) ? pattern_byte(msg, size, fill) : CHECK_POISON;
        if (host[i] != expect) {
            fprintf(stderr, "%s, %zu bytes, content %u: %s byte %zu is 0x%02x, expected 0x%02x%s\n", what, size,
                    fill, (i < CHECK_LEAD) ? "lead" : (msg < size) ? "message" : "guard",
                    (i < CHECK_LEAD) ? i : (msg < size) ? msg : msg - size, host[i], expect,
                    ((i >= CHECK_LEAD) && (msg < size) && (host[i] == CHECK_POISON)) ? " (the poison: stale)" :
                    ((i >= CHECK_LEAD) && (msg < size) && fill && (host[i] == pattern_byte(msg, size, fill - 1))) ?
                    " (the previous content: stale)" : "");
            return -1;
        }
    }
    return 0;
}

/* Is this the send of the thread that skips its first one (CUX_TEST_DATACHECK_DROP)? Once. */
static int drop_this_send(int thread)
{
    int expected = thread;

    return __atomic_compare_exchange_n(&check_drop_thread, &expected, -1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* Both sides finish a step before the next: a failure ends the case on both. */
static int sync_step(int fd, int rc)
{
    char sync = (char)(rc != 0);

    if (sock_xfer(fd, &sync, 1, 1) || sock_xfer(fd, &sync, 1, 0) || sync) {
        return -1;
    }
    return rc;
}

/*
 * One size, `check_rounds` round trips of one buffer on each side. The first side (the case's sender) fills
 * and sends content 2r, and receives 2r+1 back into the same buffer; the second poisons its buffer, receives
 * 2r, checks it, fills 2r+1 and sends it back.
 */
static int run_rounds(const check_mem_t *mem, int first, ucp_worker_h worker, ucp_ep_h ep, int fd, uint8_t *buf,
                      uint8_t *host, size_t size, int thread)
{
    uint8_t *msg               = buf + CHECK_LEAD;
    ucp_request_param_t rparam = {0};
    char what[64];
    int r, rc = 0;
    ucp_tag_t tag;

    for (r = 0; (r < check_rounds) && (rc == 0); ++r) {
        tag = ((ucp_tag_t)size << 24) | ((ucp_tag_t)thread << 16) | ((ucp_tag_t)r << 1);
        if (first) {
            snprintf(what, sizeof(what), "thread %d, round %d, sent back", thread, r);
            rc = fill_message(mem, msg, host, size, 2 * r) ||
                 (drop_this_send(thread) ? 0 :
                  ucp_wait(worker, ucp_tag_send_nbx(ep, msg, size, tag, &rparam), "tag send", fd)) ||
                 ucp_wait(worker, ucp_tag_recv_nbx(worker, msg, size, tag | 1, (ucp_tag_t)-1, &rparam),
                          "tag receive", fd) ||
                 check_buffer(mem, buf, host, size, 2 * r + 1, what);
        } else {
            snprintf(what, sizeof(what), "thread %d, round %d, received", thread, r);
            memset(host, CHECK_POISON, CHECK_LEAD + size + CHECK_GUARD);
            rc = mem_copy(mem, buf, host, CHECK_LEAD + size + CHECK_GUARD) ||
                 ucp_wait(worker, ucp_tag_recv_nbx(worker, msg, size, tag, (ucp_tag_t)-1, &rparam),
                          "tag receive", fd) ||
                 check_buffer(mem, buf, host, size, 2 * r, what) ||
                 fill_message(mem, msg, host, size, 2 * r + 1) ||
                 ucp_wait(worker, ucp_tag_send_nbx(ep, msg, size, tag | 1, &rparam), "tag send", fd);
        }
        rc = rc ? -1 : 0;
    }
    return rc;
}

/* --timed: `check_timed` round trips of one size, nothing between them but the transfers (tags of thread 255, which
 * no checking thread has); the first side prints the mean time per message. */
static int run_timed(int first, ucp_worker_h worker, ucp_ep_h ep, int fd, uint8_t *buf, size_t size)
{
    uint8_t *msg               = buf + CHECK_LEAD;
    ucp_tag_t tag              = ((ucp_tag_t)size << 24) | ((ucp_tag_t)0xff << 16);
    ucp_request_param_t rparam = {0};
    struct timespec t0, t1;
    int i, rc = 0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; (i < check_timed) && (rc == 0); ++i) {
        if (first) {
            rc = ucp_wait(worker, ucp_tag_send_nbx(ep, msg, size, tag, &rparam), "timed send", fd) ||
                 ucp_wait(worker, ucp_tag_recv_nbx(worker, msg, size, tag | 1, (ucp_tag_t)-1, &rparam),
                          "timed receive", fd);
        } else {
            rc = ucp_wait(worker, ucp_tag_recv_nbx(worker, msg, size, tag, (ucp_tag_t)-1, &rparam),
                          "timed receive", fd) ||
                 ucp_wait(worker, ucp_tag_send_nbx(ep, msg, size, tag | 1, &rparam), "timed send", fd);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if ((rc == 0) && first) {
        printf("    timed %zu bytes: %.2f us per message (%d round trips, half of each)\n", size,
               ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-3) /
               (2.0 * check_timed), check_timed);
        fflush(stdout);
    }
    return rc ? -1 : 0;
}

/* One size's checked rounds; with `timed`, the timed round trips and the checked rounds once more after them. */
static int run_size(const check_mem_t *mem, int first, ucp_worker_h worker, ucp_ep_h ep, int fd, uint8_t *buf,
                    uint8_t *host, size_t size, int timed)
{
    int rc = sync_step(fd, run_rounds(mem, first, worker, ep, fd, buf, host, size, 0));

    if ((rc == 0) && timed) {
        rc = sync_step(fd, run_timed(first, worker, ep, fd, buf, size)) ||
             sync_step(fd, run_rounds(mem, first, worker, ep, fd, buf, host, size, 0));
    }
    return rc ? -1 : 0;
}

/* --threads: one thread's share, every size in turn on a buffer of its own. */
typedef struct {
    const check_mem_t *mem;
    int               first, fd, thread, rc;
    ucp_worker_h      worker;
    ucp_ep_h          ep;
    uint8_t           *buf, *host;
    pthread_t         id;
} check_thread_t;

static void *run_thread(void *arg)
{
    check_thread_t *t = arg;
    int s;

    t->rc = cu.ctx_set(check_ctx) ? -1 : 0;
    for (s = 0; (s < check_num_sizes) && (t->rc == 0); ++s) {
        t->rc = run_rounds(t->mem, t->first, t->worker, t->ep, t->fd, t->buf, t->host, check_sizes[s], t->thread);
    }
    if (t->rc != 0) {
        __atomic_store_n(&check_thread_failed, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Every thread runs its sizes against the same worker; the first failure of any ends the case. */
static int run_threads(const check_mem_t *mem, int first, ucp_worker_h worker, ucp_ep_h ep, int fd, size_t total)
{
    check_thread_t threads[CHECK_MAX_THREADS];
    int i, started = 0, rc = 0;

    memset(threads, 0, sizeof(threads));
    for (i = 0; (i < check_threads) && (rc == 0); ++i) {
        check_thread_t *t = &threads[i];
        *t = (check_thread_t){.mem = mem, .first = first, .fd = fd, .thread = i, .worker = worker, .ep = ep};
        t->host = malloc(total);
        rc      = (t->host == NULL) ? -1 : mem_alloc(mem, total, (void**)&t->buf);
        if (rc == 0) {
            memset(t->host, CHECK_POISON, total);
            rc = mem_copy(mem, t->buf, t->host, total) || mem_check_cache(mem, t->buf, total - CHECK_LEAD - CHECK_GUARD);
        }
    }
    for (i = 0; (i < check_threads) && (rc == 0); ++i, ++started) {
        if (pthread_create(&threads[i].id, NULL, run_thread, &threads[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            rc = -1;
        }
    }
    for (i = 0; i < started; ++i) {
        pthread_join(threads[i].id, NULL);
        rc = rc ? rc : threads[i].rc;
    }
    for (i = 0; i < check_threads; ++i) {
        if (threads[i].buf != NULL) {
            mem_free(mem, threads[i].buf, total);
        }
        free(threads[i].host);
    }
    return sync_step(fd, rc);
}

/*
 * --kill-peer: the second side tells the first it is about to die and kills itself; the first side's
 * rendezvous send, outstanding then, must end within a minute (in an error: nobody receives it).
 */
static int kill_step(int first, ucp_worker_h worker, ucp_ep_h ep, int fd, uint8_t *msg, size_t size)
{
    ucp_request_param_t rparam = {0};
    ucs_status_t status;
    time_t deadline;
    char bye = 0;
    void *req;

    if (!first) {
        (void)sock_xfer(fd, &bye, 1, 1);
        raise(SIGKILL);
    }
    if (sock_xfer(fd, &bye, 1, 0)) {
        fprintf(stderr, "kill-peer: the peer did not announce its end\n");
        return -1;
    }
    req      = ucp_tag_send_nbx(ep, msg, size, (ucp_tag_t)-2, &rparam);
    deadline = time(NULL) + 60;
    status   = UCS_PTR_IS_ERR(req) ? UCS_PTR_STATUS(req) : UCS_OK;
    while (UCS_PTR_IS_PTR(req) && ((status = ucp_request_check_status(req)) == UCS_INPROGRESS) &&
           (time(NULL) < deadline)) {
        ucp_worker_progress(worker);
    }
    if (status == UCS_INPROGRESS) {
        fprintf(stderr, "kill-peer: a %zu-byte send to the killed peer still hangs after 60 s\n", size);
        return -1;
    }
    if (UCS_PTR_IS_PTR(req)) {
        ucp_request_free(req);
    }
    printf("kill-peer: the %zu-byte send to the killed peer ended: %s\n", size, ucs_status_string(status));
    fflush(stdout);
    return (status == UCS_OK) ? -1 : 0; /* nobody received it: success would be a lie */
}

static void peer_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    fprintf(stderr, "the peer failed: %s\n", ucs_status_string(status));
}

static long count_fds(void)
{
    long n   = 0;
    DIR *dir = opendir("/proc/self/fd");

    while ((dir != NULL) && (readdir(dir) != NULL)) {
        ++n;
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

static int run_side(const check_case_t *c, int is_sender, int fd)
{
    const check_mem_t *mem = is_sender ? &c->send : &c->recv;
    size_t max = 0, addr_len, peer_len, total;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_worker_params_t wparams = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = (check_threads > 1) ? UCS_THREAD_MODE_MULTI :
                                                                        UCS_THREAD_MODE_SINGLE};
    ucp_worker_attr_t wattr     = {.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE};
    ucp_request_param_t rparam = {0};
    ucp_ep_params_t eparams;
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_address_t *addr;
    uint8_t *host, *peer_addr;
    void *buf;
    ucp_ep_h ep;
    long fds[2] = {-1, -1};
    int counts_fds = (mem->kind == KIND_VMM) || (mem->kind == KIND_VMM_SPLIT) || (mem->kind == KIND_POOL_FD) ||
                     (mem->kind == KIND_RUNTIME_POOL_FD);
    int rc, s, pass;

    for (s = 0; s < check_num_sizes; ++s) {
        max = (check_sizes[s] > max) ? check_sizes[s] : max;
    }
    total = CHECK_LEAD + max + CHECK_GUARD;
    /* the peer's steps (sync_step) are waited for as long as a request */
    struct timeval limit = {.tv_sec = (time_t)check_wait_limit, .tv_usec = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    rc    = cuda_open(mem->device);
    if (rc != 0) {
        return rc;
    }
    rc = mem_alloc(mem, total, &buf);
    if (rc != 0) {
        if (rc < 0) {
            fprintf(stderr, "cannot allocate %zu bytes with %s on GPU%d\n", total, kind_names[mem->kind],
                    mem->device);
        }
        return rc;
    }
    host = malloc(total);
    if (host == NULL) {
        return -1;
    }
    /* the whole allocation starts as poison: a message must never touch its lead or its guard */
    memset(host, CHECK_POISON, total);
    if (mem_copy(mem, buf, host, total) || (ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK) ||
        (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK)) {
        fprintf(stderr, "UCP initialisation failed\n");
        return -1;
    }
    if (mem_check_cache(mem, buf, max)) {
        return -1;
    }
    if ((check_threads > 1) &&
        ((ucp_worker_query(worker, &wattr) != UCS_OK) || (wattr.thread_mode != UCS_THREAD_MODE_MULTI))) {
        fprintf(stderr, "the UCP worker is not thread-safe (UCX built without multi-thread support?)\n");
        return CHECK_SKIP;
    }
    if (sock_xfer(fd, &addr_len, sizeof(addr_len), 1) || sock_xfer(fd, addr, addr_len, 1) ||
        sock_xfer(fd, &peer_len, sizeof(peer_len), 0) || ((peer_addr = malloc(peer_len)) == NULL) ||
        sock_xfer(fd, peer_addr, peer_len, 0)) {
        fprintf(stderr, "address exchange failed\n");
        return -1;
    }
    eparams.field_mask     = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address        = (ucp_address_t*)peer_addr;
    if (check_peer_errors) {
        eparams.field_mask       |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        eparams.err_mode          = UCP_ERR_HANDLING_MODE_PEER;
        eparams.err_handler.cb    = peer_failed;
        eparams.err_handler.arg   = NULL;
    }
    if (ucp_ep_create(worker, &eparams, &ep) != UCS_OK) {
        fprintf(stderr, "ucp_ep_create failed\n");
        return -1;
    }

    rc = 0;
    /* VMM and pool memory are exported as descriptors: with UCP 1.16+ caching registrations, and UCP 1.13
     * registering per message, the count must not grow with the messages sent. Their sizes are sent twice, the
     * descriptors counted after each pass. */
    for (pass = 0; (pass < (counts_fds ? 2 : 1)) && (check_threads == 1); ++pass) {
        if (pass > 0) { /* poison again: the first pass's largest message covered the guards of the smaller */
            memset(host, CHECK_POISON, total);
            rc = mem_copy(mem, buf, host, total);
        }
        for (s = 0; (s < check_num_sizes) && (rc == 0); ++s) {
            rc = run_size(mem, is_sender, worker, ep, fd, buf, host, check_sizes[s],
                          (check_timed > 0) && (pass == (counts_fds ? 1 : 0)));
        }
        fds[pass] = count_fds();
    }
    if ((rc == 0) && counts_fds && (check_threads == 1)) {
        printf("    %s: %ld open descriptors after the first pass over the sizes, %ld after the second\n",
               is_sender ? "sender" : "receiver", fds[0], fds[1]);
        fflush(stdout);
        if (fds[1] > fds[0]) {
            fprintf(stderr, "descriptors grew with the messages sent\n");
            rc = -1;
        }
    }
    if (check_threads > 1) {
        rc = run_threads(mem, is_sender, worker, ep, fd, total);
    }
    if (check_peer_errors && is_sender) { /* wired up by now */
        ucp_ep_print_info(ep, stdout);
        fflush(stdout);
    }
    if ((rc == 0) && check_kill_peer) {
        rc = kill_step(is_sender, worker, ep, fd, (uint8_t*)buf + CHECK_LEAD, max);
        if (rc == 0) { /* the endpoint failed: UCP's own close of it is all that is left */
            ucp_request_param_t force = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
            void *req = ucp_ep_close_nbx(ep, &force);
            while (UCS_PTR_IS_PTR(req) && (ucp_request_check_status(req) == UCS_INPROGRESS)) {
                ucp_worker_progress(worker);
            }
            if (UCS_PTR_IS_PTR(req)) {
                ucp_request_free(req);
            }
            ep = NULL;
        }
    }

    if (ep != NULL) {
        ucp_wait(worker, ucp_ep_close_nbx(ep, &rparam), "endpoint close", fd);
    }
    ucp_worker_release_address(worker, addr);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    mem_free(mem, buf, total);
    free(host);
    free(peer_addr);
    return rc;
}

/* ------------------------------------------------------------------ the cases */

/* In a forked side: the rest runs as pid 1 of a new PID namespace with its own /proc (a container's view); this
 * process waits for it and ends with its status. */
static void enter_own_pid_namespace(void)
{
    /* two sibling containers (pods) also have IPC and UTS namespaces of their own */
    if (cux_enter_own_pid_namespace((check_pid_namespace == 2) ? (CLONE_NEWIPC | CLONE_NEWUTS) : 0) != 0) {
        perror("entering a PID namespace of its own (unshare, fork, mounting /proc)");
        _exit(1);
    }
}

/* --as-user: the user a container's spec names, no supplementary groups and so no capabilities; then its socket
 * directory as the recipes make it (both sides may race to it: either makes it) */
static void become_user(void)
{
    const char *dir = getenv("UCX_CUDA_IPC_SOCKET_DIR");

    if ((setgroups(0, NULL) != 0) || (setgid((gid_t)check_gid) != 0) || (setuid((uid_t)check_uid) != 0)) {
        perror("--as-user (setgroups, setgid, setuid: root only)");
        _exit(1);
    }
    if ((dir != NULL) && (*dir != '\0') && (mkdir(dir, 0700) != 0) && (errno != EEXIST)) {
        perror("--as-user: making UCX_CUDA_IPC_SOCKET_DIR");
        _exit(1);
    }
}

static pid_t spawn(const check_case_t *c, int is_sender, int fd, int other_fd)
{
    pid_t pid = fork();

    if (pid == 0) {
        close(other_fd);
        if ((check_pid_namespace == 2) || (check_pid_namespace && is_sender)) {
            enter_own_pid_namespace();
        }
        if (check_uid >= 0) {
            become_user();
        }
        alarm(300); /* a hang fails the case */
        int rc = run_side(c, is_sender, fd);
        _exit((rc < 0) ? 1 : rc);
    }
    return pid;
}

static int case_selected(int index)
{
    const char *p = check_only;
    char *end;

    while (*p != '\0') {
        if (strtol(p, &end, 10) == index) {
            return 1;
        }
        p = (*end == ',') ? end + 1 : (*end == '\0') ? end : end + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0, sizes_given = 0, i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--list")) {
            for (size_t k = 0; k < sizeof(check_cases) / sizeof(check_cases[0]); ++k) {
                printf("%zu\t%s\n", k, check_cases[k].what);
            }
            return 0;
        } else if (!strcmp(argv[i], "--fill-sync")) {
            check_fill_sync = 1;
        } else if (!strcmp(argv[i], "--only") && (i + 1 < argc)) {
            check_only = argv[++i];
        } else if (!strcmp(argv[i], "--kill-peer")) {
            check_kill_peer = check_peer_errors = 1;
        } else if (!strcmp(argv[i], "--pid-namespace")) {
            check_pid_namespace = 1;
        } else if (!strcmp(argv[i], "--as-user") && (i + 1 < argc) &&
                   (sscanf(argv[i + 1], "%ld:%ld", &check_uid, &check_gid) == 2)) {
            ++i;
        } else if (!strcmp(argv[i], "--sibling-namespaces")) {
            check_pid_namespace = 2;
        } else if (!strcmp(argv[i], "--peer-errors")) {
            check_peer_errors = 1;
        } else if (!strcmp(argv[i], "--threads") && (i + 1 < argc)) {
            check_threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rounds") && (i + 1 < argc)) {
            check_rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--timed") && (i + 1 < argc)) {
            check_timed = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--wait-limit") && (i + 1 < argc)) {
            check_wait_limit = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--sweep")) {
            check_num_sizes = 0;
            for (size_t small = 1; small <= 9; small = (small == 1) ? 7 : small + 1) {
                check_sizes[check_num_sizes++] = small;
            }
            for (int k = 6; k <= 24; ++k) {
                check_sizes[check_num_sizes++] = ((size_t)1 << k) - 1;
                check_sizes[check_num_sizes++] = (size_t)1 << k;
                check_sizes[check_num_sizes++] = ((size_t)1 << k) + 1;
            }
        } else if ((argv[i][0] >= '0') && (argv[i][0] <= '9') && (sizes_given < CHECK_MAX_SIZES)) {
            check_sizes[sizes_given++] = strtoull(argv[i], NULL, 0);
            check_num_sizes            = sizes_given;
        } else {
            fprintf(stderr, "usage: %s --list | [--fill-sync] [--peer-errors [--kill-peer]] [--pid-namespace | "
                    "--sibling-namespaces] [--as-user UID:GID] [--threads N] "
                    "[--rounds N] [--timed N] [--wait-limit S] [--only I,J,...] [--sweep | SIZE...]\n", argv[0]);
            return 2;
        }
    }
    if ((check_rounds < 1) || (check_rounds > 16384) || (check_timed < 0) || (check_timed > 1000000) ||
        (check_timed && (check_threads > 1)) || (check_num_sizes == 0) || (check_threads < 1) ||
        (check_threads > CHECK_MAX_THREADS) || (check_kill_peer && (check_threads > 1)) ||
        !(check_wait_limit >= 1) || (check_wait_limit > 86400)) {
        fprintf(stderr, "%s: 1 to 16384 rounds, 0 to 1000000 timed round trips (one thread), at least one size, "
                "1 to %d threads (one with --kill-peer), a wait limit of 1 to 86400 s\n", argv[0], CHECK_MAX_THREADS);
        return 2;
    }
    if (getenv("CUX_TEST_DATACHECK_DROP") != NULL) {
        check_drop_thread = atoi(getenv("CUX_TEST_DATACHECK_DROP"));
    }
    printf("sizes: %d (%zu to %zu bytes), %d round trips each%s, fills %s\n", check_num_sizes, check_sizes[0],
           check_sizes[check_num_sizes - 1], check_rounds, (check_threads > 1) ? " in every thread" : "",
           check_fill_sync ? "followed by cuCtxSynchronize" : "by plain synchronous cuMemcpy");
    for (i = 0; i < (int)(sizeof(check_cases) / sizeof(check_cases[0])); ++i) {
        const check_case_t *c = &check_cases[i];
        if ((check_only != NULL) && !case_selected(i)) {
            continue;
        }
#ifdef CUX_CHECK_STATIC_CUDART
        if ((c->send.kind != KIND_RUNTIME) && (c->send.kind != KIND_RUNTIME_POOL_FD)) {
            continue;
        }
#endif
        int sv[2], st[2], code[2], j;
        pid_t pid[2];

        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            perror("socketpair");
            return 1;
        }
        fflush(stdout);
        pid[0] = spawn(c, 0, sv[0], sv[1]);
        pid[1] = spawn(c, 1, sv[1], sv[0]);
        close(sv[0]);
        close(sv[1]);
        for (j = 0; j < 2; ++j) {
            waitpid(pid[j], &st[j], 0);
            code[j] = WIFEXITED(st[j]) ? WEXITSTATUS(st[j]) : 128 + WTERMSIG(st[j]);
        }
        if (check_kill_peer && (code[0] == 128 + SIGKILL)) {
            code[0] = 0; /* the second side killed itself, as asked */
        }
        if ((code[0] == CHECK_SKIP) || (code[1] == CHECK_SKIP)) {
            printf("SKIP %-32s %s -> %s: not available here\n", c->what, kind_names[c->send.kind],
                   kind_names[c->recv.kind]);
            ++skipped;
        } else if ((code[0] == 0) && (code[1] == 0)) {
            printf("PASS %-32s %s -> %s\n", c->what, kind_names[c->send.kind], kind_names[c->recv.kind]);
            ++passed;
        } else {
            printf("FAIL %-32s %s -> %s: receiver %s %d, sender %s %d\n", c->what, kind_names[c->send.kind],
                   kind_names[c->recv.kind], (code[0] > 128) ? "signal" : "exit",
                   (code[0] > 128) ? code[0] - 128 : code[0], (code[1] > 128) ? "signal" : "exit",
                   (code[1] > 128) ? code[1] - 128 : code[1]);
            ++failed;
        }
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
