/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc and fabric handles (CU_MEM_HANDLE_TYPE_FABRIC): the only way to share cuMemCreate memory made with the
 * fabric handle type and no descriptor type, as NVLink-domain allocators make it. A fabric handle is 64 bytes that
 * the driver opens for any process holding them and an IMEX channel (base/cux_imex.h), so a process without one
 * never asks the driver anything about fabric (pools are exported as fabric only where a channel is present).
 * Between processes of one host the key is proven as every key is (the exporter's table of keys out), before the
 * bytes are given to the driver; memory that can go any other way (a descriptor type as well) goes that way.
 * docs/threat-model.md, "Fabric handles".
 */
#ifndef CUX_IPC_FABRIC_H_
#define CUX_IPC_FABRIC_H_

#include "driver/cux_cuda.h"
#include "base/cux_imex.h" /* whether an IMEX channel is present */
#include <ucs/type/status.h>
#include <stdint.h>

/* The fabric handle of the cuMemCreate allocation at base (made with the fabric handle type), in its device's
 * context. UCS_ERR_UNSUPPORTED without an IMEX channel, asking the driver nothing. */
ucs_status_t cux_ipc_fabric_export(uintptr_t base, CUmemFabricHandle *fabric);

/* The allocation a peer's fabric handle names, imported in the current context (the caller maps and releases
 * it). UCS_ERR_UNREACHABLE without an IMEX channel, asking the driver nothing. */
ucs_status_t cux_ipc_fabric_import(const CUmemFabricHandle *fabric, CUmemGenericAllocationHandle *handle);

/* The fabric handle of a memory pool made with the fabric handle type. UCS_ERR_UNSUPPORTED without an IMEX channel,
 * asking the driver nothing (there, the H200's driver corrupts the heap of a process that asks). */
ucs_status_t cux_ipc_fabric_export_pool(CUmemoryPool pool, CUmemFabricHandle *fabric);

/* The pool a peer's pool fabric handle names, imported (the caller gives its devices access, imports allocations
 * from it and destroys the import). UCS_ERR_UNREACHABLE without an IMEX channel, asking the driver nothing. */
ucs_status_t cux_ipc_fabric_import_pool(const CUmemFabricHandle *fabric, CUmemoryPool *pool);

/* Memory of a pool made with the fabric handle type alone is not shared where this process has no IMEX channel:
 * said once per process, at diagnostic level, with what makes such pools shareable. */
void cux_ipc_fabric_pool_said(void);

#endif
