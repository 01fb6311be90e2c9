/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc and fabric handles (CU_MEM_HANDLE_TYPE_FABRIC): the only way to share cuMemCreate memory made with the
 * fabric handle type and no descriptor type, as NVLink-domain allocators make it. A fabric handle is 64 bytes that
 * the driver opens for any process holding them and an IMEX channel (/dev/nvidia-caps-imex-channels/channelN,
 * granted by the administrator), so a process without one never asks the driver anything about fabric: on a host
 * without a channel the driver refuses fabric allocations, and a memory pool's fabric export corrupts the
 * process's heap (bench/results/2026-12-03-h200x1-fabric-probe/). Between processes of one host the key is proven
 * as every key is (the exporter's table of keys out), before the bytes are given to the driver; memory that can
 * go any other way (a descriptor type as well) goes that way. docs/threat-model.md, "Fabric handles across hosts".
 */
#ifndef CUX_IPC_FABRIC_H_
#define CUX_IPC_FABRIC_H_

#include "driver/cux_cuda.h"
#include <ucs/type/status.h>
#include <stdint.h>

/* Where the IMEX channels' device files are; CUX_IMEX_CHANNELS_DIR replaces it (the tests' fake channels). */
#define CUX_IPC_FABRIC_CHANNELS_DIR     "/dev/nvidia-caps-imex-channels"
#define CUX_IPC_FABRIC_CHANNELS_DIR_ENV "CUX_IMEX_CHANNELS_DIR"

/* Whether this process may use an IMEX channel: a channel's device file it can read and write. Asked once per
 * process (said once at debug level). */
int cux_ipc_fabric_channel_present(void);

/* The fabric handle of the cuMemCreate allocation at base (made with the fabric handle type), in its device's
 * context. UCS_ERR_UNSUPPORTED without an IMEX channel, asking the driver nothing. */
ucs_status_t cux_ipc_fabric_export(uintptr_t base, CUmemFabricHandle *fabric);

/* The allocation a peer's fabric handle names, imported in the current context (the caller maps and releases
 * it). UCS_ERR_UNREACHABLE without an IMEX channel, asking the driver nothing. */
ucs_status_t cux_ipc_fabric_import(const CUmemFabricHandle *fabric, CUmemGenericAllocationHandle *handle);

/* Memory of a pool made with the fabric handle type alone is not shared (a pool's fabric export is not asked for:
 * see above): said once per process, at diagnostic level, with what makes such pools shareable. */
void cux_ipc_fabric_pool_said(void);

#endif
