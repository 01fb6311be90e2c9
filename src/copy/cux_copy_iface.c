/*
 * cuda_copy interface: see cux_copy_iface.h.
 */
#include "cux_copy_iface.h"
#include "cux_copy_ep.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sys.h>
#include <unistd.h>

#define CUX_COPY_DEV_NAME "cuda"

static ucs_config_field_t cux_copy_iface_config_table[] = {
    {"", "", NULL, ucs_offsetof(cux_copy_iface_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)},

    {"MAX_POLL", "16",
     "Most completions handled by one progress call.",
     ucs_offsetof(cux_copy_iface_config_t, max_poll), UCS_CONFIG_TYPE_UINT},

    {"MAX_INFLIGHT", "inf",
     "Most zero-copy operations in flight on an interface; past it operations return\n"
     "UCS_ERR_NO_RESOURCE and wait in the pending queue. CUDA events are recycled, so their number\n"
     "follows the peak of operations in flight.",
     ucs_offsetof(cux_copy_iface_config_t, max_inflight), UCS_CONFIG_TYPE_UINT},

    {"BW", "10000MBs",
     "Bandwidth reported to UCP for its protocol selection.",
     ucs_offsetof(cux_copy_iface_config_t, bandwidth), UCS_CONFIG_TYPE_BW},

    {"LAT", "8us",
     "Latency reported to UCP for its protocol selection.",
     ucs_offsetof(cux_copy_iface_config_t, latency), UCS_CONFIG_TYPE_TIME},

    {"OVERHEAD", "0",
     "CPU overhead per operation reported to UCP.",
     ucs_offsetof(cux_copy_iface_config_t, overhead), UCS_CONFIG_TYPE_TIME},

    {NULL}
};

/* Endpoints only connect inside one process: the address is this process's identity on this host. */
static uint64_t cux_copy_process_id(void)
{
    return ucs_get_system_id() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)getpid();
}

unsigned cux_copy_iface_num_events(uct_iface_h tl_iface)
{
    return cux_dev_table_num_events(&ucs_derived_of(tl_iface, cux_copy_iface_t)->devs);
}

unsigned cux_copy_iface_num_streams(uct_iface_h tl_iface)
{
    return cux_dev_table_num_streams(&ucs_derived_of(tl_iface, cux_copy_iface_t)->devs);
}

static ucs_status_t cux_copy_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    *(uint64_t*)addr = ucs_derived_of(tl_iface, cux_copy_iface_t)->id;
    return UCS_OK;
}

static int cux_copy_iface_is_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                       const uct_iface_addr_t *iface_addr)
{
    return (iface_addr != NULL) &&
           (*(const uint64_t*)iface_addr == ucs_derived_of(tl_iface, cux_copy_iface_t)->id);
}

static ucs_status_t cux_copy_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    cux_copy_iface_t *iface = ucs_derived_of(tl_iface, cux_copy_iface_t);

    uct_base_iface_query(&iface->super, attr);

    attr->iface_addr_len  = sizeof(uint64_t);
    attr->device_addr_len = 0;
    attr->ep_addr_len     = 0;
    attr->cap.flags       = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
                            UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                            UCT_IFACE_FLAG_PENDING;
    attr->cap.event_flags = UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_FD;

    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = 1;
    attr->cap.get.max_short       = UINT_MAX;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = 1;
    attr->cap.am.opt_zcopy_align  = 1;
    attr->cap.am.align_mtu        = 1;
    attr->cap.am.max_iov          = 1;

    attr->latency             = ucs_linear_func_make(iface->config.latency, 0);
    attr->bandwidth.dedicated = 0;
    attr->bandwidth.shared    = iface->config.bandwidth;
    attr->overhead            = iface->config.overhead;
    attr->priority            = 0;
    return UCS_OK;
}

static ucs_status_t cux_copy_iface_flush(uct_iface_h tl_iface, unsigned flags, uct_completion_t *comp)
{
    cux_copy_iface_t *iface = ucs_derived_of(tl_iface, cux_copy_iface_t);
    ucs_status_t status     = cux_async_flush(&iface->async, comp);

    if (status == UCS_OK) {
        UCT_TL_IFACE_STAT_FLUSH(&iface->super);
    } else if (status == UCS_INPROGRESS) {
        UCT_TL_IFACE_STAT_FLUSH_WAIT(&iface->super);
    }
    return status;
}

static ucs_status_t cux_copy_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    return cux_copy_iface_flush(tl_ep->iface, flags, comp);
}

static unsigned cux_copy_iface_progress(uct_iface_h tl_iface)
{
    return cux_async_progress(&ucs_derived_of(tl_iface, cux_copy_iface_t)->async);
}

