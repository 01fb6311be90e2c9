/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc interface and endpoint: see cux_ipc_iface.h.
 */
#include "ipc/cux_ipc_iface.h"
#include "ipc/cux_ipc_ep.h"
#include "ipc/cux_ipc_sgl.h"
#include "base/cux_link_perf.h"
#include "base/cux_ptr.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/string.h>
#include <ucs/sys/sys.h>
#include <string.h>
#include <unistd.h>

#define CUX_IPC_DEV_NAME "cuda"

#define CUX_IPC_COPY_KERNEL_MAX_AUTO (256 * UCS_KBYTE)

/* cux_iface_config_t comes first in cux_ipc_iface_config_t, so the common fields keep their offsets. */
static ucs_config_field_t cux_ipc_iface_config_table[] = {
    /* LAT is not measured by default: UCP 1.13 adds twice this latency to the cost of a rendezvous, and with
     * the measured 8-byte copy latency (about 8 us on H200) its threshold formula sends 64 KB GPU messages
     * eagerly, through two synchronous copies (tag_lat 64 KB 1.13x of UCX's module, against 0.91x). */
    CUX_IFACE_CONFIG_FIELDS("auto", "2us", "2us"),
    /* 128 rather than 16: 100,000 blocks of 45 KB in their own allocations, one launch per 128 copies, post
     * 1.35 us a block against 1.69 (per-block puts) and 0.66 against 1.08 (scatter-gather puts) on one H200
     * (bench/results/2026-12-02-h200x1-inference-batch). A lone copy still goes at once. */
    {"MAX_BATCH", "128",
     "Most operations whose copies are issued to the driver in one call (cuMemcpyBatchAsync, CUDA 13\n"
     "drivers, or one launch of the copy kernel), at most 128: copies wait to be issued together until the\n"
     "next progress call or until this many operations are waiting. A copy that finds no other in flight is\n"
     "issued at once. 1 issues every operation at once, in its own call; a scatter-gather list is one\n"
     "operation, whose copies go LIST_BATCH a call.",
     ucs_offsetof(cux_ipc_iface_config_t, max_batch), UCS_CONFIG_TYPE_UINT},
    /* 128: 1,024 a launch costs the host 9-13 ns a copy against 30-39 ns (bench/cux_launch_cost.cu), but through
     * UCP's lists it is no faster beyond the spread (H100, 2026-12-07, issue 62), and the small form runs on every
     * driver. */
    {"LIST_BATCH", "128",
     "Most copies of a scatter-gather list issued to the driver in one call, 1 to 1024: one launch of the copy\n"
     "kernel. Above 128, launches take its 1024-copy form, which needs a driver that takes kernel parameters\n"
     "over 4 KB (CUDA 12.1 and later; with older ones a launch takes 128). 1 issues each copy alone.",
     ucs_offsetof(cux_ipc_iface_config_t, list_batch), UCS_CONFIG_TYPE_UINT},
    {"COPY_KERNEL_MAX", "256k",
     "A batch of copies (MAX_BATCH) between GPU memory, none larger than this, goes to the GPU as one kernel\n"
     "launch instead of to its copy engines, which take a few microseconds per copy however small: 16 copies\n"
     "of 4 KB cost about as much as one (H200, bench/results/). The kernel runs on the SMs beside the\n"
     "application's kernels. A lone copy always goes to a copy engine. 0 keeps every copy on the copy engines;\n"
     "auto is 256k.",
     ucs_offsetof(cux_ipc_iface_config_t, copy_kernel_max), UCS_CONFIG_TYPE_MEMUNITS},
    /* UCX's module has this setting, and its auto turns reads off on GPUs without NVLink; inference servers
     * set it on (NIXL reads KV cache with gets, which otherwise leave cuda_ipc). Here auto is on everywhere. */
    {"ENABLE_GET_ZCOPY", "auto",
     "Offer reads (get) to UCP: auto and on do; off reports no get size (as UCX's module does on GPUs without\n"
     "NVLink), so that UCP's rendezvous writes through cuda_ipc instead of reading and its gets of GPU\n"
     "memory go another way.",
     ucs_offsetof(cux_ipc_iface_config_t, enable_get_zcopy), UCS_CONFIG_TYPE_ON_OFF_AUTO},
    {NULL}
};

