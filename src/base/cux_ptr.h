/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the driver knows about an address: memory type, owning device, allocation range and buffer id.
 * One cuPointerGetAttributes() call; never fails for plain host memory (it is reported as host).
 */
#ifndef CUX_PTR_H_
#define CUX_PTR_H_

#include "driver/cux_driver.h"

#include <ucs/memory/memory_type.h>
#include <ucs/sys/topo/base/topo.h>
#include <stddef.h>

typedef struct cux_ptr_info {
    ucs_memory_type_t  mem_type;   /* CUDA, CUDA_MANAGED or HOST (pinned or not) */
    int                device;     /* ordinal, -1 for host memory */
    ucs_sys_device_t   sys_dev;    /* the device's place in UCX's topology, or unknown */
    int                pinned;     /* host memory known to the driver */
    void               *base;      /* allocation start, NULL for host memory; of cuMemCreate memory, the one
                                    * allocation mapped there (its reserved range may hold several) */
    size_t             length;     /* allocation length, 0 for host memory */
    unsigned long long buffer_id;  /* unique per allocation, 0 for host memory */
    CUmemoryPool       pool;       /* the allocation's memory pool; NULL if none, or the driver cannot say */
} cux_ptr_info_t;

ucs_status_t cux_ptr_query(const void *address, cux_ptr_info_t *info);

static inline int cux_mem_type_is_cuda(ucs_memory_type_t mem_type)
{
    return (mem_type == UCS_MEMORY_TYPE_CUDA) || (mem_type == UCS_MEMORY_TYPE_CUDA_MANAGED);
}

#endif
