/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy allocations of fabric memory (UCX_CUDA_COPY_ENABLE_FABRIC, UCX's name and default, try): GPU memory that
 * UCP allocates through cuda_copy (ucp_mem_map with allocation, ucx_perftest -m cuda, staging buffers) made with
 * cuMemCreate and the fabric handle type, so that cuda_ipc shares it with processes on other hosts of a multi-node
 * NVLink domain, and with the POSIX descriptor type as well, so that processes of this host take it by its
 * descriptor, the stronger way. Only where an IMEX channel is present (base/cux_imex.h): elsewhere the driver
 * refuses such allocations, each costing 26-118 us on the H200, and cuMemAlloc serves as before.
 */
#ifndef CUX_COPY_FABRIC_ALLOC_H_
#define CUX_COPY_FABRIC_ALLOC_H_

#include "driver/cux_cuda.h"
#include <ucs/type/status.h>
#include <stddef.h>

/* Should an allocation be fabric memory, by the setting (a ucs_ternary_auto_value_t)? 1 or 0 (try: 0 once the
 * driver refused one in this process); UCS_ERR_UNSUPPORTED (with one error line) where the setting says yes and
 * this process has no IMEX channel. */
int cux_copy_fabric_wanted(int setting, ucs_status_t *status_p);

/* Fabric memory of at least *length_p bytes on the device (ordinal), in its context, readable and writable from
 * it; *length_p becomes the allocation's (a multiple of the driver's granularity). */
ucs_status_t cux_copy_fabric_alloc(int device, size_t *length_p, CUdeviceptr *dptr_p);

/* Its release, in the device's context. */
ucs_status_t cux_copy_fabric_free(CUdeviceptr dptr, size_t length);

#endif
