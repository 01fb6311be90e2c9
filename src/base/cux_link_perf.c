/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Link measurements: see cux_link_perf.h.
 */
#include "cux_link_perf.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define CUX_LINK_BW_SIZE    (16ul << 20)
#define CUX_LINK_BW_COPIES  8
#define CUX_LINK_LAT_COPIES 21

/* Index CUX_MAX_DEVICES stands for the host. */
static struct {
    int             measured;   /* 1 measured, -1 failed */
    cux_link_perf_t perf;
} cux_link_table[CUX_MAX_DEVICES + 1][CUX_MAX_DEVICES + 1];
static pthread_mutex_t cux_link_lock = PTHREAD_MUTEX_INITIALIZER;

static double cux_link_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cux_link_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return (x > y) - (x < y);
}

static ucs_status_t cux_link_alloc(int where, CUdeviceptr *ptr_p)
{
    cux_ctx_guard_t guard;
    ucs_status_t status;
    void *host;

    status = cux_device_ctx_enter((where == CUX_LINK_HOST) ? 0 : where, &guard);
    if (status != UCS_OK) {
        return status;
    }
    if (where == CUX_LINK_HOST) {
        status = CUX_DRV_CALL_ERR(cuMemHostAlloc, &host, CUX_LINK_BW_SIZE, CU_MEMHOSTALLOC_PORTABLE);
        *ptr_p = (CUdeviceptr)(uintptr_t)host;
    } else {
        status = CUX_DRV_CALL_ERR(cuMemAlloc, ptr_p, CUX_LINK_BW_SIZE);
    }
    cux_ctx_leave(&guard);
    return status;
}

static void cux_link_free(int where, CUdeviceptr ptr)
{
    cux_ctx_guard_t guard;

    if ((ptr == 0) || (cux_device_ctx_enter((where == CUX_LINK_HOST) ? 0 : where, &guard) != UCS_OK)) {
        return;
    }
    if (where == CUX_LINK_HOST) {
        (void)CUX_DRV_CALL_ERR(cuMemFreeHost, (void*)(uintptr_t)ptr);
    } else {
        (void)CUX_DRV_CALL_ERR(cuMemFree, ptr);
    }
    cux_ctx_leave(&guard);
}

/* Copies run on the device end's context (the source's when both are devices), as the transports run them. */
static ucs_status_t cux_link_measure(int src, int dst, cux_link_perf_t *perf)
{
    int runner          = (src != CUX_LINK_HOST) ? src : dst;
    CUdeviceptr sbuf    = 0, dbuf = 0;
    double lat[CUX_LINK_LAT_COPIES], t0;
    CUcontext peer_ctx;
    cux_ctx_guard_t guard;
    CUstream stream;
    ucs_status_t status;
    CUresult res;
    int i;

    status = cux_link_alloc(src, &sbuf);
    if (status == UCS_OK) {
        status = cux_link_alloc(dst, &dbuf);
    }
    if ((status != UCS_OK) || ((status = cux_device_ctx_enter(runner, &guard)) != UCS_OK)) {
        goto out_free;
    }
    if ((src != CUX_LINK_HOST) && (dst != CUX_LINK_HOST) && (src != dst) &&
        (cux_device_ctx(dst, &peer_ctx) == UCS_OK)) {
        /* As an imported mapping does (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), and left on: a mapping opened
         * since, by us or by the application, may rely on it, and switching it off would break that mapping.
         * Only cuda_ipc measures a GPU pair, and it would enable the same access at its first mapping. */
        res = cux_drv.cuCtxEnablePeerAccess(peer_ctx, 0);
        if ((res != CUDA_SUCCESS) && (res != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)) {
            ucs_debug("link %d -> %d measured without peer access (error %d)", src, dst, (int)res);
        }
    }
    status = CUX_DRV_CALL_ERR(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    if (status != UCS_OK) {
        goto out_leave;
    }

    for (i = 0; (i < CUX_LINK_LAT_COPIES) && (status == UCS_OK); ++i) {
        t0     = cux_link_now();
        status = CUX_DRV_CALL_ERR(cuMemcpyAsync, dbuf, sbuf, 8, stream);
        if (status == UCS_OK) {
            status = CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
        }
        lat[i] = cux_link_now() - t0;
    }
    /* one copy to warm the path, then the timed ones */
    for (i = -1; (i < CUX_LINK_BW_COPIES) && (status == UCS_OK); ++i) {
        if (i == 0) {
            status = CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
            t0     = cux_link_now();
        }
        if (status == UCS_OK) {
            status = CUX_DRV_CALL_ERR(cuMemcpyAsync, dbuf, sbuf, CUX_LINK_BW_SIZE, stream);
        }
    }
    if (status == UCS_OK) {
        status = CUX_DRV_CALL_ERR(cuStreamSynchronize, stream);
    }
    if (status == UCS_OK) {
        perf->bandwidth = CUX_LINK_BW_COPIES * (double)CUX_LINK_BW_SIZE / (cux_link_now() - t0);
        qsort(lat, CUX_LINK_LAT_COPIES, sizeof(lat[0]), cux_link_cmp_double);
        perf->latency = lat[CUX_LINK_LAT_COPIES / 2];
    }
    (void)CUX_DRV_CALL_ERR(cuStreamDestroy, stream);
out_leave:
    cux_ctx_leave(&guard);
out_free:
    cux_link_free(src, sbuf);
    cux_link_free(dst, dbuf);
    return status;
}

ucs_status_t cux_link_perf_get(int src, int dst, cux_link_perf_t *perf)
{
    int s = (src == CUX_LINK_HOST) ? CUX_MAX_DEVICES : src;
    int d = (dst == CUX_LINK_HOST) ? CUX_MAX_DEVICES : dst;
    ucs_status_t status;

    if ((s < 0) || (s > CUX_MAX_DEVICES) || (d < 0) || (d > CUX_MAX_DEVICES) ||
        ((src == CUX_LINK_HOST) && (dst == CUX_LINK_HOST))) {
        return UCS_ERR_INVALID_PARAM;
    }
    pthread_mutex_lock(&cux_link_lock);
    if (cux_link_table[s][d].measured == 0) {
        status = cux_link_measure(src, dst, &cux_link_table[s][d].perf);
        cux_link_table[s][d].measured = (status == UCS_OK) ? 1 : -1;
        if (status == UCS_OK) {
            ucs_debug("cuda link %d -> %d: %.1f GB/s, %.2f us", src, dst,
                      cux_link_table[s][d].perf.bandwidth / 1e9, cux_link_table[s][d].perf.latency * 1e6);
        } else {
            ucs_debug("cuda link %d -> %d: not measured (%s)", src, dst, ucs_status_string(status));
        }
    }
    status = (cux_link_table[s][d].measured > 0) ? UCS_OK : UCS_ERR_UNSUPPORTED;
    if (status == UCS_OK) {
        *perf = cux_link_table[s][d].perf;
    }
    pthread_mutex_unlock(&cux_link_lock);
    return status;
}
