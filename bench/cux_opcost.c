/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-operation costs of the plugin's building blocks, in one process, to find where the time of small and
 * mid-size transfers goes (issue #5) before changing anything:
 *
 *   cux_opcost [ITERATIONS [ALLOCATIONS]]   (default 20000; device 0, and device 1 when there is one)
 *
 * With ALLOCATIONS, the pointer query is also measured with that many 45 KB allocations alive, each asked in turn
 * (a KV cache of one allocation per block: issue 34), and nothing else.
 *
 * OPCOST_IPC_ONLY=1 measures the driver queries and cuda_ipc alone. OPCOST_EXPORTER_PIDNS=1 (root) starts the
 * exporter as pid 1 of a PID namespace of its own, as a container is: its address and keys are then proven over
 * its socket (set UCX_CUDA_IPC_SOCKET_DIR), and the proof lines are that first contact's cost.
 *
 * Prints one line per measurement: name, nanoseconds per operation (median of 5 rounds).
 */
#define _GNU_SOURCE /* unshare */
#include "driver/cux_driver.h"
#include "driver/cux_device.h"
#include "base/cux_copy_kernel_ptx.h"
#include "base/cux_ptr.h"
#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/import/cux_ipc_import.h"
#include "../test/cux_own_pidns.h"

#include "cux_bench_clock.h"
#include <dlfcn.h>
#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#define CHECK(_cond, _what) \
    do { \
        if (!(_cond)) { \
            fprintf(stderr, "cux_opcost: %s failed\n", _what); \
            exit(1); \
        } \
    } while (0)

/* Median over 5 rounds of the mean cost of one call of fn. */
#define MEASURE(_name, _iters, _body) MEASURE_EACH(_name, _iters, 1, _body)
/* _body does _each operations: the time is per operation */
#define MEASURE_EACH(_name, _iters, _each, _body) \
    do { \
        double rounds[5]; \
        for (int r = 0; r < 5; ++r) { \
            double t0 = cux_bench_now_ns(); \
            for (unsigned i = 0; i < (_iters); ++i) { \
                _body; \
            } \
            rounds[r] = (cux_bench_now_ns() - t0) / ((double)(_iters) * (_each)); \
        } \
        qsort(rounds, 5, sizeof(rounds[0]), cux_bench_cmp_double); \
        printf("%-48s %10.1f ns\n", _name, rounds[2]); \
        fflush(stdout); \
    } while (0)

/* The pointer query with n allocations of a KV-cache block's size alive, asked in turn, as a transfer of one
 * allocation per block asks them: the driver's lookup over many allocations, not one allocation's attributes. */
static void measure_ptr_query_many(unsigned n)
{
    CUdeviceptr *p = calloc(n, sizeof(*p));
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR;
    CUdeviceptr start;
    void *data = &start;
    cux_ptr_info_t info;
    unsigned i, k = 0;
    char name[80];

    CHECK(p != NULL, "calloc");
    for (i = 0; i < n; ++i) {
        CHECK(cux_drv.cuMemAlloc(&p[i], 46080) == CUDA_SUCCESS, "alloc of a block");
    }
    snprintf(name, sizeof(name), "cux_ptr_query, %u allocations in turn", n);
    MEASURE(name, n, cux_ptr_query((void*)p[k++ % n], &info));
    snprintf(name, sizeof(name), "cuPointerGetAttributes (range start), %u in turn", n);
    MEASURE(name, n, cux_drv.cuPointerGetAttributes(1, &attr, &data, p[k++ % n]));
    snprintf(name, sizeof(name), "cux_ptr_query, one of %u allocations", n);
    MEASURE(name, n, cux_ptr_query((void*)p[n / 2], &info));
    for (i = 0; i < n; ++i) {
        cux_drv.cuMemFree(p[i]);
    }
    free(p);
}

typedef struct {
    uct_component_h component;
    uct_md_h        md;
    uct_worker_h    worker;
    uct_iface_h     iface;
    uct_ep_h        ep;
} transport_t;

static const char opcost_no_ep[1];

/* An interface of tl, and an endpoint to peer_addr (device address, then interface address at byte 64) or,
 * where it is NULL, to the interface itself; with peer_addr opcost_no_ep, no endpoint. */
static void open_transport(const char *cmpt_name, const char *tl, ucs_async_context_t *async, transport_t *t,
                           const char *config_name, const char *config_value, const char *peer_addr)
{
    uct_component_h *components;
    uct_md_config_t *md_config;
    uct_iface_config_t *iface_config;
    uct_iface_params_t params = {0};
    uct_ep_params_t ep_params = {0};
    uct_iface_attr_t attr;
    char dev_addr[64], iface_addr[64];
    unsigned num;

    CHECK(uct_query_components(&components, &num) == UCS_OK, "uct_query_components");
    t->component = NULL;
    for (unsigned i = 0; i < num; ++i) {
        uct_component_attr_t cattr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        if ((uct_component_query(components[i], &cattr) == UCS_OK) && !strcmp(cattr.name, cmpt_name)) {
            t->component = components[i];
        }
    }
    uct_release_component_list(components);
    CHECK(t->component != NULL, cmpt_name);
    CHECK(uct_md_config_read(t->component, NULL, NULL, &md_config) == UCS_OK, "md config");
    CHECK(uct_md_open(t->component, cmpt_name, md_config, &t->md) == UCS_OK, "md open");
    uct_config_release(md_config);
    CHECK(uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &t->worker) == UCS_OK, "worker");
    CHECK(uct_md_iface_config_read(t->md, tl, NULL, NULL, &iface_config) == UCS_OK, "iface config");
    if (config_name != NULL) {
        /* the short name (UCX 1.13, 1.16) or with the table prefix (1.22 matches full names only) */
        char full_name[128];
        size_t i;
        for (i = 0; (tl[i] != '\0') && (i < 64); ++i) {
            full_name[i] = (char)toupper((unsigned char)tl[i]);
        }
        snprintf(full_name + i, sizeof(full_name) - i, "_%s", config_name);
        CHECK((uct_config_modify(iface_config, config_name, config_value) == UCS_OK) ||
              (uct_config_modify(iface_config, full_name, config_value) == UCS_OK), config_name);
    }
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl;
    params.mode.device.dev_name = "cuda";
    CHECK(uct_iface_open(t->md, t->worker, &params, iface_config, &t->iface) == UCS_OK, "iface open");
    uct_config_release(iface_config);
    uct_iface_progress_enable(t->iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    CHECK(uct_iface_query(t->iface, &attr) == UCS_OK, "iface query");
    uct_iface_get_device_address(t->iface, (uct_device_addr_t*)dev_addr);
    uct_iface_get_address(t->iface, (uct_iface_addr_t*)iface_addr);
    t->ep = NULL;
    if (peer_addr == opcost_no_ep) {
        return;
    } else if (peer_addr != NULL) {
        memcpy(dev_addr, peer_addr, sizeof(dev_addr));
        memcpy(iface_addr, peer_addr + sizeof(dev_addr), sizeof(iface_addr));
    }
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = t->iface;
    ep_params.dev_addr   = (uct_device_addr_t*)dev_addr;
    ep_params.iface_addr = (uct_iface_addr_t*)iface_addr;
    CHECK(uct_ep_create(&ep_params, &t->ep) == UCS_OK, "ep create");
}

static void close_transport(transport_t *t)
{
    uct_ep_destroy(t->ep);
    uct_iface_close(t->iface);
    uct_worker_destroy(t->worker);
    uct_md_close(t->md);
}

static void done_cb(uct_completion_t *self)
{
}

/* Issue one zcopy and progress until it completes. */
static void zcopy_roundtrip(transport_t *t, void *local, void *remote, size_t len, uct_rkey_t rkey)
{
    uct_completion_t comp = {.func = done_cb, .count = 1, .status = UCS_OK};
    uct_iov_t iov         = {local, len, UCT_MEM_HANDLE_NULL, 0, 1};
    ucs_status_t status   = uct_ep_put_zcopy(t->ep, &iov, 1, (uintptr_t)remote, rkey, &comp);

    CHECK((status == UCS_OK) || (status == UCS_INPROGRESS), "put_zcopy");
    while ((status == UCS_INPROGRESS) && (comp.count > 0)) {
        uct_worker_progress(t->worker);
    }
}

/* count puts of block bytes, end to end in both buffers (a transfer of many descriptors, as nixlbench posts them),
 * under one completion, then progress until all are done: what posting and completing one put costs. Not inlined:
 * valgrind --tool=callgrind --toggle-collect='zcopy_burst*' counts the burst's instructions alone (the compiler
 * makes it a constprop clone, hence the star). */
static __attribute__((noinline)) void zcopy_burst(transport_t *t, char *local, uct_mem_h memh, uint64_t remote,
                                                  size_t block, unsigned count, uct_rkey_t rkey)
{
    uct_completion_t comp = {.func = done_cb, .count = (int)count, .status = UCS_OK};
    uct_iov_t iov         = {NULL, block, memh, 0, 1};
    ucs_status_t status;
    unsigned i;

    for (i = 0; i < count; ++i) {
        iov.buffer = local + i * block;
        while ((status = uct_ep_put_zcopy(t->ep, &iov, 1, remote + i * block, rkey, &comp)) == UCS_ERR_NO_RESOURCE) {
            uct_worker_progress(t->worker);
        }
        CHECK((status == UCS_OK) || (status == UCS_INPROGRESS), "put_zcopy");
        comp.count -= (status == UCS_OK);
    }
    while (comp.count > 0) {
        uct_worker_progress(t->worker);
    }
}

/* Entry points the plugin does not use (yet), for measuring the levers of issue #5 and for acting as an
 * application does; NULL where missing. The tests' mock exports an application's entry points by name only. */
static void *driver_proc(const char *name, int version)
{
    PFN_cuGetProcAddress_v12000 get_proc;
    CUdriverProcAddressQueryResult found;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *fn  = NULL;

    if (getenv("CUX_DRIVER_PATH") != NULL) {
        lib = dlopen(getenv("CUX_DRIVER_PATH"), RTLD_NOW | RTLD_NOLOAD);
    }
    get_proc = (lib != NULL) ? (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2") : NULL;
    if ((get_proc == NULL) || (get_proc(name, &fn, version, 0, &found) != CUDA_SUCCESS)) {
        return (lib != NULL) ? dlsym(lib, name) : NULL;
    }
    return fn;
}

/* Makes GPU0's context current, with access to GPU1's memory; 0 where there is no such pair (one GPU, or a
 * driver without peer access). */
static int enter_peer_pair(CUcontext ctx0, CUcontext ctx1)
{
    PFN_cuCtxEnablePeerAccess_v4000 enable_peer = driver_proc("cuCtxEnablePeerAccess", 4000);

    if ((enable_peer == NULL) || (ctx0 == ctx1)) {
        return 0;
    }
    cux_drv.cuCtxSetCurrent(ctx0);
    enable_peer(ctx1, 0); /* already enabled after the first call: that error is harmless */
    return 1;
}

/* What a peer copy costs the CPU and the copy engine, with the levers of issue #5: events against stream
 * memory operations for completion, single copies against one batched call. GPU0 -> GPU1, peer access on. */
static void measure_peer_copy_levers(unsigned iters, CUdeviceptr src, CUdeviceptr dst, CUcontext ctx0,
                                     CUcontext ctx1)
{
    PFN_cuStreamWriteValue64_v11070 write_value = driver_proc("cuStreamWriteValue64", 11070);
    PFN_cuMemcpyBatchAsync_v13000 batch         = driver_proc("cuMemcpyBatchAsync", 13000);
    PFN_cuMemHostAlloc_v2020 host_alloc         = driver_proc("cuMemHostAlloc", 2020);
    PFN_cuMemHostGetDevicePointer_v3020 host_dptr = driver_proc("cuMemHostGetDevicePointer", 3020);
    enum { BATCH = 16 };
    CUdeviceptr dsts[BATCH], srcs[BATCH], flag_dptr = 0;
    size_t sizes[BATCH], attr_idx = 0;
    CUmemcpyAttributes attr;
    volatile uint64_t *flag = NULL;
    uint64_t seq = 0;
    CUstream stream;
    CUevent event;
    double t0;

    if (!enter_peer_pair(ctx0, ctx1)) {
        printf("# peer-copy levers: skipped (needs two GPUs and the real driver)\n");
        return;
    }
    CHECK(cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    CHECK(cux_drv.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "event");

    MEASURE("peer 64 KB cuMemcpyAsync, issue only", iters / 10 + 1,
            (cux_drv.cuMemcpyAsync(dst, src, 65536, stream),
             ((i % 64) == 63) ? cux_drv.cuStreamSynchronize(stream) : CUDA_SUCCESS));
    cux_drv.cuStreamSynchronize(stream);
    MEASURE("peer 64 KB cuMemcpyAsync + cuEventRecord, issue", iters / 10 + 1,
            (cux_drv.cuMemcpyAsync(dst, src, 65536, stream), cux_drv.cuEventRecord(event, stream),
             ((i % 64) == 63) ? cux_drv.cuStreamSynchronize(stream) : CUDA_SUCCESS));
    cux_drv.cuStreamSynchronize(stream);
    MEASURE("cuEventQuery of a completed event", iters, cux_drv.cuEventQuery(event));
    MEASURE("peer 64 KB copy, issue to completion (event polling)", iters / 10 + 1,
            (cux_drv.cuMemcpyAsync(dst, src, 65536, stream), cux_drv.cuEventRecord(event, stream), ({
                 while (cux_drv.cuEventQuery(event) == CUDA_ERROR_NOT_READY) {
                 }
             })));
    t0 = cux_bench_now_ns();
    for (unsigned i = 0; i < 2000; ++i) {
        cux_drv.cuMemcpyAsync(dst, src, 65536, stream);
    }
    cux_drv.cuStreamSynchronize(stream);
    printf("%-48s %10.2f GB/s\n", "peer 64 KB back-to-back, one stream", 2000 * 65536 / (cux_bench_now_ns() - t0));

    if ((write_value != NULL) && (host_alloc != NULL) && (host_dptr != NULL) &&
        (host_alloc((void**)&flag, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS) &&
        (host_dptr(&flag_dptr, (void*)flag, 0) == CUDA_SUCCESS)) {
        *flag = 0;
        MEASURE("peer 64 KB cuMemcpyAsync + cuStreamWriteValue64, issue", iters / 10 + 1,
                (cux_drv.cuMemcpyAsync(dst, src, 65536, stream), write_value(stream, flag_dptr, ++seq, 0),
                 ((i % 64) == 63) ? cux_drv.cuStreamSynchronize(stream) : CUDA_SUCCESS));
        MEASURE("peer 64 KB copy, issue to completion (host flag polling)", iters / 10 + 1,
                (cux_drv.cuMemcpyAsync(dst, src, 65536, stream), write_value(stream, flag_dptr, ++seq, 0), ({
                     while (*flag != seq) {
                     }
                 })));
    } else {
        printf("# stream memory operations: not available\n");
    }

    if (batch != NULL) {
        memset(&attr, 0, sizeof(attr));
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        for (unsigned b = 0; b < BATCH; ++b) {
            dsts[b]  = dst + b * 65536;
            srcs[b]  = src + b * 65536;
            sizes[b] = 65536;
        }
        MEASURE("peer 64 KB copies in cuMemcpyBatchAsync of 16, issue per copy", iters / 100 + 1,
                (batch(dsts, srcs, sizes, BATCH, &attr, &attr_idx, 1, stream),
                 ((i % 4) == 3) ? cux_drv.cuStreamSynchronize(stream) : CUDA_SUCCESS));
        cux_drv.cuStreamSynchronize(stream);
        printf("(the line above is per batch of 16 copies)\n");
        t0 = cux_bench_now_ns();
        for (unsigned i = 0; i < 2000 / BATCH; ++i) {
            batch(dsts, srcs, sizes, BATCH, &attr, &attr_idx, 1, stream);
        }
        cux_drv.cuStreamSynchronize(stream);
        printf("%-48s %10.2f GB/s\n", "peer 64 KB copies in batches of 16, one stream",
               (2000 / BATCH) * BATCH * 65536 / (cux_bench_now_ns() - t0));
    } else {
        printf("# cuMemcpyBatchAsync: not available\n");
    }
    cux_drv.cuEventDestroy(event);
    cux_drv.cuStreamDestroy(stream);
}

/*
 * Small copies within one GPU, back to back: what a stream of them costs per copy when they go one by one,
 * in batches of 16 (cuMemcpyBatchAsync), and spread over four streams (issue 22, item 2: two processes on one
 * GPU send each other small messages at a fixed cost of about 6.5 us each). Runs on the one GPU too.
 */
static void measure_small_copy_throughput(CUdeviceptr src, CUdeviceptr dst)
{
    PFN_cuMemcpyBatchAsync_v13000 batch = driver_proc("cuMemcpyBatchAsync", 13000);
    enum { BATCH = 16, STREAMS = 4, COPIES = 4096 };
    static const size_t sizes_to_try[] = {4096, 65536};
    CUdeviceptr dsts[BATCH], srcs[BATCH];
    size_t sizes[BATCH], attr_idx = 0;
    CUstream streams[STREAMS];
    CUmemcpyAttributes attr;
    char name[96];
    double t0;

    for (unsigned s = 0; s < STREAMS; ++s) {
        CHECK(cux_drv.cuStreamCreate(&streams[s], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    }
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    for (unsigned z = 0; z < sizeof(sizes_to_try) / sizeof(sizes_to_try[0]); ++z) {
        size_t size = sizes_to_try[z];
        for (unsigned b = 0; b < BATCH; ++b) {
            dsts[b]  = dst + b * size;
            srcs[b]  = src + b * size;
            sizes[b] = size;
        }
        for (unsigned nstreams = 1; nstreams <= STREAMS; nstreams *= STREAMS) {
            t0 = cux_bench_now_ns();
            for (unsigned i = 0; i < COPIES; ++i) {
                cux_drv.cuMemcpyAsync(dsts[i % BATCH], srcs[i % BATCH], size, streams[i % nstreams]);
            }
            for (unsigned s = 0; s < nstreams; ++s) {
                cux_drv.cuStreamSynchronize(streams[s]);
            }
            snprintf(name, sizeof(name), "GPU0 %zu KB copies back to back, %u stream%s", size >> 10, nstreams,
                     (nstreams > 1) ? "s" : "");
            printf("%-48s %10.1f ns per copy\n", name, (cux_bench_now_ns() - t0) / COPIES);
            if (batch == NULL) {
                continue;
            }
            t0 = cux_bench_now_ns();
            for (unsigned i = 0; i < COPIES / BATCH; ++i) {
                batch(dsts, srcs, sizes, BATCH, &attr, &attr_idx, 1, streams[i % nstreams]);
            }
            for (unsigned s = 0; s < nstreams; ++s) {
                cux_drv.cuStreamSynchronize(streams[s]);
            }
            snprintf(name, sizeof(name), "GPU0 %zu KB copies in batches of 16, %u stream%s", size >> 10,
                     nstreams, (nstreams > 1) ? "s" : "");
            printf("%-48s %10.1f ns per copy\n", name, (cux_bench_now_ns() - t0) / COPIES);
        }
    }
    for (unsigned s = 0; s < STREAMS; ++s) {
        cux_drv.cuStreamDestroy(streams[s]);
    }
    fflush(stdout);
}

/* The module's copy kernel (src/base/cux_copy_kernel.cu), launched here directly: its parameter is 128
 * descriptors, of which a launch uses as many as its grid has rows. */
typedef struct {
    unsigned long long src, dst, size;
} cux_copy_batch_desc_t;

/* Small copies within one GPU, 16 per kernel launch, back to back on one stream. */
static void measure_small_copy_kernel(CUdeviceptr src, CUdeviceptr dst)
{
    PFN_cuModuleLoadData_v2000 load_data       = driver_proc("cuModuleLoadData", 2000);
    PFN_cuModuleGetFunction_v2000 get_function = driver_proc("cuModuleGetFunction", 2000);
    PFN_cuLaunchKernel_v4000 launch            = driver_proc("cuLaunchKernel", 4000);
    enum { BATCH = 16, COPIES = 4096 };
    static const size_t sizes_to_try[] = {4096, 65536};
    cux_copy_batch_desc_t batch[128] = {{0}}; /* the driver copies the whole parameter (3 KB) */
    void *params[]                  = {batch};
    CUfunction function;
    CUmodule module;
    CUstream stream;
    char name[96];
    double t0;

    if ((load_data == NULL) || (get_function == NULL) || (launch == NULL) ||
        (load_data(&module, cux_copy_kernel_ptx) != CUDA_SUCCESS) ||
        (get_function(&function, module, "cux_copy_batch") != CUDA_SUCCESS)) {
        printf("# copies in one kernel launch: skipped (the driver does not load the PTX)\n");
        return;
    }
    CHECK(cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    for (unsigned z = 0; z < sizeof(sizes_to_try) / sizeof(sizes_to_try[0]); ++z) {
        size_t size    = sizes_to_try[z];
        unsigned grid  = (unsigned)((size / 16 + 255) / 256);
        for (unsigned b = 0; b < BATCH; ++b) {
            batch[b] = (cux_copy_batch_desc_t){src + b * size, dst + b * size, size};
        }
        t0 = cux_bench_now_ns();
        for (unsigned i = 0; i < COPIES / BATCH; ++i) {
            launch(function, grid, BATCH, 1, 256, 1, 1, 0, stream, params, NULL);
        }
        cux_drv.cuStreamSynchronize(stream);
        snprintf(name, sizeof(name), "GPU0 %zu KB copies, 16 per kernel launch", size >> 10);
        printf("%-48s %10.1f ns per copy\n", name, (cux_bench_now_ns() - t0) / COPIES);
    }
    {
        /* the data check: an odd size and offset take the byte loop, a round one the 16-byte loop */
        static unsigned char in[65536], out[65536];
        for (unsigned i = 0; i < sizeof(in); ++i) {
            in[i] = (unsigned char)(i * 7 + 3);
        }
        cux_drv.cuMemcpyAsync(src, (CUdeviceptr)in, sizeof(in), stream);
        cux_drv.cuMemcpyAsync(dst, (CUdeviceptr)out, sizeof(out), stream);
        batch[0] = (cux_copy_batch_desc_t){src, dst, 4096};
        batch[1] = (cux_copy_batch_desc_t){src + 5000, dst + 5001, 3001};
        launch(function, 1, 2, 1, 256, 1, 1, 0, stream, params, NULL);
        cux_drv.cuMemcpyAsync((CUdeviceptr)out, dst, sizeof(out), stream);
        cux_drv.cuStreamSynchronize(stream);
        printf("# copies in one kernel launch, data check: %s\n",
               (!memcmp(out, in, 4096) && !memcmp(out + 5001, in + 5000, 3001)) ? "ok" : "WRONG");
    }
    cux_drv.cuStreamDestroy(stream);
    fflush(stdout);
}

/* Copy kernels for measure_small_copy_levers, PTX from nvcc 13.0 (`nvcc -ptx -arch=compute_90 -O3`) of:
 *   extern "C" __global__ void cux_copy16(const uint4 *s, uint4 *d, unsigned long long n)  (n 16-byte words)
 *   extern "C" __global__ void cux_copy1(const unsigned char *s, unsigned char *d, unsigned long long n)
 * each a grid-stride loop of d[i] = s[i]. The driver compiles it at load (no toolkit at run time). */
static const char cux_copy_ptx[] =
    ".version 9.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "    // .globl    cux_copy16\n"
    ".visible .entry cux_copy16(\n"
    "    .param .u64 cux_copy16_param_0,\n"
    "    .param .u64 cux_copy16_param_1,\n"
    "    .param .u64 cux_copy16_param_2\n"
    ")\n"
    "{\n"
    "    .reg .pred     %p<3>;\n"
    "    .reg .b32     %r<13>;\n"
    "    .reg .b64     %rd<18>;\n"
    "    ld.param.u64     %rd8, [cux_copy16_param_0];\n"
    "    ld.param.u64     %rd9, [cux_copy16_param_1];\n"
    "    ld.param.u64     %rd10, [cux_copy16_param_2];\n"
    "    mov.u32     %r1, %ctaid.x;\n"
    "    mov.u32     %r2, %ntid.x;\n"
    "    cvt.u64.u32     %rd1, %r2;\n"
    "    mul.wide.u32     %rd11, %r1, %r2;\n"
    "    mov.u32     %r3, %tid.x;\n"
    "    cvt.u64.u32     %rd12, %r3;\n"
    "    add.s64     %rd17, %rd11, %rd12;\n"
    "    setp.ge.u64     %p1, %rd17, %rd10;\n"
    "    @%p1 bra     $L__BB0_3;\n"
    "    mov.u32     %r4, %nctaid.x;\n"
    "    cvt.u64.u32     %rd13, %r4;\n"
    "    mul.lo.s64     %rd3, %rd13, %rd1;\n"
    "    cvta.to.global.u64     %rd4, %rd8;\n"
    "    cvta.to.global.u64     %rd5, %rd9;\n"
    "$L__BB0_2:\n"
    "    shl.b64     %rd14, %rd17, 4;\n"
    "    add.s64     %rd15, %rd4, %rd14;\n"
    "    add.s64     %rd16, %rd5, %rd14;\n"
    "    ld.global.nc.v4.u32     {%r5, %r6, %r7, %r8}, [%rd15];\n"
    "    st.global.v4.u32     [%rd16], {%r5, %r6, %r7, %r8};\n"
    "    add.s64     %rd17, %rd17, %rd3;\n"
    "    setp.lt.u64     %p2, %rd17, %rd10;\n"
    "    @%p2 bra     $L__BB0_2;\n"
    "$L__BB0_3:\n"
    "    ret;\n"
    "}\n"
    "    // .globl    cux_copy1\n"
    ".visible .entry cux_copy1(\n"
    "    .param .u64 cux_copy1_param_0,\n"
    "    .param .u64 cux_copy1_param_1,\n"
    "    .param .u64 cux_copy1_param_2\n"
    ")\n"
    "{\n"
    "    .reg .pred     %p<3>;\n"
    "    .reg .b16     %rs<2>;\n"
    "    .reg .b32     %r<5>;\n"
    "    .reg .b64     %rd<17>;\n"
    "    ld.param.u64     %rd8, [cux_copy1_param_0];\n"
    "    ld.param.u64     %rd9, [cux_copy1_param_1];\n"
    "    ld.param.u64     %rd10, [cux_copy1_param_2];\n"
    "    mov.u32     %r1, %ctaid.x;\n"
    "    mov.u32     %r2, %ntid.x;\n"
    "    cvt.u64.u32     %rd1, %r2;\n"
    "    mul.wide.u32     %rd11, %r1, %r2;\n"
    "    mov.u32     %r3, %tid.x;\n"
    "    cvt.u64.u32     %rd12, %r3;\n"
    "    add.s64     %rd16, %rd11, %rd12;\n"
    "    setp.ge.u64     %p1, %rd16, %rd10;\n"
    "    @%p1 bra     $L__BB1_3;\n"
    "    mov.u32     %r4, %nctaid.x;\n"
    "    cvt.u64.u32     %rd13, %r4;\n"
    "    mul.lo.s64     %rd3, %rd13, %rd1;\n"
    "    cvta.to.global.u64     %rd4, %rd8;\n"
    "    cvta.to.global.u64     %rd5, %rd9;\n"
    "$L__BB1_2:\n"
    "    add.s64     %rd14, %rd4, %rd16;\n"
    "    ld.global.nc.u8     %rs1, [%rd14];\n"
    "    add.s64     %rd15, %rd5, %rd16;\n"
    "    st.global.u8     [%rd15], %rs1;\n"
    "    add.s64     %rd16, %rd16, %rd3;\n"
    "    setp.lt.u64     %p2, %rd16, %rd10;\n"
    "    @%p2 bra     $L__BB1_2;\n"
    "$L__BB1_3:\n"
    "    ret;\n"
    "}\n";

/* What a single peer copy costs from issue to completion (the latency of a rendezvous get of 8 B, and of a
 * serialised 1 MB ucp_get), with the levers the copy engine path leaves: a copy kernel instead of the copy
 * engine, a high-priority stream, and one copy split over two streams. GPU1's memory read from GPU0, as a
 * rendezvous get does. Each line: issue to completion by event polling. */
static void measure_small_copy_levers(unsigned iters, CUdeviceptr local, CUdeviceptr remote, CUcontext ctx0,
                                      CUcontext ctx1)
{
    PFN_cuModuleLoadData_v2000 load_data                  = driver_proc("cuModuleLoadData", 2000);
    PFN_cuModuleGetFunction_v2000 get_function            = driver_proc("cuModuleGetFunction", 2000);
    PFN_cuLaunchKernel_v4000 launch                       = driver_proc("cuLaunchKernel", 4000);
    PFN_cuStreamCreateWithPriority_v5050 create_prio      = driver_proc("cuStreamCreateWithPriority", 5050);
    PFN_cuCtxGetStreamPriorityRange_v5050 priority_range  = driver_proc("cuCtxGetStreamPriorityRange", 5050);
    static const size_t sizes[] = {8, 65536, 1 << 20};
    CUstream stream, stream2, prio_stream;
    CUevent event, event2;
    CUmodule module;
    CUfunction copy16, copy1;
    int least, greatest;
    char name[96];

    if ((load_data == NULL) || (get_function == NULL) || (launch == NULL) || (create_prio == NULL) ||
        (priority_range == NULL) || !enter_peer_pair(ctx0, ctx1) ||
        (load_data(&module, cux_copy_ptx) != CUDA_SUCCESS)) {
        printf("# small-copy levers: skipped (needs two GPUs and the real driver)\n");
        return;
    }
    CHECK(cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    CHECK(cux_drv.cuStreamCreate(&stream2, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    CHECK(priority_range(&least, &greatest) == CUDA_SUCCESS, "priority range");
    CHECK(create_prio(&prio_stream, CU_STREAM_NON_BLOCKING, greatest) == CUDA_SUCCESS, "priority stream");
    CHECK(cux_drv.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "event");
    CHECK(cux_drv.cuEventCreate(&event2, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS, "event");
    CHECK(get_function(&copy16, module, "cux_copy16") == CUDA_SUCCESS, "cux_copy16");
    CHECK(get_function(&copy1, module, "cux_copy1") == CUDA_SUCCESS, "cux_copy1");

#define WAIT_EVENT(_ev) \
    ({ \
        while (cux_drv.cuEventQuery(_ev) == CUDA_ERROR_NOT_READY) { \
        } \
    })
    for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        size_t size      = sizes[k];
        unsigned n       = (size > 65536) ? iters / 20 + 1 : iters / 10 + 1;
        unsigned long long words = size / 16;
        unsigned blocks  = (words + 511) / 512;
        void *args16[]   = {&remote, &local, &words};
        unsigned long long bytes = size;
        void *args1[]    = {&remote, &local, &bytes};

        blocks = (blocks > 264) ? 264 : ((blocks == 0) ? 1 : blocks);
        snprintf(name, sizeof(name), "peer get %zu B, copy engine", size);
        MEASURE(name, n, (cux_drv.cuMemcpyAsync(local, remote, size, stream), cux_drv.cuEventRecord(event, stream),
                          WAIT_EVENT(event)));
        snprintf(name, sizeof(name), "peer get %zu B, copy engine, high-priority stream", size);
        MEASURE(name, n, (cux_drv.cuMemcpyAsync(local, remote, size, prio_stream),
                          cux_drv.cuEventRecord(event, prio_stream), WAIT_EVENT(event)));
        snprintf(name, sizeof(name), "peer get %zu B, copy kernel (%u blocks)", size, (words > 0) ? blocks : 1);
        MEASURE(name, n, ((words > 0) ? launch(copy16, blocks, 1, 1, 512, 1, 1, 0, stream, args16, NULL)
                                      : launch(copy1, 1, 1, 1, 32, 1, 1, 0, stream, args1, NULL),
                          cux_drv.cuEventRecord(event, stream), WAIT_EVENT(event)));
        if (size >= 65536) {
            snprintf(name, sizeof(name), "peer get %zu B, copy engine, halves on two streams", size);
            MEASURE(name, n, (cux_drv.cuMemcpyAsync(local, remote, size / 2, stream),
                              cux_drv.cuEventRecord(event, stream),
                              cux_drv.cuMemcpyAsync(local + size / 2, remote + size / 2, size / 2, stream2),
                              cux_drv.cuEventRecord(event2, stream2), WAIT_EVENT(event), WAIT_EVENT(event2)));
        }
    }
#undef WAIT_EVENT
    {
        uint64_t pattern[2] = {0x5a5a5a5a5a5a5a5aull, 0x5a5a5a5a5a5a5a5aull}, check[2] = {0, 0};
        unsigned long long words = 1;
        void *args16[] = {&remote, &local, &words};
        cux_drv.cuMemcpyAsync(remote, (CUdeviceptr)(uintptr_t)pattern, 16, stream);
        launch(copy16, 1, 1, 1, 512, 1, 1, 0, stream, args16, NULL);
        cux_drv.cuMemcpyAsync((CUdeviceptr)(uintptr_t)check, local, 16, stream);
        cux_drv.cuStreamSynchronize(stream);
        printf("# copy kernel data check: %s\n", (check[0] == 0x5a5a5a5a5a5a5a5aull) ? "ok" : "WRONG");
    }
    cux_drv.cuEventDestroy(event);
    cux_drv.cuEventDestroy(event2);
    cux_drv.cuStreamDestroy(stream);
    cux_drv.cuStreamDestroy(stream2);
    cux_drv.cuStreamDestroy(prio_stream);
}

/* The copy ceilings the bandwidth targets are measured against: back-to-back copies GPU0 -> GPU1 on one stream
 * (issued in GPU0's context, peer access on), at the sizes of the harness's large-message cases. */
static void measure_copy_ceilings(CUcontext ctx0, CUcontext ctx1)
{
    static const size_t sizes[] = {1 << 20, 16 << 20, 64 << 20, 256 << 20};
    const size_t total = 4ul << 30; /* bytes copied per size */
    CUdeviceptr src, dst;
    CUstream stream;
    double t0;

    if (!enter_peer_pair(ctx0, ctx1)) {
        printf("# copy ceilings: skipped (needs two GPUs and the real driver)\n");
        return;
    }
    cux_drv.cuCtxSetCurrent(ctx1);
    CHECK(cux_drv.cuMemAlloc(&dst, sizes[3]) == CUDA_SUCCESS, "ceiling buffer on GPU1");
    cux_drv.cuCtxSetCurrent(ctx0);
    CHECK(cux_drv.cuMemAlloc(&src, sizes[3]) == CUDA_SUCCESS, "ceiling buffer on GPU0");
    CHECK(cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
    for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
        unsigned n = total / sizes[k];
        cux_drv.cuMemcpyAsync(dst, src, sizes[k], stream); /* warm-up */
        cux_drv.cuStreamSynchronize(stream);
        t0 = cux_bench_now_ns();
        for (unsigned i = 0; i < n; ++i) {
            cux_drv.cuMemcpyAsync(dst, src, sizes[k], stream);
        }
        cux_drv.cuStreamSynchronize(stream);
        printf("copy ceiling GPU0->GPU1 %4zu MB, back-to-back   %10.2f GB/s\n", sizes[k] >> 20,
               (double)n * sizes[k] / (cux_bench_now_ns() - t0));
    }
    cux_drv.cuStreamDestroy(stream);
    cux_drv.cuMemFree(src);
    cux_drv.cuCtxSetCurrent(ctx1);
    cux_drv.cuMemFree(dst);
    cux_drv.cuCtxSetCurrent(ctx0);
}

/* --- cuda_ipc: an exporting process, and the importer's costs --- */

#define OPCOST_IPC_BUFFERS 16
#define OPCOST_ADDR_LEN    128 /* device address (64 bytes), then interface address (64) */
/* What the parent asks of the exporter once it has the keys; it answers each byte with the same byte. */
#define OPCOST_EXPORTER_NOTHING 'n'
#define OPCOST_EXPORTER_WORK    'w'

typedef struct {
    char     addr[OPCOST_ADDR_LEN];
    uint64_t bufs[OPCOST_IPC_BUFFERS];
    char     keys[OPCOST_IPC_BUFFERS][256];
    int      npool; /* allocations from a shareable pool: 0 where the driver cannot make one */
    uint64_t pool_bufs[OPCOST_IPC_BUFFERS];
    char     pool_keys[OPCOST_IPC_BUFFERS][256];
} exporter_msg_t;

/* OPCOST_IPC_BUFFERS registered 1 MB allocations from one pool of device 0 that can be shared (POSIX
 * descriptor), as an application using stream-ordered allocation makes them; none where the driver has no
 * such pools. */
static void export_pool_buffers(transport_t *t, CUstream stream, exporter_msg_t *msg)
{
    CUresult (*create)(CUmemoryPool*, const CUmemPoolProps*)           = driver_proc("cuMemPoolCreate", 11020);
    CUresult (*alloc)(CUdeviceptr*, size_t, CUmemoryPool, CUstream) = driver_proc("cuMemAllocFromPoolAsync", 11020);
    CUmemPoolProps props = {.allocType   = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location    = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool;
    CUdeviceptr d;
    uct_mem_h memh;

    if ((create == NULL) || (alloc == NULL) || (create(&pool, &props) != CUDA_SUCCESS)) {
        return;
    }
    for (int i = 0; i < OPCOST_IPC_BUFFERS; ++i) {
        CHECK((alloc(&d, 1 << 20, pool, stream) == CUDA_SUCCESS) &&
              (cux_drv.cuStreamSynchronize(stream) == CUDA_SUCCESS), "exporter: pool alloc");
        CHECK(uct_md_mem_reg(t->md, (void*)d, 1 << 20, UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK, "exporter: reg");
        CHECK(uct_md_mkey_pack(t->md, memh, msg->pool_keys[i]) == UCS_OK, "exporter: pack");
        msg->pool_bufs[i] = d;
    }
    msg->npool = OPCOST_IPC_BUFFERS;
}

/* The child: its own driver, OPCOST_IPC_BUFFERS registered 1 MB buffers, their keys and its address sent to
 * the parent; it lives until the parent closes the socket. */
static void run_exporter(int fd)
{
    exporter_msg_t msg;
    ucs_async_context_t *async;
    transport_t t;
    uct_mem_h memh;
    CUstream stream;
    CUcontext ctx;
    char byte;

    memset(&msg, 0, sizeof(msg));
    CHECK(cux_devices_init() == UCS_OK, "exporter: cuda devices");
    CHECK(cux_device_ctx(0, &ctx) == UCS_OK, "exporter: ctx");
    cux_drv.cuCtxSetCurrent(ctx);
    CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) == UCS_OK, "exporter: async");
    open_transport("cuda_ipc", "cuda_ipc", async, &t, NULL, NULL, opcost_no_ep);
    uct_iface_get_device_address(t.iface, (uct_device_addr_t*)msg.addr);
    uct_iface_get_address(t.iface, (uct_iface_addr_t*)(msg.addr + 64));
    for (int i = 0; i < OPCOST_IPC_BUFFERS; ++i) {
        CUdeviceptr d;
        CHECK(cux_drv.cuMemAlloc(&d, 1 << 20) == CUDA_SUCCESS, "exporter: alloc");
        CHECK(uct_md_mem_reg(t.md, (void*)d, 1 << 20, UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK, "exporter: reg");
        CHECK(uct_md_mkey_pack(t.md, memh, msg.keys[i]) == UCS_OK, "exporter: pack");
        msg.bufs[i] = d;
    }
    CHECK(cux_drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "exporter: stream");
    export_pool_buffers(&t, stream, &msg);
    CHECK(write(fd, &msg, sizeof(msg)) == sizeof(msg), "exporter: send");
    /* OPCOST_EXPORTER_WORK: work of its own on the GPU (a 1 MB copy between two of its buffers) first */
    while (read(fd, &byte, 1) > 0) {
        if (byte == OPCOST_EXPORTER_WORK) {
            CHECK((cux_drv.cuMemcpyAsync((CUdeviceptr)msg.bufs[0], (CUdeviceptr)msg.bufs[2], 1 << 20, stream) ==
                   CUDA_SUCCESS) && (cux_drv.cuStreamSynchronize(stream) == CUDA_SUCCESS), "exporter: own copy");
        }
        CHECK(write(fd, &byte, 1) == 1, "exporter: answer");
    }
    _exit(0);
}

/* OPCOST_EXPORTER_PIDNS: the exporter as pid 1 of a PID namespace of its own, with its own /proc. */
static int opcost_exporter_contained(void)
{
    const char *v = getenv("OPCOST_EXPORTER_PIDNS");

    return (v != NULL) && (atoi(v) != 0);
}

static pid_t start_exporter(int *fd_p)
{
    int sv[2];
    pid_t pid;

    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(sv[0]);
        if (opcost_exporter_contained()) {
            CHECK(cux_enter_own_pid_namespace(0) == 0, "exporter: a PID namespace of its own (needs root)");
        }
        run_exporter(sv[1]);
    }
    close(sv[1]);
    *fd_p = sv[0];
    return pid;
}

/* The first transfer to each allocation of the exporter's pool: proof, the pool's import and the allocation's. */
static void measure_first_pool_puts(transport_t *ipc, CUdeviceptr local, const exporter_msg_t *msg)
{
    uct_rkey_bundle_t bundle;
    double t0, first = 0;

    if (msg->npool == 0) {
        printf("# the exporter's driver made no shareable pool: pool allocations not measured\n");
        return;
    }
    for (int i = 0; i < msg->npool; ++i) {
        CHECK(uct_rkey_unpack(ipc->component, msg->pool_keys[i], &bundle) == UCS_OK, "unpack");
        t0 = cux_bench_now_ns();
        zcopy_roundtrip(ipc, (void*)local, (void*)(uintptr_t)msg->pool_bufs[i], 8, bundle.rkey);
        first += cux_bench_now_ns() - t0;
        uct_rkey_release(ipc->component, &bundle);
    }
    printf("%-48s %10.1f ns\n", "cuda_ipc 8 B put, first of a pool allocation", first / msg->npool);
}

/* Has the exporter do what (OPCOST_EXPORTER_*) and waits for its answer. */
static void exporter_ask(int fd, char what)
{
    char byte;

    CHECK((write(fd, &what, 1) == 1) && (read(fd, &byte, 1) == 1) && (byte == what), "exporter's answer");
}

static void measure_ipc(unsigned iters, ucs_async_context_t *async, CUdeviceptr local, int exporter_fd)
{
    exporter_msg_t msg;
    uct_rkey_bundle_t bundles[OPCOST_IPC_BUFFERS], bundle;
    cux_ipc_iface_addr_t addr;
    uct_md_attr_t md_attr;
    cux_ipc_peer_t peer;
    uct_mem_h memh;
    char rkey_buf[256];
    transport_t ipc;
    double t0, first = 0;
    size_t got = 0;
    ssize_t n;

    while ((got < sizeof(msg)) && ((n = read(exporter_fd, (char*)&msg + got, sizeof(msg) - got)) > 0)) {
        got += n;
    }
    CHECK(got == sizeof(msg), "exporter's keys");
    open_transport("cuda_ipc", "cuda_ipc", async, &ipc, NULL, NULL, msg.addr);

    /* the exporting side, on our own buffer */
    CHECK(uct_md_query(ipc.md, &md_attr) == UCS_OK, "md query");
    MEASURE("cuda_ipc mem_reg + mem_dereg (per rendezvous)", iters / 10 + 1,
            (uct_md_mem_reg(ipc.md, (void*)local, 1 << 20, UCT_MD_MEM_ACCESS_ALL, &memh),
             uct_md_mem_dereg(ipc.md, memh)));
    CHECK(uct_md_mem_reg(ipc.md, (void*)local, 1 << 20, UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK, "reg");
    MEASURE("cuda_ipc mkey_pack", iters, uct_md_mkey_pack(ipc.md, memh, rkey_buf));
    uct_md_mem_dereg(ipc.md, memh);

    /* the importing side, on the exporter's keys */
    MEASURE("cuda_ipc rkey_unpack + rkey_release", iters,
            (uct_rkey_unpack(ipc.component, msg.keys[0], &bundle), uct_rkey_release(ipc.component, &bundle)));
    cux_ipc_addr_unpack(&addr, msg.addr + 64, SIZE_MAX);
    if (opcost_exporter_contained()) {
        printf("# the exporter is pid %d of a PID namespace of its own: proven over its socket\n", addr.pid);
    }
    MEASURE(opcost_exporter_contained() ? "cuda_ipc proof of the peer's address (its socket)" :
                                          "cuda_ipc proof of the peer's address (pidfd, /proc, read-back)",
            iters / 10 + 1,
            (cux_ipc_peer_open(&peer, &addr, cux_ipc_pid_namespace(), CUX_IPC_PROOF_AUTO), cux_ipc_peer_close(&peer)));
    CHECK(cux_ipc_peer_open(&peer, &addr, cux_ipc_pid_namespace(), CUX_IPC_PROOF_AUTO) == UCS_OK, "peer proof");
    printf("# keys are proven %s\n", (peer.channel >= 0) ? "by asking the exporter over its socket" :
                                      peer.readable ? "by reading them back from the exporter's memory" :
                                                      "by the pid in the driver's handle (its memory cannot be read)");
    MEASURE((peer.channel >= 0) ? "cuda_ipc proof of a key (asked over its socket)" :
                                  "cuda_ipc proof of a key (read back from the exporter)", iters,
            cux_ipc_peer_check_key(&peer, (const cux_ipc_rkey_t*)msg.keys[0]));
    cux_ipc_peer_close(&peer);

    /* the first transfer from each allocation: proof, mapping (cuIpcOpenMemHandle) and copy; then a cached one */
    for (int i = 0; i < OPCOST_IPC_BUFFERS; ++i) {
        CHECK(uct_rkey_unpack(ipc.component, msg.keys[i], &bundles[i]) == UCS_OK, "unpack");
        t0 = cux_bench_now_ns();
        zcopy_roundtrip(&ipc, (void*)local, (void*)(uintptr_t)msg.bufs[i], 8, bundles[i].rkey);
        first += cux_bench_now_ns() - t0;
    }
    printf("%-48s %10.1f ns\n", "cuda_ipc 8 B put, first of an allocation (proof + map)", first / OPCOST_IPC_BUFFERS);
    measure_first_pool_puts(&ipc, local, &msg);
    MEASURE("cuda_ipc 8 B put, cached mapping (no proof)", iters,
            zcopy_roundtrip(&ipc, (void*)local, (void*)(uintptr_t)msg.bufs[0], 8, bundles[0].rkey));
    /* the local buffer registered, as NIXL's are (no pointer query); per put (issue 62 item 3) */
    CHECK(uct_md_mem_reg(ipc.md, (void*)local, 1 << 20, UCT_MD_MEM_ACCESS_ALL, &memh) == UCS_OK, "reg");
    MEASURE_EACH("cuda_ipc 1 KB puts, 1,024 end to end (per put)", iters / 1024 + 1, 1024,
            zcopy_burst(&ipc, (char*)local, memh, msg.bufs[0], 1024, 1024, bundles[0].rkey));
    uct_md_mem_dereg(ipc.md, memh);
    /* Two processes on one GPU take turns on it: the first copy after the exporter's own GPU work waits for
     * the GPU to switch contexts. The exporter's memory is the target either way; only its own copy differs. */
    MEASURE("cuda_ipc 16 KB put, exporter idle (per message)", iters / 100 + 1,
            (exporter_ask(exporter_fd, OPCOST_EXPORTER_NOTHING),
             zcopy_roundtrip(&ipc, (void*)local, (void*)(uintptr_t)msg.bufs[1], 16384, bundles[1].rkey)));
    MEASURE("cuda_ipc 16 KB put, after the exporter's own copy", iters / 100 + 1,
            (exporter_ask(exporter_fd, OPCOST_EXPORTER_WORK),
             zcopy_roundtrip(&ipc, (void*)local, (void*)(uintptr_t)msg.bufs[1], 16384, bundles[1].rkey)));
    for (int i = 0; i < OPCOST_IPC_BUFFERS; ++i) {
        uct_rkey_release(ipc.component, &bundles[i]);
    }
    close_transport(&ipc);
    cux_ipc_cache_purge_pid(&cux_ipc_cache, addr.pid_ns, addr.pid);
}

/* The copy engine's and cuda_copy's costs (everything but cuda_ipc). */
static void measure_copies(unsigned iters, ucs_async_context_t *async, char *host, CUdeviceptr d0, CUdeviceptr d0b,
                           CUdeviceptr d1, CUcontext ctx, CUcontext ctx1)
{
    transport_t copy;

    measure_small_copy_throughput(d0, d0b);
    measure_small_copy_kernel(d0, d0b);
    measure_peer_copy_levers(iters, d0, d1, ctx, ctx1);
    measure_small_copy_levers(iters, d0, d1, ctx, ctx1);
    measure_copy_ceilings(ctx, ctx1);
    cux_drv.cuCtxSetCurrent(ctx);

    /* cuda_copy: UCP 1.13 packs and unpacks GPU memory with these, one per fragment */
    open_transport("cuda_cpy", "cuda_copy", async, &copy, "SHORT_WAIT", "block", NULL);
    MEASURE("cuda_copy put_short 8 B host->GPU, SHORT_WAIT=block", iters,
            uct_ep_put_short(copy.ep, host, 8, (uintptr_t)d0, 0));
    MEASURE("cuda_copy get_short 8 B GPU->host, SHORT_WAIT=block", iters,
            uct_ep_get_short(copy.ep, host, 8, (uintptr_t)d0, 0));
    MEASURE("cuda_copy put_short 8 KB host->GPU, SHORT_WAIT=block", iters,
            uct_ep_put_short(copy.ep, host, 8192, (uintptr_t)d0, 0));
    close_transport(&copy);
    open_transport("cuda_cpy", "cuda_copy", async, &copy, NULL, NULL, NULL);
    MEASURE("cuda_copy put_short 8 B host->GPU, SHORT_WAIT=spin", iters,
            uct_ep_put_short(copy.ep, host, 8, (uintptr_t)d0, 0));
    MEASURE("cuda_copy get_short 8 B GPU->host, SHORT_WAIT=spin", iters,
            uct_ep_get_short(copy.ep, host, 8, (uintptr_t)d0, 0));
    MEASURE("cuda_copy put_short 8 KB host->GPU, SHORT_WAIT=spin", iters,
            uct_ep_put_short(copy.ep, host, 8192, (uintptr_t)d0, 0));
    MEASURE("cuda_copy zcopy 64 KB GPU->GPU, issue to completion", iters,
            zcopy_roundtrip(&copy, (void*)d0b, (void*)d0, 65536, 0));
    {
        /* what UCP asks about every GPU buffer with its cache off (and once per buffer with UCX's hooks);
         * includes synchronous memory operations unless CUX_SYNC_MEMOPS=n */
        uct_md_mem_attr_t attr = {.field_mask = UCT_MD_MEM_ATTR_FIELD_MEM_TYPE | UCT_MD_MEM_ATTR_FIELD_SYS_DEV |
                                                UCT_MD_MEM_ATTR_FIELD_BASE_ADDRESS |
                                                UCT_MD_MEM_ATTR_FIELD_ALLOC_LENGTH};
        MEASURE("cuda_copy mem_query, device memory", iters, uct_md_mem_query(copy.md, (void*)d0, 8, &attr));
    }
    close_transport(&copy);
}

int main(int argc, char **argv)
{
    unsigned iters  = (argc > 1) ? (unsigned)atoi(argv[1]) : 20000;
    unsigned allocs = (argc > 2) ? (unsigned)atoi(argv[2]) : 0;
    int peer_dev   = 0;
    CUdeviceptr d0, d1, d0b;
    ucs_async_context_t *async;
    CUcontext ctx, ctx1;
    char host[65536];

    int exporter_fd = -1;
    /* before the driver is loaded here: a process of its own (not needed for the pointer query alone) */
    pid_t exporter  = (allocs == 0) ? start_exporter(&exporter_fd) : -1;
    CHECK(cux_devices_init() == UCS_OK, "cuda devices");
    peer_dev = (cux_device_count() > 1) ? 1 : 0;
    printf("# cux_opcost: %u iterations, %d device(s), driver %d\n", iters, cux_device_count(),
           cux_driver_version());

    CHECK(cux_device_ctx(peer_dev, &ctx) == UCS_OK, "ctx");
    cux_drv.cuCtxSetCurrent(ctx);
    CHECK(cux_drv.cuMemAlloc(&d1, 1 << 20) == CUDA_SUCCESS, "alloc peer");
    ctx1 = ctx;
    CHECK(cux_device_ctx(0, &ctx) == UCS_OK, "ctx");
    cux_drv.cuCtxSetCurrent(ctx);
    CHECK(cux_drv.cuMemAlloc(&d0, 1 << 20) == CUDA_SUCCESS, "alloc");
    CHECK(cux_drv.cuMemAlloc(&d0b, 1 << 20) == CUDA_SUCCESS, "alloc");

    /* driver queries a registration or a copy may make */
    {
        cux_ptr_info_t info;
        CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
        unsigned long long id;
        void *data = &id;
        CUipcMemHandle handle;
        CUcontext cur;

        MEASURE("cux_ptr_query (6 attributes), device memory", iters, cux_ptr_query((void*)d0, &info));
        MEASURE("cux_ptr_query (6 attributes), host memory", iters, cux_ptr_query(host, &info));
        MEASURE("cuPointerGetAttributes (buffer id only)", iters,
                cux_drv.cuPointerGetAttributes(1, &attr, &data, d0));
        MEASURE("cuIpcGetMemHandle", iters / 10 + 1, cux_drv.cuIpcGetMemHandle(&handle, d0));
        MEASURE("cuCtxGetCurrent", iters, cux_drv.cuCtxGetCurrent(&cur));
    }
    if (allocs > 0) {
        measure_ptr_query_many(allocs);
        return 0;
    }
    CHECK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) == UCS_OK, "async");
    if ((getenv("OPCOST_IPC_ONLY") == NULL) || !atoi(getenv("OPCOST_IPC_ONLY"))) {
        measure_copies(iters, async, host, d0, d0b, d1, ctx, ctx1);
    }

    /* cuda_ipc: what a rendezvous message costs on either side, and what proving a peer costs (issue 19), with
     * the exporter child started before the driver was loaded */
    measure_ipc(iters, async, d1, exporter_fd);
    close(exporter_fd);
    waitpid(exporter, NULL, 0);
    ucs_async_context_destroy(async);
    return 0;
}
