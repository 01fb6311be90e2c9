/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy memory domain: see cux_copy_md.h.
 */
#include "cux_copy_md.h"
#include "cux_copy_dmabuf.h"
#include "cux_copy_fabric_alloc.h"
#include "base/cux_iface.h"
#include "base/cux_md.h"
#include "base/cux_ptr.h"
#include "base/cux_sync_memops.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/memory/memtype_cache.h>
#include <ucs/sys/math.h>
#include <string.h>

static ucs_config_field_t cux_copy_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(cux_copy_md_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"PIN_HOST", "y",
     "Pin (page-lock) host memory when it is registered, so that copies between it and GPU memory run as\n"
     "DMA at full bandwidth. If pinning fails the registration still succeeds and copies use pageable\n"
     "memory.",
     ucs_offsetof(cux_copy_md_config_t, pin_host), UCS_CONFIG_TYPE_BOOL},

    {"DMABUF", "auto",
     "Give UCX a DMA-BUF descriptor of GPU memory when it asks (UCX 1.16 and later), so that InfiniBand\n"
     "transports register GPU memory without the peer-memory kernel module. auto: when every GPU and the\n"
     "driver support it; on: the same, with a warning when they do not; off: never.",
     ucs_offsetof(cux_copy_md_config_t, dmabuf), UCS_CONFIG_TYPE_ON_OFF_AUTO},

    /* UCX's name and default (1.18+) */
    {"ENABLE_FABRIC", "try",
     "Allocate GPU memory (what UCP allocates through cuda_copy) with the fabric handle type, and the POSIX\n"
     "descriptor type, so that cuda_ipc can share it with processes on other hosts of a multi-node NVLink\n"
     "domain. try: where this process has an IMEX channel, else (or where the driver refuses) as before;\n"
     "y: the same, failing the allocation where it cannot be made; n: never (cuMemAlloc).",
     ucs_offsetof(cux_copy_md_config_t, enable_fabric), UCS_CONFIG_TYPE_TERNARY},

    {NULL}
};

static void cux_copy_md_caps(uct_md_h md, cux_md_caps_t *caps)
{
    caps->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_ALLOC;
    caps->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_HOST) | UCS_BIT(UCS_MEMORY_TYPE_CUDA) |
                             UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);
    caps->alloc_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);
    caps->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);
    caps->detect_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_CUDA_MANAGED);
    caps->dmabuf_mem_types = ucs_derived_of(md, cux_copy_md_t)->dmabuf ? UCS_BIT(UCS_MEMORY_TYPE_CUDA) : 0;
    caps->copies_host_memory = 1;
    caps->max_alloc        = SIZE_MAX;
    caps->max_reg          = SIZE_MAX;
    caps->rkey_packed_size = 0;
    /* Registration of GPU memory makes one attribute query; pinning host memory costs more but is
     * not on the path UCP estimates. */
    caps->reg_cost         = ucs_linear_func_make(1e-6, 0);
}

CUX_MD_QUERY_FUNC(cux_copy_md_query, cux_copy_md_caps)

/* Context for work that is not tied to a buffer: the caller's, or the first device's primary context. */
static ucs_status_t cux_copy_md_default_ctx(cux_ctx_guard_t *guard, int *device_p)
{
    CUcontext ctx = NULL;

    if ((cux_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS) && (ctx != NULL)) {
        guard->pushed = 0;
        if (device_p != NULL) {
            *device_p = ucs_max(cux_device_current(), 0);
        }
        return UCS_OK;
    }

    if (device_p != NULL) {
        *device_p = 0;
    }
    return cux_device_ctx_enter(0, guard);
}

