/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Run-time CUDA driver loader: see cux_driver.h.
 */
#include "cux_driver.h"

#include <ucs/debug/log.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cux_driver_t cux_drv;

typedef CUresult (*cux_get_proc_address_v2_t)(const char *symbol, void **pfn, int version,
                                              cuuint64_t flags, CUdriverProcAddressQueryResult *status);
typedef CUresult (*cux_init_t)(unsigned flags);

static pthread_once_t cux_driver_once = PTHREAD_ONCE_INIT;
static ucs_status_t cux_driver_load_status = UCS_ERR_NO_DEVICE;
static int cux_driver_api_version;
static char cux_driver_errbuf[256];

#define CUX_DRIVER_ENTRY(_name, _version) {#_name, _version},
#define CUX_DRIVER_SLOT(_name, _version)  (void**)&cux_drv._name,

static const struct {
    const char *name;
    int        version;
} cux_driver_entries[] = {CUX_DRIVER_FUNCS(CUX_DRIVER_ENTRY)},
  cux_driver_optional_entries[] = {CUX_DRIVER_OPTIONAL_FUNCS(CUX_DRIVER_ENTRY)};

static ucs_status_t cux_driver_fail(ucs_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cux_driver_errbuf, sizeof(cux_driver_errbuf), fmt, ap);
    va_end(ap);
    ucs_debug("cuda driver not usable: %s", cux_driver_errbuf);
    return status;
}

static ucs_status_t cux_driver_resolve(cux_get_proc_address_v2_t get_proc)
{
    void **slots[] = {CUX_DRIVER_FUNCS(CUX_DRIVER_SLOT)};
    CUdriverProcAddressQueryResult qres;
    unsigned i;
    CUresult res;

    for (i = 0; i < sizeof(slots) / sizeof(slots[0]); ++i) {
        res = get_proc(cux_driver_entries[i].name, slots[i], cux_driver_entries[i].version,
                       CU_GET_PROC_ADDRESS_DEFAULT, &qres);
        if ((res != CUDA_SUCCESS) || (qres != CU_GET_PROC_ADDRESS_SUCCESS) || (*slots[i] == NULL)) {
            return cux_driver_fail(UCS_ERR_UNSUPPORTED,
                                   "driver has no %s with the ABI of CUDA %d (error %d, lookup %d): driver too old?",
                                   cux_driver_entries[i].name, cux_driver_entries[i].version, (int)res, (int)qres);
        }
    }

    void **optional_slots[] = {CUX_DRIVER_OPTIONAL_FUNCS(CUX_DRIVER_SLOT)};
    for (i = 0; i < sizeof(optional_slots) / sizeof(optional_slots[0]); ++i) {
        res = get_proc(cux_driver_optional_entries[i].name, optional_slots[i],
                       cux_driver_optional_entries[i].version, CU_GET_PROC_ADDRESS_DEFAULT, &qres);
        if ((res != CUDA_SUCCESS) || (qres != CU_GET_PROC_ADDRESS_SUCCESS)) {
            *optional_slots[i] = NULL;
            ucs_debug("cuda driver has no %s (CUDA %d ABI): using a fallback", cux_driver_optional_entries[i].name,
                      cux_driver_optional_entries[i].version);
        }
    }
    return UCS_OK;
}

volatile int cux_driver_forked;

static void cux_driver_atfork_child(void)
{
    cux_driver_forked = 1;
}

static void cux_driver_do_load(void)
{
    const char *path = getenv(CUX_DRIVER_PATH_ENV);
    cux_get_proc_address_v2_t get_proc;
    cux_init_t init;
    void *handle;
    CUresult res;
    int version;

    if ((path == NULL) || (*path == '\0')) {
        path = "libcuda.so.1";
    }

    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        cux_driver_load_status = cux_driver_fail(UCS_ERR_NO_DEVICE, "dlopen(%s): %s", path, dlerror());
        return;
    }

    get_proc = (cux_get_proc_address_v2_t)dlsym(handle, "cuGetProcAddress_v2");
    init     = (cux_init_t)dlsym(handle, "cuInit");
    if ((get_proc == NULL) || (init == NULL)) {
        cux_driver_load_status = cux_driver_fail(UCS_ERR_UNSUPPORTED,
                                                 "%s has no cuGetProcAddress_v2/cuInit: driver older than "
                                                 "CUDA 12 is not supported", path);
        goto err_close;
    }

    res = init(0);
    if (res != CUDA_SUCCESS) {
        cux_driver_load_status = cux_driver_fail((res == CUDA_ERROR_NO_DEVICE) ? UCS_ERR_NO_DEVICE :
                                                 UCS_ERR_IO_ERROR, "cuInit() failed with error %d%s",
                                                 (int)res, (res == CUDA_ERROR_NO_DEVICE) ?
                                                 " (no CUDA-capable device)" : "");
        goto err_close;
    }

    cux_driver_load_status = cux_driver_resolve(get_proc);
    if (cux_driver_load_status != UCS_OK) {
        goto err_reset;
    }

    if ((cux_drv.cuDriverGetVersion(&version) != CUDA_SUCCESS) || (version < CUX_DRIVER_MIN_VERSION)) {
        cux_driver_load_status = cux_driver_fail(UCS_ERR_UNSUPPORTED,
                                                 "driver API version %d is older than the required %d",
                                                 version, CUX_DRIVER_MIN_VERSION);
        goto err_reset;
    }

    /* The handle stays open for the life of the process: driver state outlives any one UCX context. */
    cux_driver_api_version = version;
    cux_driver_errbuf[0]   = '\0';
    pthread_atfork(NULL, NULL, cux_driver_atfork_child);
    ucs_debug("loaded cuda driver %s, API version %d", path, version);
    return;

err_reset:
    memset(&cux_drv, 0, sizeof(cux_drv));
err_close:
    dlclose(handle);
}

ucs_status_t cux_driver_fork_error(const char *what)
{
    ucs_error("%s in the child of a fork(): the CUDA driver's state belongs to the parent process", what);
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t cux_driver_load(void)
{
    pthread_once(&cux_driver_once, cux_driver_do_load);
    return cux_driver_load_status;
}

int cux_driver_version(void)
{
    return cux_driver_api_version;
}

const char *cux_driver_error(void)
{
    return cux_driver_errbuf;
}

ucs_status_t cux_driver_status(CUresult res, ucs_log_level_t level, const char *call, const char *file,
                               int line)
{
    const char *name = NULL, *desc = NULL;

    if (ucs_log_is_enabled(level)) {
        if (cux_drv.cuGetErrorName != NULL) {
            cux_drv.cuGetErrorName(res, &name);
            cux_drv.cuGetErrorString(res, &desc);
        }
        ucs_log_dispatch(file, line, call, level, &ucs_global_opts.log_component, "%s() failed: %s (%s)",
                         call, name ? name : "unknown error", desc ? desc : "");
    }

    switch (res) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_MAP_FAILED: /* out of mapping resources, as for an IPC mapping */
        return UCS_ERR_NO_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
        return UCS_ERR_INVALID_PARAM;
    case CUDA_ERROR_NOT_READY:
        return UCS_INPROGRESS;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        return UCS_ERR_NO_DEVICE;
    case CUDA_ERROR_NOT_SUPPORTED:
        return UCS_ERR_UNSUPPORTED;
    case CUDA_ERROR_ALREADY_MAPPED:
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
        return UCS_ERR_ALREADY_EXISTS;
    default:
        return UCS_ERR_IO_ERROR;
    }
}
