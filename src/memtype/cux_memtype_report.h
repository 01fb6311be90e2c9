/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so (CUX_MEMTYPE=hooks): what the hooks see, reported to UCX's memory-type cache.
 *
 * The hooks (cux_memtype_driver.c and cux_memtype_runtime.c: calls by name, and driver entry points
 * a program or the static CUDA runtime gets from dlsym and cuGetProcAddress) call these two after the driver
 * or the runtime allocated, and before it releases. A buffer reported twice (the shared runtime's cudaMalloc
 * and the driver's cuMemAlloc under it) reaches UCX once.
 */
#ifndef CUX_MEMTYPE_REPORT_H
#define CUX_MEMTYPE_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <ucs/memory/memory_type.h>

/* The library exports the functions it interposes; what its files share stays inside. */
#define CUX_MT_INTERNAL __attribute__((visibility("hidden")))

/* A new buffer: the allocating context made to synchronize memory operations (CUX_SYNC_MEMOPS), the buffer
 * kept for a UCX that subscribes later, and reported to the one that listens now. */
CUX_MT_INTERNAL void cux_memtype_alloc(uintptr_t address, size_t size, ucs_memory_type_t mem_type);

/* A buffer about to be released: reported gone if it was reported at all. */
CUX_MT_INTERNAL void cux_memtype_free(uintptr_t address);

/* dlsym as the C library defines it (libcux_memtype interposes on dlsym: cux_memtype_proc_address.c). */
CUX_MT_INTERNAL void *cux_memtype_real_dlsym(void *handle, const char *name);

#endif
