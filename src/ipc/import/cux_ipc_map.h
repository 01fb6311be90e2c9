/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: opening another process's allocation in a local device's address space, and closing
 * it, for the mapping cache. Each kind of key has its own way in: a legacy IPC handle (cuIpcOpenMemHandle), a
 * cuMemCreate allocation's descriptor (imported and mapped into a fresh range), a pool's descriptor and the
 * allocation's export data (cuMemPoolImportPointer). The key is proven against its exporter first
 * (cux_ipc_proof.h), and proven again once a descriptor is taken.
 */
#ifndef CUX_IPC_MAP_H_
#define CUX_IPC_MAP_H_

#include "ipc/import/cux_ipc_cache.h"

/* The cache's map and unmap; map takes the cux_ipc_peer_t the key came from. */
extern const cux_ipc_cache_ops_t cux_ipc_map_ops;

#endif
