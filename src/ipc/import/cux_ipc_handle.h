/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A legacy IPC handle (cuIpcGetMemHandle) as the Linux driver writes and checks it; undocumented, measured on
 * driver 580 (bench/results/2026-12-04-h200x1-siblings/):
 * - bytes 8-11 hold the exporting process's pid as it sees itself (checked on a handle of our own before it is
 *   relied on);
 * - cuIpcOpenMemHandle compares them with the importer's own pid only: equal is "a handle of this very process"
 *   (CUDA_ERROR_INVALID_CONTEXT), whatever PID namespace either is in, so two containers whose programs are both
 *   pid 1 cannot open each other's handles as exported. The driver finds the exporter by other bytes: a handle
 *   whose pid bytes were changed to any other value opens, in one namespace and across namespaces.
 * So the pid bytes prove nothing about who exported a handle (anyone may write them), and a peer's handle that
 * carries our own pid number opens once they are changed.
 */
#ifndef CUX_IPC_HANDLE_H_
#define CUX_IPC_HANDLE_H_

#include "driver/cux_cuda.h"

#include <stdint.h>

/* The exporting pid the driver writes into a legacy handle (bytes 8-11, little-endian). */
int32_t cux_ipc_handle_pid(const CUipcMemHandle *handle);

/* Does this driver write the exporting pid where cux_ipc_handle_pid reads it? Checked once, on a handle of an
 * allocation of our own (a device context must be current for the first call). */
int cux_ipc_handle_layout_known(void);

/* The handle to open for a peer's key: the key's own, or, where its pid bytes name this process's own pid number
 * (a peer of another PID namespace with the same number), a copy with those bytes cleared, so that the driver
 * does not take it for a handle of ours. 1 if it was changed. */
int cux_ipc_handle_for_open(const CUipcMemHandle *key_handle, CUipcMemHandle *handle);

/* Does the driver open a peer's handle that carries our own pid number once its pid bytes are cleared? Asked
 * before anything is copied: the first such handles a peer sends are opened on device (cleared) and closed at once
 * until the driver opens one or takes one for ours; from then on its verdict holds for the process (and a
 * mapping it later refuses as ours makes it 0). 0: refuse the key at unpack, where UCP takes another path. */
int cux_ipc_handle_own_pid_opens(const CUipcMemHandle *key_handle, int device);

/* The driver refused a handle whose pid bytes were cleared: no such handle is opened again in this process. */
void cux_ipc_handle_clear_refused(void);

#endif