static ucs_status_t cux_copy_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    return cux_async_event_fd(&ucs_derived_of(tl_iface, cux_copy_iface_t)->async, fd_p);
}

static ucs_status_t cux_copy_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    return cux_async_event_arm(&ucs_derived_of(tl_iface, cux_copy_iface_t)->async, events);
}

static ucs_status_t cux_copy_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    return cux_async_pending_add(&ucs_derived_of(tl_ep->iface, cux_copy_iface_t)->async, tl_ep, req);
}

static void cux_copy_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    cux_async_pending_purge(&ucs_derived_of(tl_ep->iface, cux_copy_iface_t)->async, tl_ep, cb, arg);
}

static UCS_CLASS_DECLARE_DELETE_FUNC(cux_copy_iface_t, uct_iface_t);

static uct_iface_ops_t cux_copy_iface_ops = {
    .ep_put_short             = cux_copy_ep_put_short,
    .ep_get_short             = cux_copy_ep_get_short,
    .ep_put_zcopy             = cux_copy_ep_put_zcopy,
    .ep_get_zcopy             = cux_copy_ep_get_zcopy,
    .ep_pending_add           = cux_copy_ep_pending_add,
    .ep_pending_purge         = cux_copy_ep_pending_purge,
    .ep_flush                 = cux_copy_ep_flush,
    .ep_fence                 = uct_base_ep_fence,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(cux_copy_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(cux_copy_ep_t),
    .iface_flush              = cux_copy_iface_flush,
    .iface_fence              = uct_base_iface_fence,
    .iface_progress_enable    = uct_base_iface_progress_enable,
    .iface_progress_disable   = uct_base_iface_progress_disable,
    .iface_progress           = cux_copy_iface_progress,
    .iface_event_fd_get       = cux_copy_iface_event_fd_get,
    .iface_event_arm          = cux_copy_iface_event_arm,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(cux_copy_iface_t),
    .iface_query              = cux_copy_iface_query,
    .iface_get_device_address = (uct_iface_get_device_address_func_t)ucs_empty_function_return_success,
    .iface_get_address        = cux_copy_iface_get_address,
    .iface_is_reachable       = cux_copy_iface_is_reachable,
};

static uct_iface_internal_ops_t cux_copy_iface_internal_ops =
        CUX_IFACE_INTERNAL_OPS_INIT(uct_base_iface_estimate_perf);

static UCS_CLASS_INIT_FUNC(cux_copy_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    const cux_copy_iface_config_t *config = ucs_derived_of(tl_config, cux_copy_iface_config_t);

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, &cux_copy_iface_ops, &cux_copy_iface_internal_ops, md, worker,
                              params, tl_config UCS_STATS_ARG(params->stats_root)
                              UCS_STATS_ARG(CUX_COPY_TL_NAME));

    if (strncmp(params->mode.device.dev_name, CUX_COPY_DEV_NAME, UCT_DEVICE_NAME_MAX)) {
        ucs_error("cuda_copy: no device %s (the device is called " CUX_COPY_DEV_NAME ")",
                  params->mode.device.dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    self->id               = cux_copy_process_id();
    self->num_devices      = cux_device_count();
    self->config.bandwidth = config->bandwidth;
    self->config.latency   = config->latency;
    self->config.overhead  = config->overhead;
    cux_async_init(&self->async, config->max_inflight, config->max_poll);
    cux_dev_table_init(&self->devs, &self->async, CUX_COPY_QUEUE_LAST);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(cux_copy_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    cux_dev_table_cleanup(&self->devs);
    cux_async_cleanup(&self->async);
}

UCS_CLASS_DEFINE(cux_copy_iface_t, uct_base_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(cux_copy_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(cux_copy_iface_t, uct_iface_t);

/* One device, "cuda", placed at the GPU of the caller's current context, or at the only GPU there is. */
static ucs_status_t cux_copy_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    CUdevice cu_dev    = 0;
    cux_device_t *dev  = NULL;

    if (cux_drv.cuCtxGetDevice(&cu_dev) == CUDA_SUCCESS) {
        dev = cux_device_get((int)cu_dev);
    } else if (cux_device_count() == 1) {
        dev = cux_device_get(0);
    }
    return uct_single_device_resource(md, CUX_COPY_DEV_NAME, UCT_DEVICE_TYPE_ACC,
                                      (dev != NULL) ? dev->sys_dev : UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                      num_devices_p);
}

UCT_TL_DEFINE(&cux_copy_component, cuda_copy, cux_copy_query_devices, cux_copy_iface_t, CUX_COPY_CONFIG_PREFIX,
              cux_copy_iface_config_table, cux_copy_iface_config_t);
