/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Process-wide cache of mappings of other processes' GPU allocations.
 *
 * Opening an IPC handle costs about a millisecond, so a mapping is kept after use and found again by
 * (exporting process, local device, allocation base) and owner: who the key was proven for, as far as the
 * kernel says (a process's start time, or the connection a peer of another PID namespace was proven over:
 * cux_ipc_proof.h). A hit makes no driver call and no proof: it is served only to the same owner and a key of
 * the same allocation (buffer id, length, handle, secret: cux_ipc_rkey_same_allocation), and the key it was
 * mapped from was proven then. Mappings of one place for two owners stand side by side: one never serves,
 * evicts or purges the other's. A freed and re-allocated
 * buffer at the same address is a new allocation: its stale mapping is dropped, never served. Mappings that no
 * operation is using sit on an LRU list and are unmapped when the cache exceeds its bounds (regions, bytes), or
 * at the next operation once unused for longer than max_idle: a buffer its owner freed, which the mapping keeps
 * allocated, is given back within that time of its last use here. Mappings in use are never unmapped. With
 * caching off a mapping lives only while operations use it.
 *
 * A miss maps outside the cache's lock: the peer's proof and the driver's import take from microseconds to
 * whatever a peer makes them take, and the cache's other mappings (other peers', other threads') are served
 * meanwhile. The region being mapped stands in the cache, so a thread that wants the same mapping waits for it
 * rather than import the handle a second time (a handle can be opened once per context).
 *
 * Driver work is behind the map/unmap callbacks, so the logic is tested without a GPU.
 */
#ifndef CUX_IPC_CACHE_H_
#define CUX_IPC_CACHE_H_

#include "ipc/common/cux_ipc_rkey.h"

#include <ucs/datastruct/list.h>
#include <ucs/time/time.h>
#include <pthread.h>
#include <stddef.h>

typedef struct cux_ipc_region {
    struct cux_ipc_region *next;      /* hash chain */
    ucs_list_link_t       lru;        /* in cache->lru while unused */
    cux_ipc_rkey_t        key;        /* the key it was mapped from: process, kind, base and length */
    uint64_t              key_id;     /* the unpacked key last found to be of its allocation (never reused, 0:
                                         none): that key's hits skip comparing the whole key again */
    uint64_t              owner;      /* who it was proven for (cux_ipc_proof.h): a reused pid is another owner */
    int                   device;     /* local device the mapping was opened on */
    void                  *mapped;    /* local address of key.base */
    void                  *held;      /* what else the mapping holds until unmapped (an imported pool) */
    unsigned              refcount;   /* operations using the mapping */
    ucs_time_t            unused_since; /* when the last operation released it (on the LRU list) */
    int                   detached;   /* no longer in the cache: unmapped at the last release */
    int                   mapping;    /* being mapped outside the lock: not served until done */
} cux_ipc_region_t;

typedef struct cux_ipc_cache_ops {
    /* peer: what the caller of cux_ipc_cache_get passed, for the proof and the import; *held_p: whatever else
     * the mapping holds, given back to unmap in region->held (NULL if nothing) */
    ucs_status_t (*map)(void *arg, const cux_ipc_rkey_t *rkey, int device, void *peer, void **mapped_p,
                        void **held_p);
    void         (*unmap)(void *arg, const cux_ipc_region_t *region);
} cux_ipc_cache_ops_t;

/* Buckets at first; the table doubles whenever the mappings outnumber its buckets twice over, so a lookup stays a
 * few steps long with hundreds of thousands of mappings (a KV cache of one allocation per block). */
#define CUX_IPC_CACHE_BUCKETS 1024

