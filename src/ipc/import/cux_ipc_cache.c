/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Mapping cache for cuda_ipc: see cux_ipc_cache.h.
 */
#include "ipc/import/cux_ipc_cache.h"
#include "base/cux_profile.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/debug/assert.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static unsigned long cux_ipc_cache_hash(uint64_t pid_ns, int32_t pid, int device, uint64_t base)
{
    uint64_t h = (base ^ pid_ns) * 0x9e3779b97f4a7c15ull;

    h ^= ((uint64_t)(uint32_t)pid << 32) ^ (uint64_t)device;
    h *= 0xff51afd7ed558ccdull;
    return (unsigned long)(h >> 24);
}

/* A mapping's place: an exporter (its pid in its PID namespace), a local device and the allocation's base. */
static cux_ipc_region_t **cux_ipc_cache_chain(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *key, int device)
{
    return &cache->buckets[cux_ipc_cache_hash(key->pid_ns, key->pid, device, key->base) & (cache->num_buckets - 1)];
}

/* Twice the buckets once the mappings outnumber them twice over; where memory for them is lacking, the chains
 * just stay longer. */
static void cux_ipc_cache_grow(cux_ipc_cache_t *cache)
{
    unsigned long i, num = cache->num_buckets * 2;
    cux_ipc_region_t **old = cache->buckets, **chain, *region, *next;

    if (cache->num_regions <= 2 * cache->num_buckets) {
        return;
    }
    cache->buckets = ucs_calloc(num, sizeof(*cache->buckets), "cux_ipc_cache_buckets");
    if (cache->buckets == NULL) {
        cache->buckets = old;
        return;
    }
    cache->num_buckets = num;
    for (i = 0; i < num / 2; ++i) {
        for (region = old[i]; region != NULL; region = next) {
            next         = region->next;
            chain        = cux_ipc_cache_chain(cache, &region->key, region->device);
            region->next = *chain;
            *chain       = region;
        }
    }
    if (old != cache->initial) {
        ucs_free(old);
    } else {
        memset(cache->initial, 0, sizeof(cache->initial)); /* empty when the cache comes back to it */
    }
}

void cux_ipc_cache_init(cux_ipc_cache_t *cache, const cux_ipc_cache_ops_t *ops, void *arg)
{
    memset(cache, 0, sizeof(*cache));
    pthread_mutex_init(&cache->lock, NULL);
    pthread_cond_init(&cache->mapped, NULL);
    ucs_list_head_init(&cache->lru);
    cache->buckets     = cache->initial;
    cache->num_buckets = CUX_IPC_CACHE_BUCKETS;
    cache->ops         = ops;
    cache->arg         = arg;
    cache->enabled     = 1;
    cache->max_regions = ULONG_MAX;
    cache->max_size    = SIZE_MAX;
    cache->max_idle    = UCS_TIME_INFINITY;
}

static void cux_ipc_region_unmap(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    cache->ops->unmap(cache->arg, region);
    ucs_free(region);
}

/* Take a region out of its bucket and the cache's counts. */
static void cux_ipc_cache_unlink(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    cux_ipc_region_t **pp = cux_ipc_cache_chain(cache, &region->key, region->device);

    while (*pp != region) {
        pp = &(*pp)->next;
    }
    *pp = region->next;
    --cache->num_regions;
    cache->total_size -= region->key.length;
}

/* Take a region out of the cache; it is unmapped now if unused, else at its last release. */
static void cux_ipc_cache_detach(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    cux_ipc_cache_unlink(cache, region);
    if (region->refcount == 0) {
        ucs_list_del(&region->lru);
        cux_ipc_region_unmap(cache, region);
    } else {
        region->detached = 1;
    }
}

static void cux_ipc_cache_trim(cux_ipc_cache_t *cache)
{
    cux_ipc_region_t *region;

    while (((cache->num_regions > cache->max_regions) || (cache->total_size > cache->max_size)) &&
           !ucs_list_is_empty(&cache->lru)) {
        region = ucs_list_head(&cache->lru, cux_ipc_region_t, lru);
        ++cache->stats.evictions;
        cux_ipc_cache_detach(cache, region);
    }
}

/* Unmap unused mappings older than max_idle, oldest first (the LRU list is in release order). */
static UCS_F_ALWAYS_INLINE void cux_ipc_cache_expire(cux_ipc_cache_t *cache)
{
    cux_ipc_region_t *region;
    ucs_time_t now;

    if ((cache->max_idle == UCS_TIME_INFINITY) || ucs_list_is_empty(&cache->lru)) {
        return;
    }
    now = ucs_get_time();
    while (!ucs_list_is_empty(&cache->lru)) {
        region = ucs_list_head(&cache->lru, cux_ipc_region_t, lru);
        if (now - region->unused_since <= cache->max_idle) {
            break;
        }
        ++cache->stats.expired;
        cux_ipc_cache_detach(cache, region);
    }
}

