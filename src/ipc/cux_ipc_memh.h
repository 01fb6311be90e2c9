/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: a registration's keys over its life. A registration packs the key of the allocation
 * its buffer is in, or of a span when the buffer runs on into the next allocations of its range (cux_ipc_span.h).
 * UCP 1.16+ keeps registrations past their buffers (a stock UCX has no CUDA hooks to tell it a buffer went) and
 * hands them buffers in other allocations: before a key goes to a peer it is checked against the allocation at
 * the buffer now and made again if that is another one; the states it served before stay, withdrawn once their
 * allocation was replaced, until the registration ends.
 */
#ifndef CUX_IPC_MEMH_H_
#define CUX_IPC_MEMH_H_

#include "ipc/cux_ipc_md.h"

/* mkey_pack of the cuda_ipc memory domain: the key for [address, address + length) of the registration. */
ucs_status_t cux_ipc_memh_pack(uct_md_h tl_md, uct_mem_h tl_memh, const void *address, size_t length,
                               void *rkey_buffer);

/* A registration's end: its current state and every state it served before, withdrawn and released. */
void cux_ipc_memh_forget(cux_ipc_md_t *md, cux_ipc_memh_t *memh);

#endif
