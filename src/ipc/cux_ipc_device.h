/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc's host side of UCX's device API (1.20+, GPU-initiated transfers): the device endpoint a kernel's put
 * names, and the memory element that says where a peer's allocation is mapped on the kernel's GPU. The GPU side
 * is header-only, compiled into the application (UCX's cuda_ipc.cuh, or include/uct/cuda/cuda_ipc/cuda_ipc.cuh
 * here for a UCX built without CUDA).
 */
#ifndef CUX_IPC_DEVICE_H_
#define CUX_IPC_DEVICE_H_

#include "compat/cux_ucx_compat.h"
#include "driver/cux_device.h"

#include <pthread.h>

/* The device endpoints of an interface, one per GPU, in the GPU's primary context (where the mappings the
 * elements name are made, so kernels use both from the runtime's context); made on first use, freed with the
 * interface. */
typedef struct cux_ipc_device_eps {
    pthread_mutex_t lock;
    CUdeviceptr     ep[CUX_MAX_DEVICES];
} cux_ipc_device_eps_t;

void cux_ipc_device_eps_init(cux_ipc_device_eps_t *eps);
void cux_ipc_device_eps_cleanup(cux_ipc_device_eps_t *eps);

/* The ops the release's tables take (cux_ucx_compat.h): cux_ipc_device_get_device_ep, ..._mem_elem_pack. */
CUX_DEVICE_API_DECLS(cux_ipc_device)

#endif
