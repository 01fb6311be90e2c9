/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy interface: see cux_copy_iface.h.
 */
#include "cux_copy_iface.h"
#include "cux_copy_ep.h"
#include "base/cux_link_perf.h"

#include <ucs/sys/sys.h>
#include <ucs/sys/math.h>
#include <unistd.h>
#include <string.h>

#define CUX_COPY_DEV_NAME "cuda"

static const char *cux_copy_wait_names[] = {"spin", "block", NULL};

/* cux_iface_config_t comes first in cux_copy_iface_config_t, so the common fields keep their offsets. */
static ucs_config_field_t cux_copy_iface_config_table[] = {
    CUX_IFACE_CONFIG_FIELDS("auto", "auto", "0"),
    {"SHORT_WAIT", "spin",
     "How a short operation (put_short, get_short: UCP 1.13 packs and unpacks GPU memory with them, one per\n"
     "fragment) waits for its copy:\n"
     " spin  - poll the stream: the lowest latency, the calling thread stays busy;\n"
     " block - cuStreamSynchronize, which follows the context's scheduling policy.",
     ucs_offsetof(cux_copy_iface_config_t, short_wait), UCS_CONFIG_TYPE_ENUM(cux_copy_wait_names)},
    {NULL}
};

/* Endpoints only connect inside one process: the address is this process's identity on this host. */
static uint64_t cux_copy_process_id(void)
{
    return ucs_get_system_id() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)getpid();
}

static ucs_status_t cux_copy_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    /* UCP packs addresses byte by byte: no alignment may be assumed */
    memcpy(addr, &ucs_derived_of(tl_iface, cux_copy_iface_t)->id, sizeof(uint64_t));
    return UCS_OK;
}

static int cux_copy_iface_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                    const uct_iface_addr_t *iface_addr)
{
    uint64_t id;

    if (iface_addr == NULL) {
        return 0;
    }
    memcpy(&id, iface_addr, sizeof(id));
    return id == ucs_derived_of(tl_iface, cux_copy_iface_t)->id;
}

CUX_IFACE_REACHABLE_FUNC(cux_copy_iface_is_reachable, cux_copy_iface_reachable)

static ucs_status_t cux_copy_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    cux_iface_query(ucs_derived_of(tl_iface, cux_iface_t), attr);
    attr->iface_addr_len          = sizeof(uint64_t);
    attr->device_addr_len         = 0;
    attr->cap.flags               = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_SHORT |
                                    UCT_IFACE_FLAG_GET_SHORT | UCT_IFACE_FLAG_PUT_ZCOPY |
                                    UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING;
    attr->cap.put.max_short       = UINT_MAX;
    attr->cap.get.max_short       = UINT_MAX;
    return UCS_OK;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(cux_copy_iface_t, uct_iface_t);

static uct_iface_ops_t cux_copy_iface_ops = {
    CUX_IFACE_COMMON_OPS,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(cux_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(cux_ep_t),
    .ep_put_short             = cux_copy_ep_put_short,
    .ep_get_short             = cux_copy_ep_get_short,
    .ep_put_zcopy             = cux_copy_ep_put_zcopy,
    .ep_get_zcopy             = cux_copy_ep_get_zcopy,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(cux_copy_iface_t),
    .iface_query              = cux_copy_iface_query,
    .iface_get_device_address = (uct_iface_get_device_address_func_t)ucs_empty_function_return_success,
    .iface_get_address        = cux_copy_iface_get_address,
    CUX_IFACE_OPS_REACHABLE(cux_copy_iface_is_reachable),
};

/* cuda_copy moves data to or from a GPU; a copy between two host buffers is the CPU's (memcpy, cma, shared
 * memory). UCP 1.16 and later take a failed estimate for a pair of memory types as "not supported" and choose
 * another transport; told nothing, UCP 1.22 picked cuda_copy for host rendezvous of 218 KB and more within one
 * process, on the strength of its measured host<->GPU bandwidth. */
static ucs_status_t cux_copy_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr)
{
    const uint64_t both = UCT_PERF_ATTR_FIELD_LOCAL_MEMORY_TYPE | UCT_PERF_ATTR_FIELD_REMOTE_MEMORY_TYPE;

    if (((perf_attr->field_mask & both) == both) && (perf_attr->local_memory_type == UCS_MEMORY_TYPE_HOST) &&
        (perf_attr->remote_memory_type == UCS_MEMORY_TYPE_HOST)) {
        return UCS_ERR_UNSUPPORTED;
    }
    return uct_base_iface_estimate_perf(tl_iface, perf_attr);
}

