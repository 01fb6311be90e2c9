/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IMEX channels: what lets a process use fabric handles (CU_MEM_HANDLE_TYPE_FABRIC) at all. The administrator
 * grants a process a channel's device file (/dev/nvidia-caps-imex-channels/channelN); without one the driver
 * refuses fabric allocations (26-118 us each on the H200) and a memory pool's fabric export corrupts the process's
 * heap (bench/results/2026-12-03-h200x1-fabric-probe/). So both transports look for a channel, a file check,
 * before they ask the driver anything about fabric: cuda_ipc to share such memory, cuda_copy to allocate it.
 */
#ifndef CUX_IMEX_H_
#define CUX_IMEX_H_

/* Where the channels' device files are; CUX_IMEX_CHANNELS_DIR replaces it (the tests' fake channels). */
#define CUX_IMEX_CHANNELS_DIR     "/dev/nvidia-caps-imex-channels"
#define CUX_IMEX_CHANNELS_DIR_ENV "CUX_IMEX_CHANNELS_DIR"

#include <stddef.h>

/* The path of a channel's device file this process may read and write (in name), or NULL; looked up anew at every
 * call (said at debug level). */
const char *cux_imex_channel_name(char *name, size_t max);

/* Whether this process may use an IMEX channel: a channel's device file it can read and write. Asked once per
 * process (said once at debug level). */
int cux_imex_channel_present(void);

/* The driver refused to make fabric memory although a channel is present (the IMEX service down, or the
 * channel's permissions): returns 1 the first time (for the caller's one log line). Each refusal costs 26-118 us,
 * so allocators that may do without ask no more once it was said. */
int cux_imex_allocation_refused(void);
int cux_imex_allocations_refused(void);

/* The next call looks again, and forgets refusals (the tests make and withdraw channels). */
void cux_imex_ask_again(void);

#endif
