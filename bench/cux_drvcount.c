/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_drvcount.so: counts CUDA driver API calls, whoever makes them and however they were resolved (linked,
 * dlsym'ed or from cuGetProcAddress), to show where the time of a transfer goes: loaded by the driver itself
 * as its injection library (CUDA_INJECTION64_PATH=.../libcux_drvcount.so), it subscribes to CUPTI's driver
 * API callbacks, and times them (entry to exit, per function, CUPTI's own cost included: compare modules with
 * each other, not with an uncounted run). CUPTI is opened at run time (CUX_CUPTI_PATH, else libcupti.so from the toolkit), so no
 * CUPTI header or link is needed; the few declarations below follow CUPTI's callback API.
 *
 * Counting is off until a program turns it on: cux_drvcount_enable(1) (found with dlopen(RTLD_NOLOAD) of the
 * injection path) counts the calls of the calling thread; cux_drvcount_report(f, per) prints each function's
 * calls divided by per and, in brackets, its mean time per call in microseconds, and resets. bench/cux_blocks does this around its timed transfers.
 *
 * A program that knows nothing of it (ucx_perftest) is counted whole, every thread from cuInit to exit, with
 * CUX_DRVCOUNT_AT_EXIT=N: at exit it prints each function's calls divided by N (the number of messages) to
 * standard error, one line per process. A process that ends with _exit (a forked child, as in
 * test/cux_ucp_datacheck) runs no atexit handler: with the library also in LD_PRELOAD its _exit reports first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CUPTI's callback API, as declared in cupti_callbacks.h. */
typedef int cupti_result_t;
typedef void *cupti_subscriber_t;
typedef int cupti_domain_t;
typedef uint32_t cupti_cbid_t;
#define CUPTI_CB_DOMAIN_DRIVER_API 1
#define CUPTI_API_ENTER            0
#define CUPTI_API_EXIT             1
typedef struct {
    int        callbackSite;
    const char *functionName;
    /* more fields follow that are not read here */
} cupti_callback_data_t;
typedef void (*cupti_callback_t)(void *userdata, cupti_domain_t domain, cupti_cbid_t cbid, const void *data);

#define DRVCOUNT_MAX_CBID 2048

static uint64_t     drvcount_calls[DRVCOUNT_MAX_CBID];
static uint64_t     drvcount_ns[DRVCOUNT_MAX_CBID];
static __thread uint64_t drvcount_entered[DRVCOUNT_MAX_CBID]; /* this thread's entry time, per function */
static const char  *drvcount_names[DRVCOUNT_MAX_CBID];
static __thread int drvcount_on;
static int          drvcount_all;     /* CUX_DRVCOUNT_AT_EXIT: every thread counts */
static double       drvcount_at_exit; /* its divisor */

static uint64_t drvcount_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void drvcount_callback(void *userdata, cupti_domain_t domain, cupti_cbid_t cbid, const void *data)
{
    const cupti_callback_data_t *cb = data;
    (void)userdata;
    if (!(drvcount_on || drvcount_all) || (domain != CUPTI_CB_DOMAIN_DRIVER_API) || (cbid >= DRVCOUNT_MAX_CBID)) {
        return;
    }
    if (cb->callbackSite == CUPTI_API_EXIT) {
        if (drvcount_entered[cbid] != 0) {
            __atomic_fetch_add(&drvcount_ns[cbid], drvcount_now_ns() - drvcount_entered[cbid], __ATOMIC_RELAXED);
            drvcount_entered[cbid] = 0;
        }
        return;
    }
    if (cb->callbackSite != CUPTI_API_ENTER) {
        return;
    }
    __atomic_fetch_add(&drvcount_calls[cbid], 1, __ATOMIC_RELAXED);
    if (drvcount_names[cbid] == NULL) {
        drvcount_names[cbid] = cb->functionName;
    }
    drvcount_entered[cbid] = drvcount_now_ns();
}

__attribute__((visibility("default"))) void cux_drvcount_enable(int on)
{
    drvcount_on = on;
}

__attribute__((visibility("default"))) void cux_drvcount_report(FILE *f, double per)
{
    for (int i = 0; i < DRVCOUNT_MAX_CBID; ++i) {
        if (drvcount_calls[i] != 0) {
            fprintf(f, " %s %.3f [%.2f us]", drvcount_names[i] ? drvcount_names[i] : "?", drvcount_calls[i] / per,
                    drvcount_ns[i] / 1e3 / drvcount_calls[i]);
            drvcount_calls[i] = 0;
            drvcount_ns[i]    = 0;
        }
    }
}

static void drvcount_report_at_exit(void)
{
    fprintf(stderr, "cux_drvcount pid %d, calls per %.0f:", (int)getpid(), drvcount_at_exit);
    cux_drvcount_report(stderr, drvcount_at_exit);
    fprintf(stderr, "\n");
}

/* Preloaded, this _exit is the one a program's calls reach: the report, then the C library's. */
__attribute__((visibility("default"))) void _exit(int status)
{
    void (*libc_exit)(int);

    if (drvcount_at_exit > 0) {
        drvcount_report_at_exit();
    }
    *(void**)&libc_exit = dlsym(RTLD_NEXT, "_exit");
    if (libc_exit != NULL) {
        libc_exit(status);
    }
    _Exit(status);
}

/* Called by the driver at cuInit when CUDA_INJECTION64_PATH names this library. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    const char *path = getenv("CUX_CUPTI_PATH");
    const char *paths[] = {path, "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
                           "/usr/local/cuda/lib64/libcupti.so"};
    cupti_result_t (*subscribe)(cupti_subscriber_t*, cupti_callback_t, void*);
    cupti_result_t (*enable_domain)(uint32_t, cupti_subscriber_t, cupti_domain_t);
    const char *at_exit = getenv("CUX_DRVCOUNT_AT_EXIT");
    cupti_subscriber_t subscriber;
    void *cupti = NULL;

    for (unsigned i = 0; (cupti == NULL) && (i < sizeof(paths) / sizeof(paths[0])); ++i) {
        cupti = paths[i] ? dlopen(paths[i], RTLD_NOW | RTLD_LOCAL) : NULL;
    }
    if (cupti == NULL) {
        fprintf(stderr, "cux_drvcount: no CUPTI (set CUX_CUPTI_PATH): driver calls are not counted\n");
        return 0;
    }
    *(void**)&subscribe     = dlsym(cupti, "cuptiSubscribe");
    *(void**)&enable_domain = dlsym(cupti, "cuptiEnableDomain");
    if (!subscribe || !enable_domain || subscribe(&subscriber, drvcount_callback, NULL) ||
        enable_domain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API)) {
        fprintf(stderr, "cux_drvcount: CUPTI refused the subscription: driver calls are not counted\n");
        return 0;
    }
    if ((at_exit != NULL) && (atof(at_exit) > 0)) {
        drvcount_at_exit = atof(at_exit);
        drvcount_all     = 1;
        atexit(drvcount_report_at_exit);
    }
    return 1;
}
