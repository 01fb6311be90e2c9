/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernels calling UCX's device dispatch (uct_device_impl.h) with cuda_ipc at every level, compiled against an
 * installed UCX's headers and include/ here: the dispatch must find our cuda_ipc.cuh, and its calls must match
 * our functions' signatures (UCX 1.21, 1.22, 1.23). Compiled only (test_ipc_device_api.cc); ELEM_T is the
 * release's element type.
 */
#include <uct/api/device/uct_device_impl.h>
#if defined(UCT_CUDA_IPC_SUPPORTED) && !UCT_CUDA_IPC_SUPPORTED /* 1.22+; 1.21 includes it unconditionally */
#  error "UCX's dispatch found no cuda_ipc.cuh"
#endif
#ifndef CUX_CUDA_IPC_DEVICE_CUH_
#  error "UCX's dispatch found a cuda_ipc.cuh other than ours"
#endif

template<ucs_device_level_t L>
__global__ void dispatch(uct_device_ep_h ep, const ELEM_T *elem, const void *address, uint64_t remote, size_t length,
                         ucs_status_t *status)
{
    void *ptr;
    status[0] = uct_device_ep_put<L>(ep, nullptr, elem, address, remote, length, 0, 0, nullptr);
    status[1] = uct_device_ep_atomic_add<L>(ep, elem, 1, remote, 0, 0, nullptr);
    status[2] = uct_device_ep_get_ptr(ep, elem, remote, &ptr);
}

template __global__ void dispatch<UCS_DEVICE_LEVEL_THREAD>(uct_device_ep_h, const ELEM_T*, const void*, uint64_t,
                                                           size_t, ucs_status_t*);
template __global__ void dispatch<UCS_DEVICE_LEVEL_WARP>(uct_device_ep_h, const ELEM_T*, const void*, uint64_t,
                                                         size_t, ucs_status_t*);
template __global__ void dispatch<UCS_DEVICE_LEVEL_BLOCK>(uct_device_ep_h, const ELEM_T*, const void*, uint64_t,
                                                          size_t, ucs_status_t*);
template __global__ void dispatch<UCS_DEVICE_LEVEL_GRID>(uct_device_ep_h, const ELEM_T*, const void*, uint64_t,
                                                         size_t, ucs_status_t*);
