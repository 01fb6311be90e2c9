/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the tests and the soak ask of the module's internals, to check that nothing leaks or grows: counts of
 * CUDA objects, of the mapping cache and of exported descriptors. Defined next to what they count; nothing of
 * the product calls them, and they are not exported from libuct_cuda.so.0 (tests link the core library).
 */
#ifndef CUX_INTROSPECTION_H_
#define CUX_INTROSPECTION_H_

#include <uct/api/uct.h>
#include <stddef.h>

/* CUDA events and streams an interface has created. */
unsigned cux_iface_num_events(uct_iface_h tl_iface);
unsigned cux_iface_num_streams(uct_iface_h tl_iface);

/* The cuda_ipc mapping cache's counters. */
void cux_ipc_cache_counters(unsigned long *num_regions, size_t *total_size, unsigned long *hits,
                            unsigned long *misses, unsigned long *stale, unsigned long *evictions);

/* Exported VMM descriptors a cuda_ipc memory domain holds open. */
unsigned cux_ipc_md_num_fd_exports(uct_md_h md);

/* Forget whether this process has an IMEX channel (asked once per process) and that it said it does not share
 * fabric pools: the next fabric question looks again, after a test changed CUX_IMEX_CHANNELS_DIR. */
void cux_ipc_fabric_ask_again(void);

#endif
