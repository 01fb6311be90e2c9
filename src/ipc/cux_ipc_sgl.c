/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scatter-gather zero-copy put and get on cuda_ipc. A list is one operation: its pieces (an element, or one repeat
 * of it) are merged where they continue each other in the same two allocations and queued as copies
 * (cux_copy_batch_add_copy), and one descriptor behind its last copy on each queue it used completes it, so a
 * list of adjacent KV-cache blocks costs one copy and one event, and a list of scattered ones one kernel launch per
 * 128 copies. Elements that share a local allocation (or memory handle) and a remote key form a run, looked up once:
 * the local side, the device queue and the remote mapping (the cache's hits for all runs in one pass, the cache's
 * lock taken once per 256 runs, then the misses proven and mapped; given back together the same way when the list is
 * done).
 * The whole list is checked and every run's remote allocation proven and mapped before anything is queued (keys,
 * bounds, room in flight, the peer still holding each key), so a refused list has written nothing; a driver
 * failure after some copies went out is reported through the completion. The list itself is compiled for every
 * release (its tests run on all of them); the ops that hand it to UCX exist where UCX has them (1.22+ put, 1.23+
 * get). src/base/cux_profile.h times its stages where the module is built for it.
 */
#include "ipc/cux_ipc_sgl.h"
#include "ipc/cux_ipc_ep.h"
#include "ipc/import/cux_ipc_import.h"
#include "base/cux_profile.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <inttypes.h>
#include <string.h>

/* How many runs (or elements) ahead a pass asks the CPU for the memory it will read: with one allocation per block
 * every run reads its own key, handle and mapping, each a wait for memory if asked for only when needed. */
#define CUX_IPC_SGL_AHEAD 8

/* Runs looked up or given back per hold of the cache's lock: a list of 100,000 allocations lets other threads'
 * lookups in between rather than hold them up for its whole pass. */
#define CUX_IPC_SGL_LOCK_RUNS 256

/* How many times element i goes: counts may be NULL (once each). */
static UCS_F_ALWAYS_INLINE size_t cux_ipc_sgl_reps(const size_t *counts, size_t i)
{
    return (counts != NULL) ? counts[i] : 1;
}

/* The pieces of a list, or 0 with a log line when an element cannot be taken: the checks a single put makes
 * (the key's process, the bounds), once for the list and once per key where elements repeat it. */
static size_t cux_ipc_sgl_pieces(cux_ipc_ep_t *ep, const size_t *lengths, const uint64_t *remote_addrs,
                                 uct_rkey_t const *rkeys, const size_t *counts, const size_t *strides, size_t count,
                                 ucs_status_t *status_p)
{
    size_t pieces = 0, i, reps, span;
    uct_rkey_t checked = 0;
    const cux_ipc_rkey_t *key;

    for (i = 0; i < count; ++i) {
        if (i + CUX_IPC_SGL_AHEAD < count) {
            __builtin_prefetch((const void*)rkeys[i + CUX_IPC_SGL_AHEAD]);
        }
        reps = cux_ipc_sgl_reps(counts, i);
        if ((reps > 1) && (strides == NULL)) {
            ucs_error("cuda_ipc: scatter-gather element %zu repeats %zu times without a stride", i, reps);
            *status_p = UCS_ERR_INVALID_PARAM;
            return 0;
        }
        if ((reps == 0) || (lengths[i] == 0)) {
            continue;
        }
        key = &((const cux_ipc_unpacked_rkey_t*)rkeys[i])->key;
        if ((rkeys[i] != checked) && !cux_ipc_peer_made(&ep->peer, key)) {
            /* another process's key: refused here as a single put would be */
            *status_p = cux_ipc_peer_check_key(&ep->peer, key);
            *status_p = UCS_STATUS_IS_ERR(*status_p) ? *status_p : UCS_ERR_UNREACHABLE;
            return 0;
        }
        checked = rkeys[i];
        if (__builtin_mul_overflow(reps - 1, (strides != NULL) ? strides[i] : 0, &span) ||
            __builtin_add_overflow(span, lengths[i], &span) || __builtin_add_overflow(pieces, reps, &pieces) ||
            !cux_ipc_rkey_covers(key, remote_addrs[i], span)) {
            ucs_error("cuda_ipc: scatter-gather element %zu (0x%" PRIx64 ", %zu bytes, %zu times) is outside the "
                      "remote allocation 0x%" PRIx64 "+%" PRIu64, i, remote_addrs[i], lengths[i], reps,
                      (uint64_t)key->base, (uint64_t)key->length);
            *status_p = UCS_ERR_INVALID_PARAM;
            return 0;
        }
    }
    *status_p = UCS_OK;
    return pieces;
}

