/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scatter-gather zero-copy put and get on cuda_ipc. Every piece (an element, or one repeat of it) ends in the
 * endpoint's own copy (cux_ipc_ep_zcopy_mapped), so a piece continuing the previous one in the same two allocations
 * joins its copy and small pieces share a kernel launch (cux_completion.h): a list of adjacent KV-cache blocks costs one
 * copy, not one per element. The whole list is checked and every element's remote allocation proven and mapped
 * before anything is issued (keys, bounds, room in the completion engine, the peer still holding each key), so a
 * refused list has written nothing; a driver failure after some pieces went out is reported through the
 * completion, which the pieces still hold. The list itself is compiled for every release (its tests run on all of
 * them); the ops that hand it to UCX exist where UCX has them (1.22+ put, 1.23+ get).
 */
#include "ipc/cux_ipc_sgl.h"
#include "ipc/cux_ipc_ep.h"
#include "ipc/import/cux_ipc_import.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <inttypes.h>

/* How many times element i goes: counts may be NULL (once each). */
static UCS_F_ALWAYS_INLINE size_t cux_ipc_sgl_reps(const size_t *counts, size_t i)
{
    return (counts != NULL) ? counts[i] : 1;
}

/* The pieces of a list, or 0 with a log line when an element cannot be taken: the checks a single put makes
 * (the key's process, the bounds), once for the list, so that its pieces go straight to the copy. */
