/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process-wide cache of mappings of other processes' GPU allocations.
 *
 * Opening an IPC handle costs about a millisecond, so a mapping is kept after use and found again by
 * (exporting process, local device, allocation base). A hit makes no driver call. The buffer id in the key
 * tells a freed and re-allocated buffer at the same address from the one that was mapped: such a stale
 * mapping is dropped, never served. Mappings that no operation is using sit on an LRU list and are unmapped
 * when the cache exceeds its bounds (regions, bytes); mappings in use are never unmapped. With caching off a
 * mapping lives only while operations use it.
 *
 * Driver work is behind the map/unmap callbacks, so the logic is tested without a GPU.
 */
#ifndef CUX_IPC_CACHE_H_
#define CUX_IPC_CACHE_H_

#include "cux_ipc_rkey.h"

#include <ucs/datastruct/list.h>
#include <pthread.h>
#include <stddef.h>

typedef struct cux_ipc_region {
    struct cux_ipc_region *next;      /* hash chain */
    ucs_list_link_t       lru;        /* in cache->lru while unused */
    int32_t               pid;
    int                   device;     /* local device the mapping was opened on */
    uint64_t              base;
    uint64_t              length;
    uint64_t              buffer_id;
    int                   kind;       /* CUX_IPC_KIND_* of the key it was mapped from */
    CUipcMemHandle        handle;     /* LEGACY: the handle it was opened from */
    uint64_t              export_ino; /* VMM_FD: the exported descriptor's inode */
    void                  *mapped;    /* local address of base */
    unsigned              refcount;   /* operations using the mapping */
    int                   detached;   /* no longer in the cache: unmapped at the last release */
} cux_ipc_region_t;

typedef struct cux_ipc_cache_ops {
    ucs_status_t (*map)(void *arg, const cux_ipc_rkey_t *rkey, int device, void **mapped_p);
    void         (*unmap)(void *arg, const cux_ipc_region_t *region);
} cux_ipc_cache_ops_t;

#define CUX_IPC_CACHE_BUCKETS 1024

typedef struct cux_ipc_cache {
    pthread_mutex_t           lock;
    const cux_ipc_cache_ops_t *ops;
    void                      *arg;
    int                       enabled;
    unsigned long             max_regions;
    size_t                    max_size;
    unsigned long             num_regions;  /* mappings in the cache, used or not */
    size_t                    total_size;
    ucs_list_link_t           lru;          /* unused mappings, least recently used first */
    cux_ipc_region_t          *buckets[CUX_IPC_CACHE_BUCKETS];
    struct {
        unsigned long         hits, misses, stale, evictions;
    } stats;
} cux_ipc_cache_t;

void cux_ipc_cache_init(cux_ipc_cache_t *cache, const cux_ipc_cache_ops_t *ops, void *arg);

/* Bounds and caching mode; applies from the next operation. */
void cux_ipc_cache_configure(cux_ipc_cache_t *cache, int enabled, unsigned long max_regions, size_t max_size);

/* Unmaps everything unused; mappings in use are detached and unmapped when released. */
void cux_ipc_cache_purge(cux_ipc_cache_t *cache);

/* The same for the mappings of one process, such as a peer that has exited. */
void cux_ipc_cache_purge_pid(cux_ipc_cache_t *cache, int32_t pid);

/* The mapping of a remote allocation on a local device, mapped on a miss; held until cux_ipc_cache_put. */
ucs_status_t cux_ipc_cache_get(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device,
                               cux_ipc_region_t **region_p);

void cux_ipc_cache_put(cux_ipc_cache_t *cache, cux_ipc_region_t *region);

#endif
