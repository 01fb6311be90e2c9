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

/* A memory element's mapping: where the key's allocation is mapped on the calling thread's GPU, as an offset from
 * the peer's addresses (0 for local memory: memh and no key). With release_p (UCX 1.23+, whose elements have a
 * release), the element holds the mapping itself until cux_ipc_device_elem_unmap(*release_p), after the key's
 * release too; without (1.20 to 1.22), the key holds it: an element is valid only while its key is. Compiled for
 * every release (its tests run on all of them). */
ucs_status_t cux_ipc_device_elem_map(uct_mem_h memh, uct_rkey_t rkey, ptrdiff_t *mapped_offset_p, void **release_p);
void cux_ipc_device_elem_unmap(void *release_handle);

/* The ops the release's tables take (cux_ucx_compat.h): cux_ipc_device_get_device_ep, ..._mem_elem_pack. */
CUX_DEVICE_API_DECLS(cux_ipc_device)

#endif