static size_t cux_ipc_sgl_pieces(cux_ipc_ep_t *ep, const size_t *lengths, const uint64_t *remote_addrs,
                                 uct_rkey_t const *rkeys, const size_t *counts, const size_t *strides, size_t count,
                                 ucs_status_t *status_p)
{
    size_t pieces = 0, i, reps, span;
    const cux_ipc_rkey_t *key;

    for (i = 0; i < count; ++i) {
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
        if (!cux_ipc_peer_made(&ep->peer, key)) { /* another process's key: refused here as a single put would be */
            *status_p = cux_ipc_peer_check_key(&ep->peer, key);
            *status_p = UCS_STATUS_IS_ERR(*status_p) ? *status_p : UCS_ERR_UNREACHABLE;
            return 0;
        }
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

/* An element's local side and the mapping of its remote allocation, held from before the first piece is issued
 * until each of its pieces took a reference of its own. */
typedef struct {
    cux_ipc_local_t  local;
    cux_ipc_region_t *region; /* NULL: an element that moves nothing */
} cux_ipc_sgl_element_t;

#define CUX_IPC_SGL_ON_STACK 32

/* Every element's local side and remote mapping (proven and mapped on a miss); on failure, what was taken is
 * given back and nothing has been issued. */
static ucs_status_t cux_ipc_sgl_map(cux_ipc_ep_t *ep, void *const *buffers, const size_t *lengths,
                                    uct_mem_h const *memhs, uct_rkey_t const *rkeys, const size_t *counts,
                                    size_t count, cux_ipc_sgl_element_t *element)
{
    ucs_status_t status = UCS_OK;
    size_t i;

    for (i = 0; (i < count) && (status == UCS_OK); ++i) {
        element[i].region = NULL;
        if ((cux_ipc_sgl_reps(counts, i) == 0) || (lengths[i] == 0)) {
            continue;
        }
        status = cux_ipc_ep_local(buffers[i], (memhs != NULL) ? memhs[i] : UCT_MEM_HANDLE_NULL, &element[i].local);
        if (status == UCS_OK) {
            status = cux_ipc_import_get((const cux_ipc_unpacked_rkey_t*)rkeys[i], element[i].local.device,
                                        &ep->peer, &element[i].region);
        }
    }
    if (status != UCS_OK) {
        while (i-- > 0) {
            if (element[i].region != NULL) {
                cux_ipc_import_put(element[i].region);
            }
        }
    }
    return status;
}

ucs_status_t cux_ipc_sgl_zcopy(uct_ep_h tl_ep, void *const *buffers, const size_t *lengths, uct_mem_h const *memhs,
                               const uint64_t *remote_addrs, uct_rkey_t const *rkeys, const size_t *counts,
                               const size_t *strides, size_t count, uct_completion_t *comp, int put)
{
    cux_ipc_ep_t *ep             = ucs_derived_of(tl_ep, cux_ipc_ep_t);
    cux_completion_t *completion = &ucs_derived_of(tl_ep->iface, cux_ipc_iface_t)->super.completion;
    cux_ipc_sgl_element_t on_stack[CUX_IPC_SGL_ON_STACK], *element = on_stack;
    size_t issued = 0, pieces, i, r, reps, stride;
    ucs_status_t status;

    pieces = cux_ipc_sgl_pieces(ep, lengths, remote_addrs, rkeys, counts, strides, count, &status);
    if (pieces == 0) {
        return status;
    }
    if (pieces > completion->max_inflight) {
        ucs_error("cuda_ipc: a scatter-gather list of %zu pieces is more than an interface keeps in flight (%u: "
                  "UCX_CUDA_IPC_MAX_INFLIGHT)", pieces, completion->max_inflight);
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    if (completion->num_inflight + pieces > completion->max_inflight) {
        return UCS_ERR_NO_RESOURCE; /* all or nothing: UCP retries the whole list from its pending queue */
    }
    if ((count > CUX_IPC_SGL_ON_STACK) &&
        ((element = ucs_malloc(count * sizeof(*element), "cux_ipc_sgl_elements")) == NULL)) {
        return UCS_ERR_NO_MEMORY;
    }
    /* a key the peer no longer holds, anywhere in the list, refuses it before its first piece goes */
    status = cux_ipc_sgl_map(ep, buffers, lengths, memhs, rkeys, counts, count, element);
    if (status != UCS_OK) {
        goto out_free;
    }

    for (i = 0; (i < count) && (status == UCS_OK); ++i) {
        if (element[i].region == NULL) {
            continue;
        }
        reps   = cux_ipc_sgl_reps(counts, i);
        stride = (strides != NULL) ? strides[i] : 0;
        cux_ipc_import_hold(element[i].region, reps - 1); /* one reference a piece: each copy gives its own back */
        for (r = 0; r < reps; ++r) {
            if (status != UCS_OK) {
                cux_ipc_import_put(element[i].region); /* a piece that does not go after a failed one */
                continue;
            }
            if (comp != NULL) {
                ++comp->count; /* this piece's share: its completion takes it back */
            }
            status = cux_ipc_ep_zcopy_mapped(tl_ep, UCS_PTR_BYTE_OFFSET(buffers[i], r * stride), &element[i].local,
                                             lengths[i], remote_addrs[i] + r * stride, rkeys[i], element[i].region,
                                             comp, put);
            if (status == UCS_INPROGRESS) {
                ++issued;
                status = UCS_OK;
            } else if (comp != NULL) {
                --comp->count;
            }
        }
    }
    for (; i < count; ++i) { /* the elements after a failed copy */
        if (element[i].region != NULL) {
            cux_ipc_import_put(element[i].region);
        }
    }

out_free:
    if (element != on_stack) {
        ucs_free(element);
    }
    if (issued == 0) {
        return status;
    }
    /* The pieces in flight hold comp: the list completes through it, once, with the first error if any. */
    if (comp != NULL) {
        if (UCS_STATUS_IS_ERR(status)) {
            uct_completion_update_status(comp, status);
        }
        --comp->count;
    }
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

/* The ops' flags and list lengths: as many elements as the interface keeps in flight. */
ucs_status_t cux_ipc_sgl_query_v2(uct_iface_h tl_iface, uct_iface_attr_v2_t *attr)
{
    cux_ipc_iface_t *iface = ucs_derived_of(tl_iface, cux_ipc_iface_t);
    ucs_status_t status    = uct_iface_base_query_v2(tl_iface, attr);

    if (status != UCS_OK) {
        return status;
    }
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_CAP_FLAGS) {
        attr->cap.flags |= UCT_IFACE_FLAG_V2_PUT_SGL_ZCOPY;
#if CUX_UCX_HAS_GET_SGL
        attr->cap.flags |= iface->get_zcopy ? UCT_IFACE_FLAG_V2_GET_SGL_ZCOPY : 0;
#endif
    }
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_PUT_SGL_ZCOPY_COUNT) {
        attr->max_put_sgl_zcopy_count = iface->super.completion.max_inflight;
    }
#if CUX_UCX_HAS_GET_SGL
    if (attr->field_mask & UCT_IFACE_ATTR_FIELD_MAX_GET_SGL_ZCOPY_COUNT) {
        attr->max_get_sgl_zcopy_count = iface->get_zcopy ? iface->super.completion.max_inflight : 0;
    }
#endif
    return UCS_OK;
}

#endif
