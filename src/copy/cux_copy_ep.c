/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy endpoint: see cux_copy_ep.h.
 */
#include "cux_copy_ep.h"
#include "base/cux_ptr.h"

#include <uct/base/uct_iov.inl>

#include <ucs/debug/log.h>

/* Where a buffer lives: from its registration when we have one, else from the driver. */
static UCS_F_ALWAYS_INLINE ucs_status_t cux_copy_locate(const void *address, uct_mem_h memh, int *is_cuda_p,
                                                        int *device_p)
{
    const cux_copy_memh_t *copy_memh = memh;
    cux_ptr_info_t info;
    ucs_status_t status;

    if (copy_memh != UCT_MEM_HANDLE_NULL) {
        *is_cuda_p = cux_mem_type_is_cuda(copy_memh->mem_type);
        *device_p  = copy_memh->device;
        return UCS_OK;
    }

    status = cux_ptr_query(address, &info);
    if (ucs_unlikely(status != UCS_OK)) {
        ucs_error("cuda_copy: cannot query address %p: %s", address, ucs_status_string(status));
        return status;
    }
    *is_cuda_p = cux_mem_type_is_cuda(info.mem_type);
    *device_p  = info.device;
    return UCS_OK;
}

/* Issue one copy on a queue of a device's resources. */
static UCS_F_ALWAYS_INLINE ucs_status_t cux_copy_issue(cux_copy_iface_t *iface, void *dst, const void *src,
                                                       size_t length, int device, int queue,
                                                       uct_completion_t *comp)
{
    cux_dev_res_t *res;
    ucs_status_t status;

    status = cux_dev_resources_get(&iface->super.devs, device, &res);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    return cux_dev_copy(res, queue, dst, src, length,
                        (queue == CUX_COPY_QUEUE_SHORT) ? iface->short_wait : CUX_DEV_COPY_ASYNC, NULL, comp, NULL,
                        NULL);
}

/*
 * The device that runs a short copy. Its stream is not tied to a direction, so only the device matters:
 * with one visible GPU that needs no driver call (UCP 1.13 issues one short copy per fragment when it packs
 * or unpacks GPU memory, so this is on its bandwidth path); otherwise the GPU side of the copy decides.
 */
static UCS_F_ALWAYS_INLINE ucs_status_t cux_copy_short_device(cux_copy_iface_t *iface, const void *gpu_side,
                                                              const void *other_side, int *device_p)
{
    int is_cuda = 0, device = 0;
    ucs_status_t status;

    if (iface->super.num_devices == 1) {
        *device_p = 0;
        return UCS_OK;
    }

    status = cux_copy_locate(gpu_side, UCT_MEM_HANDLE_NULL, &is_cuda, &device);
    if (ucs_likely((status == UCS_OK) && !is_cuda)) {
        status = cux_copy_locate(other_side, UCT_MEM_HANDLE_NULL, &is_cuda, &device);
    }
    *device_p = ((status == UCS_OK) && is_cuda) ? device : 0;
    return status;
}

static UCS_F_ALWAYS_INLINE ucs_status_t cux_copy_ep_short(uct_ep_h tl_ep, void *dst, const void *src,
                                                          unsigned length, const void *remote)
{
    cux_copy_iface_t *iface = ucs_derived_of(tl_ep->iface, cux_copy_iface_t);
    ucs_status_t status;
    int device;

    if (ucs_unlikely(length == 0)) {
        return UCS_OK;
    }

    /* UCP's remote address is the GPU buffer of a memory-type copy: ask about it first. */
    status = cux_copy_short_device(iface, remote, (remote == dst) ? src : dst, &device);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    return cux_copy_issue(iface, dst, src, length, device, CUX_COPY_QUEUE_SHORT, NULL);
}

ucs_status_t cux_copy_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey)
{
    ucs_status_t status = cux_copy_ep_short(tl_ep, (void*)remote_addr, buffer, length, (void*)remote_addr);

    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), PUT, SHORT, length);
    ucs_trace_data("cuda_copy put_short %u bytes %p -> 0x%" PRIx64 ": %s", length, buffer, remote_addr,
                   ucs_status_string(status));
    return status;
}

ucs_status_t cux_copy_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey)
{
    ucs_status_t status = cux_copy_ep_short(tl_ep, buffer, (const void*)remote_addr, length, (void*)remote_addr);

    UCT_TL_EP_STAT_OP(ucs_derived_of(tl_ep, uct_base_ep_t), GET, SHORT, length);
    ucs_trace_data("cuda_copy get_short %u bytes 0x%" PRIx64 " -> %p: %s", length, remote_addr, buffer,
                   ucs_status_string(status));
    return status;
}

static UCS_F_ALWAYS_INLINE ucs_status_t cux_copy_ep_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                                          uint64_t remote_addr, uct_completion_t *comp,
                                                          int local_is_src)
{
    cux_copy_iface_t *iface = ucs_derived_of(tl_ep->iface, cux_copy_iface_t);
    void *remote            = (void*)remote_addr;
    int local_cuda, local_dev, remote_cuda, remote_dev;
    ucs_status_t status;
    size_t length;

    if (ucs_unlikely(iovcnt > 1)) {
        ucs_error("cuda_copy %s: %zu iov entries, at most 1 is supported", local_is_src ? "put_zcopy" : "get_zcopy",
                  iovcnt);
        return UCS_ERR_INVALID_PARAM;
    }

    length = uct_iov_total_length(iov, iovcnt);
    if (ucs_unlikely(length == 0)) {
        return UCS_OK;
    }
    if (ucs_unlikely(!cux_completion_has_resources(&iface->super.completion))) {
        return UCS_ERR_NO_RESOURCE;
    }

    status = cux_copy_locate(iov[0].buffer, iov[0].memh, &local_cuda, &local_dev);
    if (ucs_likely(status == UCS_OK)) {
        status = cux_copy_locate(remote, UCT_MEM_HANDLE_NULL, &remote_cuda, &remote_dev);
    }
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }

    /* The source's GPU drives the copy; the queue is that of the direction, so directions overlap. */
    if (local_is_src) {
        return cux_copy_issue(iface, remote, iov[0].buffer, length,
                              local_cuda ? local_dev : (remote_cuda ? remote_dev : 0),
                              (local_cuda << 1) | remote_cuda, comp);
    }
    return cux_copy_issue(iface, iov[0].buffer, remote, length,
                          remote_cuda ? remote_dev : (local_cuda ? local_dev : 0),
                          (remote_cuda << 1) | local_cuda, comp);
}

ucs_status_t cux_copy_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp)
{
    ucs_status_t status = cux_copy_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, comp, 1);

    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t), PUT, ZCOPY,
                                 uct_iov_total_length(iov, iovcnt));
    ucs_trace_data("cuda_copy put_zcopy %zu bytes -> 0x%" PRIx64 ": %s", uct_iov_total_length(iov, iovcnt),
                   remote_addr, ucs_status_string(status));
    return status;
}

ucs_status_t cux_copy_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp)
{
    ucs_status_t status = cux_copy_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, comp, 0);

    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t), GET, ZCOPY,
                                 uct_iov_total_length(iov, iovcnt));
    ucs_trace_data("cuda_copy get_zcopy %zu bytes <- 0x%" PRIx64 ": %s", uct_iov_total_length(iov, iovcnt),
                   remote_addr, ucs_status_string(status));
    return status;
}
