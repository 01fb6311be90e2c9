/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy interface: see cux_copy_iface.h.
 */
#include "cux_copy_iface.h"
#include "cux_copy_ep.h"
#include "base/cux_link_perf.h"

#include <ucs/sys/sys.h>
#include <ucs/sys/math.h>
#include <string.h>

#define CUX_COPY_DEV_NAME "cuda"

/* UCX's own module's host<->GPU figures (UCX_CUDA_COPY_BW's h2d and d2h defaults), with which UCP keeps host
 * messages off the GPUs: what ours reports for those pairs unless HOST_STAGING is on. */
#define CUX_COPY_UNSTAGED_H2D_BW (8300.0 * UCS_MBYTE)
#define CUX_COPY_UNSTAGED_D2H_BW (11660.0 * UCS_MBYTE)

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
    {"HOST_STAGING", "n",
     "Let UCP 1.16 and later send host-memory messages between processes through GPU fragments (a copy to\n"
     "the GPU, cuda_ipc, a copy back), which it does when the host<->GPU copies are rated faster than shared\n"
     "memory. n: host<->GPU estimates no higher than UCX's own module's (8300 MB/s host->GPU, 11660 MB/s\n"
     "GPU->host), so host messages stay on the CPU as with UCX's module; y: the measured figures (BW auto).",
     ucs_offsetof(cux_copy_iface_config_t, host_staging), UCS_CONFIG_TYPE_BOOL},
    {NULL}
};

static ucs_status_t cux_copy_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    /* UCP packs addresses byte by byte: no alignment may be assumed */
    memcpy(addr, &ucs_derived_of(tl_iface, cux_copy_iface_t)->id, sizeof(uint64_t));
    return UCS_OK;
}

/* An endpoint connects an interface to itself only (UCP's memory-type endpoints), as UCX's module's do: two
 * workers of one process are not reachable to each other over cuda_copy. */
