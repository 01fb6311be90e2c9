/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc endpoint: see cux_ipc_ep.h.
 */
#include "ipc/cux_ipc_ep.h"
#include "ipc/import/cux_ipc_import.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "base/cux_ptr.h"

#include <ucs/debug/log.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>
#include <uct/base/uct_iov.inl>

/* Has the peer exited (or, in our namespace, its pid been reused)? Not asked of a peer on another host. */
static int cux_ipc_ep_peer_gone(cux_ipc_ep_t *ep)
{
    if (ep->peer.channel >= 0) {
        return cux_ipc_channel_closed(ep->peer.channel);
    }
    return ucs_sys_get_proc_create_time(ep->peer.pid) != ep->keepalive.start_time;
}

UCS_CLASS_INIT_FUNC(cux_ipc_ep_t, const uct_ep_params_t *params)
{
    cux_ipc_iface_t *iface = ucs_derived_of(params->iface, cux_ipc_iface_t);
    uint64_t system_id     = iface->system_id;
    cux_ipc_iface_addr_t addr;
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(cux_ep_t, params);
    if (!(params->field_mask & UCT_EP_PARAM_FIELD_IFACE_ADDR) || (params->iface_addr == NULL)) {
        ucs_error("cuda_ipc: an endpoint needs the peer's interface address");
        return UCS_ERR_INVALID_PARAM;
    }
    cux_ipc_addr_unpack(&addr, params->iface_addr, CUX_EP_PARAM_IFACE_ADDR_LENGTH(params)); /* any alignment */
    if ((params->field_mask & UCT_EP_PARAM_FIELD_DEV_ADDR) && (params->dev_addr != NULL)) {
        memcpy(&system_id, params->dev_addr, sizeof(system_id));
    }
    if (system_id != iface->system_id) {
        /* another host: nothing to keep alive here (UCP's other lanes see such a peer fail) */
        status = cux_ipc_remote_peer_open(&self->peer, &addr, system_id, iface->pid_ns);
        if (status != UCS_OK) {
            ucs_error("cuda_ipc: no endpoint to pid %d of host 0x%" PRIx64 ": not a peer of our NVLink domain "
                      "(UCX_LOG_LEVEL=debug says why)", addr.pid, system_id);
        }
        return status;
    }
    status = cux_ipc_peer_open(&self->peer, &addr, iface->pid_ns, iface->proof);
    if ((status != UCS_OK) && cux_ipc_addr_in_other_pid_namespace(&addr, iface->pid_ns)) {
        /* the cause and the setting that helps were said once for that namespace: not again for each endpoint */
        ucs_debug("cuda_ipc: no endpoint to pid %d of another PID namespace", addr.pid);
        return status;
    }
    if (status != UCS_OK) {
        ucs_error("cuda_ipc: no endpoint to pid %d: its address is not proven (the process is gone, or the "
                  "address names another process; UCX_LOG_LEVEL=debug says which)", addr.pid);
        return status;
    }
    if (self->peer.channel >= 0) {
        return UCS_OK; /* its pid names nothing here: its connection is its liveness */
    }
    /* fails when the peer is already gone */
    status = uct_ep_keepalive_init(&self->keepalive, self->peer.pid);
    if (status != UCS_OK) {
        cux_ipc_peer_close(&self->peer);
    }
    return status;
}

static UCS_CLASS_CLEANUP_FUNC(cux_ipc_ep_t)
{
    /* A peer that is gone never uses its mappings again: give back the GPU memory they hold now, not when the
     * cache happens to evict them (mappings still in use go at their last release). Mappings bound to this
     * endpoint's connection serve no one after it, gone or not; nor do those of a peer on another host, whose
     * end nothing here can see. */
    if ((CUX_IPC_OWNER_KIND(self->peer.owner) == CUX_IPC_OWNER_CONNECTION) || cux_ipc_peer_is_remote(&self->peer) ||
        cux_ipc_ep_peer_gone(self)) {
        ucs_debug("cuda_ipc: peer pid %d is gone, or its mappings were this connection's: dropping them",
                  self->peer.pid);
        cux_ipc_import_forget_peer(&self->peer);
    }
    cux_ipc_peer_close(&self->peer);
}

