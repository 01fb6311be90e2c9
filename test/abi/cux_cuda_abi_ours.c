/* SPDX-License-Identifier: BSD-3-Clause */
/* The sizes, offsets and values of src/driver/cux_cuda.h (cux_cuda_abi_list.h). */
#include "driver/cux_cuda.h"
#include "cux_cuda_abi_list.h"

const cux_abi_entry_t cux_abi_ours[] = CUX_ABI_TABLE;