/* --- interface --- */

static ucs_status_t cux_ipc_iface_get_device_address(uct_iface_h tl_iface, uct_device_addr_t *addr)
{
    /* UCP packs addresses byte by byte: no alignment may be assumed */
    memcpy(addr, &ucs_derived_of(tl_iface, cux_ipc_iface_t)->system_id, sizeof(uint64_t));
    return UCS_OK;
}

/* Our address, with our NVLink domain where peers on other hosts are reachable. */
static void cux_ipc_iface_own_address(const cux_ipc_iface_t *iface, cux_ipc_iface_addr_t *own)
{
    cux_ipc_proof_own_address(own, iface->pid_ns);
    if (iface->domain.on) {
        own->magic  = CUX_IPC_ADDR_MAGIC_DOMAIN;
        own->clique = iface->domain.clique;
        memcpy(own->cluster, iface->domain.cluster, sizeof(own->cluster));
    }
}

static ucs_status_t cux_ipc_iface_get_address(uct_iface_h tl_iface, uct_iface_addr_t *addr)
{
    cux_ipc_iface_addr_t own; /* UCP packs addresses byte by byte: no alignment may be assumed */

    cux_ipc_iface_own_address(ucs_derived_of(tl_iface, cux_ipc_iface_t), &own);
    memcpy(addr, &own, cux_ipc_addr_length(&own));
    return UCS_OK;
}

/* Another process of this host and of our PID namespace that proves the address is its own (cux_ipc_proof.h;
 * GPU-to-GPU access is checked when a buffer is mapped, where the devices are known), or of another host of our
 * multi-node NVLink domain (cux_ipc_remote_peer_acceptable). Never this very process ("same process", as UCX's
 * module says): UCP copies within a process with cuda_copy, and would otherwise put cuda_ipc on its loopback
 * memory-type endpoints. An endpoint to it can still be made (cux_ipc_peer_open). */
static int cux_ipc_iface_reachable(const uct_iface_h tl_iface, const uct_device_addr_t *dev_addr,
                                   const uct_iface_addr_t *iface_addr, size_t iface_addr_len, const char **why_p)
{
    const cux_ipc_iface_t *iface = ucs_derived_of(tl_iface, cux_ipc_iface_t);
    cux_ipc_iface_addr_t addr;
    cux_ipc_peer_t peer;
    uint64_t system_id;

    if ((dev_addr == NULL) || (iface_addr == NULL)) {
        *why_p = "no device or interface address";
        return 0;
    }
    memcpy(&system_id, dev_addr, sizeof(system_id));
    cux_ipc_addr_unpack(&addr, iface_addr, iface_addr_len);
    if (system_id != iface->system_id) {
        return cux_ipc_remote_peer_acceptable(&addr, iface->pid_ns, why_p);
    }
    if (((addr.magic == CUX_IPC_ADDR_MAGIC) || (addr.magic == CUX_IPC_ADDR_MAGIC_DOMAIN)) && (addr.pid == getpid()) &&
        (addr.pid_ns == iface->pid_ns)) {
        *why_p = "same process";
        return 0;
    }
    if (cux_ipc_peer_open(&peer, &addr, iface->pid_ns, iface->proof) != UCS_OK) {
        *why_p = "not a proven peer process (UCX_LOG_LEVEL=debug says why)";
        return 0;
    }
    cux_ipc_peer_close(&peer);
    return 1;
}

CUX_IFACE_REACHABLE_FUNC(cux_ipc_iface_is_reachable, cux_ipc_iface_reachable)

