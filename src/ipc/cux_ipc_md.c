/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc memory domain: see cux_ipc_md.h.
 */
#include "cux_ipc_md.h"
#include "cux_ipc_device.h"
#include "cux_introspection.h"
#include "cux_ipc_import.h"
#include "cux_ipc_key_table.h"
#include "cux_ipc_peer_read.h"
#include "cux_ipc_channel.h"
#include "cux_ipc_fabric.h"
#include "base/cux_iface.h"
#include "base/cux_md.h"
#include "base/cux_ptr.h"
#include "base/cux_sync_memops.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
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
     "trusted. Process-wide: the last memory domain opened sets it.",
     ucs_offsetof(cux_ipc_md_config_t, proof_timeout), UCS_CONFIG_TYPE_TIME_UNITS},

    {"MAX_EXPORTED_FDS", "auto",
     "Most descriptors of cuMemCreate allocations and memory pools kept open for peers at once (one per\n"
     "allocation or pool with a live registration; UCP 1.16+ keeps registrations). Beyond it, such memory is\n"
     "not shared over cuda_ipc (its keys say so, one warning line) until registrations end. 'auto': a quarter\n"
     "of the process's descriptor limit (RLIMIT_NOFILE) when the memory domain opens.",
     ucs_offsetof(cux_ipc_md_config_t, max_exported_fds), UCS_CONFIG_TYPE_ULUNITS},

    /* Containers without a shared PID namespace: see cux_ipc_channel.h */
    {"SOCKET_DIR", "",
     "A directory that this process and its peers in other PID namespaces (containers without a shared PID\n"
     "namespace) all mount, each wherever it likes: every process listens there on a UNIX socket of its own,\n"
     "and a peer of another namespace proves itself and its keys over it, since its pid, /proc and memory are\n"
     "out of reach. Both sides need it, run as the same user, and must be able to write the directory; its\n"
     "permissions decide who else may connect. Empty: such peers are not reachable over cuda_ipc.",
     ucs_offsetof(cux_ipc_md_config_t, socket_dir), UCS_CONFIG_TYPE_STRING},

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

/* The key goes into the table of keys out, where importers read it back (cux_ipc_key_table.h): the registration's
 * own slot. The secret depends only on the allocation, so a key from the memo keeps its own. A key the table
 * cannot take tells the peer to take another path. */
static void cux_ipc_memh_seal(cux_ipc_memh_t *memh)
{
    if (cux_ipc_key_table_add(&memh->key) != UCS_OK) {
        memh->key.kind   = CUX_IPC_KIND_NONE;
        memh->key.record = UINT64_MAX;
        cux_ipc_rkey_seal(&memh->key);
    }
}

/* A state's allocation is gone: its key is withdrawn first, so that no importer proves it any more, then its
 * descriptor reference is given back and its spans withdrawn. The state stays, since another thread may be
 * looking at its spans, until the registration ends. */
static void cux_ipc_memh_withdraw(cux_ipc_md_t *md, cux_ipc_memh_t *state)
{
    cux_ipc_span_t *span;

    cux_ipc_key_table_remove(&state->key);
    cux_ipc_fd_export_put(&md->fd_exports, state->fdx);
    state->fdx = NULL;
    for (span = state->spans; span != NULL; span = span->next) {
        if (!span->withdrawn) {
            cux_ipc_span_withdraw(&md->fd_exports, span);
        }
    }
    __atomic_store_n(&state->withdrawn, 1, __ATOMIC_RELEASE);
}

/* One state's end: withdrawn if it was not, its spans freed. */
static void cux_ipc_memh_release_state(cux_ipc_md_t *md, cux_ipc_memh_t *state)
{
    cux_ipc_span_t *span;

    if (!state->withdrawn) {
        cux_ipc_memh_withdraw(md, state);
    }
    explicit_bzero(&state->key, sizeof(state->key));
    while ((span = state->spans) != NULL) {
        state->spans = span->next;
        cux_ipc_span_release(&md->fd_exports, span);
    }
}

/* A registration's end: its current state and every state it served before. */
static void cux_ipc_memh_forget(cux_ipc_md_t *md, cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *served;

    cux_ipc_memh_release_state(md, memh);
    while ((served = memh->served) != NULL) {
        memh->served = served->served;
        cux_ipc_memh_release_state(md, served);
        ucs_free(served);
    }
}

/* What the driver says an allocation can be exported as. */
typedef struct {
    int          legacy;   /* a legacy IPC handle (cuMemAlloc memory) */
    int          fd;       /* a POSIX descriptor: of the allocation (cuMemCreate), or of its pool */
    int          fabric;   /* a fabric handle (cux_ipc_fabric.h) */
    CUmemoryPool pool;     /* the allocation's memory pool, NULL if none */
} cux_ipc_exportable_t;

