/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX's device API, host side. A device endpoint is the transport's id in GPU memory: UCX's GPU code reads it
 * to dispatch to cuda_ipc's functions. A remote element is the offset from the peer's address to where its
 * allocation is mapped here; it is made from the same mapping rkey_ptr hands out (the key proven first, the
 * mapping held until the key is released), so a kernel never writes through a mapping that has gone.
 */
#include "ipc/cux_ipc_device.h"
#include "ipc/cux_ipc_ep.h"
#include "ipc/import/cux_ipc_import.h"

#include <ucs/debug/log.h>
#if CUX_UCX_HAS_DEVICE_API
#  include <uct/api/device/uct_device_types.h>
#endif

void cux_ipc_device_eps_init(cux_ipc_device_eps_t *eps)
{
    pthread_mutex_init(&eps->lock, NULL);
    memset(eps->ep, 0, sizeof(eps->ep));
}

void cux_ipc_device_eps_cleanup(cux_ipc_device_eps_t *eps)
{
    cux_ctx_guard_t guard;
    int device;

    for (device = 0; device < CUX_MAX_DEVICES; ++device) {
        if ((eps->ep[device] != 0) && (cux_device_ctx_enter(device, &guard) == UCS_OK)) {
            (void)CUX_DRV_CALL_ERR(cuMemFree, eps->ep[device]);
            cux_ctx_leave(&guard);
        }
    }
    pthread_mutex_destroy(&eps->lock);
}

ucs_status_t cux_ipc_device_elem_map(uct_mem_h memh, uct_rkey_t rkey, ptrdiff_t *mapped_offset_p, void **release_p)
{
    cux_ipc_unpacked_rkey_t *ukey = (cux_ipc_unpacked_rkey_t*)rkey;
    cux_ipc_region_t *region;
    ucs_status_t status;
    void *mapped;

    if (rkey == UCT_INVALID_RKEY) {
        if (memh == NULL) {
            ucs_error("cuda_ipc: a device memory element needs a remote key (or a local memory handle)");
            return UCS_ERR_INVALID_PARAM;
        }
        *mapped_offset_p = 0; /* local memory: a kernel uses its own addresses */
        if (release_p != NULL) {
            *release_p = NULL;
        }
        return UCS_OK;
    }
    if (release_p != NULL) {
        status = cux_ipc_import_rkey_hold(ukey, &region);
        if (status == UCS_OK) {
            mapped     = region->mapped;
            *release_p = region;
        }
    } else {
        status = cux_ipc_import_rkey_attach(ukey, &mapped);
    }
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc: no device memory element for pid %d's allocation 0x%" PRIx64 "+%" PRIu64 ": %s",
                  ukey->key.pid, ukey->key.base, ukey->key.length, ucs_status_string(status));
        return status;
    }
    *mapped_offset_p = (ptrdiff_t)((uintptr_t)mapped - (uintptr_t)ukey->key.base);
    return UCS_OK;
}

void cux_ipc_device_elem_unmap(void *release_handle)
{
    if (release_handle != NULL) {
        cux_ipc_import_put(release_handle);
    }
}

#if CUX_UCX_HAS_DEVICE_API

static ucs_status_t cux_ipc_device_ep_create(int device, CUdeviceptr *ep_p)
{
    uct_device_ep_t ep = {.uct_tl_id = UCT_DEVICE_TL_CUDA_IPC};
    cux_ctx_guard_t guard;
    ucs_status_t status;
    CUdeviceptr ptr;

    status = cux_device_ctx_enter(device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL_ERR(cuMemAlloc, &ptr, sizeof(ep));
    if (status == UCS_OK) {
        status = cux_device_store((void*)ptr, &ep, sizeof(ep));
        if (status == UCS_OK) {
            *ep_p = ptr;
        } else {
            (void)CUX_DRV_CALL_ERR(cuMemFree, ptr);
        }
    }
    cux_ctx_leave(&guard);
    return status;
}

static ucs_status_t cux_ipc_device_ep(uct_ep_h tl_ep, void **device_ep_p)
{
    cux_ipc_iface_t *iface    = ucs_derived_of(tl_ep->iface, cux_ipc_iface_t);
    cux_ipc_device_eps_t *eps = &iface->device_eps;
    int device                = cux_device_current();
    ucs_status_t status       = UCS_OK;

    if (device < 0) {
        ucs_error("cuda_ipc: a device endpoint is made for the GPU of the calling thread's context, and it has none");
        return UCS_ERR_NO_DEVICE;
    }
    pthread_mutex_lock(&eps->lock);
    if (eps->ep[device] == 0) {
        status = cux_ipc_device_ep_create(device, &eps->ep[device]);
    }
    pthread_mutex_unlock(&eps->lock);
    if (status == UCS_OK) {
        *device_ep_p = (void*)eps->ep[device];
    }
    return status;
}

CUX_GET_DEVICE_EP_FUNC(cux_ipc_device_get_device_ep, cux_ipc_device_ep)
CUX_MEM_ELEM_PACK_FUNC(cux_ipc_device_mem_elem_pack, cux_ipc_device_elem_map)
CUX_MEM_ELEM_RELEASE_FUNC(cux_ipc_device_mem_elem_release, cux_ipc_device_elem_unmap)

#endif