/* Elements in a row that share their remote key and local side: one lookup for all of them. */
typedef struct {
    size_t             first;   /* its first element: the run holds the elements up to the next run's first */
    uct_rkey_t         rkey;
    uct_mem_h          memh;    /* the elements' handle; UCT_MEM_HANDLE_NULL: the local side was asked */
    cux_ipc_local_t    local;
    cux_ipc_region_t   *region; /* the remote allocation's mapping on local.device */
    uint64_t           remote_delta; /* its local address minus the remote allocation's base */
    int                owns;    /* this run holds a reference of region (else an earlier run of the same key) */
    cux_stream_queue_t *sq;     /* the local device's queue for the peer's device */
    cux_copy_allocs_t  allocs;  /* of its copies: destination, source */
} cux_ipc_sgl_run_t;

/* A list's runs, kept from its lookups until the last queue it used completes it: its mappings go back then. */
typedef struct {
    unsigned          queues;   /* descriptors of the list still to complete */
    size_t            count;
    cux_ipc_sgl_run_t run[];
} cux_ipc_sgl_hold_t;

#define CUX_IPC_SGL_ON_STACK 16

/* The runs of a list being built: on the stack while few, else in a hold of the heap. */
typedef struct {
    cux_ipc_sgl_run_t  stack[CUX_IPC_SGL_ON_STACK];
    cux_ipc_sgl_hold_t *heap;
    cux_ipc_sgl_run_t  *run;
    size_t             count, capacity;
} cux_ipc_sgl_runs_t;

/* Whether element i belongs to run r: the same key, and the same memory handle or, without handles, a buffer in
 * the same local device allocation. */
static UCS_F_ALWAYS_INLINE int cux_ipc_sgl_in_run(const cux_ipc_sgl_run_t *r, void *const *buffers,
                                                  uct_mem_h const *memhs, uct_rkey_t const *rkeys, size_t i)
{
    uintptr_t b;

    if (rkeys[i] != r->rkey) {
        return 0;
    }
    if (memhs != NULL) {
        return memhs[i] == r->memh;
    }
    b = (uintptr_t)buffers[i];
    return (r->local.alloc != 0) && (b >= r->local.alloc) && (b - r->local.alloc < r->local.length);
}

