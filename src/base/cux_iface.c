/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Base class of the CUDA interfaces: see cux_iface.h.
 */
#include "cux_iface.h"
#include "cux_introspection.h"

#include <ucs/debug/log.h>
#include <ucs/time/time.h>
#include <ucs/sys/math.h>
#include <ctype.h>
#include <stdio.h>

#define cux_iface(_tl_iface) ucs_derived_of(_tl_iface, cux_iface_t)

/* The environment variable of a transport's setting: UCX_CUDA_COPY_BW for cuda_copy's BW. */
static void cux_iface_setting_name(const char *tl_name, const char *field, char *buf, size_t max)
{
    size_t i;

    snprintf(buf, max, "UCX_%s_%s", tl_name, field);
    for (i = 0; buf[i] != '\0'; ++i) {
        buf[i] = toupper((unsigned char)buf[i]);
    }
}

UCS_CLASS_INIT_FUNC(cux_iface_t, uct_iface_ops_t *ops, uct_iface_internal_ops_t *internal_ops, uct_md_h md,
                    uct_worker_h worker, const uct_iface_params_t *params, const uct_iface_config_t *tl_config,
                    const char *tl_name, const char *dev_name, unsigned num_queues)
{
    const cux_iface_config_t *config = ucs_derived_of(tl_config, cux_iface_config_t);
    char setting[64];
    ucs_status_t status;

    UCS_CLASS_CALL_SUPER_INIT(uct_base_iface_t, ops, internal_ops, md, worker, params, tl_config
                              UCS_STATS_ARG(params->stats_root) UCS_STATS_ARG(tl_name));

    if (strncmp(params->mode.device.dev_name, dev_name, UCT_DEVICE_NAME_MAX)) {
        ucs_error("%s: no device %s (the device is called %s)", tl_name, params->mode.device.dev_name,
                  dev_name);
        return UCS_ERR_NO_DEVICE;
    }

    cux_iface_setting_name(tl_name, "BW", setting, sizeof(setting));
    status = cux_bw_spec_parse(setting, config->bandwidth, &self->perf.bw_spec);
    if (status != UCS_OK) {
        return status;
    }
    self->num_devices    = cux_device_count();
    self->perf.bandwidth = self->perf.bw_spec.dflt;
    self->perf.latency   = (config->latency == UCS_TIME_AUTO) ? -1.0 : ucs_time_to_sec(config->latency);
    self->perf.overhead  = config->overhead;
    self->perf.bandwidth_measured = 0;
    self->measure        = NULL;
    cux_completion_init(&self->completion, config->max_inflight, config->max_poll, 1); /* a transport may batch */
    cux_dev_resources_init(&self->devs, &self->completion, num_queues);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(cux_iface_t)
{
    uct_base_iface_progress_disable(&self->super.super, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    cux_dev_resources_cleanup(&self->devs);
    cux_completion_cleanup(&self->completion);
}

UCS_CLASS_DEFINE(cux_iface_t, uct_base_iface_t);

/* BW or LAT set to auto: measured on the first query (the measurement is cached process-wide). */
static void cux_iface_resolve_perf(cux_iface_t *iface)
{
    double bandwidth, latency;

    if (!CUX_CONFIG_BW_IS_AUTO(iface->perf.bandwidth) && (iface->perf.latency >= 0)) {
        return;
    }
    if (iface->measure == NULL) { /* a transport that measures nothing reports "unknown" as nothing */
        bandwidth = 0;
        latency   = 0;
    } else {
        iface->measure(iface, &bandwidth, &latency);
    }
    if (CUX_CONFIG_BW_IS_AUTO(iface->perf.bandwidth)) {
        iface->perf.bandwidth          = bandwidth;
        iface->perf.bandwidth_measured = (iface->measure != NULL);
    }
    if (iface->perf.latency < 0) {
        iface->perf.latency = latency;
    }
}

void cux_iface_query(cux_iface_t *iface, uct_iface_attr_t *attr)
{
    cux_iface_resolve_perf(iface);
    uct_base_iface_query(&iface->super, attr);
    attr->ep_addr_len            = 0;
    /* RECV, though nothing is received here (UCX's modules say so too): UCP keeps progressing an interface whose
     * last endpoint went, and then arms it, only where both event kinds are declared. Without it, copies still
     * running when the last endpoint of a dead peer is discarded were never completed, nor the flush that waited
     * on them (NIXL's transfer to a killed peer stayed in progress; test/cux_ucp_put_kill.c). */
    attr->cap.event_flags        = UCT_IFACE_FLAG_EVENT_SEND_COMP | UCT_IFACE_FLAG_EVENT_RECV |
                                   UCT_IFACE_FLAG_EVENT_FD;
    attr->cap.am.opt_zcopy_align = 1;
    attr->cap.am.align_mtu       = 1;
    attr->cap.am.max_iov         = 1;
    /* both transports: one contiguous buffer per zero-copy operation, any size and alignment */
    attr->cap.put.max_zcopy       = SIZE_MAX;
    attr->cap.put.opt_zcopy_align = 1;
    attr->cap.put.align_mtu       = 1;
    attr->cap.put.max_iov         = 1;
    attr->cap.get.max_zcopy       = SIZE_MAX;
    attr->cap.get.opt_zcopy_align = 1;
    attr->cap.get.align_mtu       = 1;
    attr->cap.get.max_iov         = 1;
    attr->latency                = ucs_linear_func_make(iface->perf.latency, 0);
    attr->bandwidth.dedicated    = 0;
    attr->bandwidth.shared       = iface->perf.bandwidth;
    attr->overhead               = iface->perf.overhead;
    attr->priority               = 0;
}

UCS_CLASS_INIT_FUNC(cux_ep_t, const uct_ep_params_t *params)
{
    UCT_EP_PARAMS_CHECK_DEV_IFACE_ADDRS(params);
    UCS_CLASS_CALL_SUPER_INIT(uct_base_ep_t, ucs_derived_of(params->iface, uct_base_iface_t));
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(cux_ep_t)
{
}

UCS_CLASS_DEFINE(cux_ep_t, uct_base_ep_t)
UCS_CLASS_DEFINE_NEW_FUNC(cux_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DEFINE_DELETE_FUNC(cux_ep_t, uct_ep_t);

/* An endpoint's flush waits for the whole interface: its operations share the interface's streams and queue. */
static ucs_status_t cux_iface_flush_for(uct_iface_h tl_iface, uct_ep_h ep, uct_completion_t *comp)
{
    cux_iface_t *iface  = cux_iface(tl_iface);
    ucs_status_t status = cux_completion_flush(&iface->completion, ep, comp);

    if (status == UCS_OK) {
        UCT_TL_IFACE_STAT_FLUSH(&iface->super);
    } else if (status == UCS_INPROGRESS) {
        UCT_TL_IFACE_STAT_FLUSH_WAIT(&iface->super);
    }
    return status;
}

ucs_status_t cux_iface_flush(uct_iface_h tl_iface, unsigned flags, uct_completion_t *comp)
{
    return cux_iface_flush_for(tl_iface, NULL, comp);
}

ucs_status_t cux_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp)
{
    return cux_iface_flush_for(tl_ep->iface, tl_ep, comp);
}

unsigned cux_iface_progress(uct_iface_h tl_iface)
{
    return cux_completion_progress(&cux_iface(tl_iface)->completion);
}

ucs_status_t cux_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p)
{
    return cux_completion_event_fd(&cux_iface(tl_iface)->completion, fd_p);
}

ucs_status_t cux_iface_event_arm(uct_iface_h tl_iface, unsigned events)
{
    return cux_completion_event_arm(&cux_iface(tl_iface)->completion, events);
}

ucs_status_t cux_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags)
{
    return cux_completion_pending_add(&cux_iface(tl_ep->iface)->completion, tl_ep, req);
}

void cux_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg)
{
    cux_completion_pending_purge(&cux_iface(tl_ep->iface)->completion, tl_ep, cb, arg);
}

unsigned cux_iface_num_events(uct_iface_h tl_iface)
{
    return cux_dev_resources_num_events(&cux_iface(tl_iface)->devs);
}

unsigned cux_iface_num_streams(uct_iface_h tl_iface)
{
    return cux_dev_resources_num_streams(&cux_iface(tl_iface)->devs);
}