static ucs_status_t cux_ipc_iface_query(uct_iface_h tl_iface, uct_iface_attr_t *attr)
{
    cux_ipc_iface_t *iface = ucs_derived_of(tl_iface, cux_ipc_iface_t);

    cux_iface_query(&iface->super, attr);
    if (!iface->get_zcopy) {
        attr->cap.get.max_zcopy = 0; /* the flag stays, as with UCX's module: UCP keeps cuda_ipc's lanes */
    }
    attr->iface_addr_len          = iface->domain.on ? sizeof(cux_ipc_iface_addr_t) : CUX_IPC_ADDR_HOST_LEN;
    attr->device_addr_len         = sizeof(uint64_t);
    /* A peer of this host that dies is detected by ep_check (UCP's keepalive), so UCP may use cuda_ipc on
     * endpoints that ask for peer error handling. */
    attr->cap.flags               = UCT_IFACE_FLAG_CONNECT_TO_IFACE | UCT_IFACE_FLAG_PUT_ZCOPY |
                                    UCT_IFACE_FLAG_GET_ZCOPY | UCT_IFACE_FLAG_PENDING |
                                    UCT_IFACE_FLAG_ERRHANDLE_PEER_FAILURE | UCT_IFACE_FLAG_EP_CHECK |
                                    CUX_IFACE_FLAG_DEVICE_EP | (iface->domain.on ? CUX_IFACE_FLAG_INTER_NODE : 0);
    return UCS_OK;
}

static UCS_CLASS_DECLARE_DELETE_FUNC(cux_ipc_iface_t, uct_iface_t);

static uct_iface_ops_t cux_ipc_iface_ops = {
    CUX_IFACE_COMMON_OPS,
    .ep_create                = UCS_CLASS_NEW_FUNC_NAME(cux_ipc_ep_t),
    .ep_destroy               = UCS_CLASS_DELETE_FUNC_NAME(cux_ipc_ep_t),
    .ep_put_zcopy             = cux_ipc_ep_put_zcopy,
    .ep_get_zcopy             = cux_ipc_ep_get_zcopy,
    .ep_check                 = cux_ipc_ep_check,
    .iface_close              = UCS_CLASS_DELETE_FUNC_NAME(cux_ipc_iface_t),
    .iface_query              = cux_ipc_iface_query,
    .iface_get_device_address = cux_ipc_iface_get_device_address,
    .iface_get_address        = cux_ipc_iface_get_address,
    CUX_IFACE_OPS_REACHABLE(cux_ipc_iface_is_reachable),
};

static uct_iface_internal_ops_t cux_ipc_iface_internal_ops =
        CUX_IFACE_INTERNAL_OPS_INIT(uct_base_iface_estimate_perf, cux_ipc_iface_is_reachable, CUX_EP_CONNECTED_NEVER,
                                    cux_ipc_device, cux_ipc_sgl);

/* The best link from the caller's GPU to a GPU it can reach (itself included: two processes may share a
 * GPU). The interface is one device for every peer, so it reports its best link; without a measurement,
 * the figures of an NVLink peer. */
static void cux_ipc_iface_measure(cux_iface_t *iface, double *bandwidth_p, double *latency_p)
{
    int local = ucs_max(cux_device_current(), 0);
    cux_link_perf_t perf;
    int peer, access;

    *bandwidth_p = 0;
    *latency_p   = 0;
    for (peer = 0; peer < cux_device_count(); ++peer) {
        access = (peer == local);
        if (!access && (cux_drv.cuDeviceCanAccessPeer(&access, cux_device_get(local)->cu_dev,
                                                      cux_device_get(peer)->cu_dev) != CUDA_SUCCESS)) {
            access = 0;
        }
        if (access && (cux_link_perf_get(local, peer, &perf) == UCS_OK)) {
            *bandwidth_p = ucs_max(*bandwidth_p, perf.bandwidth);
            *latency_p   = (*latency_p == 0) ? perf.latency : ucs_min(*latency_p, perf.latency);
        }
    }
    if (*bandwidth_p == 0) {
        *bandwidth_p = 300000.0 * UCS_MBYTE;
        *latency_p   = 2e-6;
    }
}