static ucs_status_t cux_copy_mem_reg_impl(uct_md_h tl_md, void *address, size_t length, unsigned flags,
                                          uct_mem_h *memh_p)
{
    cux_copy_md_t *md = ucs_derived_of(tl_md, cux_copy_md_t);
    cux_copy_memh_t *memh;
    cux_ctx_guard_t guard;
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_copy registration");
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ptr_query(address, &info);
    if (status != UCS_OK) {
        uct_md_log_mem_reg_error(flags, "cuda_copy: cannot query address %p: %s", address,
                                 ucs_status_string(status));
        return status;
    }

    if (cux_mem_type_is_cuda(info.mem_type)) {
        cux_sync_memops(address, info.device);
    }

    memh = ucs_malloc(sizeof(*memh), "cux_copy_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memh->mem_type = info.mem_type;
    memh->device   = info.device;
    memh->address  = address;
    memh->length   = length;
    memh->flags    = 0;

    /* Pin exactly the registered range: rounding it out to pages would make a neighbouring buffer straddle
     * the edge of a pinned range, and the driver rejects copies that do. */
    if ((info.mem_type == UCS_MEMORY_TYPE_HOST) && !info.pinned && md->pin_host && (length > 0) &&
        (cux_copy_md_default_ctx(&guard, NULL) == UCS_OK)) {
        status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemHostRegister, address, length,
                              CU_MEMHOSTREGISTER_PORTABLE);
        cux_ctx_leave(&guard);
        if (status == UCS_OK) {
            memh->flags |= CUX_COPY_MEMH_PINNED;
        } else {
            /* Overlaps a range someone else pinned, or the system refused: copies still work. */
            ucs_debug("cuda_copy: %p+%zu stays pageable (%s)", address, length, ucs_status_string(status));
        }
    }

    *memh_p = memh;
    return UCS_OK;
}

CUX_MEM_REG_FUNC(cux_copy_mem_reg, cux_copy_mem_reg_impl)

static void cux_copy_memh_release(cux_copy_memh_t *memh)
{
    cux_ctx_guard_t guard;

    if ((memh->flags & CUX_COPY_MEMH_PINNED) && (cux_copy_md_default_ctx(&guard, NULL) == UCS_OK)) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemHostUnregister, memh->address);
        cux_ctx_leave(&guard);
    }
    ucs_free(memh);
}

static ucs_status_t cux_copy_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    cux_copy_memh_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 0);
    memh = params->memh;
    if (memh->flags & CUX_COPY_MEMH_ALLOCATED) {
        ucs_error("cuda_copy: memh %p of %p was allocated by mem_alloc, release it with mem_free", memh,
                  memh->address);
        return UCS_ERR_INVALID_PARAM;
    }
    cux_copy_memh_release(memh);
    return UCS_OK;
}

/* Our driver calls bypass any allocation hooks (UCX's libucm_cuda, or libcux_memtype), so UCP's memory-type
 * cache hears of the buffers we allocate from us. The cache is created at its first lookup, which may come
 * later: a lookup creates it now (or finds it turned off). */
static void cux_copy_md_cache_alloc(const cux_copy_memh_t *memh)
{
    ucs_memory_info_t info;

    if ((ucs_memtype_cache_global_instance != NULL) ||
        (ucs_memtype_cache_lookup(memh->address, 1, &info) != UCS_ERR_UNSUPPORTED)) {
        /* device and flags unknown: UCP asks a memory domain for them when it first needs them */
        CUX_MEMTYPE_CACHE_UPDATE(memh->address, memh->length, memh->mem_type, UCS_SYS_DEVICE_ID_UNKNOWN, 0);
    }
}

