/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What recognising GPU memory costs a program that allocates between its messages (issue 61): the shape of an
 * inference server whose allocator misses its cache, and of openucx/ucx#11652.
 *
 *   cux_alloc_churn [--mem host|cuda] [--message BYTES] [--alloc BYTES] [ITERATIONS]
 *
 * One process, one UCP worker, an endpoint to itself. The driver is opened as the CUDA runtimes open it (a handle
 * of its own, every entry point from cuGetProcAddress), CUX_DRIVER_PATH or libcuda.so.1. Three loops of
 * ITERATIONS (default 20000), each timed over 5 rounds:
 *   alloc_free  cuMemAlloc(--alloc, default 2 MB) and cuMemFree
 *   message     a tag message of --message bytes (default 8) from a --mem buffer to another, sent and received
 *   churn       both in turn, as the server does
 * The received buffer is checked after every round (a pattern per round): a run whose check fails prints FAIL
 * and exits 1, and no figure of it counts. Prints "name ns-per-iteration [min max]" (median of the rounds).
 * How UCP learns of GPU memory is the environment's: ucx-cuda-run's CUX_MEMTYPE=query or hooks on a stock UCX,
 * or a UCX built with CUDA (its own hooks).
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include "cux_bench_clock.h"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#define ROUNDS 5

typedef CUresult (*get_proc_t)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

static struct {
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext*, CUdevice);
    CUresult (*push)(CUcontext);
    CUresult (*alloc)(CUdeviceptr*, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void*, size_t);
    CUresult (*dtoh)(void*, CUdeviceptr, size_t);
} drv;

static ucp_worker_h worker;
static ucp_ep_h     self_ep;

#define CHECK(_cond, _what) \
    do { \
        if (!(_cond)) { \
            printf("FAIL: %s\n", _what); \
            exit(1); \
        } \
    } while (0)

static void open_driver(void)
{
    const char *path = getenv("CUX_DRIVER_PATH");
    CUdriverProcAddressQueryResult st;
    get_proc_t get_proc;
    CUcontext ctx;
    void *handle;

    handle = dlopen(((path != NULL) && (*path != '\0')) ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(handle != NULL, "opening the driver");
    *(void**)&drv.init = dlsym(handle, "cuInit");
    *(void**)&get_proc = dlsym(handle, "cuGetProcAddress_v2");
    CHECK((drv.init != NULL) && (get_proc != NULL) && (drv.init(0) == CUDA_SUCCESS), "cuInit");
#define GET(_field, _name, _version) \
    CHECK((get_proc(_name, (void**)&drv._field, _version, 0, &st) == CUDA_SUCCESS) && (drv._field != NULL), _name)
    GET(retain, "cuDevicePrimaryCtxRetain", 7000);
    GET(push, "cuCtxPushCurrent", 4000);
    GET(alloc, "cuMemAlloc", 3020);
    GET(free, "cuMemFree", 3020);
    GET(htod, "cuMemcpyHtoD", 3020);
    GET(dtoh, "cuMemcpyDtoH", 3020);
#undef GET
    CHECK((drv.retain(&ctx, 0) == CUDA_SUCCESS) && (drv.push(ctx) == CUDA_SUCCESS), "the primary context");
}

static void open_ucp(void)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_worker_params_t wparams = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_ep_params_t eparams = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS};
    ucp_address_t *address;
    ucp_context_h context;
    size_t length;

    CHECK(ucp_init(&params, NULL, &context) == UCS_OK, "ucp_init");
    CHECK(ucp_worker_create(context, &wparams, &worker) == UCS_OK, "ucp_worker_create");
    CHECK(ucp_worker_get_address(worker, &address, &length) == UCS_OK, "ucp_worker_get_address");
    eparams.address = address;
    CHECK(ucp_ep_create(worker, &eparams, &self_ep) == UCS_OK, "ucp_ep_create");
    ucp_worker_release_address(worker, address);
}

static void wait_request(void *request)
{
    if (request == NULL) {
        return;
    }
    CHECK(!UCS_PTR_IS_ERR(request), "a tag operation");
    while (ucp_request_check_status(request) == UCS_INPROGRESS) {
        ucp_worker_progress(worker);
    }
    CHECK(ucp_request_check_status(request) == UCS_OK, "a tag operation's completion");
    ucp_request_free(request);
}

