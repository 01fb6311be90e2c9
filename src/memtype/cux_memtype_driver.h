/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcux_memtype.so: the driver's allocation calls however a program reaches them (cux_memtype_driver.c).
 */
#ifndef CUX_MEMTYPE_DRIVER_H
#define CUX_MEMTYPE_DRIVER_H

#include "driver/cux_cuda.h"
#include "memtype/cux_memtype_report.h"

/* What dlsym found for name in a driver: ours of the same ABI where name is an allocation call's or
 * cuGetProcAddress's exported symbol, else pointer itself. */
CUX_MT_INTERNAL void *cux_memtype_wrap_symbol(const char *name, void *pointer);

#endif