static ucs_status_t cux_copy_mem_alloc_impl(uct_md_h md, size_t *length_p, void **address_p,
                                            ucs_memory_type_t mem_type, ucs_sys_device_t sys_dev, unsigned flags,
                                            const char *alloc_name, uct_mem_h *memh_p)
{
    int enable_fabric = ucs_derived_of(md, cux_copy_md_t)->enable_fabric;
    unsigned flags_out = CUX_COPY_MEMH_ALLOCATED;
    cux_copy_memh_t *memh;
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUdeviceptr dptr;
    int device, fabric;

    if ((mem_type != UCS_MEMORY_TYPE_CUDA) && (mem_type != UCS_MEMORY_TYPE_CUDA_MANAGED)) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = cux_driver_check_fork("cuda_copy allocation");
    if (status != UCS_OK) {
        return status;
    }
    if (*length_p == 0) {
        ucs_error("cuda_copy: cannot allocate 0 bytes of %s memory", ucs_memory_type_names[mem_type]);
        return UCS_ERR_INVALID_PARAM;
    }
    status = UCS_OK;
    fabric = (mem_type == UCS_MEMORY_TYPE_CUDA) && cux_copy_fabric_wanted(enable_fabric, &status);
    if (status != UCS_OK) {
        return status;
    }

    memh = ucs_malloc(sizeof(*memh), "cux_copy_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }

    /* The device asked for (UCX 1.22+), else the caller's current one, else GPU 0. */
    device = cux_device_by_sys_dev(sys_dev);
    if (device >= 0) {
        status = cux_device_ctx_enter(device, &guard);
    } else {
        if (sys_dev != UCS_SYS_DEVICE_ID_UNKNOWN) {
            ucs_debug("cuda_copy: system device %u is no GPU of this process: allocating on the current one",
                      sys_dev);
        }
        status = cux_copy_md_default_ctx(&guard, &device);
    }
    if (status != UCS_OK) {
        goto err_free;
    }
    if (fabric) {
        status = cux_copy_fabric_alloc(device, length_p, &dptr);
        if ((status != UCS_OK) && (enable_fabric != UCS_YES)) {
            fabric = 0; /* cuMemAlloc instead (said once) */
        } else if (status == UCS_OK) {
            flags_out |= CUX_COPY_MEMH_FABRIC;
        } else {
            ucs_error("cuda_copy: UCX_CUDA_COPY_ENABLE_FABRIC=y, and the driver makes no fabric memory of %zu bytes "
                      "on GPU %d (%s)", *length_p, device, ucs_status_string(status));
        }
    }
    if ((mem_type == UCS_MEMORY_TYPE_CUDA) && !fabric) {
        status = CUX_DRV_CALL_ERR(cuMemAlloc, &dptr, *length_p);
    } else if (mem_type != UCS_MEMORY_TYPE_CUDA) {
        status = CUX_DRV_CALL_ERR(cuMemAllocManaged, &dptr, *length_p, CU_MEM_ATTACH_GLOBAL);
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        goto err_free;
    }

    memh->mem_type = mem_type;
    memh->device   = device;
    memh->address  = (void*)(uintptr_t)dptr;
    memh->length   = *length_p;
    memh->flags    = flags_out;
    cux_sync_memops(memh->address, device);
    *address_p     = memh->address;
    *memh_p        = memh;
    cux_copy_md_cache_alloc(memh);
    ucs_debug("cuda_copy: allocated %zu bytes of %s memory at %p for %s", *length_p,
              ucs_memory_type_names[mem_type], memh->address, alloc_name);
    return UCS_OK;

err_free:
    ucs_free(memh);
    return status;
}

CUX_MEM_ALLOC_FUNC(cux_copy_mem_alloc, cux_copy_mem_alloc_impl)

static ucs_status_t cux_copy_mem_free(uct_md_h md, uct_mem_h tl_memh)
{
    cux_copy_memh_t *memh = tl_memh;
    cux_ctx_guard_t guard;
    ucs_status_t status;

    if (!(memh->flags & CUX_COPY_MEMH_ALLOCATED)) {
        ucs_error("cuda_copy: memh %p was not allocated by mem_alloc", memh);
        return UCS_ERR_INVALID_PARAM;
    }

    status = cux_device_ctx_enter(memh->device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    if (ucs_memtype_cache_global_instance != NULL) { /* UCX 1.13's remove does not check */
        ucs_memtype_cache_remove(memh->address, memh->length);
    }
    if (memh->flags & CUX_COPY_MEMH_FABRIC) {
        status = cux_copy_fabric_free((CUdeviceptr)(uintptr_t)memh->address, memh->length);
    } else {
        status = CUX_DRV_CALL_ERR(cuMemFree, (CUdeviceptr)(uintptr_t)memh->address);
    }
    cux_ctx_leave(&guard);
    ucs_free(memh);
    return status;
}

/*
 * The memory types we handle; anything else is reported as not ours, which UCP takes as host memory. As with
 * UCX's own module, GPU memory UCP asks about gets synchronous memory operations, and UCP's memory-type cache
 * learns its allocation, device and flags (cux_copy_cache_learns): UCX's allocation hooks report buffers as
 * "unknown", and UCP asks a memory domain only about those (or about every buffer when the cache is off, where
 * the update does nothing).
 */
static ucs_status_t cux_copy_ptr_query_cuda(const void *address, cux_ptr_info_t *info)
{
    ucs_status_t status = cux_ptr_query(address, info);

    if (status != UCS_OK) {
        return status;
    }
    if (!cux_mem_type_is_cuda(info->mem_type)) {
        return UCS_ERR_INVALID_ADDR;
    }
    cux_sync_memops(address, info->device);
    return UCS_OK;
}

/*
 * Can a NIC register this GPU memory? As UCX 1.22's own module answers: yes, unless the devices export dma-buf,
 * the memory's device is known, and the dma-buf export of the buffer was tried and failed (then a NIC can
 * register it only through dma-buf, and cannot). UCX 1.22's InfiniBand memory domains register only memory
 * flagged so, for GPUDirect RDMA.
 */
static uint8_t cux_copy_mem_flags(const cux_copy_md_t *md, const cux_ptr_info_t *info, int dmabuf_failed)
{
    return (md->dmabuf && (info->sys_dev != UCS_SYS_DEVICE_ID_UNKNOWN) && dmabuf_failed) ?
           0 : CUX_MEM_FLAG_REGISTRABLE;
}

/* The range to describe. Managed memory: the range asked about, as UCX's module does (its gtest checks it): the
 * driver does not give a managed allocation's range, and parts of one may live on different devices. A range
 * that runs past its allocation (PyTorch's expandable segments map several allocations one after another): the
 * range asked about too, or UCP would extend a registration to an allocation that does not hold the buffer
 * (UCP 1.13 asserts that it does). */
static void cux_copy_described_range(cux_ptr_info_t *info, const void *address, size_t length)
{
    if ((info->mem_type == UCS_MEMORY_TYPE_CUDA_MANAGED) ||
        ((info->base != NULL) && ((uintptr_t)address + length > (uintptr_t)info->base + info->length))) {
        info->base   = (void*)address;
        info->length = length;
    }
}

static void cux_copy_cache_learns(const cux_ptr_info_t *info, uint8_t mem_flags)
{
    CUX_MEMTYPE_CACHE_UPDATE(info->base, info->length, info->mem_type, info->sys_dev, mem_flags);
}

static ucs_status_t cux_copy_detect_memory_type(uct_md_h md, const void *address, size_t length,
                                                ucs_memory_type_t *mem_type_p)
{
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_copy_ptr_query_cuda(address, &info);
    if (status == UCS_OK) {
        cux_copy_described_range(&info, address, length);
        *mem_type_p = info.mem_type;
        cux_copy_cache_learns(&info, cux_copy_mem_flags(ucs_derived_of(md, cux_copy_md_t), &info, 0));
    }
    return status;
}

static ucs_status_t cux_copy_mem_query_impl(uct_md_h md, const void *address, size_t length, cux_mem_info_t *mem)
{
    const cux_copy_md_t *copy_md = ucs_derived_of(md, cux_copy_md_t);
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_copy_ptr_query_cuda(address, &info);
    if (status != UCS_OK) {
        return status;
    }
    cux_copy_described_range(&info, address, length);
    mem->mem_type     = info.mem_type;
    mem->sys_dev      = info.sys_dev;
    mem->base_address = info.base;
    mem->alloc_length = info.length;
    if (mem->want_dmabuf && copy_md->dmabuf) {
        cux_copy_dmabuf_export(address, length, &info, &mem->dmabuf_fd, &mem->dmabuf_offset);
    }
    mem->mem_flags = cux_copy_mem_flags(copy_md, &info, mem->want_dmabuf && (mem->dmabuf_fd < 0));
    cux_copy_cache_learns(&info, mem->mem_flags);
    return UCS_OK;
}

CUX_MEM_QUERY_FUNC(cux_copy_mem_query, cux_copy_mem_query_impl)

static ucs_status_t cux_copy_mkey_pack_impl(uct_md_h md, uct_mem_h memh, const void *address, size_t length,
                                            void *rkey_buffer)
{
    return UCS_OK; /* rkey_packed_size is 0: copies stay inside one process */
}

CUX_MKEY_PACK_FUNC(cux_copy_mkey_pack, cux_copy_mkey_pack_impl)

static ucs_status_t cux_copy_rkey_unpack_impl(uct_component_t *component, const void *rkey_buffer,
                                              uct_rkey_t *rkey_p, void **handle_p)
{
    *rkey_p   = 0;
    *handle_p = NULL;
    return UCS_OK;
}

CUX_RKEY_UNPACK_FUNC(cux_copy_rkey_unpack, cux_copy_rkey_unpack_impl)

static void cux_copy_md_close(uct_md_h md)
{
    ucs_free(md);
}

static uct_md_ops_t cux_copy_md_ops = {
    .close              = cux_copy_md_close,
    .query              = cux_copy_md_query,
    .mem_alloc          = cux_copy_mem_alloc,
    .mem_free           = cux_copy_mem_free,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = cux_copy_mem_reg,
    .mem_dereg          = cux_copy_mem_dereg,
    .mem_query          = cux_copy_mem_query,
    .mkey_pack          = cux_copy_mkey_pack,
    .detect_memory_type = cux_copy_detect_memory_type,
    CUX_MD_OPS_VERSION_FIELDS(cux_no_device)
};

static ucs_status_t cux_copy_md_open(uct_component_t *component, const char *md_name,
                                     const uct_md_config_t *uct_config, uct_md_h *md_p)
{
    const cux_copy_md_config_t *config = ucs_derived_of(uct_config, cux_copy_md_config_t);
    cux_copy_md_t *md;
    ucs_status_t status;

    status = cux_md_open_check(md_name);
    if (status != UCS_OK) {
        return status;
    }

    md = ucs_calloc(1, sizeof(*md), "cux_copy_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &cux_copy_md_ops;
    md->super.component = &cux_copy_component;
    md->pin_host        = config->pin_host;
    md->dmabuf          = cux_copy_dmabuf_supported(config->dmabuf);
    md->enable_fabric   = config->enable_fabric;
    *md_p               = &md->super;
    return UCS_OK;
}

uct_component_t cux_copy_component = {
    .query_md_resources = cux_query_md_resources,
    .md_open            = cux_copy_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = cux_copy_rkey_unpack,
    .rkey_ptr           = (uct_component_rkey_ptr_func_t)ucs_empty_function_return_unsupported,
    .rkey_release       = (uct_component_rkey_release_func_t)ucs_empty_function_return_success,
    .name               = CUX_COPY_COMPONENT_NAME,
    .md_config          = {
        .name           = "CUDA copy memory domain",
        .prefix         = CUX_COPY_CONFIG_PREFIX,
        .table          = cux_copy_md_config_table,
        .size           = sizeof(cux_copy_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&cux_copy_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function,
    CUX_COMPONENT_VERSION_FIELDS
};