typedef struct cux_ipc_cache {
    pthread_mutex_t           lock;
    pthread_cond_t            mapped;       /* a region being mapped is done (or failed) */
    const cux_ipc_cache_ops_t *ops;
    void                      *arg;
    int                       enabled;
    unsigned long             max_regions;
    size_t                    max_size;
    ucs_time_t                max_idle;     /* UCS_TIME_INFINITY: unused mappings stay */
    ucs_time_t                batch_time;   /* the batch's releases' time, read at its first (0 before) */
    unsigned long             num_regions;  /* mappings in the cache, used or not */
    size_t                    total_size;
    ucs_list_link_t           lru;          /* unused mappings, least recently used first */
    cux_ipc_region_t          **buckets;    /* num_buckets hash chains: initial, or allocated when it grew */
    unsigned long             num_buckets;  /* a power of two */
    cux_ipc_region_t          *initial[CUX_IPC_CACHE_BUCKETS];
    struct {
        unsigned long         hits, misses, stale, evictions, expired;
    } stats;
} cux_ipc_cache_t;

void cux_ipc_cache_init(cux_ipc_cache_t *cache, const cux_ipc_cache_ops_t *ops, void *arg);

/* Bounds and caching mode; applies from the next operation. */
void cux_ipc_cache_configure(cux_ipc_cache_t *cache, int enabled, unsigned long max_regions, size_t max_size,
                             ucs_time_t max_idle);

/* Unmaps everything unused; mappings in use are detached and unmapped when released. The table goes back to its
 * first size (nothing else to free: a cache needs no cleanup after its last purge). */
void cux_ipc_cache_purge(cux_ipc_cache_t *cache);

/* The same for the mappings of one process, such as a peer that has exited, whoever they were proven for. */
void cux_ipc_cache_purge_pid(cux_ipc_cache_t *cache, uint64_t pid_ns, int32_t pid);

/* The same for one owner's mappings of one process: what a peer's endpoint proved, when the endpoint goes. */
#define CUX_IPC_CACHE_ANY_OWNER UINT64_MAX
void cux_ipc_cache_purge_owner(cux_ipc_cache_t *cache, uint64_t pid_ns, int32_t pid, uint64_t owner);

/* The mapping of a remote allocation on a local device for owner, mapped on a miss (ops->map gets peer); held
 * until cux_ipc_cache_put. key_id: the id of the unpacked key rkey belongs to (cux_ipc_import.h), 0 where there
 * is none. */
ucs_status_t cux_ipc_cache_get(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, uint64_t key_id, int device,
                               void *peer, uint64_t owner, cux_ipc_region_t **region_p);

/* count more references of a held mapping (one put each). */
void cux_ipc_cache_hold(cux_ipc_cache_t *cache, cux_ipc_region_t *region, unsigned count);

void cux_ipc_cache_put(cux_ipc_cache_t *cache, cux_ipc_region_t *region);

/*
 * Many lookups or releases under one lock (a scatter-gather list's runs, one allocation per block): between
 * cux_ipc_cache_batch_begin and cux_ipc_cache_batch_end the caller holds the cache's lock and calls nothing else
 * of the cache. batch_hit holds a mapping the cache has ready for owner and a key of the same allocation, else
 * returns NULL without waiting or mapping (a miss, a place being mapped, a stale mapping: cux_ipc_cache_get
 * serves those after the batch). batch_put is cux_ipc_cache_put's release; the batch's end trims the cache.
 */
void cux_ipc_cache_batch_begin(cux_ipc_cache_t *cache);
cux_ipc_region_t *cux_ipc_cache_batch_hit(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, uint64_t key_id,
                                          int device, uint64_t owner);
void cux_ipc_cache_batch_put(cux_ipc_cache_t *cache, cux_ipc_region_t *region);
void cux_ipc_cache_batch_end(cux_ipc_cache_t *cache);

/* Hints for a batch's later lookups (one allocation per block: each lookup would wait for memory twice): the
 * hash chain's head of a place, then, once that is in the CPU's cache, its first mapping. */
void cux_ipc_cache_batch_prefetch_chain(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device);
void cux_ipc_cache_batch_prefetch_region(cux_ipc_cache_t *cache, const cux_ipc_rkey_t *rkey, int device);

#endif
