/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The same of a CUDA toolkit's cuda.h, and whether each entry point of src/driver/cux_cuda_entry_points.h has, with
 * the toolkit's types, the toolkit's signature: for its PFN_<name>_v<version> and for the symbol a direct call
 * links to. Built only where configure found a CUDA 13 toolkit; never includes src/driver/cux_cuda.h.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include "driver/cux_cuda_entry_points.h"
#include "cux_cuda_abi_list.h"

const cux_abi_entry_t cux_abi_toolkit[] = CUX_ABI_TABLE;

#define CUX_ABI_ENTRY_POINT(_name, _version, _symbol, _params) \
    {"PFN_" #_name "_v" #_version, __builtin_types_compatible_p(PFN_##_name##_v##_version, CUresult (*) _params)}, \
    {#_symbol, __builtin_types_compatible_p(__typeof__(&_symbol), CUresult (*) _params)},

const cux_abi_entry_t cux_abi_toolkit_entry_points[] = {CUX_CUDA_ENTRY_POINTS(CUX_ABI_ENTRY_POINT) {NULL, 0}};
