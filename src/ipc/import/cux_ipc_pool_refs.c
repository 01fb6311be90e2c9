/* SPDX-License-Identifier: BSD-3-Clause */
#include "ipc/import/cux_ipc_pool_refs.h"

#include "driver/cux_driver.h"

#include <pthread.h>
#include <ucs/datastruct/list.h>
#include <ucs/datastruct/khash.h>
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>

typedef struct {
    ucs_list_link_t link;
    CUmemoryPool    pool;
    unsigned        imports;  /* the driver's count: cuMemPoolDestroy calls owed */
    unsigned        pointers; /* allocations imported from it and not freed */
} cux_ipc_pool_ref_t;

/* Mappings holding each imported pointer (more than one if the driver hands the same pointer out again). */
KHASH_MAP_INIT_INT64(cux_ipc_pool_ptrs, unsigned)

/* Mappings are made and dropped by any thread whose worker shares the cache. */
static pthread_mutex_t cux_ipc_pool_refs_lock = PTHREAD_MUTEX_INITIALIZER;
static UCS_LIST_HEAD(cux_ipc_pool_refs);
static khash_t(cux_ipc_pool_ptrs) cux_ipc_pool_ptrs;

static cux_ipc_pool_ref_t *cux_ipc_pool_ref_find(CUmemoryPool pool)
{
    cux_ipc_pool_ref_t *ref;

    ucs_list_for_each(ref, &cux_ipc_pool_refs, link) {
        if (ref->pool == pool) {
            return ref;
        }
    }
    return NULL;
}

static void cux_ipc_pool_destroy_imports(CUmemoryPool pool, unsigned imports)
{
    while (imports-- > 0) {
        (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemPoolDestroy, pool);
    }
}

/* Called with the lock held: an entry whose allocations are all freed destroys its imports and goes. */
static void cux_ipc_pool_ref_settle(cux_ipc_pool_ref_t *ref)
{
    if (ref->pointers == 0) {
        ucs_list_del(&ref->link);
        cux_ipc_pool_destroy_imports(ref->pool, ref->imports);
        ucs_free(ref);
    }
}

ucs_status_t cux_ipc_pool_refs_add(CUmemoryPool pool, unsigned imports, CUdeviceptr pointer)
{
    cux_ipc_pool_ref_t *ref;
    khiter_t it;
    int ret;

    pthread_mutex_lock(&cux_ipc_pool_refs_lock);
    ref = cux_ipc_pool_ref_find(pool);
    if (ref == NULL) {
        ref = ucs_calloc(1, sizeof(*ref), "cux_ipc_pool_ref");
        if (ref == NULL) {
            pthread_mutex_unlock(&cux_ipc_pool_refs_lock);
            ucs_error("cuda_ipc: no memory to count the references to an imported pool");
            return UCS_ERR_NO_MEMORY;
        }
        ref->pool = pool;
        ucs_list_add_tail(&cux_ipc_pool_refs, &ref->link);
    }
    if (pointer != 0) {
        it = kh_put(cux_ipc_pool_ptrs, &cux_ipc_pool_ptrs, pointer, &ret);
        if (ret == UCS_KH_PUT_FAILED) {
            cux_ipc_pool_ref_settle(ref); /* a new, empty entry goes again */
            pthread_mutex_unlock(&cux_ipc_pool_refs_lock);
            ucs_error("cuda_ipc: no memory to count the mappings of an imported allocation");
            return UCS_ERR_NO_MEMORY;
        } else if (ret == UCS_KH_PUT_KEY_PRESENT) {
            ++kh_val(&cux_ipc_pool_ptrs, it); /* the same pointer again: freed when its last mapping goes */
            ucs_debug("cuda_ipc: the driver imported pool allocation 0x%llx again at the same pointer",
                      (unsigned long long)pointer);
        } else {
            kh_val(&cux_ipc_pool_ptrs, it) = 1;
            ++ref->pointers;
        }
    }
    ref->imports += imports;
    cux_ipc_pool_ref_settle(ref);
    pthread_mutex_unlock(&cux_ipc_pool_refs_lock);
    return UCS_OK;
}

void cux_ipc_pool_refs_free_pointer(CUmemoryPool pool, CUdeviceptr pointer)
{
    cux_ipc_pool_ref_t *ref;
    khiter_t it;

    pthread_mutex_lock(&cux_ipc_pool_refs_lock);
    it = kh_get(cux_ipc_pool_ptrs, &cux_ipc_pool_ptrs, pointer);
    if ((it != kh_end(&cux_ipc_pool_ptrs)) && (--kh_val(&cux_ipc_pool_ptrs, it) > 0)) {
        pthread_mutex_unlock(&cux_ipc_pool_refs_lock); /* another mapping holds the same pointer */
        return;
    }
    if (it != kh_end(&cux_ipc_pool_ptrs)) {
        kh_del(cux_ipc_pool_ptrs, &cux_ipc_pool_ptrs, it);
    }
    (void)CUX_DRV_CALL(UCS_LOG_LEVEL_WARN, cuMemFree, pointer);
    ref = cux_ipc_pool_ref_find(pool);
    if ((ref != NULL) && (ref->pointers > 0)) {
        --ref->pointers;
        cux_ipc_pool_ref_settle(ref);
    } else {
        ucs_warn("cuda_ipc: an allocation of imported pool %p was freed twice or never counted", (void*)pool);
    }
    pthread_mutex_unlock(&cux_ipc_pool_refs_lock);
}