/*
 * Asked instead of provoked by export calls that fail (each failure is an error in compute-sanitizer's report
 * of the application). Legacy and VMM exports are both tried when the driver cannot say. The attributes are
 * booleans, bit masks of driver-chosen width and a handle: zeroed 64-bit values hold each.
 */
static void cux_ipc_export_kinds(const cux_ptr_info_t *info, cux_ipc_exportable_t *can)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                   CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                   CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
    uint64_t legacy = 0, handle_types = 0, pool = 0;
    void *data[]    = {&legacy, &handle_types, &pool};

    if (CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuPointerGetAttributes, 3, attrs, data,
                     (CUdeviceptr)(uintptr_t)info->base) != UCS_OK) {
        *can = (cux_ipc_exportable_t){.legacy = 1, .fd = 1, .fabric = 0, .pool = NULL};
        return;
    }
    can->legacy = (legacy != 0);
    can->fd     = !!(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    can->fabric = !!(handle_types & CU_MEM_HANDLE_TYPE_FABRIC);
    can->pool   = (CUmemoryPool)(uintptr_t)pool;
}

/* Pool memory: the pool's descriptor and the allocation's place in the pool. The pointer is exported at the
 * allocation's start, where the pool made it. */
static ucs_status_t cux_ipc_memh_export_pool(cux_ipc_md_t *md, const cux_ptr_info_t *info, CUmemoryPool pool,
                                             cux_ipc_memh_t *memh)
{
    ucs_status_t status;

    if (cux_drv.cuMemPoolExportPointer == NULL) {
        return UCS_ERR_UNSUPPORTED;
    }
    status = cux_ipc_fd_export_pool(&md->fd_exports, pool, &memh->fdx);
    if (status != UCS_OK) {
        return status;
    }
    status = CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuMemPoolExportPointer, &memh->key.pool_ptr,
                          (CUdeviceptr)(uintptr_t)info->base);
    if (status != UCS_OK) {
        cux_ipc_fd_export_put(&md->fd_exports, memh->fdx);
        memh->fdx = NULL;
        return status;
    }
    memh->key.export_fd = memh->fdx->fd;
    return UCS_OK;
}

static cux_ipc_memh_t *cux_ipc_memo_slot(cux_ipc_md_t *md, const void *base)
{
    return &md->memo[((uintptr_t)base >> 12) % CUX_IPC_KEY_MEMO_SIZE];
}

/* A key made earlier for this very allocation, copied into memh; 0 if there is none. */
static int cux_ipc_memo_find(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *slot = cux_ipc_memo_slot(md, info->base);
    int found;

    ucs_spin_lock(&md->memo_lock);
    found = (slot->key.magic != 0) && (slot->key.base == (uintptr_t)info->base) &&
            (slot->key.length == info->length) && (slot->key.buffer_id == info->buffer_id);
    if (found) {
        *memh = *slot;
    }
    ucs_spin_unlock(&md->memo_lock);
    return found;
}

static void cux_ipc_memo_store(cux_ipc_md_t *md, const cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *slot = cux_ipc_memo_slot(md, (void*)(uintptr_t)memh->key.base);

    ucs_spin_lock(&md->memo_lock);
    *slot = *memh;
    ucs_spin_unlock(&md->memo_lock);
}

/* Fill memh->key for the allocation info describes: from the memo, or by exporting a handle (a key of kind
 * NONE when the allocation cannot be shared). */
