/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc memory domain: see cux_ipc_md.h.
 */
#include "ipc/cux_ipc_md.h"
#include "ipc/cux_ipc_device.h"
#include "cux_introspection.h"
#include "ipc/cux_ipc_memh_export.h"
#include "ipc/import/cux_ipc_import.h"
#include "ipc/export/cux_ipc_answer.h"
#include "ipc/cux_ipc_memh.h"
#include "ipc/import/cux_ipc_peer_read.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/common/cux_ipc_domain.h"
#include "base/cux_iface.h"
#include "base/cux_md.h"
#include "base/cux_ptr.h"
#include "base/cux_sync_memops.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <string.h>
#include <unistd.h>


static ucs_config_field_t cux_ipc_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(cux_ipc_md_config_t, super), UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"CACHE", "y",
     "Keep mappings of other processes' GPU buffers after use (opening one costs about a millisecond).\n"
     "With 'n' a mapping is closed as soon as no operation uses it.",
     ucs_offsetof(cux_ipc_md_config_t, cache_enable), UCS_CONFIG_TYPE_BOOL},

    {"CACHE_MAX_REGIONS", "inf",
     "Most mappings kept; the least recently used unused ones are closed beyond it. Mappings in use are\n"
     "never closed, so the cache can exceed its bounds while they are. A bound below the allocations a\n"
     "transfer touches maps them again on every transfer (a KV cache of 100,000 block allocations). Unused\n"
     "mappings still close after CACHE_MAX_IDLE, and when the driver runs out of room for a new one.",
     ucs_offsetof(cux_ipc_md_config_t, cache_max_regions), UCS_CONFIG_TYPE_ULUNITS},

    {"CACHE_MAX_SIZE", "inf",
     "Most bytes of remote allocations kept mapped, with the same eviction rule.",
     ucs_offsetof(cux_ipc_md_config_t, cache_max_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"CACHE_MAX_IDLE", "10s",
     "A mapping no operation has used for longer than this is closed at this process's next cuda_ipc\n"
     "operation. A mapping keeps the peer's buffer allocated after the peer frees it; this bounds how long.\n"
     "'inf' keeps unused mappings until the bounds above close them.",
     ucs_offsetof(cux_ipc_md_config_t, cache_max_idle), UCS_CONFIG_TYPE_TIME_UNITS},

    {"PEER_PROOF", "auto",
     "How a peer proves that its address and the keys it sends are its own, before any of its memory is\n"
     "mapped. Both ways read the identity and keys back from the peer's memory (process_vm_readv) where the\n"
     "OS allows it: the same user, and a ptrace policy that lets this process trace the peer (Yama's\n"
     "ptrace_scope=1 allows only descendants; root may always).\n"
     " auto   - where the OS does not allow it, legacy IPC handles (cuMemAlloc memory) are still imported,\n"
     "          bound to the peer by the exporting pid the driver writes into them; VMM memory is not.\n"
     " memory - peers whose memory cannot be read are not reachable over cuda_ipc.",
     ucs_offsetof(cux_ipc_md_config_t, peer_proof), UCS_CONFIG_TYPE_ENUM(cux_ipc_proof_mode_names)},

    {"PROOF_TIMEOUT", "1s",
     "How long a read of a peer's memory for a proof may take before the peer counts as unreachable (its\n"
     "address) or its key as refused. A peer can make such a read block (a page it never serves); the\n"
     "mapping that needed it fails with one log line, and other mappings go on. The reads are made by a\n"
     "reader thread, which costs a first mapping some 36 us more on an H200 host (cached mappings read\n"
     "nothing); 'inf' reads on the calling thread, without a bound, for hosts whose local processes are\n"
     "trusted; at least 1ms. Process-wide: the last memory domain opened sets it.",
     ucs_offsetof(cux_ipc_md_config_t, proof_timeout), UCS_CONFIG_TYPE_TIME_UNITS},

    {"MAX_EXPORTED_FDS", "auto",
     "Most descriptors of cuMemCreate allocations and memory pools kept open for peers at once (one per\n"
     "allocation or pool with a live registration; UCP 1.16+ keeps registrations). Beyond it, such memory is\n"
     "not shared over cuda_ipc (its keys say so, one warning line) until registrations end. 'auto': a quarter\n"
     "of the process's descriptor limit (RLIMIT_NOFILE) when the memory domain opens.",
     ucs_offsetof(cux_ipc_md_config_t, max_exported_fds), UCS_CONFIG_TYPE_ULUNITS},

    {"EXPORTS_KEPT", "16",
     "Descriptors of cuMemCreate allocations and memory pools kept open after their last registration ends (at\n"
     "most 64), so that registering the same memory again exports nothing: UCP before 1.16 registers per\n"
     "message. Each deregistration closes those whose allocation the driver no longer has (an open one keeps its\n"
     "memory alive); 0 closes each when its last registration ends.",
     ucs_offsetof(cux_ipc_md_config_t, exports_kept), UCS_CONFIG_TYPE_UINT},

    /* Containers without a shared PID namespace: see cux_ipc_channel.h */
    {"SOCKET_DIR", "",
     "A directory that this process and its peers in other PID namespaces (containers without a shared PID\n"
     "namespace) all mount, each wherever it likes: every process listens there on a UNIX socket of its own,\n"
     "and a peer of another namespace proves itself and its keys over it, since its pid, /proc and memory are\n"
     "out of reach. Both sides need it, run as the same user, and must be able to write the directory; its\n"
     "permissions decide who else may connect. Empty: such peers are not reachable over cuda_ipc.",
     ucs_offsetof(cux_ipc_md_config_t, socket_dir), UCS_CONFIG_TYPE_STRING},

    /* UCX's name and default (1.18+); what ours proves about such peers is docs/threat-model.md */
    {"ENABLE_MNNVL", "try",
     "Reach processes on other hosts of this multi-node NVLink domain (GB200/GB300 NVL72, GH200 NVL32) over\n"
     "cuda_ipc, through fabric handles. On only where an IMEX channel is present and NVML says every GPU of\n"
     "this process finished its fabric registration, in one cluster and clique; a peer is reached only if its\n"
     "GPUs are in the same. Such a peer proves nothing the kernel backs: what it is trusted with is what the\n"
     "IMEX channel allows any holder of a fabric handle (README, \"Multi-node NVLink\").\n"
     " try - on where possible, otherwise processes of this host only.\n"
     " y   - the same, with an error line where it is not possible.\n"
     " n   - processes of this host only; NVML is never asked.",
     ucs_offsetof(cux_ipc_md_config_t, enable_mnnvl), UCS_CONFIG_TYPE_TERNARY},

    {NULL}
};

