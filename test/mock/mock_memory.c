/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): Memory: the allocation table, late DMA of pageable copies, allocation, host registration, pointer attributes.
 */
#include "mock.h"

static size_t mock_dma_eager(void);
static void mock_late_drop(uintptr_t start, size_t size);
static mock_range_t mock_range_of(const mock_alloc_t *a);

mock_alloc_t *mock_find(uintptr_t p)
{
    int i;
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        if (mock_allocs[i].size && (p >= mock_allocs[i].start) &&
            (p < mock_allocs[i].start + mock_allocs[i].size)) {
            return &mock_allocs[i];
        }
    }
    return NULL;
}

mock_alloc_t *mock_find_import(uint64_t source, int device, uintptr_t pool)
{
    int i;

    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        if (mock_allocs[i].size && mock_allocs[i].imported && (mock_allocs[i].source == source) &&
            (mock_allocs[i].pool == pool) && ((pool != 0) || (mock_allocs[i].device == device))) {
            return &mock_allocs[i];
        }
    }
    return NULL;
}

mock_where_t mock_where(uintptr_t p, size_t n)
{
    mock_where_t where = {0, 0, 0};
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if (a != NULL) {
        where.known       = 1;
        where.host_pinned = a->host_pinned;
        where.fits        = (p + n <= a->start + a->size);
    }
    pthread_mutex_unlock(&mock_lock);
    return where;
}