static ucs_status_t cux_ipc_sgl_runs_grow(cux_ipc_sgl_runs_t *runs)
{
    size_t capacity = runs->capacity * 2;
    cux_ipc_sgl_hold_t *heap;

    heap = ucs_realloc(runs->heap, sizeof(*heap) + capacity * sizeof(heap->run[0]), "cux_ipc_sgl_hold");
    if (heap == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    if (runs->heap == NULL) {
        memcpy(heap->run, runs->stack, runs->count * sizeof(heap->run[0]));
    }
    runs->heap     = heap;
    runs->run      = heap->run;
    runs->capacity = capacity;
    return UCS_OK;
}

/* A new run starting at element i: its local side and its queue (its mapping comes in cux_ipc_sgl_map). */
static ucs_status_t cux_ipc_sgl_run_add(cux_ipc_iface_t *iface, cux_ipc_sgl_runs_t *runs, void *const *buffers,
                                        uct_mem_h const *memhs, uct_rkey_t const *rkeys, size_t i)
{
    const cux_ipc_unpacked_rkey_t *ukey = (const cux_ipc_unpacked_rkey_t*)rkeys[i];
    cux_ipc_sgl_run_t *r;
    cux_dev_res_t *res;
    ucs_status_t status;

    if ((runs->count == runs->capacity) && ((status = cux_ipc_sgl_runs_grow(runs)) != UCS_OK)) {
        return status;
    }
    r         = &runs->run[runs->count];
    r->first  = i;
    r->rkey   = rkeys[i];
    r->memh   = (memhs != NULL) ? memhs[i] : UCT_MEM_HANDLE_NULL;
    r->region = NULL;
    r->owns   = 0;
    status    = cux_ipc_ep_local(buffers[i], r->memh, &r->local);
    if (status != UCS_OK) {
        return status;
    }
    status = cux_dev_resources_get(&iface->super.devs, r->local.device, &res);
    if (status != UCS_OK) {
        return status;
    }
    /* one queue per peer device keeps copies to different GPUs apart */
    r->sq = &res->queues[(ukey->peer_device >= 0) ? ukey->peer_device : iface->super.num_devices];
    ++runs->count;
    return UCS_OK;
}

/* The mappings a list's runs hold go back together, one lock of the cache per CUX_IPC_SGL_LOCK_RUNS. */
static void cux_ipc_sgl_runs_put(const cux_ipc_sgl_run_t *run, size_t count)
{
    size_t i;

    cux_ipc_import_batch_begin();
    for (i = 0; i < count; ++i) {
        if ((i > 0) && (i % CUX_IPC_SGL_LOCK_RUNS == 0)) {
            cux_ipc_import_batch_end();
            cux_ipc_import_batch_begin();
        }
        if (i + CUX_IPC_SGL_AHEAD < count) {
            __builtin_prefetch(run[i + CUX_IPC_SGL_AHEAD].region);
        }
        if (run[i].owns) {
            cux_ipc_import_batch_put(run[i].region);
        }
    }
    cux_ipc_import_batch_end();
}

/* Whether run i maps what the run before it mapped (the same key on the same device): it shares that mapping. */
static UCS_F_ALWAYS_INLINE int cux_ipc_sgl_run_shares(const cux_ipc_sgl_run_t *run, size_t i)
{
    return (i > 0) && (run[i - 1].rkey == run[i].rkey) && (run[i - 1].local.device == run[i].local.device);
}

/* Every run's remote mapping: those the cache holds in one pass (a lock per CUX_IPC_SGL_LOCK_RUNS), then the others
 * proven and mapped one by one (a miss takes the peer's proof and the driver's import, outside the cache's lock). */
static ucs_status_t cux_ipc_sgl_map(cux_ipc_ep_t *ep, cux_ipc_sgl_run_t *run, size_t count, int put)
{
    cux_ipc_sgl_run_t *r;
    ucs_status_t status;
    size_t i;
    CUX_PROF_START(t0);

    cux_ipc_import_batch_begin();
    for (i = 0; i < count; ++i) {
        if ((i > 0) && (i % CUX_IPC_SGL_LOCK_RUNS == 0)) {
            cux_ipc_import_batch_end();
            cux_ipc_import_batch_begin();
        }
        if (i + 2 * CUX_IPC_SGL_AHEAD < count) {
            r = &run[i + 2 * CUX_IPC_SGL_AHEAD];
            cux_ipc_import_batch_prefetch((const cux_ipc_unpacked_rkey_t*)r->rkey, r->local.device, 0);
        }
        if (i + CUX_IPC_SGL_AHEAD < count) {
            r = &run[i + CUX_IPC_SGL_AHEAD];
            cux_ipc_import_batch_prefetch((const cux_ipc_unpacked_rkey_t*)r->rkey, r->local.device, 1);
        }
        if (!cux_ipc_sgl_run_shares(run, i)) {
            run[i].region = cux_ipc_import_batch_get_held((const cux_ipc_unpacked_rkey_t*)run[i].rkey,
                                                          run[i].local.device, &ep->peer);
            run[i].owns   = (run[i].region != NULL);
        }
    }
    cux_ipc_import_batch_end();
    CUX_PROF_END(CUX_PROF_SGL_HELD, t0, count);

    for (i = 0, r = run; i < count; ++i, ++r) {
        if (cux_ipc_sgl_run_shares(run, i)) {
            r->region = run[i - 1].region;
        } else if (r->region == NULL) {
            status = cux_ipc_import_get((const cux_ipc_unpacked_rkey_t*)r->rkey, r->local.device, &ep->peer,
                                        &r->region);
            if (status != UCS_OK) {
                return status;
            }
            r->owns = 1;
        }
        r->remote_delta = (uintptr_t)r->region->mapped - ((const cux_ipc_unpacked_rkey_t*)r->rkey)->key.base;
        r->allocs.dst   = put ? (uintptr_t)r->region->mapped : r->local.alloc;
        r->allocs.src   = put ? r->local.alloc : (uintptr_t)r->region->mapped;
    }
    return UCS_OK;
}

/* Every run's local side and remote mapping (proven and mapped on a miss); on failure, what was taken is given
 * back and nothing has been queued. */
static ucs_status_t cux_ipc_sgl_lookup(cux_ipc_iface_t *iface, cux_ipc_ep_t *ep, cux_ipc_sgl_runs_t *runs,
                                       void *const *buffers, const size_t *lengths, uct_mem_h const *memhs,
                                       uct_rkey_t const *rkeys, const size_t *counts, size_t count, int put)
{
    ucs_status_t status = UCS_OK;
    size_t i;
    CUX_PROF_START(t0);

    for (i = 0; (i < count) && (status == UCS_OK); ++i) {
        if (i + CUX_IPC_SGL_AHEAD < count) {
            __builtin_prefetch((const void*)rkeys[i + CUX_IPC_SGL_AHEAD]);
            if (memhs != NULL) {
                __builtin_prefetch(memhs[i + CUX_IPC_SGL_AHEAD]);
            }
        }
        if ((cux_ipc_sgl_reps(counts, i) == 0) || (lengths[i] == 0) ||
            ((runs->count > 0) && cux_ipc_sgl_in_run(&runs->run[runs->count - 1], buffers, memhs, rkeys, i))) {
            continue;
        }
        status = cux_ipc_sgl_run_add(iface, runs, buffers, memhs, rkeys, i);
    }
    CUX_PROF_END(CUX_PROF_SGL_RUNS, t0, runs->count);
    if (status == UCS_OK) {
        status = cux_ipc_sgl_map(ep, runs->run, runs->count, put);
    }
    if (status != UCS_OK) {
        cux_ipc_sgl_runs_put(runs->run, runs->count); /* the runs that own a mapping: those that got one */
    }
    return status;
}

/* Each piece as a copy on its run's queue: the runs are met again in element order, each from its first. */
static void cux_ipc_sgl_queue(const cux_ipc_sgl_runs_t *runs, void *const *buffers, const size_t *lengths,
                              const uint64_t *remote_addrs, const size_t *counts, const size_t *strides, size_t count,
                              int put)
{
    const cux_ipc_sgl_run_t *r = runs->run, *last = runs->run + runs->count - 1;
    size_t i, rep, reps, stride, offset;
    CUdeviceptr local, remote;

    for (i = 0; i < count; ++i) {
        reps = cux_ipc_sgl_reps(counts, i);
        if ((reps == 0) || (lengths[i] == 0)) {
            continue;
        }
        if ((r < last) && (i >= r[1].first)) {
            ++r;
        }
        stride = (strides != NULL) ? strides[i] : 0;
        local  = (CUdeviceptr)(uintptr_t)buffers[i];
        remote = (CUdeviceptr)(remote_addrs[i] + r->remote_delta);
        for (rep = 0, offset = 0; rep < reps; ++rep, offset += stride) {
            cux_copy_batch_add_copy(r->sq, (put ? remote : local) + offset, (put ? local : remote) + offset,
                                    lengths[i], &r->allocs);
        }
    }
}

static void cux_ipc_sgl_release_one(void *arg)
{
    cux_ipc_import_put(arg);
}

static void cux_ipc_sgl_release(void *arg)
{
    cux_ipc_sgl_hold_t *hold = arg;
    CUX_PROF_START(t0);

    if (--hold->queues > 0) {
        return;
    }
    cux_ipc_sgl_runs_put(hold->run, hold->count);
    CUX_PROF_END(CUX_PROF_RELEASE, t0, hold->count);
    ucs_free(hold);
}

/* A list of more than one run keeps its runs in a hold until its last descriptor completes (*hold_p; NULL for a
 * single run, whose descriptor gives back its one mapping). */
static ucs_status_t cux_ipc_sgl_hold(cux_ipc_sgl_runs_t *runs, cux_ipc_sgl_hold_t **hold_p)
{
    cux_ipc_sgl_hold_t *hold = runs->heap;

    if (runs->count == 1) {
        *hold_p = NULL;
        return UCS_OK;
    }
    if (hold == NULL) {
        hold = ucs_malloc(sizeof(*hold) + runs->count * sizeof(hold->run[0]), "cux_ipc_sgl_hold");
        if (hold == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        memcpy(hold->run, runs->run, runs->count * sizeof(hold->run[0]));
        runs->heap = hold;
    }
    hold->count  = runs->count;
    hold->queues = 1; /* the list's own share, until its descriptors are all placed (cux_ipc_sgl_end) */
    *hold_p      = hold;
    return UCS_OK;
}

/* Whether run i's queue came earlier in the list: mostly the previous run's; a few others are remembered. */
#define CUX_IPC_SGL_QUEUES_SEEN 8

static int cux_ipc_sgl_queue_seen(const cux_ipc_sgl_run_t *run, size_t i, cux_stream_queue_t **seen,
                                  unsigned *num_seen)
{
    size_t j;

    if ((i > 0) && (run[i].sq == run[i - 1].sq)) {
        return 1;
    }
    for (j = 0; j < *num_seen; ++j) {
        if (seen[j] == run[i].sq) {
            return 1;
        }
    }
    if (*num_seen < CUX_IPC_SGL_QUEUES_SEEN) {
        seen[(*num_seen)++] = run[i].sq;
        return 0;
    }
    for (j = 0; j < i; ++j) { /* a list spread over many devices' queues */
        if (run[j].sq == run[i].sq) {
            return 1;
        }
    }
    return 0;
}

/* The list's descriptor behind its copies on every queue its runs used; returns how many are in flight, and the
 * first error of those that could not be tracked (their copies were waited for, and their share released). A hold
 * starts with one share of the list's own, given back here once every descriptor is placed. */
static unsigned cux_ipc_sgl_end(const cux_ipc_sgl_run_t *run, size_t count, uct_completion_t *comp,
                                cux_ipc_sgl_hold_t *hold, ucs_status_t *status_p)
{
    cux_completion_release_func_t release = (hold != NULL) ? cux_ipc_sgl_release : cux_ipc_sgl_release_one;
    void *arg                             = (hold != NULL) ? (void*)hold : (void*)run[0].region;
    cux_stream_queue_t *seen[CUX_IPC_SGL_QUEUES_SEEN];
    unsigned inflight = 0, num_seen = 0;
    ucs_status_t status;
    size_t i;

    *status_p = UCS_OK;
    for (i = 0; i < count; ++i) {
        if (cux_ipc_sgl_queue_seen(run, i, seen, &num_seen)) {
            continue;
        }
        if (hold != NULL) {
            ++hold->queues;
        }
        if (comp != NULL) {
            ++comp->count;
        }
        status = cux_copy_batch_end_op(run[i].sq, comp, release, arg);
        if (status == UCS_INPROGRESS) {
            ++inflight;
            continue;
        }
        if (comp != NULL) {
            --comp->count;
        }
        if (UCS_STATUS_IS_ERR(status) && (*status_p == UCS_OK)) {
            *status_p = status;
        }
        release(arg);
    }
    if (hold != NULL) {
        cux_ipc_sgl_release(hold); /* the list's own share */
    }
    return inflight;
}

ucs_status_t cux_ipc_sgl_zcopy(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths, uct_mem_h const *memhs,
                               const uint64_t *remote_addrs, uct_rkey_t const *rkeys, const size_t *counts,
                               const size_t *strides, size_t count, uct_completion_t *comp, int put)
{
    cux_ipc_ep_t *ep             = ucs_derived_of(tl_ep, cux_ipc_ep_t);
    cux_ipc_iface_t *iface       = ucs_derived_of(tl_ep->iface, cux_ipc_iface_t);
    cux_completion_t *completion = &iface->super.completion;
    cux_ipc_sgl_runs_t runs;
    cux_ipc_sgl_hold_t *hold;
    unsigned inflight;
    ucs_status_t status;
    size_t pieces;

    CUX_PROF_START(t0);
    pieces = cux_ipc_sgl_pieces(ep, lengths, remote_addrs, rkeys, counts, strides, count, &status);
    CUX_PROF_END(CUX_PROF_SGL_CHECK, t0, count);
    if (pieces == 0) {
        return status;
    }
    if (!cux_completion_has_resources(completion)) {
        return UCS_ERR_NO_RESOURCE; /* all or nothing: UCP retries the whole list from its pending queue */
    }
    status = cux_driver_check_fork("a copy");
    if (status != UCS_OK) {
        return status;
    }

    /* a key the peer no longer holds, anywhere in the list, refuses it before its first piece goes */
    CUX_PROF_START(t1);
    runs.heap     = NULL;
    runs.run      = runs.stack;
    runs.count    = 0;
    runs.capacity = CUX_IPC_SGL_ON_STACK;
    status        = cux_ipc_sgl_lookup(iface, ep, &runs, buffers, lengths, memhs, rkeys, counts, count, put);
    if ((status == UCS_OK) && ((status = cux_ipc_sgl_hold(&runs, &hold)) != UCS_OK)) {
        cux_ipc_sgl_runs_put(runs.run, runs.count);
    }
    if (status != UCS_OK) {
        ucs_free(runs.heap);
        return status;
    }
    CUX_PROF_END(CUX_PROF_SGL_LOOKUP, t1, runs.count);

    CUX_PROF_START(t2);
    cux_ipc_sgl_queue(&runs, buffers, lengths, remote_addrs, counts, strides, count, put);
    CUX_PROF_END(CUX_PROF_SGL_QUEUE, t2, pieces);

    CUX_PROF_START(t3);
    /* the runs are read from the list's hold (or the stack) until the last descriptor is there: a descriptor
     * completes no earlier than the next progress */
    inflight = cux_ipc_sgl_end(runs.run, runs.count, comp, hold, &status);
    CUX_PROF_END(CUX_PROF_SGL_END, t3, inflight);
    if (inflight == 0) {
        return status;
    }
    /* The list's descriptors hold comp: it completes through it, once, with the first error if any. */
    if (comp != NULL) {
        if (UCS_STATUS_IS_ERR(status)) {
            uct_completion_update_status(comp, status);
        }
        --comp->count;
    }
    CUX_PROF_END(CUX_PROF_SGL_TOTAL, t0, count);
    return UCS_INPROGRESS;
}

#if CUX_UCX_HAS_PUT_SGL
ucs_status_t cux_ipc_sgl_put_sgl_zcopy(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths,
                                       uct_mem_h const *memhs, const uint64_t *remote_addrs,
                                       uct_rkey_t const *rkeys, const size_t *counts, const size_t *strides,
                                       size_t count, uct_completion_t *comp)
{
    ucs_status_t status = cux_ipc_sgl_zcopy(tl_ep, buffers, lengths, memhs, remote_addrs, rkeys, counts, strides,
                                            count, comp, 1);

    ucs_trace_data("cuda_ipc put_sgl_zcopy %zu elements: %s", count, ucs_status_string(status));
    return status;
}

#if CUX_UCX_HAS_GET_SGL
ucs_status_t cux_ipc_sgl_get_sgl_zcopy(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths,
                                       uct_mem_h const *memhs, const uint64_t *remote_addrs,
                                       uct_rkey_t const *rkeys, const size_t *counts, const size_t *strides,
                                       size_t count, uct_completion_t *comp)
{
    ucs_status_t status;

    if (!ucs_derived_of(tl_ep->iface, cux_ipc_iface_t)->get_zcopy) {
        return UCS_ERR_UNSUPPORTED; /* ENABLE_GET_ZCOPY=off: reads are not offered */
    }
    status = cux_ipc_sgl_zcopy(tl_ep, buffers, lengths, memhs, remote_addrs, rkeys, counts, strides, count, comp, 0);
    ucs_trace_data("cuda_ipc get_sgl_zcopy %zu elements: %s", count, ucs_status_string(status));
    return status;
}
#endif

/* The ops' flags and list lengths: a list is one operation in flight however long (it holds one descriptor per
 * device queue it uses), so UCP need not cut it. */
ucs_status_t cux_ipc_sgl_query_v2(uct_iface_h tl_iface, uct_iface_attr_v2_t *attr)
{
    ucs_status_t status = uct_iface_base_query_v2(tl_iface, attr);

    if (status != UCS_OK) {
        return status;
    }
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_CAP_FLAGS) {
        attr->cap.flags |= UCT_IFACE_FLAG_V2_PUT_SGL_ZCOPY;
#if CUX_UCX_HAS_GET_SGL
        attr->cap.flags |= ucs_derived_of(tl_iface, cux_ipc_iface_t)->get_zcopy ? UCT_IFACE_FLAG_V2_GET_SGL_ZCOPY : 0;
#endif
    }
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT) {
        attr->max_put_sgl_zcopy_count = CUX_IPC_SGL_MAX_COUNT;
    }
#if CUX_UCX_HAS_GET_SGL
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_GET_SGL_ZCOPY_COUNT) {
        attr->max_get_sgl_zcopy_count = ucs_derived_of(tl_iface, cux_ipc_iface_t)->get_zcopy ? CUX_IPC_SGL_MAX_COUNT :
                                                                                                 0;
    }
#endif
    return UCS_OK;
}

#endif
