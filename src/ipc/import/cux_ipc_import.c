/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: see cux_ipc_import.h.
 */
#include "ipc/import/cux_ipc_import.h"
#include "cux_introspection.h"
#include "ipc/common/cux_ipc_domain.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "ipc/import/cux_ipc_map.h"
#include "ipc/import/cux_ipc_handle.h"
#include "ipc/export/cux_ipc_identity.h"
#include "ipc/import/cux_ipc_proof.h"
#include "base/cux_iface.h"

#include <ucs/debug/log.h>
#include <ucs/arch/atomic.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/sys.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

cux_ipc_cache_t cux_ipc_cache;
static pthread_once_t cux_ipc_cache_once = PTHREAD_ONCE_INIT;
static unsigned cux_ipc_md_count; /* open memory domains; the last to close empties the cache */

static void cux_ipc_cache_do_init(void)
{
    cux_ipc_cache_init(&cux_ipc_cache, &cux_ipc_map_ops, NULL);
}

void cux_ipc_cache_counters(unsigned long *num_regions, size_t *total_size, unsigned long *hits,
                            unsigned long *misses, unsigned long *stale, unsigned long *evictions)
{
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    *num_regions = cux_ipc_cache.num_regions;
    *total_size  = cux_ipc_cache.total_size;
    *hits        = cux_ipc_cache.stats.hits;
    *misses      = cux_ipc_cache.stats.misses;
    *stale       = cux_ipc_cache.stats.stale;
    *evictions   = cux_ipc_cache.stats.evictions;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
}

void cux_ipc_import_attach(int cache_enable, unsigned long max_regions, size_t max_size, ucs_time_t max_idle)
{
    pthread_once(&cux_ipc_cache_once, cux_ipc_cache_do_init);
    pthread_mutex_lock(&cux_ipc_cache.lock);
    ++cux_ipc_md_count;
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    cux_ipc_cache_configure(&cux_ipc_cache, cache_enable, max_regions, max_size, max_idle);
}

void cux_ipc_import_detach(void)
{
    int last;

    /* Interfaces close before their memory domain, so no mapping is in use by now. */
    pthread_mutex_lock(&cux_ipc_cache.lock);
    last = (--cux_ipc_md_count == 0);
    pthread_mutex_unlock(&cux_ipc_cache.lock);
    if (last) {
        cux_ipc_cache_purge(&cux_ipc_cache);
    }
}

ucs_status_t cux_ipc_import_get(const cux_ipc_unpacked_rkey_t *ukey, int device, cux_ipc_peer_t *peer,
                                cux_ipc_region_t **region_p)
{
    return cux_ipc_cache_get(&cux_ipc_cache, &ukey->key, ukey->id, device, peer, peer->owner, region_p);
}

void cux_ipc_import_hold(cux_ipc_region_t *region, unsigned count)
{
    cux_ipc_cache_hold(&cux_ipc_cache, region, count);
}

void cux_ipc_import_put(cux_ipc_region_t *region)
{
    cux_ipc_cache_put(&cux_ipc_cache, region);
}

void cux_ipc_import_batch_begin(void)
{
    cux_ipc_cache_batch_begin(&cux_ipc_cache);
}

cux_ipc_region_t *cux_ipc_import_batch_get_held(const cux_ipc_unpacked_rkey_t *ukey, int device,
                                                const cux_ipc_peer_t *peer)
{
    return cux_ipc_cache_batch_hit(&cux_ipc_cache, &ukey->key, ukey->id, device, peer->owner);
}

void cux_ipc_import_batch_put(cux_ipc_region_t *region)
{
    cux_ipc_cache_batch_put(&cux_ipc_cache, region);
}

void cux_ipc_import_batch_prefetch(const cux_ipc_unpacked_rkey_t *ukey, int device, int stage)
{
    if (stage == 0) {
        cux_ipc_cache_batch_prefetch_chain(&cux_ipc_cache, &ukey->key, device);
    } else {
        cux_ipc_cache_batch_prefetch_region(&cux_ipc_cache, &ukey->key, device);
    }
}

void cux_ipc_import_batch_end(void)
{
    cux_ipc_cache_batch_end(&cux_ipc_cache);
}

void cux_ipc_import_forget_peer(const cux_ipc_peer_t *peer)
{
    cux_ipc_cache_purge_owner(&cux_ipc_cache, peer->pid_ns, peer->pid, peer->owner);
}

