/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Base class of the CUDA interfaces: the completion engine, per-device resources, the performance figures
 * reported to UCP, and the operations that are the same for every transport (flush, progress, event
 * arming, pending queue).
 */
#ifndef CUX_IFACE_H_
#define CUX_IFACE_H_

#include "cux_bw_spec.h"
#include "cux_dev_resources.h"
#include "compat/cux_ucx_compat.h"

typedef struct cux_iface_config {
    uct_iface_config_t super;
    unsigned           max_poll;
    unsigned           max_inflight;
    char               *bandwidth;  /* cux_bw_spec.h: one figure, "auto" (measured), or UCX's list */
    ucs_time_t         latency;     /* UCS_TIME_AUTO: measured */
    double             overhead;
} cux_iface_config_t;

/* Config table entries of cux_iface_config_t, with the transport's performance defaults. */
#define CUX_IFACE_CONFIG_FIELDS(_bw, _lat, _overhead) \
    {"", "", NULL, ucs_offsetof(cux_iface_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_iface_config_table)}, \
    {"MAX_POLL", "16", \
     "Most completions handled by one progress call.", \
     ucs_offsetof(cux_iface_config_t, max_poll), UCS_CONFIG_TYPE_UINT}, \
    {"MAX_INFLIGHT", "inf", \
     "Most zero-copy operations in flight on an interface; past it operations return\n" \
     "UCS_ERR_NO_RESOURCE and wait in the pending queue. CUDA events are recycled, so their number\n" \
     "follows the peak of operations in flight.", \
     ucs_offsetof(cux_iface_config_t, max_inflight), UCS_CONFIG_TYPE_UINT}, \
    {"MAX_EVENTS", NULL, /* UCX's module's name for its bound on CUDA events: here they follow the operations */ \
     "", ucs_offsetof(cux_iface_config_t, max_inflight), UCS_CONFIG_TYPE_UINT}, \
    {"BW", _bw, \
     "Bandwidth reported to UCP for its protocol selection; auto: measured once per process on the\n" \
     "device links this transport uses. UCX's list form is taken too (cux_bw_spec.h).", \
     ucs_offsetof(cux_iface_config_t, bandwidth), UCS_CONFIG_TYPE_STRING}, \
    {"LAT", _lat, \
     "Latency reported to UCP for its protocol selection; auto: measured like BW.", \
     ucs_offsetof(cux_iface_config_t, latency), UCS_CONFIG_TYPE_TIME_UNITS}, \
    {"OVERHEAD", _overhead, \
     "CPU overhead per operation reported to UCP.", \
     ucs_offsetof(cux_iface_config_t, overhead), UCS_CONFIG_TYPE_TIME}

typedef struct cux_iface cux_iface_t;

/* A transport's measured bandwidth (bytes/s) and latency (s), for BW or LAT set to auto. */
typedef void (*cux_iface_measure_func_t)(cux_iface_t *iface, double *bandwidth_p, double *latency_p);

struct cux_iface {
    uct_base_iface_t super;
    cux_completion_t    completion;
    cux_dev_resources_t devs;
    int              num_devices;
    struct {
        double       bandwidth;      /* "auto" until measured */
        cux_bw_spec_t bw_spec;       /* BW as configured: per-pair figures a transport may report */
        double       latency;        /* negative until measured */
        double       overhead;
        int          bandwidth_measured; /* BW was "auto": a transport may refine it per link */
    } perf;
    cux_iface_measure_func_t measure;  /* set by the transport */
};

UCS_CLASS_DECLARE(cux_iface_t, uct_iface_ops_t*, uct_iface_internal_ops_t*, uct_md_h, uct_worker_h,
                  const uct_iface_params_t*, const uct_iface_config_t*, const char*, const char*, unsigned);

/* Fills what every CUDA interface reports: performance, events, zero-copy limits; callers add the rest. */
void cux_iface_query(cux_iface_t *iface, uct_iface_attr_t *attr);

/* The base of both transports' endpoints; cuda_copy's as it is (its operations carry all they need), cuda_ipc's
 * with its peer (cux_ipc_ep.h). */
typedef struct cux_ep {
    uct_base_ep_t super;
} cux_ep_t;

UCS_CLASS_DECLARE(cux_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_NEW_FUNC(cux_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(cux_ep_t, uct_ep_t);

ucs_status_t cux_iface_flush(uct_iface_h tl_iface, unsigned flags, uct_completion_t *comp);
ucs_status_t cux_ep_flush(uct_ep_h tl_ep, unsigned flags, uct_completion_t *comp);
unsigned cux_iface_progress(uct_iface_h tl_iface);
ucs_status_t cux_iface_event_fd_get(uct_iface_h tl_iface, int *fd_p);
ucs_status_t cux_iface_event_arm(uct_iface_h tl_iface, unsigned events);
ucs_status_t cux_ep_pending_add(uct_ep_h tl_ep, uct_pending_req_t *req, unsigned flags);
void cux_ep_pending_purge(uct_ep_h tl_ep, uct_pending_purge_callback_t cb, void *arg);

/* The generic operations, for a transport's uct_iface_ops_t initializer. */
#define CUX_IFACE_COMMON_OPS \
    .ep_pending_add         = cux_ep_pending_add, \
    .ep_pending_purge       = cux_ep_pending_purge, \
    .ep_flush               = cux_ep_flush, \
    .ep_fence               = uct_base_ep_fence, \
    .iface_flush            = cux_iface_flush, \
    .iface_fence            = uct_base_iface_fence, \
    .iface_progress_enable  = uct_base_iface_progress_enable, \
    .iface_progress_disable = uct_base_iface_progress_disable, \
    .iface_progress         = cux_iface_progress, \
    .iface_event_fd_get     = cux_iface_event_fd_get, \
    .iface_event_arm        = cux_iface_event_arm

#endif