static ucs_status_t cux_ipc_memh_export(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh)
{
    cux_ipc_exportable_t can;
    cux_ctx_guard_t guard;
    ucs_status_t status;

    if (cux_ipc_memo_find(md, info, memh)) {
        memh->spans     = NULL; /* the memo keeps keys without descriptors: no spans, nothing served */
        memh->served    = NULL;
        memh->withdrawn = 0;
        cux_ipc_memh_seal(memh); /* the memo's key, kept here now */
        return UCS_OK;
    }

    status = cux_device_ctx_enter(info->device, &guard);
    if (status != UCS_OK) {
        return status;
    }
    cux_ipc_export_kinds(info, &can);
    memh->key.export_fd = -1;
    if (can.pool != NULL) {
        /* Pool memory: shareable if its pool was created with the descriptor handle type (not the default
         * pool's). */
        memh->key.kind = CUX_IPC_KIND_POOL_FD;
        status = !can.fd ? UCS_ERR_UNSUPPORTED : cux_ipc_memh_export_pool(md, info, can.pool, memh);
        if (!can.fd && can.fabric) {
            cux_ipc_fabric_pool_said();
        }
    } else {
        memh->key.kind = CUX_IPC_KIND_LEGACY;
        status = !can.legacy ? UCS_ERR_UNSUPPORTED :
                 CUX_DRV_CALL(UCS_LOG_LEVEL_DEBUG, cuIpcGetMemHandle, &memh->key.handle,
                              (CUdeviceptr)(uintptr_t)info->base);
        if ((status != UCS_OK) && (can.fd || !can.fabric)) {
            /* No legacy handle: cuMemCreate memory, exportable as a file descriptor if it was created so. */
            status = !can.fd ? UCS_ERR_UNSUPPORTED : cux_ipc_fd_export_vmm(&md->fd_exports, info, &memh->fdx);
            memh->key.kind      = CUX_IPC_KIND_VMM_FD;
            memh->key.export_fd = (status == UCS_OK) ? memh->fdx->fd : -1;
        } else if (status != UCS_OK) {
            /* cuMemCreate memory with a fabric handle and no descriptor: nothing else carries it */
            memh->key.kind = CUX_IPC_KIND_VMM_FABRIC;
            status         = cux_ipc_fabric_export((uintptr_t)info->base, &memh->key.fabric);
        }
    }
    cux_ctx_leave(&guard);
    if (status != UCS_OK) {
        ucs_debug("cuda_ipc: allocation %p+%zu (%s) has no legacy IPC handle, exportable file descriptor or "
                  "fabric handle (%s): its key tells peers to take another path", info->base, info->length,
                  (can.pool != NULL) ? "from a memory pool" : "no memory pool", ucs_status_string(status));
        memh->key.kind      = CUX_IPC_KIND_NONE;
        memh->key.export_fd = -1;
        memset(&memh->key.handle, 0, sizeof(memh->key.handle));
    }

    memh->device         = info->device;
    memh->key.system_id  = md->system_id;
    memh->key.pid        = md->pid;
    memh->key.pid_ns     = md->pid_ns;
    memh->key.dev_uuid   = cux_device_get(info->device)->uuid;
    memh->key.base       = (uintptr_t)info->base;
    memh->key.length     = info->length;
    memh->key.buffer_id  = info->buffer_id;
    memh->key.secret     = cux_ipc_proof_key_secret(&memh->key);
    cux_ipc_memh_seal(memh);
    /* A VMM or pool key holds a reference to a descriptor. A NONE key is remembered too, so that a buffer
     * that cannot be shared is asked about once, not on every rendezvous. */
    if (memh->fdx == NULL) {
        cux_ipc_memo_store(md, memh);
    }
    return UCS_OK;
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

/* A key of kind NONE in key's place: the peer takes another path for the buffer. */
static void cux_ipc_key_pack_none(const cux_ipc_rkey_t *key, void *rkey_buffer)
{
    cux_ipc_rkey_t none = *key;

    none.kind      = CUX_IPC_KIND_NONE;
    none.export_fd = -1;
    none.secret    = 0;
    memset(&none.handle, 0, sizeof(none.handle));
    cux_ipc_rkey_seal(&none);
    memcpy(rkey_buffer, &none, sizeof(none));
}

/*
 * Packs memh's key for the buffer [start, start + length), with memo_lock held, which it releases. A buffer
 * that runs past the key's allocation (PyTorch's expandable segments map several allocations one after another
 * into one range) gets a span's key (cux_ipc_span.h): one of the registration's spans that covers it and whose
 * pieces are all still the allocations mapped there, else a new one. A span whose piece was replaced is
 * withdrawn; the others stay as long as the registration, since a peer may hold their keys. Where there can be
 * no span (not cuMemCreate memory, a piece that cannot be exported), a key of kind NONE: the peer then takes
 * another path instead of reaching past the one allocation it could map.
 */
static void cux_ipc_memh_pack_unlock(cux_ipc_md_t *md, cux_ipc_memh_t *memh, const void *start, size_t length,
                                     void *rkey_buffer)
{
    cux_ipc_span_t *span, *newest;
    cux_ipc_rkey_t first;

    if ((length == 0) || cux_ipc_rkey_covers(&memh->key, (uintptr_t)start, length)) {
        memcpy(rkey_buffer, &memh->key, sizeof(memh->key));
        ucs_spin_unlock(&md->memo_lock);
        return;
    } else if (memh->key.kind != CUX_IPC_KIND_VMM_FD) {
        ucs_debug("cuda_ipc: %p+%zu runs past its allocation 0x%" PRIx64 "+%" PRIu64 ", which is not cuMemCreate "
                  "memory: another path carries it", start, length, memh->key.base, memh->key.length);
        cux_ipc_key_pack_none(&memh->key, rkey_buffer);
        ucs_spin_unlock(&md->memo_lock);
        return;
    }

    /* Spans are checked and made outside the lock (driver calls). They are freed only with the registration,
     * and only ever added at the head: the list read here stays valid. */
    first  = memh->key;
    newest = memh->spans;
    ucs_spin_unlock(&md->memo_lock);
    for (span = newest; span != NULL; span = span->next) {
        if (__atomic_load_n(&span->withdrawn, __ATOMIC_ACQUIRE) ||
            !cux_ipc_rkey_covers(&span->key, (uintptr_t)start, length)) {
            continue;
        }
        if (cux_ipc_span_is_current(span)) {
            memcpy(rkey_buffer, &span->key, sizeof(span->key));
            return;
        }
        ucs_spin_lock(&md->memo_lock);
        if (!span->withdrawn) {
            cux_ipc_span_withdraw(&md->fd_exports, span);
        }
        ucs_spin_unlock(&md->memo_lock);
    }

    if (cux_ipc_span_make(&md->fd_exports, &first, memh->device, start, length, &span) != UCS_OK) {
        cux_ipc_key_pack_none(&first, rkey_buffer);
        return;
    }
    ucs_spin_lock(&md->memo_lock);
    if (memcmp(&memh->key, &first, sizeof(first))) {
        /* renewed meanwhile: the span is of another allocation */
        ucs_spin_unlock(&md->memo_lock);
        cux_ipc_span_release(&md->fd_exports, span);
        cux_ipc_key_pack_none(&first, rkey_buffer);
        return;
    }
    span->next  = memh->spans;
    memh->spans = span;
    memcpy(rkey_buffer, &span->key, sizeof(span->key));
    ucs_spin_unlock(&md->memo_lock);
}

/*
 * UCP 1.16 and later cache these registrations (cache_mem_types: its rendezvous registers only through memory
 * domains it may cache) and learn of freed GPU memory only from allocation hooks, which a stock UCX lacks. A
 * cached registration can so outlive its allocation while a new one takes the address: before a key goes to
 * a peer, it is checked against the allocation at the buffer now, and made again if that is another one.
 */
/* Whether the key describes the allocation info describes. */
static int cux_ipc_key_is_of(const cux_ipc_rkey_t *key, const cux_ptr_info_t *info)
{
    return (key->base == (uintptr_t)info->base) && (key->length == info->length) &&
           (key->buffer_id == info->buffer_id);
}

/* Do the allocations of a key and of the buffer's allocation share bytes? (Then, unless it is that allocation,
 * the key's allocation was freed and the range holds another now.) */
static int cux_ipc_key_overlaps(const cux_ipc_rkey_t *key, const cux_ptr_info_t *info)
{
    return (key->base < (uintptr_t)info->base + info->length) && ((uintptr_t)info->base < key->base + key->length);
}

static void cux_ipc_memh_swap_state(cux_ipc_memh_t *a, cux_ipc_memh_t *b)
{
    cux_ipc_memh_t t = *a;

    a->key    = b->key;
    a->device = b->device;
    a->fdx    = b->fdx;
    a->spans  = b->spans;
    b->key    = t.key;
    b->device = t.device;
    b->fdx    = t.fdx;
    b->spans  = t.spans;
}

/* Withdraws the states memh served whose allocation the buffer's allocation overlaps: freed, and the range holds
 * another allocation now. memo_lock held. */
static void cux_ipc_memh_withdraw_replaced(cux_ipc_md_t *md, cux_ipc_memh_t *memh, const cux_ptr_info_t *info)
{
    cux_ipc_memh_t *state;

    for (state = memh->served; state != NULL; state = state->served) {
        if (!state->withdrawn && cux_ipc_key_overlaps(&state->key, info)) {
            cux_ipc_memh_withdraw(md, state);
        }
    }
}

/* Makes memh's current state the one of the allocation info describes, if it is or was served: whether it is now.
 * memo_lock held. */
static int cux_ipc_memh_switch(cux_ipc_md_t *md, cux_ipc_memh_t *memh, const cux_ptr_info_t *info)
{
    cux_ipc_memh_t *state;

    if (cux_ipc_key_is_of(&memh->key, info)) {
        return 1;
    }
    for (state = memh->served; state != NULL; state = state->served) {
        if (!state->withdrawn && cux_ipc_key_is_of(&state->key, info)) {
            cux_ipc_memh_swap_state(memh, state);
            cux_ipc_memh_withdraw_replaced(md, memh, info);
            return 1;
        }
    }
    return 0;
}

/* Keeps memh's current state in node, among the served, and makes `made` (just exported for info's allocation)
 * the current one. memo_lock held. */
static void cux_ipc_memh_install(cux_ipc_md_t *md, cux_ipc_memh_t *memh, const cux_ptr_info_t *info,
                                 cux_ipc_memh_t *made, cux_ipc_memh_t *node)
{
    *node        = *memh;
    node->served = memh->served;
    memh->served = node;
    memh->key    = made->key; /* with its slot in the table */
    memh->device = made->device;
    memh->fdx    = made->fdx;
    memh->spans  = NULL;
    cux_ipc_memh_withdraw_replaced(md, memh, info);
}

static ucs_status_t cux_ipc_mkey_pack_impl(uct_md_h tl_md, uct_mem_h tl_memh, const void *address, size_t length,
                                           void *rkey_buffer)
{
    cux_ipc_md_t *md       = ucs_derived_of(tl_md, cux_ipc_md_t);
    cux_ipc_memh_t *memh   = tl_memh;
    cux_ipc_memh_t made    = {}, *node;
    cux_ptr_info_t info;
    ucs_status_t status;

    status = cux_driver_check_fork("cuda_ipc key packing"); /* the key names the parent */
    if (status != UCS_OK) {
        return status;
    }
    if (address == NULL) {
        if (!CUX_UCX_CACHES_IPC_REGISTRATIONS) { /* UCP 1.13 packs a registration it has just made */
            ucs_spin_lock(&md->memo_lock);
            cux_ipc_memh_pack_unlock(md, memh, memh->address, memh->length, rkey_buffer);
            return UCS_OK;
        }
        address = memh->address; /* UCP 1.14 and 1.15 keep registrations but do not say which buffer is sent */
        length  = memh->length;
    }
    status = cux_ptr_query(address, &info);
    if (status != UCS_OK) {
        return status;
    }
    if (info.mem_type != UCS_MEMORY_TYPE_CUDA) {
        ucs_error("cuda_ipc: %p is %s memory now, not the GPU memory registered there", address,
                  ucs_memory_type_names[info.mem_type]);
        return UCS_ERR_INVALID_ADDR;
    }

    /* memh may be UCP's cached registration, packed by several workers at once: read and swap it locked */
    ucs_spin_lock(&md->memo_lock);
    if (cux_ipc_memh_switch(md, memh, &info)) {
        cux_ipc_memh_pack_unlock(md, memh, address, length, rkey_buffer);
        return UCS_OK;
    }
    ucs_spin_unlock(&md->memo_lock);

    ucs_debug("cuda_ipc: registration of %p+%zu (id %llu) serves %p in %p+%zu (id %llu) now",
              (void*)memh->key.base, memh->key.length, (unsigned long long)memh->key.buffer_id, address,
              info.base, info.length, info.buffer_id);
    node   = ucs_malloc(sizeof(*node), "cux_ipc_memh_served");
    status = (node == NULL) ? UCS_ERR_NO_MEMORY : cux_ipc_memh_export(md, &info, &made);
    if (status != UCS_OK) {
        ucs_free(node);
        return status;
    }
    ucs_spin_lock(&md->memo_lock);
    if (cux_ipc_memh_switch(md, memh, &info)) { /* another thread made it meanwhile */
        cux_ipc_memh_pack_unlock(md, memh, address, length, rkey_buffer);
        cux_ipc_memh_release_state(md, &made);
        ucs_free(node);
        return UCS_OK;
    }
    cux_ipc_memh_install(md, memh, &info, &made, node);
    cux_ipc_memh_pack_unlock(md, memh, address, length, rkey_buffer);
    return UCS_OK;
}

CUX_MKEY_PACK_FUNC(cux_ipc_mkey_pack, cux_ipc_mkey_pack_impl)

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
    cux_ipc_fd_exports_init(&md->fd_exports, config->max_exported_fds);

    max_regions = config->cache_max_regions;
    if (max_regions == 0) {
        /* every mapping would be closed after each use and reopened (about a millisecond) at the next */
        ucs_warn("UCX_" CUX_IPC_CONFIG_PREFIX "CACHE_MAX_REGIONS=0 would close every mapping after each use: "
                 "using 1 (UCX_" CUX_IPC_CONFIG_PREFIX "CACHE=n is the way to keep none)");
        max_regions = 1;
    }
    /* Process-wide: the last memory domain opened sets the bounds and the proofs' deadline. */
    cux_ipc_peer_read_set_timeout(ucs_time_to_sec(config->proof_timeout));
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