static void one_message(void *send, void *recv, size_t size)
{
    ucp_request_param_t param = {0};
    void *rreq, *sreq;

    rreq = ucp_tag_recv_nbx(worker, recv, size, 7, (ucp_tag_t)-1, &param);
    sreq = ucp_tag_send_nbx(self_ep, send, size, 7, &param);
    wait_request(sreq);
    wait_request(rreq);
}

static void one_allocation(size_t size)
{
    CUdeviceptr p;

    CHECK(drv.alloc(&p, size) == CUDA_SUCCESS, "cuMemAlloc");
    CHECK(drv.free(p) == CUDA_SUCCESS, "cuMemFree");
}

/* A buffer of the kind asked, and its pattern written and read the plain way. */
static void *buffer(int cuda, size_t size)
{
    CUdeviceptr p;
    void *host;

    if (!cuda) {
        host = malloc(size);
        CHECK(host != NULL, "malloc");
        return host;
    }
    CHECK(drv.alloc(&p, size) == CUDA_SUCCESS, "cuMemAlloc of a message buffer");
    return (void*)(uintptr_t)p;
}

static void fill(int cuda, void *dst, int byte, size_t size, unsigned char *staging)
{
    memset(staging, byte, size);
    if (cuda) {
        CHECK(drv.htod((CUdeviceptr)(uintptr_t)dst, staging, size) == CUDA_SUCCESS, "cuMemcpyHtoD");
    } else {
        memcpy(dst, staging, size);
    }
}

static int holds(int cuda, void *src, int byte, size_t size, unsigned char *staging)
{
    size_t i;

    if (cuda) {
        CHECK(drv.dtoh(staging, (CUdeviceptr)(uintptr_t)src, size) == CUDA_SUCCESS, "cuMemcpyDtoH");
    } else {
        memcpy(staging, src, size);
    }
    for (i = 0; (i < size) && (staging[i] == (unsigned char)byte); ++i) {
    }
    return i == size;
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"alloc_free", "message", "churn"};
    size_t message = 8, alloc = 2 << 20;
    long iterations = 20000, i;
    int cuda = 0, loop, round, a;
    double t[ROUNDS], start;
    unsigned char *staging;
    void *send, *recv;

    for (a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--mem") && (a + 1 < argc)) {
            cuda = !strcmp(argv[++a], "cuda");
        } else if (!strcmp(argv[a], "--message") && (a + 1 < argc)) {
            message = strtoul(argv[++a], NULL, 0);
        } else if (!strcmp(argv[a], "--alloc") && (a + 1 < argc)) {
            alloc = strtoul(argv[++a], NULL, 0);
        } else if ((argv[a][0] >= '0') && (argv[a][0] <= '9')) {
            iterations = strtol(argv[a], NULL, 0);
        } else {
            fprintf(stderr, "usage: cux_alloc_churn [--mem host|cuda] [--message BYTES] [--alloc BYTES] "
                            "[ITERATIONS]\n");
            return 2;
        }
    }
    CHECK((message > 0) && (alloc > 0) && (iterations > 0), "the arguments");
    open_driver();
    open_ucp();
    staging = malloc(message);
    send    = buffer(cuda, message);
    recv    = buffer(cuda, message);
    CHECK(staging != NULL, "malloc");

    printf("# %s messages of %zu bytes, allocations of %zu bytes, %ld iterations, median [min max] of %d rounds\n",
           cuda ? "GPU" : "host", message, alloc, iterations, ROUNDS);
    for (loop = 0; loop < 3; ++loop) {
        for (round = 0; round < ROUNDS; ++round) {
            fill(cuda, send, 1 + round, message, staging);
            fill(cuda, recv, 0, message, staging);
            start = cux_bench_now_ns();
            for (i = 0; i < iterations; ++i) {
                if (loop != 1) {
                    one_allocation(alloc);
                }
                if (loop != 0) {
                    one_message(send, recv, message);
                }
            }
            t[round] = (cux_bench_now_ns() - start) / iterations;
            if ((loop != 0) && !holds(cuda, recv, 1 + round, message, staging)) {
                printf("FAIL: %s round %d: the received buffer does not hold what was sent\n", names[loop], round);
                return 1;
            }
        }
        qsort(t, ROUNDS, sizeof(t[0]), cux_bench_cmp_double);
        printf("%s %.1f [%.1f %.1f]\n", names[loop], t[ROUNDS / 2], t[0], t[ROUNDS - 1]);
        fflush(stdout);
    }
    printf("PASS\n");
    return 0;
}