CUresult mock_track(uintptr_t start, size_t size, int device, int managed, int pinned, int fd,
                           int imported)
{
    int i;
    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        if (mock_allocs[i].size == 0) {
            mock_allocs[i] = (mock_alloc_t){.start = start, .size = size, .device = device, .managed = managed,
                                            .host_pinned = pinned, .id = mock_next_id++, .fd = fd,
                                            .imported = imported};
            pthread_mutex_unlock(&mock_lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* kind: 0 device allocation, 1 pinned host range, 2 imported mapping */
CUresult mock_untrack(uintptr_t start, int kind)
{
    mock_alloc_t *a;
    pthread_mutex_lock(&mock_lock);
    a = mock_find(start);
    if ((a == NULL) || (a->start != start) || (a->host_pinned != (kind == 1)) || (a->imported != (kind == 2))) {
        pthread_mutex_unlock(&mock_lock);
        return (kind == 1) ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : CUDA_ERROR_INVALID_VALUE;
    }
    if (kind != 1) {
        mock_late_drop(a->start, a->size);
        munmap((void*)a->start, a->size);
    }
    if (a->fd >= 0) {
        close(a->fd);
    }
    a->size = 0;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ late DMA of pageable copies */

typedef struct mock_late_write {
    struct mock_late_write *next;
    uintptr_t              dst;
    size_t                 size;
    uint8_t                data[];
} mock_late_write_t;

static mock_late_write_t *mock_late_head, **mock_late_tail = &mock_late_head;
static pthread_mutex_t mock_late_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t mock_dma_eager(void)
{
    const char *n = getenv("MOCK_CUDA_DMA_EAGER");
    return n ? strtoull(n, NULL, 0) : 4096;
}

/* Everything issued before a synchronising call has landed when it returns. */
void mock_late_land(void)
{
    mock_late_write_t *w;

    pthread_mutex_lock(&mock_late_lock);
    while ((w = mock_late_head) != NULL) {
        mock_late_head = w->next;
        memcpy((void*)w->dst, w->data, w->size);
        free(w);
    }
    mock_late_tail = &mock_late_head;
    pthread_mutex_unlock(&mock_late_lock);
}

/* Writes not landed yet into [start, start + size) are lost when the memory goes. */
static void mock_late_drop(uintptr_t start, size_t size)
{
    mock_late_write_t **p, *w;

    pthread_mutex_lock(&mock_late_lock);
    for (p = &mock_late_head; (w = *p) != NULL;) {
        if ((w->dst >= start) && (w->dst < start + size)) {
            *p = w->next;
            free(w);
        } else {
            p = &w->next;
        }
    }
    for (mock_late_tail = &mock_late_head; *mock_late_tail != NULL; mock_late_tail = &(*mock_late_tail)->next) {
    }
    pthread_mutex_unlock(&mock_late_lock);
}

/* A synchronous copy: lands what came before, then writes; from pageable memory into device memory without
 * synchronous memory operations, only the head of it lands now. */
CUresult mock_sync_copy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    const char *late = getenv("MOCK_CUDA_LATE_DMA");
    size_t eager     = mock_dma_eager();
    mock_alloc_t *d, *sa;
    mock_late_write_t *w;
    int sync_memops, pageable_to_device;

    if (!dst || !src) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    mock_late_land();
    pthread_mutex_lock(&mock_lock);
    d                  = mock_find(dst);
    sa                 = mock_find(src);
    sync_memops        = ((d != NULL) && d->sync_memops) ||
                         ((mock_current != NULL) && (__atomic_load_n(&mock_current->flags, __ATOMIC_RELAXED) & CU_CTX_SYNC_MEMOPS));
    pageable_to_device = (sa == NULL) && (d != NULL) && !d->host_pinned;
    pthread_mutex_unlock(&mock_lock);
    if (!pageable_to_device || sync_memops || (n <= eager) || ((late != NULL) && !strcmp(late, "0"))) {
        memmove((void*)dst, (void*)src, n);
        return CUDA_SUCCESS;
    }
    w = malloc(sizeof(*w) + n - eager);
    if (w == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memmove((void*)dst, (void*)src, eager);
    w->next = NULL;
    w->dst  = dst + eager;
    w->size = n - eager;
    memcpy(w->data, (void*)(src + eager), n - eager);
    pthread_mutex_lock(&mock_late_lock);
    *mock_late_tail = w;
    mock_late_tail  = &w->next;
    pthread_mutex_unlock(&mock_late_lock);
    return CUDA_SUCCESS;
}

CUresult mock_alloc(CUdeviceptr *p, size_t n, int managed)
{
    CUresult res = mock_injected("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
    void *m;
    int fd;

    if (res != CUDA_SUCCESS) {
        return res;
    }

    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (n == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    fd = memfd_create("mockcuda", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, n) != 0)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = (CUdeviceptr)m;
    return mock_track((uintptr_t)m, n, mock_current_device(), managed, 0, fd, 0);
}

CUresult m_cuMemAlloc(CUdeviceptr *p, size_t n) { return mock_alloc(p, n, 0); }
CUresult m_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f) { return mock_alloc(p, n, 1); }

/* Memory imported from another process's pool is freed with cuMemFree too. */
CUresult m_cuMemFree(CUdeviceptr p)
{
    mock_alloc_t *a;
    int imported;

    pthread_mutex_lock(&mock_lock);
    a        = mock_find(p);
    imported = (a != NULL) && a->pool_import;
    pthread_mutex_unlock(&mock_lock);
    return mock_untrack(p, imported ? 2 : 0);
}

/* The device's memory in use: this process's allocations (the driver answers for every process). */
CUresult m_cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    size_t used = 0;
    int i;

    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        if (mock_allocs[i].size && !mock_allocs[i].host_pinned && !mock_allocs[i].imported) {
            used += mock_allocs[i].size;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    *total      = 80ul << 30;
    *free_bytes = (used < *total) ? *total - used : 0;
    return CUDA_SUCCESS;
}

CUresult m_cuMemHostRegister(void *p, size_t n, unsigned flags)
{
    if (mock_find((uintptr_t)p) || mock_find((uintptr_t)p + n - 1)) {
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    return mock_track((uintptr_t)p, n, -1, 0, 1, -1, 0);
}

CUresult m_cuMemHostUnregister(void *p) { return mock_untrack((uintptr_t)p, 1); }

CUresult m_cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    CUresult res;

    *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    if (*p == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    res = mock_track((uintptr_t)*p, n, -1, 0, 1, -1, 0);
    if (res != CUDA_SUCCESS) {
        free(*p);
    }
    return res;
}

CUresult m_cuMemFreeHost(void *p)
{
    CUresult res = mock_untrack((uintptr_t)p, 1);

    if (res == CUDA_SUCCESS) {
        free(p);
    }
    return res;
}


/* The driver's range of a cuMemMap mapping is its whole reservation, which may hold several mappings; the
 * mapping attributes give the one mapping. Caller holds mock_lock. */
static mock_range_t mock_range_of(const mock_alloc_t *a)
{
    int i;

    for (i = 0; a->vmm && (i < MOCK_MAX_RESERVED); ++i) {
        if ((mock_reserved[i].size != 0) && (a->start >= mock_reserved[i].start) &&
            (a->start < mock_reserved[i].start + mock_reserved[i].size)) {
            return mock_reserved[i];
        }
    }
    return (mock_range_t){a->start, a->size};
}

/* The driver maps a pool's memory in chunks of 32 MB: the mapping attributes of pool memory give the chunk at p,
 * while the range is the whole allocation (an H100 with driver 580, bench/cux_pool_probe). Caller holds
 * mock_lock. */
#define MOCK_POOL_CHUNK (32ul << 20)
static mock_range_t mock_mapping_of(const mock_alloc_t *a, CUdeviceptr p)
{
    CUdeviceptr chunk = a->start + ((p - a->start) / MOCK_POOL_CHUNK) * MOCK_POOL_CHUNK;

    return a->pool ? (mock_range_t){chunk, MOCK_POOL_CHUNK} : (mock_range_t){a->start, a->size};
}

CUresult m_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    mock_alloc_t *a;
    unsigned i;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    for (i = 0; i < n; ++i) {
        switch (attrs[i]) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned*)data[i] = !a ? 0 : a->host_pinned ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            break;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *(unsigned*)data[i] = a && a->managed;
            break;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *(int*)data[i] = a ? a->device : -2;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *(CUdeviceptr*)data[i] = a ? mock_range_of(a).start : 0;
            break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *(size_t*)data[i] = a ? mock_range_of(a).size : 0;
            break;
        case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
            *(CUdeviceptr*)data[i] = a ? mock_mapping_of(a, p).start : 0;
            break;
        case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
            *(size_t*)data[i] = a ? mock_mapping_of(a, p).size : 0;
            break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *(unsigned long long*)data[i] = a ? a->id : 0;
            break;
        case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
            *(unsigned*)data[i] = a && a->sync_memops;
            break;
        case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: /* a bool, as the driver writes it */
            *(uint8_t*)data[i] = a && (a->fd >= 0) && !a->imported && !a->pool && !a->vmm && !a->host_pinned;
            break;
        case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
            *(unsigned long long*)data[i] = (a && a->pool) ? mock_pool_handle_types(a->pool) :
                                            (a && a->vmm) ? mock_vmm_handle_types(a->handle) : 0;
            break;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
            *(CUmemoryPool*)data[i] = a ? (CUmemoryPool)a->pool : NULL;
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult m_cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr p)
{
    mock_alloc_t *a;
    CUresult res = CUDA_SUCCESS;

    if (attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || a->host_pinned) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (a->vmm) {
        res = CUDA_ERROR_NOT_SUPPORTED; /* like the driver: VMM memory needs the context flag */
    } else {
        a->sync_memops = *(const unsigned*)value;
    }
    pthread_mutex_unlock(&mock_lock);
    return res;
}

CUresult m_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    mock_alloc_t *a;

    if (mock_injected("cuMemGetAddressRange", CUDA_ERROR_NOT_SUPPORTED) != CUDA_SUCCESS) {
        return CUDA_ERROR_NOT_SUPPORTED; /* audit: a driver that does not report an imported mapping's range */
    }

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || (a->device < 0)) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_ERROR_NOT_FOUND;
    }
    if (base != NULL) { /* as the pointer attributes: a cuMemMap mapping's range is its whole reservation */
        *base = mock_range_of(a).start;
    }
    if (size != NULL) {
        *size = mock_range_of(a).size;
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}
