/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A GPU's place in a multi-node NVLink domain (GB200/GB300 NVL72, GH200 NVL32), as NVML reports it: whether the
 * GPU's registration with the fabric completed, and the cluster UUID and clique id of its domain. GPUs of other
 * hosts share memory with it over fabric handles only within one cluster and clique (docs/threat-model.md,
 * "Fabric handles"). NVML is opened at run time, once per process (libnvidia-ml.so.1, or the file CUX_NVML_PATH
 * names: the tests' mock); nothing links against it. No UCX in here: the launcher's check program builds this
 * file too. The module asks it only where an IMEX channel is present (cux_ipc_domain.h).
 */
#ifndef CUX_NVML_H_
#define CUX_NVML_H_

#include "driver/cux_cuda.h"
#include <stdint.h>

#define CUX_NVML_PATH_ENV "CUX_NVML_PATH"

typedef enum {
    CUX_FABRIC_NONE,     /* no NVML, or a GPU in no NVLink fabric (PCIe, or NVLink within its host) */
    CUX_FABRIC_PENDING,  /* in a fabric whose registration has not finished */
    CUX_FABRIC_COMPLETE, /* registered: cluster and clique name its domain */
    CUX_FABRIC_FAILED    /* registration ended with an error */
} cux_fabric_state_t;

typedef struct cux_fabric_info {
    cux_fabric_state_t state;
    uint8_t            cluster[16]; /* COMPLETE only; zero otherwise */
    uint32_t           clique;      /* COMPLETE only */
    char               why[96];     /* what NVML answered, for a log or check line */
} cux_fabric_info_t;

/* The fabric of the GPU with this UUID (cuDeviceGetUuid's). Never fails: what cannot be asked is NONE, with why. */
void cux_nvml_fabric_info(const CUuuid *gpu, cux_fabric_info_t *info);

/* The name of a state, for log and check lines. */
const char *cux_fabric_state_name(cux_fabric_state_t state);

#endif