UCS_CLASS_DEFINE(cux_ipc_ep_t, cux_ep_t)
UCS_CLASS_DEFINE_NEW_FUNC(cux_ipc_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(cux_ipc_ep_t, uct_ep_t);

/* A peer whose process is gone, or whose pid now names another process, is reported to the interface's error
 * handler (UCP then fails the endpoint's requests). */
ucs_status_t cux_ipc_ep_check(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    cux_ipc_ep_t *ep = ucs_derived_of(tl_ep, cux_ipc_ep_t);

    CUX_EP_KEEPALIVE_CHECK_PARAM(flags, comp);
    if (cux_ipc_peer_is_remote(&ep->peer)) {
        return UCS_OK; /* a process of another host: only UCP's lanes over the network see it fail */
    } else if (ep->peer.channel < 0) {
        uct_ep_keepalive_check(tl_ep, &ep->keepalive, ep->peer.pid, flags, comp);
    } else if (cux_ipc_channel_closed(ep->peer.channel)) {
        /* UCT's keepalive is how every release reports a gone peer to the interface's error handler; it compares
         * a pid's start time, so it is given one that cannot match: this process's own, against 1 */
        uct_keepalive_info_t gone = {.start_time = 1};

        ucs_debug("cuda_ipc: peer pid %d of PID namespace %" PRIu64 " closed its connection: gone", ep->peer.pid,
                  ep->peer.pid_ns);
        uct_ep_keepalive_check(tl_ep, &gone, getpid(), flags, comp);
    }
    return UCS_OK;
}

static void cux_ipc_region_release(void *arg)
{
    cux_ipc_import_put(arg);
}

/* cux_ipc_ep_local's work, inlined into a put's and a get's path */
static UCS_F_ALWAYS_INLINE ucs_status_t cux_ipc_ep_local_side(const void *buffer, uct_mem_h memh,
                                                              cux_ipc_local_t *local)
{
    const cux_ipc_memh_t *m = memh;
    cux_ptr_info_t info;
    ucs_status_t status;

    if (m != UCT_MEM_HANDLE_NULL) {
        local->device = m->device;
        local->alloc  = m->key.base;
        local->length = m->key.length;
        return UCS_OK;
    }
    status = cux_ptr_query(buffer, &info);
    if (status == UCS_OK) {
        local->device = cux_mem_type_is_cuda(info.mem_type) ? info.device : 0;
        local->alloc  = (uintptr_t)info.base; /* 0 for host memory: never merged */
        local->length = info.length;
    }
    return status;
}

ucs_status_t cux_ipc_ep_local(const void *buffer, uct_mem_h memh, cux_ipc_local_t *local)
{
    return cux_ipc_ep_local_side(buffer, memh, local);
}

/* One zero-copy copy of length (> 0) bytes to (put) or from the peer's memory through region, the mapping of the
 * key's allocation on the local side's device, its key and bounds already checked and room in flight known. Takes
 * one reference of region, given back when the copy is done (or at once when it did not go). UCS_INPROGRESS (comp
 * follows) or an error. Scatter-gather lists queue their copies themselves (cux_ipc_sgl.c). */
static ucs_status_t cux_ipc_ep_zcopy_mapped(uct_ep_h tl_ep, void *buffer, const cux_ipc_local_t *local,
                                           size_t length, uint64_t remote_addr, uct_rkey_t rkey,
                                           cux_ipc_region_t *region, uct_completion_t *comp, int put)
{
    cux_ipc_iface_t *iface              = ucs_derived_of(tl_ep->iface, cux_ipc_iface_t);
    const cux_ipc_unpacked_rkey_t *ukey = (const cux_ipc_unpacked_rkey_t*)rkey;
    cux_copy_allocs_t allocs;
    cux_dev_res_t *res;
    ucs_status_t status;
    void *remote;

    status = cux_dev_resources_get(&iface->super.devs, local->device, &res);
    if (ucs_unlikely(status != UCS_OK)) {
        cux_ipc_import_put(region);
        return status;
    }
    remote = UCS_PTR_BYTE_OFFSET(region->mapped, remote_addr - ukey->key.base);
    /* adjacent blocks of one transfer become one copy (cux_completion.h): both allocations must be known */
    allocs.dst = put ? (uintptr_t)region->mapped : local->alloc;
    allocs.src = put ? local->alloc : (uintptr_t)region->mapped;

    /* One queue per peer device keeps copies to different GPUs apart. */
    status = cux_dev_copy(res, (ukey->peer_device >= 0) ? ukey->peer_device : iface->super.num_devices,
                          put ? remote : buffer, put ? buffer : remote, length,
                          (iface->super.completion.max_batch > 1) ? CUX_DEV_COPY_BATCH : CUX_DEV_COPY_ASYNC, &allocs,
                          comp, cux_ipc_region_release, region);
    if (status != UCS_INPROGRESS) {
        cux_ipc_import_put(region);
    }
    return status;
}

static UCS_F_ALWAYS_INLINE ucs_status_t cux_ipc_ep_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                                         uint64_t remote_addr, uct_rkey_t rkey,
                                                         uct_completion_t *comp, int put)
{
    cux_ipc_iface_t *iface    = ucs_derived_of(tl_ep->iface, cux_ipc_iface_t);
    cux_ipc_ep_t *ep          = ucs_derived_of(tl_ep, cux_ipc_ep_t);
    const cux_ipc_rkey_t *key = &((const cux_ipc_unpacked_rkey_t*)rkey)->key;
    cux_ipc_region_t *region;
    cux_ipc_local_t local;
    ucs_status_t status;
    size_t length;

    if (ucs_unlikely(iovcnt > 1)) {
        ucs_error("cuda_ipc: %zu iov entries, at most 1 is supported", iovcnt);
        return UCS_ERR_INVALID_PARAM;
    }
    length = uct_iov_total_length(iov, iovcnt);
    if (ucs_unlikely(length == 0)) {
        return UCS_OK;
    }
    /* A key reaches only the process this endpoint connects to (the peer proves the key on a cache miss; a hit
     * needs the same owner, as the kernel names the peer, and the same allocation), so it cannot make this process
     * touch another's memory. */
    if (ucs_unlikely(!cux_ipc_peer_made(&ep->peer, key))) {
        return cux_ipc_peer_check_key(&ep->peer, key); /* refuses it, logging once per peer */
    }
    if (ucs_unlikely(!cux_ipc_rkey_covers(key, remote_addr, length))) {
        ucs_error("cuda_ipc: 0x%" PRIx64 "+%zu is outside the remote allocation 0x%" PRIx64 "+%" PRIu64,
                  remote_addr, length, (uint64_t)key->base, (uint64_t)key->length);
        return UCS_ERR_INVALID_PARAM;
    }
    if (ucs_unlikely(!cux_completion_has_resources(&iface->super.completion))) {
        return UCS_ERR_NO_RESOURCE;
    }

    /* The local buffer's device maps the remote allocation and drives the copy. */
    status = cux_ipc_ep_local_side(iov[0].buffer, iov[0].memh, &local);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    status = cux_ipc_import_get((const cux_ipc_unpacked_rkey_t*)rkey, local.device, &ep->peer, &region);
    if (ucs_unlikely(status != UCS_OK)) {
        return status;
    }
    return cux_ipc_ep_zcopy_mapped(tl_ep, iov[0].buffer, &local, length, remote_addr, rkey, region, comp, put);
}

ucs_status_t cux_ipc_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    ucs_status_t status = cux_ipc_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey, comp, 1);

    ucs_trace_data("cuda_ipc put_zcopy %zu bytes -> 0x%" PRIx64 ": %s", uct_iov_total_length(iov, iovcnt),
                   remote_addr, ucs_status_string(status));
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t), PUT, ZCOPY,
                                 uct_iov_total_length(iov, iovcnt));
    return status;
}

ucs_status_t cux_ipc_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt,
                                         uint64_t remote_addr, uct_rkey_t rkey, uct_completion_t *comp)
{
    ucs_status_t status = cux_ipc_ep_zcopy(tl_ep, iov, iovcnt, remote_addr, rkey, comp, 0);

    ucs_trace_data("cuda_ipc get_zcopy %zu bytes <- 0x%" PRIx64 ": %s", uct_iov_total_length(iov, iovcnt),
                   remote_addr, ucs_status_string(status));
    UCT_TL_EP_STAT_OP_IF_SUCCESS(status, ucs_derived_of(tl_ep, uct_base_ep_t), GET, ZCOPY,
                                 uct_iov_total_length(iov, iovcnt));
    return status;
}