static UCS_CLASS_INIT_FUNC(cux_ipc_iface_t, uct_md_h md, uct_worker_h worker, const uct_iface_params_t *params,
                           const uct_iface_config_t *tl_config)
{
    const cux_ipc_iface_config_t *config = ucs_derived_of(tl_config, cux_ipc_iface_config_t);

    UCS_CLASS_CALL_SUPER_INIT(cux_iface_t, &cux_ipc_iface_ops, &cux_ipc_iface_internal_ops, md, worker, params,
                              tl_config, CUX_IPC_TL_NAME, CUX_IPC_DEV_NAME, cux_device_count() + 1);
    self->system_id     = ucs_get_system_id();
    self->pid_ns        = cux_ipc_pid_namespace();
    self->proof         = ucs_derived_of(md, cux_ipc_md_t)->proof;
    self->super.measure = cux_ipc_iface_measure;
    self->get_zcopy     = (config->enable_get_zcopy != UCS_CONFIG_OFF);
    (void)cux_ipc_domain_get(&self->domain);
    if (cux_bw_spec_has_pairs(&self->super.perf.bw_spec)) {
        ucs_error("UCX_" CUX_IPC_CONFIG_PREFIX "BW=%s: one bandwidth or auto (h2d, d2h and d2d are cuda_copy's)",
                  config->super.bandwidth);
        return UCS_ERR_INVALID_PARAM;
    }
    cux_completion_set_max_batch(&self->super.completion, config->max_batch, config->list_batch);
    cux_completion_set_kernel_max(&self->super.completion, (config->copy_kernel_max == UCS_MEMUNITS_AUTO) ?
                                  CUX_IPC_COPY_KERNEL_MAX_AUTO : config->copy_kernel_max);
    if (self->super.completion.max_batch != config->max_batch) {
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "MAX_BATCH=%u is outside 1..%u: using %u", config->max_batch,
                 CUX_BATCH_MAX, self->super.completion.max_batch);
    }
    if (self->super.completion.max_copies != config->list_batch) {
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "LIST_BATCH=%u is outside 1..%u: using %u", config->list_batch,
                 CUX_BATCH_COPIES_MAX, self->super.completion.max_copies);
    }
    cux_ipc_device_eps_init(&self->device_eps);
    return UCS_OK;
}

static UCS_CLASS_CLEANUP_FUNC(cux_ipc_iface_t)
{
    cux_ipc_device_eps_cleanup(&self->device_eps);
}

UCS_CLASS_DEFINE(cux_ipc_iface_t, cux_iface_t);
static UCS_CLASS_DEFINE_NEW_FUNC(cux_ipc_iface_t, uct_iface_t, uct_md_h, uct_worker_h, const uct_iface_params_t*,
                                 const uct_iface_config_t*);
static UCS_CLASS_DEFINE_DELETE_FUNC(cux_ipc_iface_t, uct_iface_t);

static ucs_status_t cux_ipc_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                          unsigned *num_devices_p)
{
    return uct_single_device_resource(md, CUX_IPC_DEV_NAME, UCT_DEVICE_TYPE_SHM, UCS_SYS_DEVICE_ID_UNKNOWN,
                                      devices_p, num_devices_p);
}

/* Registered by the module constructor (cux_module.c), after its UCX version check. */
uct_tl_t cux_ipc_tl = {
    .name          = "cuda_ipc",
    .query_devices = cux_ipc_query_devices,
    .iface_open    = UCS_CLASS_NEW_FUNC_NAME(cux_ipc_iface_t),
    .config        = {
        .name      = "cuda_ipc transport",
        .prefix    = CUX_IPC_CONFIG_PREFIX,
        .table     = cux_ipc_iface_config_table,
        .size      = sizeof(cux_ipc_iface_config_t),
    },
};
