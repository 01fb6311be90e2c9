/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Synchronous memory operations on the GPU memory UCX moves.
 *
 * A synchronous cuMemcpy from pageable host memory may return before its DMA has landed (documented CUDA
 * behaviour), and copies on our non-blocking streams are not ordered behind it: a buffer filled that way and
 * sent at once could go out stale. UCX's own module prevents that wherever it learns of GPU memory, and so
 * does ours, with the first mechanism the driver offers:
 *
 *   - CU_CTX_SYNC_MEMOPS (cuCtxSetFlags, drivers 12.1+; covers every kind of memory, VMM included) on the
 *     primary context of the buffer's device and on the calling thread's current context. A context that gets
 *     the flag from us is synchronised once, so a fill issued before we knew of the buffer has landed too, and
 *     so is each thread's current context at that thread's first contact, flag or not: another thread may have
 *     set the flag and synchronised a moment after this thread's fill began;
 *   - else CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation, looked at on every call (UCX 1.13 sets it on
 *     every call), with the same one-time synchronisation when we set it.
 *
 * CUX_SYNC_MEMOPS=n turns this off (for measuring its cost; applications would then have to synchronise
 * after every fill themselves).
 */
#ifndef CUX_SYNC_MEMOPS_H_
#define CUX_SYNC_MEMOPS_H_

#include "driver/cux_driver.h"

#define CUX_SYNC_MEMOPS_ENV "CUX_SYNC_MEMOPS"

/* Make synchronous memory operations on this GPU buffer (owned by device ordinal `device`) complete before
 * they return. Never fails: a driver that refuses is logged at debug level. */
void cux_sync_memops(const void *address, int device);

#endif
