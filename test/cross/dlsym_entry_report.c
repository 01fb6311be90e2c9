/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/run-cross-dlsym.sh: libcux_memtype's report (src/memtype/cux_memtype_report.c) stood in for by two
 * counters the program reads, so that the dlsym entry and cuGetProcAddress's wrapping build without UCX for
 * another architecture.
 */
#include <stddef.h>
#include <stdint.h>

int cux_cross_allocs, cux_cross_frees;

__attribute__((visibility("hidden"))) void cux_memtype_alloc(uintptr_t address, size_t size, int mem_type)
{
    ++cux_cross_allocs;
}

__attribute__((visibility("hidden"))) void cux_memtype_free(uintptr_t address)
{
    ++cux_cross_frees;
}
