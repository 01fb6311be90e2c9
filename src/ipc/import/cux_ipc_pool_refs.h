/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: the driver's references to the pools this process imported. The driver gives every
 * import of one pool in a process the same handle and counts the imports; cuMemPoolDestroy drops one, and is
 * refused (CUDA_ERROR_INVALID_VALUE) while any allocation imported from the pool lives (measured on the H200's
 * driver 580, HACKING.md). So a mapping cannot destroy "its" import when it goes: another mapping of the same
 * pool may still hold an allocation. This table counts, per handle, the imports made and the allocations alive,
 * and destroys every import once the last allocation is freed.
 *
 * One allocation may be imported twice in a process (mapped for two local devices, or a mapping still in use
 * while the cache maps the same key anew). Whether the driver then hands out the same pointer is counted for:
 * each imported pointer is counted, and freed only when the last mapping that holds it goes.
 */
#ifndef CUX_IPC_POOL_REFS_H_
#define CUX_IPC_POOL_REFS_H_

#include "driver/cux_cuda.h"
#include <ucs/type/status.h>

/*
 * After imports more cuMemPoolImportFromShareableHandle calls of pool and, unless pointer is 0, an allocation
 * imported from it at pointer (cuMemPoolImportPointer): counted; if no allocation of the pool is alive then,
 * every import is destroyed at once (an import whose allocation could not be imported). UCS_ERR_NO_MEMORY:
 * nothing counted; the caller frees the pointer (no other mapping holds it then) and destroys the import.
 */
ucs_status_t cux_ipc_pool_refs_add(CUmemoryPool pool, unsigned imports, CUdeviceptr pointer);

/* A mapping of an allocation imported from pool at pointer goes: the last mapping that holds the pointer frees
 * it (cuMemFree, in the caller's current context), and the pool's last allocation destroys its every import. */
void cux_ipc_pool_refs_free_pointer(CUmemoryPool pool, CUdeviceptr pointer);

#endif
