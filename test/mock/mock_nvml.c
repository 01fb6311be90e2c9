/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A mock NVML (CUX_NVML_PATH names it): the three calls src/driver/cux_nvml.c makes, answered as NVML's
 * documentation says, from MOCK_NVML_FABRIC (read at every call):
 *   unset or "not-supported"       nvmlDeviceGetGpuFabricInfoV: NVML_ERROR_NOT_SUPPORTED (a GPU in no fabric;
 *                                   nvidia-smi -q shows the GPU host's H200 fabric as N/A)
 *   "not-started", "in-progress"   success, that state
 *   "completed:CLIQUE:CLUSTER"     success, state completed, status success; CLUSTER 32 hex digits
 *   "failed:STATUS"                success, state completed, status STATUS
 * MOCK_NVML_INIT_ERROR=N makes nvmlInit_v2 answer N. A structure of another version gets
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH, as NVML answers it. The last UUID asked for is kept for the tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_NVML_EXPORT __attribute__((visibility("default")))

enum {
    MOCK_NVML_SUCCESS               = 0,
    MOCK_NVML_INVALID_ARGUMENT      = 2,
    MOCK_NVML_NOT_SUPPORTED         = 3,
    MOCK_NVML_UNINITIALIZED         = 1,
    MOCK_NVML_NOT_FOUND             = 6,
    MOCK_NVML_ARGUMENT_VERSION      = 25
};

typedef struct {
    unsigned int  version;
    unsigned char cluster_uuid[16];
    int           status;
    unsigned int  clique_id;
    unsigned char state;
    unsigned int  health_mask;
} mock_nvml_fabric_info_v2_t;

#define MOCK_NVML_FABRIC_INFO_V2 ((unsigned int)sizeof(mock_nvml_fabric_info_v2_t) | (2u << 24))

static int mock_nvml_initialised;
static char mock_nvml_uuid[64];
static int mock_nvml_device; /* the one handle handed out */

MOCK_NVML_EXPORT const char *mock_nvml_asked_uuid(void)
{
    return mock_nvml_uuid;
}

MOCK_NVML_EXPORT int nvmlInit_v2(void)
{
    const char *error = getenv("MOCK_NVML_INIT_ERROR");

    if ((error != NULL) && (atoi(error) != 0)) {
        return atoi(error);
    }
    mock_nvml_initialised = 1;
    return MOCK_NVML_SUCCESS;
}

/* NVML's form: "GPU-" and 8-4-4-4-12 hex digits. */
static int mock_nvml_uuid_well_formed(const char *uuid)
{
    static const int dash[] = {12, 17, 22, 27};
    int i, d = 0;

    if ((strlen(uuid) != 40) || (strncmp(uuid, "GPU-", 4) != 0)) {
        return 0;
    }
    for (i = 4; i < 40; ++i) {
        if ((d < 4) && (i == dash[d])) {
            if (uuid[i] != '-') {
                return 0;
            }
            ++d;
        } else if (!strchr("0123456789abcdef", uuid[i])) {
            return 0;
        }
    }
    return 1;
}

MOCK_NVML_EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **device)
{
    if (!mock_nvml_initialised) {
        return MOCK_NVML_UNINITIALIZED;
    }
    if ((uuid == NULL) || (device == NULL)) {
        return MOCK_NVML_INVALID_ARGUMENT;
    }
    snprintf(mock_nvml_uuid, sizeof(mock_nvml_uuid), "%s", uuid);
    if (!mock_nvml_uuid_well_formed(uuid)) {
        return MOCK_NVML_NOT_FOUND;
    }
    *device = &mock_nvml_device;
    return MOCK_NVML_SUCCESS;
}

MOCK_NVML_EXPORT int nvmlDeviceGetGpuFabricInfoV(void *device, mock_nvml_fabric_info_v2_t *info)
{
    const char *fabric = getenv("MOCK_NVML_FABRIC");
    unsigned int clique = 0;
    char cluster[33]    = "";
    int i, status;

    if (!mock_nvml_initialised) {
        return MOCK_NVML_UNINITIALIZED;
    }
    if ((device != &mock_nvml_device) || (info == NULL)) {
        return MOCK_NVML_INVALID_ARGUMENT;
    }
    if (info->version != MOCK_NVML_FABRIC_INFO_V2) {
        return MOCK_NVML_ARGUMENT_VERSION;
    }
    if ((fabric == NULL) || !strcmp(fabric, "not-supported")) {
        return MOCK_NVML_NOT_SUPPORTED;
    }
    memset((char*)info + sizeof(info->version), 0, sizeof(*info) - sizeof(info->version));
    if (!strcmp(fabric, "not-started") || !strcmp(fabric, "in-progress")) {
        info->state = (fabric[0] == 'n') ? 1 : 2;
    } else if (sscanf(fabric, "failed:%d", &status) == 1) {
        info->state  = 3;
        info->status = status;
    } else if ((sscanf(fabric, "completed:%u:%32[0-9a-f]", &clique, cluster) == 2) && (strlen(cluster) == 32)) {
        info->state     = 3;
        info->clique_id = clique;
        for (i = 0; i < 16; ++i) {
            sscanf(cluster + 2 * i, "%2hhx", &info->cluster_uuid[i]);
        }
    } else {
        fprintf(stderr, "mock NVML: MOCK_NVML_FABRIC=%s is not a state it knows\n", fabric);
        return MOCK_NVML_INVALID_ARGUMENT;
    }
    return MOCK_NVML_SUCCESS;
}
