/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DMA-BUF descriptors for GPU memory (UCX 1.16 and later ask the memory query for one): with it UCX's
 * InfiniBand transports register GPU memory through the kernel's dma-buf interface instead of the
 * peer-memory module. The descriptor covers the pages of the queried buffer; the caller closes it.
 */
#ifndef CUX_COPY_DMABUF_H_
#define CUX_COPY_DMABUF_H_

#include "base/cux_ptr.h"

#include <ucs/config/types.h>

/* Whether descriptors can be offered, given the UCX_CUDA_COPY_DMABUF setting: every device must support
 * dma-buf and the driver must have cuMemGetHandleForAddressRange. Logs why not once when asked for (on). */
int cux_copy_dmabuf_supported(ucs_on_off_auto_value_t setting);

/* A descriptor of the pages holding [address, address + length) inside the allocation described by info,
 * and the address's offset in it. *fd_p is UCT_DMABUF_FD_INVALID (-1) when the driver gives none: the
 * memory query still succeeds, and UCX registers without dma-buf. */
void cux_copy_dmabuf_export(const void *address, size_t length, const cux_ptr_info_t *info, int *fd_p,
                            size_t *offset_p);

#endif