static void cux_ipc_md_caps(uct_md_h md, cux_md_caps_t *caps)
{
    /* INVALIDATE: UCP selects rendezvous lanes for endpoints with peer error handling only from memory domains
     * that can invalidate (see cux_ipc_mem_dereg); UCX's own cuda_ipc declares it too. */
    caps->flags            = UCT_MD_FLAG_REG | UCT_MD_FLAG_NEED_RKEY | UCT_MD_FLAG_INVALIDATE |
                             CUX_UCX_IPC_MD_FLAGS;
    caps->reg_mem_types    = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    /* UCP's rendezvous registers only through memory domains it may cache (1.16+); see mkey_pack */
    caps->cache_mem_types  = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    caps->access_mem_types = UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    caps->max_reg          = SIZE_MAX;
    caps->rkey_packed_size = sizeof(cux_ipc_rkey_t);
    caps->reg_cost         = ucs_linear_func_make(2e-6, 0);
}

CUX_MD_QUERY_FUNC(cux_ipc_md_query, cux_ipc_md_caps)

unsigned cux_ipc_md_num_fd_exports(uct_md_h tl_md)
{
    return cux_ipc_fd_exports_count(&ucs_derived_of(tl_md, cux_ipc_md_t)->fd_exports);
}

static ucs_status_t cux_ipc_mem_reg_impl(uct_md_h tl_md, void *address, size_t length, unsigned flags,
                                         uct_mem_h *memh_p)
{
    cux_ipc_md_t *md = ucs_derived_of(tl_md, cux_ipc_md_t);
    cux_ipc_memh_t *memh;
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_ipc registration");
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ptr_query(address, &info);
    if (status != UCS_OK) {
        return status;
    }
    if (info.mem_type != UCS_MEMORY_TYPE_CUDA) {
        uct_md_log_mem_reg_error(flags, "cuda_ipc: %p is %s memory, only cuda device memory is exported",
                                 address, ucs_memory_type_names[info.mem_type]);
        return UCS_ERR_UNSUPPORTED;
    }
    cux_sync_memops(address, info.device);

    memh = ucs_calloc(1, sizeof(*memh), "cux_ipc_memh");
    if (memh == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    status = cux_ipc_memh_export(md, &info, memh);
    if (status != UCS_OK) {
        ucs_free(memh);
        return status;
    }
    memh->address = address;
    memh->length  = length;
    *memh_p = memh;
    return UCS_OK;
}

CUX_MEM_REG_FUNC(cux_ipc_mem_reg, cux_ipc_mem_reg_impl)

/*
 * UCP invalidates the send buffer of a rendezvous whose endpoint failed, before it hands the buffer back to
 * the application: in that protocol the peer only reads the buffer through its mapping (get), so once we
 * forget the registration nothing the peer does can change the application's data, and the invalidation is
 * complete at once. (A peer's mapping itself cannot be revoked: a peer that is still alive may go on reading
 * until it closes it. UCX's own module declares invalidation and never calls the completion.)
 */
static ucs_status_t cux_ipc_mem_dereg(uct_md_h md, const uct_md_mem_dereg_params_t *params)
{
    unsigned flags         = UCT_MD_MEM_DEREG_FIELD_VALUE(params, flags, FIELD_FLAGS, 0);
    uct_completion_t *comp = UCT_MD_MEM_DEREG_FIELD_VALUE(params, comp, FIELD_COMPLETION, NULL);
    cux_ipc_memh_t *memh;

    UCT_MD_MEM_DEREG_CHECK_PARAMS(params, 1);
    if ((flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) && (comp == NULL)) {
        ucs_error("cuda_ipc: invalidation without a completion");
        return UCS_ERR_INVALID_PARAM;
    }
    memh = params->memh;
    cux_ipc_memh_forget(ucs_derived_of(md, cux_ipc_md_t), memh);
    ucs_free(memh);
    if (flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) {
        uct_invoke_completion(comp, UCS_OK);
    }
    return UCS_OK;
}

CUX_MKEY_PACK_FUNC(cux_ipc_mkey_pack, cux_ipc_memh_pack)

static void cux_ipc_md_close(uct_md_h md)
{
    cux_ipc_import_detach();
    if (ucs_derived_of(md, cux_ipc_md_t)->listening) {
        cux_ipc_channel_unlisten();
    }
    cux_ipc_fd_exports_cleanup(&ucs_derived_of(md, cux_ipc_md_t)->fd_exports);
    ucs_spinlock_destroy(&ucs_derived_of(md, cux_ipc_md_t)->memo_lock);
    ucs_free(md);
}

static uct_md_ops_t cux_ipc_md_ops = {
    .close              = cux_ipc_md_close,
    .query              = cux_ipc_md_query,
    .mem_alloc          = (uct_md_mem_alloc_func_t)ucs_empty_function_return_unsupported,
    .mem_free           = (uct_md_mem_free_func_t)ucs_empty_function_return_unsupported,
    .mem_advise         = (uct_md_mem_advise_func_t)ucs_empty_function_return_unsupported,
    .mem_reg            = cux_ipc_mem_reg,
    .mem_dereg          = cux_ipc_mem_dereg,
    .mem_query          = (uct_md_mem_query_func_t)ucs_empty_function_return_unsupported,
    .mkey_pack          = cux_ipc_mkey_pack,
    .detect_memory_type = (uct_md_detect_memory_type_func_t)ucs_empty_function_return_unsupported,
    CUX_MD_OPS_VERSION_FIELDS(cux_ipc_device)
};

static ucs_status_t cux_ipc_md_open(uct_component_t *component, const char *md_name,
                                    const uct_md_config_t *uct_config, uct_md_h *md_p)
{
    const cux_ipc_md_config_t *config = ucs_derived_of(uct_config, cux_ipc_md_config_t);
    unsigned long max_regions;
    static int timeout_said;
    double proof_timeout;
    cux_ipc_md_t *md;
    ucs_status_t status;

    status = cux_md_open_check(md_name);
    if (status != UCS_OK) {
        return status;
    }

    md = ucs_calloc(1, sizeof(*md), "cux_ipc_md");
    if (md == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    md->super.ops       = &cux_ipc_md_ops;
    md->super.component = &cux_ipc_component;
    md->system_id       = ucs_get_system_id();
    md->pid             = getpid();
    md->pid_ns          = cux_ipc_pid_namespace();
    md->proof           = (cux_ipc_proof_mode_t)config->peer_proof;
    ucs_spinlock_init(&md->memo_lock, 0);
    cux_ipc_fd_exports_init(&md->fd_exports, config->max_exported_fds,
                            ucs_min(config->exports_kept, CUX_IPC_FD_EXPORT_TRIM_MAX));

    max_regions = config->cache_max_regions;
    if (max_regions == 0) {
        /* every mapping would be closed after each use and reopened (about a millisecond) at the next */
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "CACHE_MAX_REGIONS=0 would close every mapping after each use: "
                 "using 1 (UCX_" CUX_IPC_CONFIG_PREFIX "CACHE=n is the way to keep none)");
        max_regions = 1;
    }
    /* Process-wide: the last memory domain opened sets the bounds, the proofs' deadline and the NVLink domain. */
    proof_timeout = ucs_time_to_sec(config->proof_timeout);
    if ((proof_timeout < CUX_IPC_PROOF_TIMEOUT_MIN) && !__atomic_exchange_n(&timeout_said, 1, __ATOMIC_RELAXED)) {
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "PROOF_TIMEOUT=%g s would give a peer no time to answer (and the "
                 "kernel takes 0 for no bound): using %g s", proof_timeout, CUX_IPC_PROOF_TIMEOUT_MIN);
    }
    proof_timeout = ucs_max(proof_timeout, CUX_IPC_PROOF_TIMEOUT_MIN);
    cux_ipc_peer_read_set_timeout(proof_timeout);
    cux_ipc_domain_decide(config->enable_mnnvl);
    md->listening = (config->socket_dir[0] != '\0');
    /* logged; the domain works for peers of our namespace */
    (void)cux_ipc_channel_listen(config->socket_dir, cux_ipc_proof_answer);
    cux_ipc_import_attach(config->cache_enable, max_regions, config->cache_max_size, config->cache_max_idle);
    *md_p = &md->super;
    return UCS_OK;
}

