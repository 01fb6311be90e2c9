/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU side of cuda_ipc in UCX's device API (UCX 1.21 and 1.22), for a UCX built without CUDA: its
 * uct_device_impl.h includes <uct/cuda/cuda_ipc/cuda_ipc.cuh> where it exists and dispatches device endpoints
 * of UCT_DEVICE_TL_CUDA_IPC to the three functions at the end, with these signatures. Installed by the
 * uct-cuda-plugin (configure says where); a UCX built with CUDA keeps its own header, which works with our host
 * side the same way.
 *
 * A remote memory element holds the offset from the peer's address to where its allocation is mapped on this
 * GPU (the host side maps it from the remote key, proven, and holds it until the key is released), so a put is
 * a copy by the calling threads into peer memory, and a signal an atomic add there.
 *
 * Levels: a call at level THREAD is one thread's; WARP and BLOCK are made by every thread of the warp or block
 * with the same arguments, share the copy and return once it is done by all of them. GRID is not offered
 * (threads of different blocks cannot wait for each other here): UCS_ERR_UNSUPPORTED.
 */
#ifndef CUX_CUDA_IPC_DEVICE_CUH_
#define CUX_CUDA_IPC_DEVICE_CUH_

#include <uct/api/uct_def.h>
#include <uct/api/device/uct_device_types.h>
#include <ucs/sys/device_code.h>
#include <ucs/type/status.h>
#include <cuda/atomic>
#include <stdint.h>

namespace cux_device {

/* This thread's place among the threads sharing a call at a level, and how many they are. */
template<ucs_device_level_t level> struct group;

/* The thread's index in its block, however the block is shaped. */
__device__ __forceinline__ unsigned thread_in_block()
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

template<> struct group<UCS_DEVICE_LEVEL_THREAD> {
    __device__ static unsigned lane() { return 0; }
    __device__ static unsigned size() { return 1; }
    __device__ static void sync() {}
};

template<> struct group<UCS_DEVICE_LEVEL_WARP> {
    __device__ static unsigned lane() { return thread_in_block() % 32; }
    __device__ static unsigned size() { return 32; }
    __device__ static void sync() { __syncwarp(); }
};

template<> struct group<UCS_DEVICE_LEVEL_BLOCK> {
    __device__ static unsigned lane() { return thread_in_block(); }
    __device__ static unsigned size() { return blockDim.x * blockDim.y * blockDim.z; }
    __device__ static void sync() { __syncthreads(); }
};

/* Loads and stores that stay out of L1 (.cg): the destination is another process's memory, often over NVLink. */
__device__ __forceinline__ int4 load(const int4 *p) { return __ldcg(p); }
__device__ __forceinline__ long long load(const long long *p) { return __ldcg(p); }
__device__ __forceinline__ int load(const int *p) { return __ldcg(p); }
__device__ __forceinline__ void store(int4 *p, int4 v) { __stcg(p, v); }
__device__ __forceinline__ void store(long long *p, long long v) { __stcg(p, v); }
__device__ __forceinline__ void store(int *p, int v) { __stcg(p, v); }

/* Bytes [begin, end) one by one, spread over the lanes. */
__device__ __forceinline__ void copy_bytes(char *dst, const char *src, size_t begin, size_t end, unsigned lane,
                                           unsigned lanes)
{
    for (size_t i = begin + lane; i < end; i += lanes) {
        dst[i] = src[i];
    }
}

/* dst and src agree modulo sizeof(W): bytes up to dst's W-alignment, then words, four in flight per lane, then
 * the bytes left. */
template<typename W>
__device__ __forceinline__ void copy_words(char *dst, const char *src, size_t length, unsigned lane,
                                           unsigned lanes)
{
    size_t head = (sizeof(W) - ((uintptr_t)dst % sizeof(W))) % sizeof(W);
    head        = (head < length) ? head : length;
    copy_bytes(dst, src, 0, head, lane, lanes);

    W *d          = reinterpret_cast<W*>(dst + head);
    const W *s    = reinterpret_cast<const W*>(src + head);
    size_t words  = (length - head) / sizeof(W);
    size_t i      = lane;
    for (; i + 3 * (size_t)lanes < words; i += 4 * (size_t)lanes) {
        W a = load(s + i), b = load(s + i + lanes), c = load(s + i + 2 * lanes), e = load(s + i + 3 * lanes);
        store(d + i, a);
        store(d + i + lanes, b);
        store(d + i + 2 * lanes, c);
        store(d + i + 3 * lanes, e);
    }
    for (; i < words; i += lanes) {
        store(d + i, load(s + i));
    }
    copy_bytes(dst, src, head + words * sizeof(W), length, lane, lanes);
}

/* The widest word both addresses allow. */
__device__ __forceinline__ void copy(void *dst, const void *src, size_t length, unsigned lane, unsigned lanes)
{
    char *d          = static_cast<char*>(dst);
    const char *s    = static_cast<const char*>(src);
    uintptr_t differ = (uintptr_t)d ^ (uintptr_t)s;

    if ((differ % 16) == 0) {
        copy_words<int4>(d, s, length, lane, lanes);
    } else if ((differ % 8) == 0) {
        copy_words<long long>(d, s, length, lane, lanes);
    } else if ((differ % 4) == 0) {
        copy_words<int>(d, s, length, lane, lanes);
    } else {
        copy_bytes(d, s, 0, length, lane, lanes);
    }
}

template<typename Elem>
__device__ __forceinline__ void *mapped(const Elem *mem_elem, uint64_t remote_address)
{
    auto elem = reinterpret_cast<const uct_cuda_ipc_md_device_mem_element_t*>(mem_elem);
    return reinterpret_cast<void*>(remote_address + elem->mapped_offset);
}

} /* namespace cux_device */

