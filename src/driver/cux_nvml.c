/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NVML's word on a GPU's NVLink fabric: see cux_nvml.h. NVML's types are declared here as its documentation
 * gives them (nvml.h's version 2 of the fabric info), so that nothing needs nvml.h to build.
 */
#include "driver/cux_nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    CUX_NVML_SUCCESS                   = 0,
    CUX_NVML_ERROR_NOT_SUPPORTED       = 3,
    CUX_NVML_FABRIC_STATE_NOT_STARTED  = 1,
    CUX_NVML_FABRIC_STATE_IN_PROGRESS  = 2,
    CUX_NVML_FABRIC_STATE_COMPLETED    = 3
};

/* nvmlGpuFabricInfo_v2_t */
typedef struct cux_nvml_fabric_info_v2 {
    unsigned int  version;
    unsigned char cluster_uuid[16];
    int           status; /* an nvmlReturn_t: the registration's error, read only once it completed */
    unsigned int  clique_id;
    unsigned char state;
    unsigned int  health_mask;
} cux_nvml_fabric_info_v2_t;

_Static_assert(sizeof(cux_nvml_fabric_info_v2_t) == 36, "nvmlGpuFabricInfo_v2_t is 36 bytes");

/* NVML_STRUCT_VERSION(GpuFabricInfo, 2): the size, and the version in the top byte. */
#define CUX_NVML_FABRIC_INFO_V2 ((unsigned int)sizeof(cux_nvml_fabric_info_v2_t) | (2u << 24))

typedef struct cux_nvml_device *cux_nvml_device_t;

static struct {
    int (*init)(void);
    int (*by_uuid)(const char *uuid, cux_nvml_device_t *device);
    int (*fabric_info)(cux_nvml_device_t device, cux_nvml_fabric_info_v2_t *info);
    char why[80]; /* why NVML is not there, when it is not */
} cux_nvml;

static pthread_once_t cux_nvml_once = PTHREAD_ONCE_INIT;

/* Opened once and kept, as the driver is: NVML counts its initialisations, and a process asks again. */
static void cux_nvml_load(void)
{
    const char *path = getenv(CUX_NVML_PATH_ENV);
    void *lib;
    int res;

    if ((path == NULL) || (*path == '\0')) {
        path = "libnvidia-ml.so.1";
    }
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(cux_nvml.why, sizeof(cux_nvml.why), "%s does not load", path);
        return;
    }
    *(void**)&cux_nvml.init        = dlsym(lib, "nvmlInit_v2");
    *(void**)&cux_nvml.by_uuid     = dlsym(lib, "nvmlDeviceGetHandleByUUID");
    *(void**)&cux_nvml.fabric_info = dlsym(lib, "nvmlDeviceGetGpuFabricInfoV");
    if ((cux_nvml.init == NULL) || (cux_nvml.by_uuid == NULL) || (cux_nvml.fabric_info == NULL)) {
        snprintf(cux_nvml.why, sizeof(cux_nvml.why), "NVML without nvmlDeviceGetGpuFabricInfoV (before CUDA 12.4)");
    } else if ((res = cux_nvml.init()) != CUX_NVML_SUCCESS) {
        snprintf(cux_nvml.why, sizeof(cux_nvml.why), "nvmlInit_v2 failed with error %d", res);
    } else {
        return;
    }
    cux_nvml.fabric_info = NULL;
    dlclose(lib);
}

static void cux_nvml_says(cux_fabric_info_t *info, cux_fabric_state_t state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cux_nvml_says(cux_fabric_info_t *info, cux_fabric_state_t state, const char *fmt, ...)
{
    va_list ap;

    info->state = state;
    va_start(ap, fmt);
    vsnprintf(info->why, sizeof(info->why), fmt, ap);
    va_end(ap);
}

void cux_nvml_fabric_info(const CUuuid *gpu, cux_fabric_info_t *info)
{
    const unsigned char *b = (const unsigned char*)gpu->bytes;
    cux_nvml_fabric_info_v2_t fabric;
    cux_nvml_device_t device;
    char uuid[48];
    int res;

    memset(info, 0, sizeof(*info));
    pthread_once(&cux_nvml_once, cux_nvml_load);
    if (cux_nvml.fabric_info == NULL) {
        cux_nvml_says(info, CUX_FABRIC_NONE, "%s", cux_nvml.why);
        return;
    }
    /* NVML names a GPU by the driver's UUID, written as nvidia-smi -L writes it */
    snprintf(uuid, sizeof(uuid), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    res = cux_nvml.by_uuid(uuid, &device);
    if (res != CUX_NVML_SUCCESS) {
        cux_nvml_says(info, CUX_FABRIC_NONE, "NVML does not know the GPU (error %d)", res);
        return;
    }
    memset(&fabric, 0, sizeof(fabric));
    fabric.version = CUX_NVML_FABRIC_INFO_V2;
    res            = cux_nvml.fabric_info(device, &fabric);
    if (res == CUX_NVML_ERROR_NOT_SUPPORTED) {
        cux_nvml_says(info, CUX_FABRIC_NONE, "no NVLink fabric (NVML: not supported)");
    } else if (res != CUX_NVML_SUCCESS) {
        cux_nvml_says(info, CUX_FABRIC_NONE, "NVML's fabric query failed with error %d", res);
    } else if ((fabric.state == CUX_NVML_FABRIC_STATE_NOT_STARTED) ||
               (fabric.state == CUX_NVML_FABRIC_STATE_IN_PROGRESS)) {
        cux_nvml_says(info, CUX_FABRIC_PENDING, "fabric registration not finished (state %d)", fabric.state);
    } else if (fabric.state != CUX_NVML_FABRIC_STATE_COMPLETED) {
        cux_nvml_says(info, CUX_FABRIC_NONE, "no NVLink fabric (NVML: state %d)", fabric.state);
    } else if (fabric.status != CUX_NVML_SUCCESS) {
        cux_nvml_says(info, CUX_FABRIC_FAILED, "fabric registration failed with error %d", fabric.status);
    } else {
        cux_nvml_says(info, CUX_FABRIC_COMPLETE, "fabric registration complete");
        info->clique = fabric.clique_id;
        memcpy(info->cluster, fabric.cluster_uuid, sizeof(info->cluster));
    }
}

const char *cux_fabric_state_name(cux_fabric_state_t state)
{
    switch (state) {
    case CUX_FABRIC_PENDING:
        return "pending";
    case CUX_FABRIC_COMPLETE:
        return "complete";
    case CUX_FABRIC_FAILED:
        return "failed";
    default:
        return "none";
    }
}