void cux_ipc_cache_configure(cux_ipc_cache_t *cache, int enabled, unsigned long max_regions, size_t max_size,
                             ucs_time_t max_idle)
{
    pthread_mutex_lock(&cache->lock);
    cache->enabled     = enabled;
    cache->max_regions = max_regions;
    cache->max_size    = max_size;
    cache->max_idle    = max_idle;
    if (!enabled) {
        while (!ucs_list_is_empty(&cache->lru)) {
            cux_ipc_cache_detach(cache, ucs_list_head(&cache->lru, cux_ipc_region_t, lru));
        }
    }
    cux_ipc_cache_trim(cache);
    pthread_mutex_unlock(&cache->lock);
}

/* Detach every region, or every region of one process (pid >= 0, of PID namespace pid_ns), or only those of one
 * owner of it (owner != CUX_IPC_CACHE_ANY_OWNER). */
static void cux_ipc_cache_detach_all(cux_ipc_cache_t *cache, uint64_t pid_ns, int32_t pid, uint64_t owner)
{
    cux_ipc_region_t **pp, *region;
    unsigned long i;

    pthread_mutex_lock(&cache->lock);
    for (i = 0; i < cache->num_buckets; ++i) {
        for (pp = &cache->buckets[i]; (region = *pp) != NULL;) {
            if ((pid < 0) || ((region->key.pid == pid) && (region->key.pid_ns == pid_ns) &&
                              ((owner == CUX_IPC_CACHE_ANY_OWNER) || (region->owner == owner)))) {
                cux_ipc_cache_detach(cache, region); /* *pp is now the next region */
            } else {
                pp = &region->next;
            }
        }
    }
    if ((pid < 0) && (cache->buckets != cache->initial)) { /* every chain is empty: back to the first table */
        ucs_free(cache->buckets);
        cache->buckets     = cache->initial;
        cache->num_buckets = CUX_IPC_CACHE_BUCKETS;
    }
    pthread_mutex_unlock(&cache->lock);
}

void cux_ipc_cache_purge(cux_ipc_cache_t *cache)
{
    cux_ipc_cache_detach_all(cache, 0, -1, CUX_IPC_CACHE_ANY_OWNER);
}

void cux_ipc_cache_purge_pid(cux_ipc_cache_t *cache, uint64_t pid_ns, int32_t pid)
{
    cux_ipc_cache_detach_all(cache, pid_ns, pid, CUX_IPC_CACHE_ANY_OWNER);
}

void cux_ipc_cache_purge_owner(cux_ipc_cache_t *cache, uint64_t pid_ns, int32_t pid, uint64_t owner)
{
    cux_ipc_cache_detach_all(cache, pid_ns, pid, owner);
}

/* Unmap unused mappings on a device, oldest first, until about length bytes are given back; 0 if that cannot
 * help (they are fewer bytes than the mapping needs, or none), and then nothing is unmapped: a peer's huge
 * allocation does not empty the cache of everyone else's mappings for a mapping that fails anyway. Mappings on
 * other devices and mappings in use stay. */
static int cux_ipc_cache_release_for(cux_ipc_cache_t *cache, int device, uint64_t length)
{
    cux_ipc_region_t *region, *tmp;
    uint64_t released = 0, unused = 0;
    int count         = 0;

    ucs_list_for_each(region, &cache->lru, lru) {
        unused += (region->device == device) ? region->key.length : 0;
    }
    if ((unused == 0) || (unused < length)) {
        ucs_debug("cuda_ipc: mapping %" PRIu64 " bytes on device %d failed; unused mappings there hold %" PRIu64
                  " bytes, too few to help: none released", length, device, unused);
        return 0;
    }
    ucs_list_for_each_safe(region, tmp, &cache->lru, lru) {
        if (region->device != device) {
            continue;
        }
        released += region->key.length;
        ++count;
        ++cache->stats.evictions;
        cux_ipc_cache_detach(cache, region);
        if (released >= length) {
            break;
        }
    }
    ucs_debug("cuda_ipc: mapping %" PRIu64 " bytes on device %d failed: released %d unused mappings (%" PRIu64
              " bytes) of that device", length, device, count, released);
    return 1;
}