CUX_RKEY_UNPACK_FUNC(cux_ipc_rkey_unpack, cux_ipc_import_rkey_unpack)

uct_component_t cux_ipc_component = {
    .query_md_resources = cux_query_md_resources,
    .md_open            = cux_ipc_md_open,
    .cm_open            = (uct_component_cm_open_func_t)ucs_empty_function_return_unsupported,
    .rkey_unpack        = cux_ipc_rkey_unpack,
    .rkey_ptr           = cux_ipc_import_rkey_ptr,
    .rkey_release       = cux_ipc_import_rkey_release,
    .name               = CUX_IPC_COMPONENT_NAME,
    .md_config          = {
        .name           = "CUDA IPC memory domain",
        .prefix         = CUX_IPC_CONFIG_PREFIX,
        .table          = cux_ipc_md_config_table,
        .size           = sizeof(cux_ipc_md_config_t),
    },
    .cm_config          = UCS_CONFIG_EMPTY_GLOBAL_LIST_ENTRY,
    .tl_list            = UCT_COMPONENT_TL_LIST_INITIALIZER(&cux_ipc_component),
    .flags              = 0,
    .md_vfs_init        = (uct_component_md_vfs_init_func_t)ucs_empty_function,
    CUX_COMPONENT_VERSION_FIELDS
};