static int cux_copy_iface_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                    const uct_iface_addr_t *iface_addr, size_t iface_addr_len, const char **why_p)
{
    uint64_t id;

    if (iface_addr == NULL) {
        *why_p = "no interface address";
        return 0;
    }
    memcpy(&id, iface_addr, sizeof(id));
    if (id != ucs_derived_of(tl_iface, cux_copy_iface_t)->id) {
        *why_p = "another interface (cuda_copy connects an interface to itself)";
        return 0;
    }
    return 1;
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

/* Where one end of a copy is: host memory, or the calling thread's GPU (UCP estimates for the device it runs on). */
static int cux_copy_link_end(ucs_memory_type_t mem_type)
{
    return ((mem_type == UCS_MEMORY_TYPE_CUDA) || (mem_type == UCS_MEMORY_TYPE_CUDA_MANAGED)) ?
           ucs_max(cux_device_current(), 0) : CUX_LINK_HOST;
}

static int cux_copy_op_reads_remote(uct_ep_operation_t op)
{
    return (op == UCT_EP_OP_GET_SHORT) || (op == UCT_EP_OP_GET_BCOPY) || (op == UCT_EP_OP_GET_ZCOPY);
}

static void cux_copy_report_bandwidth(uct_perf_attr_t *perf_attr, double bandwidth)
{
    if (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_BANDWIDTH) {
        perf_attr->bandwidth.dedicated = 0;
        perf_attr->bandwidth.shared    = bandwidth;
    }
#if CUX_UCX_HAS_PATH_BANDWIDTH
    if (perf_attr->field_mask & UCT_PERF_ATTR_FIELD_PATH_BANDWIDTH) {
        perf_attr->path_bandwidth.dedicated = 0;
        perf_attr->path_bandwidth.shared    = bandwidth;
    }
#endif
}

/* The pair of UCX's BW list a copy from src to dst memory falls under: managed memory and unknown types
 * fall under none, as with UCX's module (its "default"). */
static int cux_copy_bw_pair(ucs_memory_type_t src, ucs_memory_type_t dst)
{
    if ((src == UCS_MEMORY_TYPE_HOST) && (dst == UCS_MEMORY_TYPE_CUDA)) {
        return CUX_BW_PAIR_H2D;
    } else if ((src == UCS_MEMORY_TYPE_CUDA) && (dst == UCS_MEMORY_TYPE_HOST)) {
        return CUX_BW_PAIR_D2H;
    } else if ((src == UCS_MEMORY_TYPE_CUDA) && (dst == UCS_MEMORY_TYPE_CUDA)) {
        return CUX_BW_PAIR_D2D;
    }
    return -1;
}

/*
 * cuda_copy moves data to or from a GPU; a copy between two host buffers is the CPU's (memcpy, cma, shared
 * memory). UCP 1.16 and later take a failed estimate for a pair of memory types as "not supported" and choose
 * another transport; told nothing, UCP 1.22 picked cuda_copy for host rendezvous of 218 KB and more within one
 * process, on the strength of its measured host<->GPU bandwidth.
 * With BW "auto", every other pair gets its own link's measured bandwidth: host -> GPU, GPU -> host and within
 * one GPU differ by more than tenfold on an H200 (about 55, 55 and 1,500 GB/s), and UCP weighs its memory-type
 * copies and pipelines by these figures. A get moves data from the remote buffer to the local one. Host<->GPU
 * figures stay at or below UCX's own module's unless HOST_STAGING is on: higher ones make UCP route host
 * messages through GPU fragments. A figure BW gives for the pair (UCX's list: h2d, d2h, d2d) is reported as it
 * is, measured or not.
 */
static ucs_status_t cux_copy_iface_estimate_perf(uct_iface_h tl_iface, uct_perf_attr_t *perf_attr)
{
    const uint64_t both = UCT_PERF_ATTR_FIELD_LOCAL_MEMORY_TYPE | UCT_PERF_ATTR_FIELD_REMOTE_MEMORY_TYPE;
    cux_iface_t *iface  = ucs_derived_of(tl_iface, cux_iface_t);
    ucs_memory_type_t src, dst;
    cux_link_perf_t link;
    ucs_status_t status;
    int from, to, pair;

    if ((perf_attr->field_mask & both) != both) {
        return uct_base_iface_estimate_perf(tl_iface, perf_attr);
    }
    if ((perf_attr->local_memory_type == UCS_MEMORY_TYPE_HOST) &&
        (perf_attr->remote_memory_type == UCS_MEMORY_TYPE_HOST)) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = uct_base_iface_estimate_perf(tl_iface, perf_attr);
    if (status != UCS_OK) {
        return status;
    }

    if ((perf_attr->field_mask & UCT_PERF_ATTR_FIELD_OPERATION) && cux_copy_op_reads_remote(perf_attr->operation)) {
        src = perf_attr->remote_memory_type;
        dst = perf_attr->local_memory_type;
    } else {
        src = perf_attr->local_memory_type;
        dst = perf_attr->remote_memory_type;
    }
    pair = cux_copy_bw_pair(src, dst);
    if ((pair >= 0) && iface->perf.bw_spec.has_pair[pair]) {
        cux_copy_report_bandwidth(perf_attr, iface->perf.bw_spec.pair[pair]);
        return UCS_OK;
    }
    if (!iface->perf.bandwidth_measured) {
        return UCS_OK; /* the interface's figure stands */
    }
    from = cux_copy_link_end(src);
    to   = cux_copy_link_end(dst);
    if (cux_link_perf_get(from, to, &link) != UCS_OK) {
        return UCS_OK;
    }
    if (!ucs_derived_of(iface, cux_copy_iface_t)->host_staging) {
        if (from == CUX_LINK_HOST) {
            link.bandwidth = ucs_min(link.bandwidth, CUX_COPY_UNSTAGED_H2D_BW);
        } else if (to == CUX_LINK_HOST) {
            link.bandwidth = ucs_min(link.bandwidth, CUX_COPY_UNSTAGED_D2H_BW);
        }
    }
    cux_copy_report_bandwidth(perf_attr, link.bandwidth);
    return UCS_OK;
}

static uct_iface_internal_ops_t cux_copy_iface_internal_ops =
        CUX_IFACE_INTERNAL_OPS_INIT(cux_copy_iface_estimate_perf, cux_copy_iface_is_reachable,
                                    CUX_EP_CONNECTED_IF_REACHABLE, cux_no_device, cux_no_sgl);

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
    self->id            = ucs_generate_uuid((uintptr_t)self);
    self->super.measure = cux_copy_iface_measure;
    self->short_wait = (ucs_derived_of(tl_config, cux_copy_iface_config_t)->short_wait == 0) ?
                       CUX_DEV_COPY_SPIN : CUX_DEV_COPY_BLOCK;
    self->host_staging = ucs_derived_of(tl_config, cux_copy_iface_config_t)->host_staging;
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
