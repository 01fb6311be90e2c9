/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: a registration's keys over its life. See cux_ipc_memh.h.
 */
#include "ipc/cux_ipc_memh.h"
#include "ipc/cux_ipc_memh_export.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "base/cux_ptr.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <inttypes.h>
#include <string.h>

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

void cux_ipc_memh_forget(cux_ipc_md_t *md, cux_ipc_memh_t *memh)
{
    cux_ipc_memh_t *served;

    cux_ipc_memh_release_state(md, memh);
    while ((served = memh->served) != NULL) {
        memh->served = served->served;
        cux_ipc_memh_release_state(md, served);
        ucs_free(served);
    }
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

ucs_status_t cux_ipc_memh_pack(uct_md_h tl_md, uct_mem_h tl_memh, const void *address, size_t length,
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
