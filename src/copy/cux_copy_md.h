/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy memory domain (component "cuda_cpy"): detects and queries CUDA memory, allocates device and
 * managed memory, and registers host memory by pinning it so that copies to and from it run as DMA.
 */
#ifndef CUX_COPY_MD_H_
#define CUX_COPY_MD_H_

#include "compat/cux_ucx_compat.h"

#include <ucs/memory/memory_type.h>

#define CUX_COPY_COMPONENT_NAME "cuda_cpy"
#define CUX_COPY_TL_NAME        "cuda_copy"
#define CUX_COPY_CONFIG_PREFIX  "CUDA_COPY_"

extern uct_component_t cux_copy_component;

typedef struct cux_copy_md_config {
    uct_md_config_t         super;
    int                     pin_host; /* pin host memory on registration */
    ucs_on_off_auto_value_t dmabuf;   /* DMA-BUF descriptors in memory queries */
    int                     enable_fabric; /* ucs_ternary_auto_value_t: allocate fabric memory */
} cux_copy_md_config_t;

typedef struct cux_copy_md {
    uct_md_t super;
    int      pin_host;
    int      dmabuf;     /* memory queries give DMA-BUF descriptors of GPU memory */
    int      enable_fabric; /* ENABLE_FABRIC (cux_copy_fabric_alloc.h) */
} cux_copy_md_t;

enum {
    CUX_COPY_MEMH_PINNED    = UCS_BIT(0), /* we pinned the host range and unpin it at deregistration */
    CUX_COPY_MEMH_ALLOCATED = UCS_BIT(1), /* allocated by mem_alloc */
    CUX_COPY_MEMH_FABRIC    = UCS_BIT(2)  /* ... as fabric memory (cux_copy_fabric_alloc.h) */
};

/* What registration learned about a buffer, so the data path need not ask the driver again. */
typedef struct cux_copy_memh {
    ucs_memory_type_t mem_type;
    int               device;     /* ordinal, -1 for host memory */
    void              *address;
    size_t            length;
    unsigned          flags;
} cux_copy_memh_t;

#endif