/* Element types: uct_device_mem_element_t (1.21) or uct_device_mem_elem_t (1.22), deduced. */
template<ucs_device_level_t level = UCS_DEVICE_LEVEL_BLOCK, typename Elem>
UCS_F_DEVICE ucs_status_t uct_cuda_ipc_ep_put(uct_device_ep_h device_ep, const Elem *mem_elem, const void *address,
                                              uint64_t remote_address, size_t length, uint64_t flags,
                                              uct_device_completion_t *comp)
{
    if constexpr (level == UCS_DEVICE_LEVEL_GRID) {
        return UCS_ERR_UNSUPPORTED;
    } else {
        using g = cux_device::group<level>;
        cux_device::copy(cux_device::mapped(mem_elem, remote_address), address, length, g::lane(), g::size());
        g::sync();
        return UCS_OK; /* done: there is nothing to progress or complete */
    }
}

/* A signal after puts: every thread of the level has done its stores (the barrier), then one makes them visible
 * to the whole system before its add (release), so a peer that sees the new count sees the data. */
template<ucs_device_level_t level = UCS_DEVICE_LEVEL_BLOCK, typename Elem>
UCS_F_DEVICE ucs_status_t uct_cuda_ipc_ep_atomic_add(uct_device_ep_h device_ep, const Elem *mem_elem,
                                                     uint64_t inc_value, uint64_t remote_address, uint64_t flags,
                                                     uct_device_completion_t *comp)
{
    if constexpr (level == UCS_DEVICE_LEVEL_GRID) {
        return UCS_ERR_UNSUPPORTED;
    } else {
        using g = cux_device::group<level>;
        g::sync();
        if (g::lane() == 0) {
            auto counter = static_cast<unsigned long long*>(cux_device::mapped(mem_elem, remote_address));
            cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> ref(*counter);
            ref.fetch_add(inc_value, cuda::memory_order_release);
        }
        g::sync();
        return UCS_OK;
    }
}

template<typename Elem>
UCS_F_DEVICE ucs_status_t uct_cuda_ipc_ep_get_ptr(uct_device_ep_h device_ep, const Elem *mem_elem,
                                                  uint64_t remote_address, void **addr_p)
{
    *addr_p = cux_device::mapped(mem_elem, remote_address);
    return UCS_OK;
}

#endif