/* A region for key, standing in the cache while the caller maps it (refcount 1: held by the mapper). */
static cux_ipc_region_t *cux_ipc_cache_add_mapping(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey,
                                                   uint64_t key_id, int device, uint64_t owner)
{
    cux_ipc_region_t *region = ucs_calloc(1, sizeof(*region), "cux_ipc_region");
    cux_ipc_region_t **chain;

    if (region == NULL) {
        return NULL;
    }
    chain                  = cux_ipc_cache_chain(cache, rkey, device);
    region->key            = *rkey;
    region->key_id         = key_id;
    region->owner          = owner;
    region->device         = device;
    region->refcount       = 1;
    region->mapping        = 1;
    region->next           = *chain;
    *chain                 = region;
    ++cache->num_regions;
    cache->total_size += region->key.length;
    cux_ipc_cache_grow(cache);
    return region;
}

/* The map callback outside the lock, retried after giving back unused mappings of the device when it ran out
 * of mapping resources there; called and returning with the lock held. */
static ucs_status_t cux_ipc_cache_map_unlocked(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device,
                                               void *peer, void **mapped_p, void **held_p)
{
    ucs_status_t status;

    do {
        pthread_mutex_unlock(&cache->lock);
        status = cache->ops->map(cache->arg, rkey, device, peer, mapped_p, held_p);
        pthread_mutex_lock(&cache->lock);
    } while ((status == UCS_ERR_NO_MEMORY) && cux_ipc_cache_release_for(cache, device, rkey->length));
    return status;
}

/* The mapping of a place for owner, whatever its state (being mapped, or of another allocation). */
static UCS_F_ALWAYS_INLINE cux_ipc_region_t *cux_ipc_cache_find(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey,
                                                                  int device, uint64_t owner)
{
    cux_ipc_region_t *region;

    for (region = *cux_ipc_cache_chain(cache, rkey, device); region != NULL; region = region->next) {
        /* another owner's mapping of that place is never this one's, and stays (an impostor's evicts nothing) */
        if ((region->key.pid == rkey->pid) && (region->key.pid_ns == rkey->pid_ns) && (region->device == device) &&
            (region->key.base == rkey->base) && (region->owner == owner)) {
            return region;
        }
    }
    return NULL;
}

/* Whether a mapping found for a key's place serves it: a key of another allocation at that address is not served.
 * The last key found to be of its allocation is remembered by its id (never reused, and an unpacked key never
 * changes), so that its later hits do not compare the whole key again. */
static UCS_F_ALWAYS_INLINE int cux_ipc_cache_serves(cux_ipc_region_t *region, const cux_ipc_rkey_t *rkey,
                                                    uint64_t key_id)
{
    if ((key_id != 0) && (region->key_id == key_id)) {
        return 1;
    }
    if (!cux_ipc_rkey_same_allocation(&region->key, rkey)) {
        return 0;
    }
    region->key_id = key_id;
    return 1;
}

/* One more operation uses a mapping found ready: off the LRU list if it was unused. */
static UCS_F_ALWAYS_INLINE void cux_ipc_cache_take(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    ++cache->stats.hits;
    if (region->refcount++ == 0) {
        ucs_list_del(&region->lru);
    }
}

ucs_status_t cux_ipc_cache_get(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, uint64_t key_id, int device,
                               void *peer, uint64_t owner, cux_ipc_region_t **region_p)
{
    cux_ipc_region_t *region;
    ucs_status_t status;
    void *mapped, *held;

    pthread_mutex_lock(&cache->lock);
    cux_ipc_cache_expire(cache);

lookup: /* the chain is found again after each wait: the table may have grown meanwhile */
    region = cux_ipc_cache_find(cache, rkey, device, owner);
    if ((region != NULL) && region->mapping) {
        /* another thread maps this place: wait for it, then look again (it may have failed, or be another key) */
        pthread_cond_wait(&cache->mapped, &cache->lock);
        goto lookup;
    }
    if (region != NULL) {
        if (cux_ipc_cache_serves(region, rkey, key_id)) {
            cux_ipc_cache_take(cache, region);
            *region_p = region;
            pthread_mutex_unlock(&cache->lock);
            return UCS_OK;
        }
        /* Freed and re-allocated at the same address since it was mapped. */
        ucs_debug("cuda_ipc: pid %d 0x%" PRIx64 " is a new buffer (id %" PRIu64 ", was %" PRIu64 "): remapping",
                  rkey->pid, rkey->base, (uint64_t)rkey->buffer_id, (uint64_t)region->key.buffer_id);
        ++cache->stats.stale;
        cux_ipc_cache_detach(cache, region);
    }

    ++cache->stats.misses;
    CUX_PROF_START(t0);
    region = cux_ipc_cache_add_mapping(cache, rkey, key_id, device, owner);
    if (region == NULL) {
        pthread_mutex_unlock(&cache->lock);
        return UCS_ERR_NO_MEMORY;
    }
    status          = cux_ipc_cache_map_unlocked(cache, rkey, device, peer, &mapped, &held);
    region->mapping = 0;
    pthread_cond_broadcast(&cache->mapped);
    if (status != UCS_OK) {
        /* nothing mapped: out of the cache (unless a purge took it out meanwhile), and freed */
        if (!region->detached) {
            cux_ipc_cache_unlink(cache, region);
        }
        ucs_free(region);
        pthread_mutex_unlock(&cache->lock);
        return status;
    }
    region->mapped = mapped;
    region->held   = held;
    if (!region->detached) {
        cux_ipc_cache_trim(cache);
    }
    *region_p = region;
    pthread_mutex_unlock(&cache->lock);
    CUX_PROF_END(CUX_PROF_MAP_NEW, t0, 1);
    return UCS_OK;
}

