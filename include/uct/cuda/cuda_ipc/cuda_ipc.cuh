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
#include <stdlib.h>

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

/* Loads and stores that stay out of L1 (.cg): the destination is another process's memory, often over NVLink.
 * Host and device, so that the copy below can be checked on any machine (test/device/cux_device_copy_check.cu);
 * on the host a misaligned word, which a GPU would fault on, aborts. */
#ifndef __CUDA_ARCH__
template<typename W> __host__ inline void host_check_aligned(const W *p)
{
    if ((uintptr_t)p % alignof(W)) {
        abort();
    }
}
#endif

template<typename W> __host__ __device__ __forceinline__ W load(const W *p)
{
#ifdef __CUDA_ARCH__
    return __ldcg(p);
#else
    host_check_aligned(p);
    return *p;
#endif
}

template<typename W> __host__ __device__ __forceinline__ void store(W *p, W v)
{
#ifdef __CUDA_ARCH__
    __stcg(p, v);
#else
    host_check_aligned(p);
    *p = v;
#endif
}

/* Words in flight per lane in the main loop: four loads issued before their stores. */
constexpr unsigned in_flight = 4;

/* words elements of W, lane by lane, in_flight at a time while every lane has that many. */
template<typename W>
__host__ __device__ __forceinline__ void copy_words(W *d, const W *s, size_t words, unsigned lane, unsigned lanes)
{
    size_t i = lane;
    for (; i + (in_flight - 1) * (size_t)lanes < words; i += in_flight * (size_t)lanes) {
        W v[in_flight];
#pragma unroll
        for (unsigned k = 0; k < in_flight; ++k) {
            v[k] = load(s + i + k * lanes);
        }
#pragma unroll
        for (unsigned k = 0; k < in_flight; ++k) {
            store(d + i + k * lanes, v[k]);
        }
    }
    for (; i < words; i += lanes) {
        store(d + i, load(s + i));
    }
}

template<typename W>
__host__ __device__ __forceinline__ void copy_piece(char *dst, const char *src)
{
    store(reinterpret_cast<W*>(dst), load(reinterpret_cast<const W*>(src)));
}

/* Fewer bytes than a word's worth around the words (or a whole short put): with at least a lane per byte, a byte
 * each; otherwise pieces of 8, 4, 2 or 1 bytes, each the widest that is left, that dst's alignment allows and that
 * is no wider than max_piece (src agrees with dst modulo max_piece), dealt round the lanes. A thread copies 8
 * bytes in one piece, not in eight. */
template<size_t max_piece>
__host__ __device__ __forceinline__ void copy_short(char *dst, const char *src, size_t length, unsigned lane,
                                                    unsigned lanes)
{
    if ((lanes > 1) && (lanes >= length)) { /* a byte for each lane: one round, the shortest wait */
        if (lane < length) {
            copy_piece<char>(dst + lane, src + lane);
        }
        return;
    }
    unsigned piece = 0;
    for (size_t off = 0; off < length; ++piece) {
        size_t left  = length - off;
        uintptr_t at = (uintptr_t)(dst + off);
        size_t size  = ((max_piece >= 8) && (left >= 8) && !(at % 8)) ? 8 :
                       ((max_piece >= 4) && (left >= 4) && !(at % 4)) ? 4 :
                       ((max_piece >= 2) && (left >= 2) && !(at % 2)) ? 2 : 1;
        if ((piece % lanes) == lane) {
            switch (size) {
            case 8: copy_piece<long long>(dst + off, src + off); break;
            case 4: copy_piece<int>(dst + off, src + off); break;
            case 2: copy_piece<short>(dst + off, src + off); break;
            default: copy_piece<char>(dst + off, src + off); break;
            }
        }
        off += size;
    }
}

/* dst and src agree modulo sizeof(W): pieces up to dst's W-alignment, the words, pieces for the rest. */
template<typename W>
__host__ __device__ __forceinline__ void copy_aligned(char *dst, const char *src, size_t length, unsigned lane,
                                                      unsigned lanes)
{
    constexpr size_t max_piece = (sizeof(W) < 8) ? sizeof(W) : 8;
    size_t head                = (sizeof(W) - ((uintptr_t)dst % sizeof(W))) % sizeof(W);

    if (head + sizeof(W) > length) { /* no whole word */
        copy_short<max_piece>(dst, src, length, lane, lanes);
        return;
    }
    if (head != 0) {
        copy_short<max_piece>(dst, src, head, lane, lanes);
    }
    size_t words = (length - head) / sizeof(W);
    copy_words(reinterpret_cast<W*>(dst + head), reinterpret_cast<const W*>(src + head), words, lane, lanes);
    size_t done = head + words * sizeof(W);
    if (done < length) {
        copy_short<max_piece>(dst + done, src + done, length - done, lane, lanes);
    }
}

/* length bytes by lane out of lanes (each lane calls it; together they copy every byte once): the widest word
 * both addresses allow. */
__host__ __device__ __forceinline__ void copy(void *dst, const void *src, size_t length, unsigned lane,
                                              unsigned lanes)
{
    char *d          = static_cast<char*>(dst);
    const char *s    = static_cast<const char*>(src);
    uintptr_t differ = (uintptr_t)d ^ (uintptr_t)s;

    if ((((uintptr_t)d | (uintptr_t)s | length) % 16) == 0) { /* whole aligned words: nothing else to decide */
        copy_words(reinterpret_cast<int4*>(d), reinterpret_cast<const int4*>(s), length / 16, lane, lanes);
        return;
    }

    if ((differ % 16) == 0) {
        copy_aligned<int4>(d, s, length, lane, lanes);
    } else if ((differ % 8) == 0) {
        copy_aligned<long long>(d, s, length, lane, lanes);
    } else if ((differ % 4) == 0) {
        copy_aligned<int>(d, s, length, lane, lanes);
    } else if ((differ % 2) == 0) {
        copy_aligned<short>(d, s, length, lane, lanes);
    } else {
        copy_words(d, s, length, lane, lanes);
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