/*
 * A legacy key of a process of this host whose pid number is ours, in another PID namespace (two containers whose
 * programs are both pid 1): the driver takes its handle for one of our own. It is opened with its pid bytes
 * cleared where the driver allows that (cux_ipc_handle.h, asked before the first copy); where it does not, the key
 * is refused here, where UCP takes another path, with one warning per namespace that says what would help.
 */
static int cux_ipc_import_own_pid_refused(const cux_ipc_unpacked_rkey_t *ukey)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t warned_ns;
    const cux_ipc_rkey_t *key = &ukey->key;
    int device                = cux_device_current();
    int warn;

    if ((key->kind != CUX_IPC_KIND_LEGACY) || (key->pid != getpid()) || (key->system_id != cux_ipc_host_id()) ||
        (key->pid_ns == 0) || (key->pid_ns == cux_ipc_pid_namespace()) ||
        cux_ipc_handle_own_pid_opens(&key->handle, (device >= 0) ? device : ukey->peer_device)) {
        return 0;
    }
    pthread_mutex_lock(&lock);
    warn      = (warned_ns != key->pid_ns);
    warned_ns = key->pid_ns;
    pthread_mutex_unlock(&lock);
    if (warn) {
        ucs_warn("cuda_ipc: the peer in PID namespace %" PRIu64 " has this process's pid number (%d), and this "
                 "driver refuses its cuMemAlloc memory (legacy IPC handles) as if it were ours: that memory goes over "
                 "another transport. Start the programs with different pids, give them one PID namespace, or "
                 "allocate with cuMemCreate or a shareable memory pool (passed by descriptor)", key->pid_ns, key->pid);
    }
    return 1;
}

/* Ids of unpacked keys, never reused (the first is 1: 0 is none). */
static volatile uint64_t cux_ipc_import_next_key_id = 1;

/* The unpacked key is a checked copy of the packed one; the endpoint maps it on first use. */
ucs_status_t cux_ipc_import_rkey_unpack(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p,
                                        void **handle_p)
{
    cux_ipc_unpacked_rkey_t *ukey;
    ucs_status_t status;

    if (cux_driver_forked) {
        ucs_debug("cuda_ipc: key unpacking in the child of a fork(): the driver's state belongs to the parent");
        return UCS_ERR_UNREACHABLE; /* the one status UCP 1.13 does not abort on */
    }
    ukey = ucs_malloc(sizeof(*ukey), "cux_ipc_rkey");
    if (ukey == NULL) {
        return UCS_ERR_NO_MEMORY;
    }
    memcpy(&ukey->key, rkey_buffer, sizeof(ukey->key));
    status = cux_ipc_rkey_check(&ukey->key, cux_ipc_host_id(), cux_ipc_domain_on());
    if ((status == UCS_OK) && (ukey->key.kind == CUX_IPC_KIND_VMM_FABRIC) && !cux_imex_channel_present()) {
        /* the driver would refuse it: UCP takes another path at once */
        ucs_debug("cuda_ipc: pid %d's key is a fabric handle, and this process has no IMEX channel: another path "
                  "carries it", ukey->key.pid);
        status = UCS_ERR_UNREACHABLE;
    }
    if (status == UCS_OK) {
        ukey->peer_device = cux_device_by_uuid(&ukey->key.dev_uuid);
        if (cux_ipc_import_own_pid_refused(ukey)) {
            status = UCS_ERR_UNREACHABLE;
        }
    }
    if (status != UCS_OK) {
        ucs_free(ukey);
        return status;
    }
    ukey->attached    = NULL;
    ukey->id          = ucs_atomic_fadd64(&cux_ipc_import_next_key_id, 1);
    *rkey_p   = (uintptr_t)ukey;
    *handle_p = NULL;
    return UCS_OK;
}


ucs_status_t cux_ipc_import_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle)
{
    cux_ipc_unpacked_rkey_t *ukey = (cux_ipc_unpacked_rkey_t*)rkey;
    int device;

    /* UCX's perftest releases a zeroed key when endpoint set-up fails before unpacking (UCX 1.22's gtest
     * test_uct_loopback_cuda): nothing to release */
    if (ukey == NULL) {
        return UCS_OK;
    }
    if (ukey->attached != NULL) {
        for (device = 0; device < CUX_MAX_DEVICES; ++device) {
            if (ukey->attached[device] != NULL) {
                cux_ipc_import_put(ukey->attached[device]);
            }
        }
        ucs_free(ukey->attached);
    }
    ucs_free(ukey);
    return UCS_OK;
}