static uct_iface_internal_ops_t cux_copy_iface_internal_ops =
        CUX_IFACE_INTERNAL_OPS_INIT(cux_copy_iface_estimate_perf, cux_copy_iface_is_reachable,
                                    CUX_EP_CONNECTED_IF_REACHABLE);

/* UCP 1.13 uses cuda_copy for copies between host and GPU memory: the host -> device link of the caller's
 * GPU. Without a measurement, UCX's own module's figures. */
static void cux_copy_iface_measure(cux_iface_t *iface, double *bandwidth_p, double *latency_p)
{
    cux_link_perf_t perf;

    if (cux_link_perf_get(CUX_LINK_HOST, ucs_max(cux_device_current(), 0), &perf) == UCS_OK) {
        *bandwidth_p = perf.bandwidth;
        *latency_p   = perf.latency;
    } else {
        *bandwidth_p = 10000.0 * UCS_MBYTE;
        *latency_p   = 8e-6;
    }
}

static UCS_CLASS_INIT_FUNC(cux_copy_iface_t, uct_md_h md, uct_worker_h worker,
                           const uct_iface_params_t *params, const uct_iface_config_t *tl_config)
{
    UCS_CLASS_CALL_SUPER_INIT(cux_iface_t, &cux_copy_iface_ops, &cux_copy_iface_internal_ops, md, worker, params,
                              tl_config, CUX_COPY_TL_NAME, CUX_COPY_DEV_NAME, CUX_COPY_QUEUE_LAST);
    self->id            = cux_copy_process_id();
    self->super.measure = cux_copy_iface_measure;
    self->short_wait = (ucs_derived_of(tl_config, cux_copy_iface_config_t)->short_wait == 0) ?
                       CUX_DEV_COPY_SPIN : CUX_DEV_COPY_BLOCK;
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(cux_copy_iface_t)
{
}

UCS_CLASS_DEFINE(cux_copy_iface_t, cux_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(cux_copy_iface_t, uct_iface_t, uct_md_h, uct_worker_h,
                                 const uct_iface_params_t*, const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(cux_copy_iface_t, uct_iface_t);

/* One device, "cuda", placed at the GPU of the caller's current context, or at the only GPU there is. */
static ucs_status_t cux_copy_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                           unsigned *num_devices_p)
{
    int current       = cux_device_current();
    cux_device_t *dev = NULL;

    if (current >= 0) {
        dev = cux_device_get(current);
    } else if (cux_device_count() == 1) {
        dev = cux_device_get(0);
    }
    return uct_single_device_resource(md, CUX_COPY_DEV_NAME, UCT_DEVICE_TYPE_ACC,
                                      (dev != NULL) ? dev->sys_dev : UCS_SYS_DEVICE_ID_UNKNOWN, devices_p,
                                      num_devices_p);
}

/* Registered by the module constructor (cux_module.c), after its UCX version check. */
uct_tl_t cux_copy_tl = {
    .name          = "cuda_copy",
    .query_devices = cux_copy_query_devices,
    .iface_open    = UCS_CLASS_NEW_FUNC_NAME(cux_copy_iface_t),
    .config        = {
        .name      = "cuda_copy transport",
        .prefix    = CUX_COPY_CONFIG_PREFIX,
        .table     = cux_copy_iface_config_table,
        .size      = sizeof(cux_copy_iface_config_t),
    },
};