void cux_ipc_cache_hold(cux_ipc_cache_t *cache, cux_ipc_region_t *region, unsigned count)
{
    if (count == 0) {
        return;
    }
    pthread_mutex_lock(&cache->lock);
    ucs_assert(region->refcount > 0);
    region->refcount += count;
    pthread_mutex_unlock(&cache->lock);
}

/* An operation is done with a mapping (the lock held): unused from now on, the last use of a detached one unmaps
 * it, and without caching an unused one goes at once. *now: the time it became unused, read once for the caller
 * when the first of its mappings does (0 until then). 1 when it joined the unused ones, which the caller then
 * trims (the cache's size is over its bounds only while nothing could be evicted). */
static UCS_F_ALWAYS_INLINE int cux_ipc_cache_release(cux_ipc_cache_t *cache, cux_ipc_region_t *region,
                                                     ucs_time_t *now)
{
    ucs_assert(region->refcount > 0);
    if (--region->refcount > 0) {
        return 0;
    }
    if (region->detached) {
        cux_ipc_region_unmap(cache, region);
        return 0;
    }
    if (*now == 0) {
        *now = ucs_get_time();
    }
    region->unused_since = *now;
    ucs_list_add_tail(&cache->lru, &region->lru);
    if (!cache->enabled) {
        cux_ipc_cache_detach(cache, region);
    }
    return 1;
}

void cux_ipc_cache_put(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    ucs_time_t now = 0;

    pthread_mutex_lock(&cache->lock);
    if (cux_ipc_cache_release(cache, region, &now)) {
        cux_ipc_cache_trim(cache);
    }
    pthread_mutex_unlock(&cache->lock);
}

void cux_ipc_cache_batch_begin(cux_ipc_cache_t *cache)
{
    pthread_mutex_lock(&cache->lock);
    cux_ipc_cache_expire(cache);
    cache->batch_time = 0;
}

cux_ipc_region_t *cux_ipc_cache_batch_hit(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, uint64_t key_id,
                                          int device, uint64_t owner)
{
    cux_ipc_region_t *region = cux_ipc_cache_find(cache, rkey, device, owner);

    if ((region == NULL) || region->mapping || !cux_ipc_cache_serves(region, rkey, key_id)) {
        return NULL; /* cux_ipc_cache_get maps it, waits for it, or replaces a stale one */
    }
    cux_ipc_cache_take(cache, region);
    return region;
}

/* Every cache line of [p, p + size): a hit compares the whole key of both sides (four lines each). */
static UCS_F_ALWAYS_INLINE void cux_ipc_cache_prefetch_lines(const void *p, size_t size)
{
    uintptr_t line = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + size;

    for (; line < end; line += 64) {
        __builtin_prefetch((const void*)line);
    }
}

void cux_ipc_cache_batch_prefetch_chain(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device)
{
    __builtin_prefetch(cux_ipc_cache_chain(cache, rkey, device));
    cux_ipc_cache_prefetch_lines(rkey, sizeof(*rkey));
}

void cux_ipc_cache_batch_prefetch_region(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device)
{
    cux_ipc_region_t *region = *cux_ipc_cache_chain(cache, rkey, device);

    if (region != NULL) {
        cux_ipc_cache_prefetch_lines(region, sizeof(*region));
    }
}

void cux_ipc_cache_batch_put(cux_ipc_cache_t *cache, cux_ipc_region_t *region)
{
    (void)cux_ipc_cache_release(cache, region, &cache->batch_time); /* the batch's end trims */
}

void cux_ipc_cache_batch_end(cux_ipc_cache_t *cache)
{
    cux_ipc_cache_trim(cache);
    pthread_mutex_unlock(&cache->lock);
}
