/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX 1.19: what changed since 1.18. rkey_unpack takes a parameter structure; mem_alloc is told the system
 * device to allocate on; estimate_perf may ask for a path bandwidth; cuda_ipc flags MEMTYPE_COPY; a transport
 * that moves host memory lists it as accessed (UCP takes its memory-type copy lanes from those). Included by
 * cux_ucx_compat.h only.
 */
#ifndef CUX_UCX_1_19_H_
#define CUX_UCX_1_19_H_

#include "cux_ucx_1_18.h"

#undef CUX_UCX_ALLOCATES_ON_DEVICE
#define CUX_UCX_ALLOCATES_ON_DEVICE 1
#undef CUX_UCX_HAS_PATH_BANDWIDTH
#define CUX_UCX_HAS_PATH_BANDWIDTH  1
/* UCX_MEMTYPE_COPY_ENABLE=n leaves out the GPU transports that carry this flag */
#undef CUX_UCX_IPC_MD_FLAGS
#define CUX_UCX_IPC_MD_FLAGS        UCT_MD_FLAG_MEMTYPE_COPY

#undef CUX_MEM_ALLOC_FUNC
#define CUX_MEM_ALLOC_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_md_h md, size_t *length_p, void **address_p, ucs_memory_type_t mem_type, \
                              ucs_sys_device_t sys_dev, unsigned flags, const char *alloc_name, uct_mem_h *memh_p) \
    { \
        return _impl(md, length_p, address_p, mem_type, sys_dev, flags, alloc_name, memh_p); \
    }

#undef CUX_RKEY_UNPACK_FUNC
#define CUX_RKEY_UNPACK_FUNC(_name, _impl) \
    static ucs_status_t _name(uct_component_t *component, const void *rkey_buffer, \
                              const uct_rkey_unpack_params_t *params, uct_rkey_t *rkey_p, void **handle_p) \
    { \
        return _impl(component, rkey_buffer, rkey_p, handle_p); \
    }

/* UCP takes its memory-type copy lanes from transports that access host memory (a mem-type endpoint with none
 * fails: "no copy across memory types transport"). */
#undef CUX_MD_HOST_ACCESS
#define CUX_MD_HOST_ACCESS(_caps) ((_caps)->copies_host_memory ? UCS_BIT(UCS_MEMORY_TYPE_HOST) : 0)

#endif