/* A mapping of the key's allocation on a device, with no endpoint: the peer is found from the key. */
static ucs_status_t cux_ipc_import_get_for_key(const cux_ipc_unpacked_rkey_t *ukey, int device,
                                               cux_ipc_region_t **region_p)
{
    cux_ipc_peer_t peer;
    ucs_status_t status;

    status = cux_ipc_peer_open_for_key(&peer, &ukey->key);
    if (status != UCS_OK) {
        return status;
    }
    status = cux_ipc_import_get(ukey, device, &peer, region_p);
    cux_ipc_peer_close(&peer);
    return status;
}

/* The calling thread's device, else the one that owns the allocation. */
static ucs_status_t cux_ipc_import_key_device(const cux_ipc_unpacked_rkey_t *ukey, int *device_p)
{
    int device = cux_device_current();

    if (device < 0) {
        device = ukey->peer_device;
    }
    if (device < 0) {
        ucs_debug("cuda_ipc: no device context current and pid %d's GPU not visible here", ukey->key.pid);
        return UCS_ERR_UNREACHABLE;
    }
    *device_p = device;
    return UCS_OK;
}

/* The mapping rkey_ptr hands out on a device, made once per key and device; racing threads keep the first. */
static ucs_status_t cux_ipc_import_attach_device(cux_ipc_unpacked_rkey_t *ukey, int device,
                                                 cux_ipc_region_t **region_p)
{
    cux_ipc_region_t **attached = ukey->attached, *region;
    ucs_status_t status;

    if (attached == NULL) {
        attached = ucs_calloc(CUX_MAX_DEVICES, sizeof(*attached), "cux_ipc_rkey_ptr");
        if (attached == NULL) {
            return UCS_ERR_NO_MEMORY;
        }
        if (!__atomic_compare_exchange_n(&ukey->attached, &(cux_ipc_region_t**){NULL}, attached, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            ucs_free(attached);
            attached = ukey->attached;
        }
    }
    region = __atomic_load_n(&attached[device], __ATOMIC_ACQUIRE);
    if (region == NULL) {
        status = cux_ipc_import_get_for_key(ukey, device, &region);
        if (status != UCS_OK) {
            return status;
        }
        if (!__atomic_compare_exchange_n(&attached[device], &(cux_ipc_region_t*){NULL}, region, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            cux_ipc_import_put(region);
            region = attached[device];
        }
    }
    *region_p = region;
    return UCS_OK;
}

ucs_status_t cux_ipc_import_rkey_attach(cux_ipc_unpacked_rkey_t *ukey, void **mapped_base_p)
{
    cux_ipc_region_t *region;
    ucs_status_t status;
    int device;

    status = cux_ipc_import_key_device(ukey, &device);
    if (status == UCS_OK) {
        status = cux_ipc_import_attach_device(ukey, device, &region);
    }
    if (status == UCS_OK) {
        *mapped_base_p = region->mapped;
    }
    return status;
}

ucs_status_t cux_ipc_import_rkey_hold(const cux_ipc_unpacked_rkey_t *ukey, cux_ipc_region_t **region_p)
{
    ucs_status_t status;
    int device;

    status = cux_ipc_import_key_device(ukey, &device);
    return (status == UCS_OK) ? cux_ipc_import_get_for_key(ukey, device, region_p) : status;
}

ucs_status_t cux_ipc_import_rkey_ptr(uct_component_t *component, uct_rkey_t rkey, void *handle, uint64_t raddr,
                                     void **laddr_p)
{
    cux_ipc_unpacked_rkey_t *ukey = (cux_ipc_unpacked_rkey_t*)rkey;
    ucs_status_t status;
    void *base;

    if (!cux_ipc_rkey_covers(&ukey->key, raddr, 1)) {
        ucs_debug("cuda_ipc: rkey_ptr of 0x%" PRIx64 ", outside pid %d's allocation 0x%" PRIx64 "+%" PRIu64,
                  raddr, ukey->key.pid, ukey->key.base, ukey->key.length);
        return UCS_ERR_INVALID_ADDR;
    }
    status = cux_ipc_import_rkey_attach(ukey, &base);
    if (status == UCS_OK) {
        *laddr_p = UCS_PTR_BYTE_OFFSET(base, raddr - ukey->key.base);
    }
    return status;
}

