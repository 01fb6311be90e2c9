/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A stand-in for libcuda.so.1 so that CI, which has no GPU, runs the transport's whole data path through the
 * real libuct: "device memory" is host memory the mock tracks, copies are memcpy, events become ready after
 * MOCK_CUDA_EVENT_DELAY queries (default 2), so progress, flush, pending and arming are exercised.
 *
 * MOCK_CUDA_MODE selects a failure to test the loader: "nodevice" (cuInit fails), "old" (driver version
 * 11.8), "nosym" (one entry point missing). Built with MOCK_PRE12 it lacks cuGetProcAddress_v2, like a
 * driver older than CUDA 12.
 * MOCK_CUDA_DEVICES sets the number of devices (default 2); MOCK_CUDA_NO_PEER=1 denies peer access.
 * CUDA_VISIBLE_DEVICES selects and orders them like the driver does (indices only): a device's UUID and peer
 * access follow its physical index, so two processes can see the same device under different ordinals.
 *
 * Device memory lives in memfd files, so IPC works between processes: a handle names the exporter's pid,
 * file descriptor and inode, and the importer maps the same file through /proc/<pid>/fd.
 *
 * Late DMA, as the driver documents it: a synchronous copy from pageable host memory to device memory may
 * return before its DMA has landed. Unless the allocation has CU_POINTER_ATTRIBUTE_SYNC_MEMOPS or the current
 * context CU_CTX_SYNC_MEMOPS, the mock writes the first MOCK_CUDA_DMA_EAGER bytes (default 4096) at once and
 * the rest only at the next synchronising call (a synchronous copy, cuCtxSynchronize, cuStreamSynchronize of
 * the NULL stream): copies on other streams read what was there before. MOCK_CUDA_LATE_DMA=0 turns it off.
 * MOCK_CUDA_MODE=nosetflags hides cuCtxSetFlags (a 12.0 driver). MOCK_CUDA_EVENT_ERROR makes every
 * cuEventQuery fail with CUDA_ERROR_ILLEGAL_ADDRESS.
 *
 * Asynchronous copies: with MOCK_CUDA_ASYNC=1 a copy on a stream (cuMemcpyAsync, cuMemcpyBatchAsync) is only
 * queued; it is done when an event recorded after it completes, or at cuStreamSynchronize, cuStreamQuery,
 * cuCtxSynchronize, cuLaunchHostFunc or cuStreamDestroy. A queued copy whose memory was freed or unmapped before
 * it ran fails its stream with CUDA_ERROR_ILLEGAL_ADDRESS instead of writing.
 *
 * DMA-BUF: cuMemGetHandleForAddressRange checks the range as the driver documents it (page-aligned, device
 * memory of one allocation) and returns a memfd of the range's size, so a test can check the size with
 * lseek(SEEK_END) as it would on a real dma-buf. MOCK_CUDA_NO_DMABUF=1: devices do not support dma-buf.
 * Memory of a device's default pool (cuMemAllocFromPoolAsync) has no IPC handle, as with the driver.
 * MOCK_CUDA_PCI=1 gives devices PCI addresses (0000:c0:00.0 on), so that UCX's topology knows them.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#define MOCK_MAX_ALLOCS 16384

typedef struct {
    uintptr_t          start;
    size_t             size;
    int                device;
    int                managed;
    int                host_pinned;
    unsigned long long id;
    int                fd;        /* memfd of device memory, -1 otherwise */
    int                imported;  /* mapped from another process by cuIpcOpenMemHandle */
    int                vmm;       /* a cuMemMap mapping: the handle below owns the memory */
    unsigned long long handle;
    int                sync_memops; /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */
    int                pool;        /* from a device's default memory pool: no IPC handle */
} mock_alloc_t;

/* cuMemCreate / cuMemImportFromShareableHandle allocations: a memfd with a reference count. */
typedef struct {
    int    fd;
    size_t size;
    int    refs;
    int    exportable;
} mock_vmm_t;

#define MOCK_MAX_VMM 1024
static mock_vmm_t mock_vmm[MOCK_MAX_VMM];

/* cuMemAddressReserve ranges: the driver's range of the memory mapped into one. */
typedef struct {
    uintptr_t start;
    size_t    size;
} mock_range_t;

#define MOCK_MAX_RESERVED 1024
static mock_range_t mock_reserved[MOCK_MAX_RESERVED];

/* The exporting pid at bytes 8-11, where the real driver writes it (what the module's handle binding reads). */
typedef struct {
    uint32_t magic;
    int32_t  fd;
    int32_t  pid;
    int32_t  reserved;
    uint64_t size;
    uint64_t ino;
} mock_ipc_handle_t;

#define MOCK_IPC_MAGIC 0x4b434f4d

/* A context is shared by threads, as the driver's are: its flags and peers are read and written atomically. */
struct CUctx_st    { int device; unsigned flags; unsigned peers; };

/* A copy issued on a stream with MOCK_CUDA_ASYNC=1: done when an event recorded after it completes. */
typedef struct mock_copy {
    struct mock_copy   *next;
    uintptr_t          dst, src;
    size_t             size;
    unsigned long long dst_id, src_id; /* the allocations at issue time, 0 for untracked memory */
    unsigned long      seq;
} mock_copy_t;

struct CUstream_st {
    int                device;
    pthread_mutex_t    lock;
    mock_copy_t        *head, **tail; /* copies not done yet, oldest first */
    unsigned long      issued;        /* copies issued so far: the sequence of the last one */
    CUresult           error;         /* sticky: a copy whose memory had gone */
    int                destroyed;
    struct CUstream_st *all_next;     /* every stream ever created, so that events never dangle */
};
struct CUevent_st  { int pending; CUstream stream; unsigned long seq; };

static mock_alloc_t mock_allocs[MOCK_MAX_ALLOCS];
static void mock_late_drop(uintptr_t start, size_t size);
static CUresult mock_ctx_streams_run(int device);
#define MOCK_MAX_DEVICES 16
static struct CUctx_st mock_ctx[MOCK_MAX_DEVICES];
static int mock_ctx_retained[MOCK_MAX_DEVICES]; /* retains of each primary context */
static __thread CUcontext mock_current;
static __thread CUcontext mock_stack[16];
static __thread int mock_stack_depth;
static unsigned long long mock_next_id = 1;
static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static int mock_initialized;

static const char *mock_mode(void)
{
    const char *mode = getenv("MOCK_CUDA_MODE");
    return mode ? mode : "";
}

static int mock_num_devices(void)
{
    const char *n = getenv("MOCK_CUDA_DEVICES");
    return n ? atoi(n) : 2;
}

/* Physical indices of the visible devices, in ordinal order; returns how many. */
static int mock_visible(int *phys, int max)
{
    const char *list = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0, total = mock_num_devices();
    char *end;
    long v;

    if (list == NULL) {
        for (n = 0; (n < total) && (n < max); ++n) {
            phys[n] = n;
        }
        return n;
    }
    while ((*list != '\0') && (n < max)) {
        v = strtol(list, &end, 10);
        if ((end == list) || (v < 0) || (v >= total)) {
            break; /* like the driver: the list ends at the first invalid entry */
        }
        phys[n++] = (int)v;
        list = (*end == ',') ? end + 1 : end;
    }
    return n;
}

static int mock_physical(CUdevice d)
{
    int phys[16];
    return (d < mock_visible(phys, 16)) ? phys[d] : -1;
}

static int mock_event_delay(void)
{
    const char *n = getenv("MOCK_CUDA_EVENT_DELAY");
    return n ? atoi(n) : 2;
}

static mock_alloc_t *mock_find(uintptr_t p)
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

static CUresult mock_track(uintptr_t start, size_t size, int device, int managed, int pinned, int fd,
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
static CUresult mock_untrack(uintptr_t start, int kind)
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

static int mock_current_device(void)
{
    return mock_current ? mock_current->device : -1;
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
static void mock_late_land(void)
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
static CUresult mock_sync_copy(CUdeviceptr dst, CUdeviceptr src, size_t n)
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

CUresult cuInit(unsigned flags)
{
    if (!strcmp(mock_mode(), "nodevice") || (mock_num_devices() == 0)) {
        return CUDA_ERROR_NO_DEVICE;
    }
    mock_initialized = 1;
    return CUDA_SUCCESS;
}

static CUresult m_cuDriverGetVersion(int *v)
{
    *v = !strcmp(mock_mode(), "old") ? 11080 : 13000;
    return CUDA_SUCCESS;
}

static CUresult m_cuGetErrorName(CUresult e, const char **s) { *s = "MOCK_ERROR"; return CUDA_SUCCESS; }
static CUresult m_cuGetErrorString(CUresult e, const char **s) { *s = "mock error"; return CUDA_SUCCESS; }
static CUresult m_cuDeviceGetCount(int *n)
{
    int phys[16];
    *n = mock_visible(phys, 16);
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceGet(CUdevice *d, int ordinal)
{
    int phys[16];
    if ((ordinal < 0) || (ordinal >= mock_visible(phys, 16))) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceGetName(char *name, int len, CUdevice d)
{
    strncpy(name, "Mock GPU", len);
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    *v = !((a == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) && getenv("MOCK_CUDA_NO_DMABUF"));
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceGetPCIBusId(char *s, int len, CUdevice d)
{
    if (getenv("MOCK_CUDA_PCI") == NULL) {
        return CUDA_ERROR_NOT_SUPPORTED; /* no PCI topology: sys_dev stays unknown */
    }
    snprintf(s, len, "0000:%02x:00.0", 0xc0 + mock_physical(d));
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceGetUuid(CUuuid *u, CUdevice d)
{
    memset(u, 0, sizeof(*u));
    u->bytes[0] = 0x4d;
    u->bytes[15] = (char)mock_physical(d);
    return CUDA_SUCCESS;
}

static CUresult m_cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b)
{
    *can = (getenv("MOCK_CUDA_NO_PEER") == NULL) && (mock_physical(a) != mock_physical(b));
    return CUDA_SUCCESS;
}

static CUresult mock_injected(const char *name, CUresult error);

static CUresult m_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    CUresult res = mock_injected("cuDevicePrimaryCtxRetain", CUDA_ERROR_OUT_OF_MEMORY);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    mock_ctx[d].device = d; /* its flags and peers stay as they are: one primary context per device */
    __atomic_add_fetch(&mock_ctx_retained[d], 1, __ATOMIC_RELAXED);
    *c = &mock_ctx[d];
    return CUDA_SUCCESS;
}

/* A primary context is active once retained; the mock never deactivates one (release only counts). */
static CUresult m_cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active)
{
    if ((d < 0) || (d >= MOCK_MAX_DEVICES)) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *flags  = 0;
    *active = (mock_ctx[d].device == d) && (mock_ctx_retained[d] > 0);
    return CUDA_SUCCESS;
}

static CUresult m_cuDevicePrimaryCtxRelease(CUdevice d)
{
    return ((d >= 0) && (d < MOCK_MAX_DEVICES)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static CUresult m_cuCtxGetCurrent(CUcontext *c) { *c = mock_current; return CUDA_SUCCESS; }
static CUresult m_cuCtxSetCurrent(CUcontext c) { mock_current = c; return CUDA_SUCCESS; }

static CUresult m_cuCtxPushCurrent(CUcontext c)
{
    mock_stack[mock_stack_depth++] = mock_current;
    mock_current = c;
    return CUDA_SUCCESS;
}

static CUresult m_cuCtxPopCurrent(CUcontext *c)
{
    if (mock_stack_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *c = mock_current;
    mock_current = mock_stack[--mock_stack_depth];
    return CUDA_SUCCESS;
}

static CUresult m_cuCtxGetFlags(unsigned *flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *flags = __atomic_load_n(&mock_current->flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult m_cuCtxSetFlags(unsigned flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    __atomic_store_n(&mock_current->flags, flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

static CUresult m_cuCtxSynchronize(void)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    mock_late_land();
    return mock_ctx_streams_run(mock_current->device);
}

static CUresult m_cuCtxGetDevice(CUdevice *d)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *d = mock_current->device;
    return CUDA_SUCCESS;
}

/*
 * Fault injection: MOCK_CUDA_FAIL="NAME[:AFTER[:COUNT]]" makes entry point NAME (cuDevicePrimaryCtxRetain,
 * cuMemAlloc, cuStreamCreate, cuEventCreate, cuMemcpyAsync, cuMemcpyBatchAsync, cuIpcOpenMemHandle) fail after
 * AFTER more successful calls (default 0), COUNT times (default: every call). Read at each call, so a test can set and unset it between
 * operations; the calls are counted from the first one that sees the current value.
 */
static CUresult mock_injected(const char *name, CUresult error)
{
    static char     seen[128];
    static unsigned calls;
    const char *spec = getenv("MOCK_CUDA_FAIL");
    unsigned after = 0, count = UINT32_MAX;
    size_t len = strlen(name);
    int fail;

    if ((spec == NULL) || (strncmp(spec, name, len) != 0) || ((spec[len] != '\0') && (spec[len] != ':'))) {
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&mock_lock);
    if (strncmp(seen, spec, sizeof(seen)) != 0) {
        snprintf(seen, sizeof(seen), "%s", spec);
        calls = 0;
    }
    sscanf(spec + len, ":%u:%u", &after, &count);
    ++calls;
    fail = (calls > after) && (calls - after <= count);
    pthread_mutex_unlock(&mock_lock);
    return fail ? error : CUDA_SUCCESS;
}

/* Live objects, for tests that check nothing leaked: mock_cuda_live("streams"), "events", "allocations"
 * (device and managed memory) or "mappings" (imported IPC memory); and "failed exports", the export calls
 * that failed so far, and "issued copies", the copies accepted on a stream so far. */
static long mock_live_streams, mock_live_events;
static long mock_failed_exports; /* cuIpcGetMemHandle and cuMemExportToShareableHandle calls that failed */
static long mock_issued_copies;  /* copies accepted on a stream, alone or in a batch */

long mock_cuda_live(const char *what)
{
    long n = 0;
    int i, imported;

    if (!strcmp(what, "streams")) {
        return __atomic_load_n(&mock_live_streams, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "events")) {
        return __atomic_load_n(&mock_live_events, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "failed exports")) {
        return __atomic_load_n(&mock_failed_exports, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "issued copies")) {
        return __atomic_load_n(&mock_issued_copies, __ATOMIC_RELAXED);
    }
    imported = !strcmp(what, "mappings");
    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        n += mock_allocs[i].size && !mock_allocs[i].host_pinned && (mock_allocs[i].imported == imported);
    }
    pthread_mutex_unlock(&mock_lock);
    return n;
}

static CUstream mock_all_streams;

/* Runs the copies of a stream issued up to sequence upto (all of them: ULONG_MAX); returns its sticky error. A
 * copy whose tracked memory was freed (or unmapped) since it was issued is not done: the stream fails, as a
 * device would on an unmapped address, so a transport that unmaps under copies in flight is caught. */
static CUresult mock_stream_run(CUstream s, unsigned long upto)
{
    mock_copy_t *c;
    mock_alloc_t *d, *sa;
    int gone;

    pthread_mutex_lock(&s->lock);
    while (((c = s->head) != NULL) && (c->seq <= upto)) {
        s->head = c->next;
        if (s->head == NULL) {
            s->tail = &s->head;
        }
        pthread_mutex_lock(&mock_lock);
        d    = c->dst_id ? mock_find(c->dst) : NULL;
        sa   = c->src_id ? mock_find(c->src) : NULL;
        gone = (c->dst_id && ((d == NULL) || (d->id != c->dst_id))) ||
               (c->src_id && ((sa == NULL) || (sa->id != c->src_id)));
        pthread_mutex_unlock(&mock_lock);
        if (gone) {
            fprintf(stderr, "mock cuda: an asynchronous copy of %zu bytes found its memory gone\n", c->size);
            s->error = CUDA_ERROR_ILLEGAL_ADDRESS;
        } else if (s->error == CUDA_SUCCESS) {
            memmove((void*)c->dst, (void*)c->src, c->size);
        }
        free(c);
    }
    pthread_mutex_unlock(&s->lock);
    return s->error;
}

/* cuCtxSynchronize: every stream of the device; the first sticky error. */
static CUresult mock_ctx_streams_run(int device)
{
    CUresult res = CUDA_SUCCESS, r;
    CUstream s;

    pthread_mutex_lock(&mock_lock);
    s = mock_all_streams;
    pthread_mutex_unlock(&mock_lock);
    for (; s != NULL; s = s->all_next) { /* only ever prepended to: the list from s on is fixed */
        if (!s->destroyed && (s->device == device) && ((r = mock_stream_run(s, ULONG_MAX)) != CUDA_SUCCESS)) {
            res = (res == CUDA_SUCCESS) ? r : res;
        }
    }
    return res;
}

/* Issue a copy on a stream: done now, or queued with MOCK_CUDA_ASYNC=1. */
static CUresult mock_stream_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    const char *async = getenv("MOCK_CUDA_ASYNC");
    mock_alloc_t *a;
    mock_copy_t *c;

    if ((async == NULL) || strcmp(async, "1")) {
        memmove((void*)dst, (void*)src, n);
        return CUDA_SUCCESS;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->dst  = dst;
    c->src  = src;
    c->size = n;
    pthread_mutex_lock(&mock_lock);
    c->dst_id = ((a = mock_find(dst)) != NULL) ? a->id : 0;
    c->src_id = ((a = mock_find(src)) != NULL) ? a->id : 0;
    pthread_mutex_unlock(&mock_lock);
    pthread_mutex_lock(&s->lock);
    c->seq   = ++s->issued;
    *s->tail = c;
    s->tail  = &c->next;
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static CUresult m_cuStreamCreate(CUstream *s, unsigned flags)
{
    CUresult res = mock_injected("cuStreamCreate", CUDA_ERROR_OUT_OF_MEMORY);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *s = calloc(1, sizeof(**s));
    (*s)->device = mock_current_device();
    (*s)->tail   = &(*s)->head;
    pthread_mutex_init(&(*s)->lock, NULL);
    pthread_mutex_lock(&mock_lock);
    (*s)->all_next   = mock_all_streams;
    mock_all_streams = *s;
    pthread_mutex_unlock(&mock_lock);
    __atomic_add_fetch(&mock_live_streams, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
/* Like the driver, work still queued completes; the stream's memory is kept for events recorded on it. */
static CUresult m_cuStreamDestroy(CUstream s)
{
    (void)mock_stream_run(s, ULONG_MAX);
    s->destroyed = 1;
    __atomic_sub_fetch(&mock_live_streams, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
static CUresult m_cuStreamSynchronize(CUstream s)
{
    if (s == NULL) {
        mock_late_land(); /* the legacy stream: ordered after synchronous copies */
        return CUDA_SUCCESS;
    }
    return mock_stream_run(s, ULONG_MAX);
}
static CUresult m_cuStreamQuery(CUstream s)
{
    return (s == NULL) ? CUDA_SUCCESS : mock_stream_run(s, ULONG_MAX);
}

static CUresult m_cuEventCreate(CUevent *e, unsigned flags)
{
    CUresult res = mock_injected("cuEventCreate", CUDA_ERROR_OUT_OF_MEMORY);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *e = calloc(1, sizeof(**e));
    __atomic_add_fetch(&mock_live_events, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
static CUresult m_cuEventDestroy(CUevent e)
{
    __atomic_sub_fetch(&mock_live_events, 1, __ATOMIC_RELAXED);
    free(e);
    return CUDA_SUCCESS;
}

static CUresult m_cuEventRecord(CUevent e, CUstream s)
{
    e->pending = mock_event_delay();
    e->stream  = s;
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        e->seq = s->issued;
        pthread_mutex_unlock(&s->lock);
    }
    return CUDA_SUCCESS;
}

static CUresult m_cuEventQuery(CUevent e)
{
    if (getenv("MOCK_CUDA_EVENT_ERROR") != NULL) {
        return CUDA_ERROR_ILLEGAL_ADDRESS; /* a sticky asynchronous error, as after a faulting kernel */
    }
    if (e->pending > 0) {
        --e->pending;
        return CUDA_ERROR_NOT_READY;
    }
    return (e->stream != NULL) ? mock_stream_run(e->stream, e->seq) : CUDA_SUCCESS;
}

static CUresult m_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    (void)mock_stream_run(s, ULONG_MAX); /* every earlier copy has run when the function does */
    fn(arg);
    return CUDA_SUCCESS;
}

/* Like the driver: a host range that starts inside a pinned range must end inside it too. */
static int mock_straddles_pinned(CUdeviceptr p, size_t n)
{
    mock_alloc_t *a;
    int straddles;

    pthread_mutex_lock(&mock_lock);
    a         = mock_find(p);
    straddles = (a != NULL) && a->host_pinned && (p + n > a->start + a->size);
    pthread_mutex_unlock(&mock_lock);
    return straddles;
}

static CUresult m_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    CUresult res = mock_injected("cuMemcpyAsync", CUDA_ERROR_ILLEGAL_ADDRESS);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if ((s == NULL) || (s->device != mock_current_device())) {
        return CUDA_ERROR_INVALID_CONTEXT; /* like the driver: the stream's context must be current */
    }
    if (!dst || !src || mock_straddles_pinned(dst, n) || mock_straddles_pinned(src, n)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    __atomic_add_fetch(&mock_issued_copies, 1, __ATOMIC_RELAXED);
    return mock_stream_copy(s, dst, src, n);
}

static CUresult mock_alloc(CUdeviceptr *p, size_t n, int managed)
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

static CUresult m_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                     CUmemcpyAttributes *attrs, size_t *attr_idxs, size_t num_attrs, CUstream s)
{
    CUresult res = mock_injected("cuMemcpyBatchAsync", CUDA_ERROR_ILLEGAL_ADDRESS);
    size_t i;

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if ((count == 0) || (num_attrs == 0) || (attrs == NULL)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; (i < count) && (res == CUDA_SUCCESS); ++i) {
        res = m_cuMemcpyAsync(dsts[i], srcs[i], sizes[i], s);
    }
    return res;
}

static CUresult m_cuMemAlloc(CUdeviceptr *p, size_t n) { return mock_alloc(p, n, 0); }
static CUresult m_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f) { return mock_alloc(p, n, 1); }

static CUresult m_cuMemFree(CUdeviceptr p) { return mock_untrack(p, 0); }

static CUresult m_cuMemHostRegister(void *p, size_t n, unsigned flags)
{
    if (mock_find((uintptr_t)p) || mock_find((uintptr_t)p + n - 1)) {
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    return mock_track((uintptr_t)p, n, -1, 0, 1, -1, 0);
}

static CUresult m_cuMemHostUnregister(void *p) { return mock_untrack((uintptr_t)p, 1); }

static CUresult m_cuMemHostAlloc(void **p, size_t n, unsigned flags)
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

static CUresult m_cuMemFreeHost(void *p)
{
    CUresult res = mock_untrack((uintptr_t)p, 1);

    if (res == CUDA_SUCCESS) {
        free(p);
    }
    return res;
}

/* Peer access needs no set-up in host memory; the driver's answers, and which pairs have it, are imitated. */
static CUresult m_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags)
{
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    } else if ((mock_current == peer) || (peer == NULL)) {
        return CUDA_ERROR_INVALID_DEVICE;
    } else if (__atomic_fetch_or(&mock_current->peers, 1u << peer->device, __ATOMIC_RELAXED) &
               (1u << peer->device)) {
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    }
    return CUDA_SUCCESS;
}

static CUresult m_cuCtxDisablePeerAccess(CUcontext peer)
{
    if ((mock_current == NULL) || (peer == NULL) ||
        !(__atomic_fetch_and(&mock_current->peers, ~(1u << peer->device), __ATOMIC_RELAXED) & (1u << peer->device))) {
        return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    }
    return CUDA_SUCCESS;
}

static mock_vmm_t *mock_vmm_get(CUmemGenericAllocationHandle h);

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

static CUresult m_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
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
            *(CUdeviceptr*)data[i] = a ? a->start : 0;
            break;
        case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
            *(size_t*)data[i] = a ? a->size : 0;
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
            *(unsigned long long*)data[i] = (a && a->vmm && mock_vmm_get(a->handle) &&
                                             mock_vmm_get(a->handle)->exportable) ?
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

static CUresult m_cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr p)
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

static CUresult m_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr p)
{
    mock_ipc_handle_t *h = (mock_ipc_handle_t*)handle;
    mock_alloc_t *a;
    struct stat st;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || (a->start != p) || (a->fd < 0) || a->imported || a->pool || fstat(a->fd, &st)) {
        pthread_mutex_unlock(&mock_lock);
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(handle, 0, sizeof(*handle));
    *h = (mock_ipc_handle_t){.magic = MOCK_IPC_MAGIC, .fd = a->fd, .pid = getpid(), .size = a->size,
                             .ino = st.st_ino};
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/*
 * The driver opens a legacy handle through its kernel module, with no ptrace check; the mock opens the
 * exporter's memfd through /proc/PID/fd, which needs one. Where CAP_SYS_PTRACE is permitted but not effective
 * (a test that took it away to make the exporter unreadable, as Yama does to siblings), it is raised for that
 * open only, so that the mock refuses no more than the driver would.
 */
static int mock_open_as_driver(const char *path)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    int fd, raised = 0;

    if ((syscall(SYS_capget, &hdr, data) == 0) && (data[0].permitted & (1u << CAP_SYS_PTRACE)) &&
        !(data[0].effective & (1u << CAP_SYS_PTRACE))) {
        data[0].effective |= 1u << CAP_SYS_PTRACE;
        raised = (syscall(SYS_capset, &hdr, data) == 0);
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (raised) {
        data[0].effective &= ~(1u << CAP_SYS_PTRACE);
        syscall(SYS_capset, &hdr, data);
    }
    return fd;
}

static CUresult m_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle handle, unsigned flags)
{
    mock_ipc_handle_t h;
    char path[64];
    struct stat st;
    void *m;
    int fd;
    CUresult res = mock_injected("cuIpcOpenMemHandle", CUDA_ERROR_MAP_FAILED);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    memcpy(&h, &handle, sizeof(h));
    if (mock_current == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (h.magic != MOCK_IPC_MAGIC) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (h.pid == getpid()) {
        return CUDA_ERROR_INVALID_CONTEXT; /* like the driver: no importing one's own memory */
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", h.pid, h.fd);
    fd = mock_open_as_driver(path);
    if (fd < 0) {
        return CUDA_ERROR_INVALID_HANDLE; /* exporter exited */
    }
    if (fstat(fd, &st) || (st.st_ino != h.ino) || ((uint64_t)st.st_size != h.size)) {
        close(fd);
        return CUDA_ERROR_INVALID_HANDLE; /* the allocation was freed: the fd now names something else */
    }
    m = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = (CUdeviceptr)m;
    return mock_track((uintptr_t)m, h.size, mock_current_device(), 0, 0, -1, 1);
}

static CUresult m_cuIpcCloseMemHandle(CUdeviceptr p) { return mock_untrack(p, 2); }

static CUresult m_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p)
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
    if (base != NULL) {
        *base = a->start;
    }
    if (size != NULL) {
        *size = a->size;
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

static CUresult mock_vmm_new(int fd, size_t size, int exportable, CUmemGenericAllocationHandle *h)
{
    unsigned i;
    pthread_mutex_lock(&mock_lock);
    for (i = 1; i < MOCK_MAX_VMM; ++i) {
        if (mock_vmm[i].refs == 0) {
            mock_vmm[i] = (mock_vmm_t){fd, size, 1, exportable};
            *h = i;
            pthread_mutex_unlock(&mock_lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static mock_vmm_t *mock_vmm_get(CUmemGenericAllocationHandle h)
{
    return ((h > 0) && (h < MOCK_MAX_VMM) && mock_vmm[h].refs) ? &mock_vmm[h] : NULL;
}

static void mock_vmm_put(CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&mock_lock);
    if (--mock_vmm[h].refs == 0) {
        close(mock_vmm[h].fd);
    }
    pthread_mutex_unlock(&mock_lock);
}

static CUresult m_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                              unsigned long long flags)
{
    int fd = memfd_create("mockcuda-vmm", MFD_CLOEXEC);
    if ((fd < 0) || ftruncate(fd, size)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return mock_vmm_new(fd, size, !!(prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), h);
}

static CUresult m_cuMemRelease(CUmemGenericAllocationHandle h)
{
    if (mock_vmm_get(h) == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    mock_vmm_put(h);
    return CUDA_SUCCESS;
}

static CUresult m_cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                      unsigned long long flags)
{
    void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int i;

    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = (CUdeviceptr)m;
    pthread_mutex_lock(&mock_lock);
    for (i = 0; (i < MOCK_MAX_RESERVED) && (mock_reserved[i].size != 0); ++i) {
    }
    if (i < MOCK_MAX_RESERVED) {
        mock_reserved[i] = (mock_range_t){(uintptr_t)m, size};
    }
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

static CUresult m_cuMemAddressFree(CUdeviceptr p, size_t size)
{
    int i;

    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_RESERVED; ++i) {
        if (mock_reserved[i].start == p) {
            mock_reserved[i].size = 0;
        }
    }
    pthread_mutex_unlock(&mock_lock);
    return munmap((void*)p, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult m_cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                           unsigned long long flags)
{
    mock_vmm_t *v = mock_vmm_get(h);
    mock_alloc_t *a;
    CUresult r;

    if ((v == NULL) || (mock_current == NULL) || (offset + size > v->size)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (mmap((void*)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, v->fd, offset) == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = mock_track(p, size, mock_current_device(), 0, 0, -1, 0);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        a = mock_find(p);
        a->vmm    = 1;
        a->handle = h;
        v->refs++;
        pthread_mutex_unlock(&mock_lock);
    }
    return r;
}

static CUresult m_cuMemUnmap(CUdeviceptr p, size_t size)
{
    unsigned long long h;
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find(p);
    if ((a == NULL) || !a->vmm || (a->start != p)) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    h       = a->handle;
    a->size = 0;
    pthread_mutex_unlock(&mock_lock);
    /* back to a reserved, inaccessible range */
    mmap((void*)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    mock_vmm_put(h);
    return CUDA_SUCCESS;
}

static CUresult m_cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    return CUDA_SUCCESS;
}

static CUresult m_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *p)
{
    mock_alloc_t *a;

    pthread_mutex_lock(&mock_lock);
    a = mock_find((uintptr_t)p);
    if ((a == NULL) || !a->vmm) {
        pthread_mutex_unlock(&mock_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *h = a->handle;
    mock_vmm[a->handle].refs++;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/*
 * VMM exports as the driver makes them: every exported descriptor is a descriptor of one control file (the
 * driver's is /dev/nvidiactl: one device and inode for every export), so a descriptor's inode tells nothing
 * about the allocation. Each export is a new open of this process's control file whose file offset names the
 * exporting pid and the allocation's memfd; a duplicate taken with pidfd_getfd shares the offset, and the import
 * opens that memfd through /proc as cuIpcOpenMemHandle does. (The allocation must still be alive at the import:
 * the driver's export would keep it alive.)
 */
#define MOCK_EXPORT_FD_BITS 24

static int   mock_ctl_fd = -1;
static pid_t mock_ctl_pid;

static CUresult m_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                               CUmemAllocationHandleType type, unsigned long long flags)
{
    mock_vmm_t *v = mock_vmm_get(h);
    char path[64];
    int fd;

    if ((v == NULL) || (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || !v->exportable) {
        __atomic_add_fetch(&mock_failed_exports, 1, __ATOMIC_RELAXED);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    pthread_mutex_lock(&mock_lock);
    if ((mock_ctl_fd < 0) || (mock_ctl_pid != getpid())) { /* one per process, a forked child's its own */
        mock_ctl_fd  = memfd_create("mock-nvidiactl", MFD_CLOEXEC);
        mock_ctl_pid = getpid();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", mock_ctl_fd);
    pthread_mutex_unlock(&mock_lock);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if ((fd < 0) || (lseek(fd, ((off_t)getpid() << MOCK_EXPORT_FD_BITS) | v->fd, SEEK_SET) < 0)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *(int*)out = fd;
    return CUDA_SUCCESS;
}

static CUresult m_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle,
                                                 CUmemAllocationHandleType type)
{
    off_t tag = lseek((int)(uintptr_t)os_handle, 0, SEEK_CUR);
    struct stat st;
    char path[64];
    int fd;

    if ((type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) || (tag <= 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)(tag >> MOCK_EXPORT_FD_BITS),
             (int)(tag & ((1 << MOCK_EXPORT_FD_BITS) - 1)));
    fd = mock_open_as_driver(path);
    if ((fd < 0) || fstat(fd, &st) || (st.st_size == 0)) {
        if (fd >= 0) {
            close(fd);
        }
        return CUDA_ERROR_INVALID_VALUE; /* the allocation is gone */
    }
    return mock_vmm_new(fd, st.st_size, 1, h);
}

static CUresult m_cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                CUmemAllocationGranularity_flags option)
{
    *g = 4096;
    return CUDA_SUCCESS;
}

static CUresult m_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                                CUmemRangeHandleType type, unsigned long long flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    mock_alloc_t *a = mock_find(dptr);
    int fd;

    if ((type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) || (flags != 0) || (dptr % page) || (size % page) ||
        (size == 0)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ((a == NULL) || a->managed || a->host_pinned ||
        (dptr + size > ((a->start + a->size + page - 1) / page) * page)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (getenv("MOCK_CUDA_NO_DMABUF")) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    fd = memfd_create("mock-dmabuf", MFD_CLOEXEC);
    if ((fd < 0) || (ftruncate(fd, (off_t)size) != 0)) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}

#define MOCK_SYM(_name) {#_name, (void*)m_##_name}

static const struct {
    const char *name;
    void       *fn;
} mock_syms[] __attribute__((used)) = {
    MOCK_SYM(cuDriverGetVersion), MOCK_SYM(cuGetErrorName), MOCK_SYM(cuGetErrorString),
    MOCK_SYM(cuDeviceGetCount), MOCK_SYM(cuDeviceGet), MOCK_SYM(cuDeviceGetName),
    MOCK_SYM(cuDeviceGetAttribute), MOCK_SYM(cuDeviceGetPCIBusId), MOCK_SYM(cuDeviceGetUuid),
    MOCK_SYM(cuDeviceCanAccessPeer), MOCK_SYM(cuDevicePrimaryCtxRetain), MOCK_SYM(cuDevicePrimaryCtxGetState),
    MOCK_SYM(cuDevicePrimaryCtxRelease), MOCK_SYM(cuCtxGetCurrent),
    MOCK_SYM(cuCtxSetCurrent), MOCK_SYM(cuCtxPushCurrent), MOCK_SYM(cuCtxPopCurrent),
    MOCK_SYM(cuCtxGetDevice), MOCK_SYM(cuCtxGetFlags), MOCK_SYM(cuCtxSetFlags), MOCK_SYM(cuCtxSynchronize),
    MOCK_SYM(cuPointerSetAttribute), MOCK_SYM(cuStreamCreate), MOCK_SYM(cuStreamDestroy),
    MOCK_SYM(cuStreamSynchronize), MOCK_SYM(cuStreamQuery), MOCK_SYM(cuEventCreate), MOCK_SYM(cuEventDestroy),
    MOCK_SYM(cuEventRecord), MOCK_SYM(cuEventQuery), MOCK_SYM(cuLaunchHostFunc), MOCK_SYM(cuMemcpyAsync), MOCK_SYM(cuMemcpyBatchAsync),
    MOCK_SYM(cuMemAlloc), MOCK_SYM(cuMemAllocManaged), MOCK_SYM(cuMemFree), MOCK_SYM(cuMemHostRegister),
    MOCK_SYM(cuMemHostUnregister), MOCK_SYM(cuMemHostAlloc), MOCK_SYM(cuMemFreeHost),
    MOCK_SYM(cuCtxEnablePeerAccess), MOCK_SYM(cuCtxDisablePeerAccess), MOCK_SYM(cuPointerGetAttributes), MOCK_SYM(cuIpcGetMemHandle),
    MOCK_SYM(cuIpcOpenMemHandle), MOCK_SYM(cuIpcCloseMemHandle), MOCK_SYM(cuMemCreate), MOCK_SYM(cuMemRelease),
    MOCK_SYM(cuMemRetainAllocationHandle), MOCK_SYM(cuMemExportToShareableHandle),
    MOCK_SYM(cuMemImportFromShareableHandle), MOCK_SYM(cuMemAddressReserve), MOCK_SYM(cuMemAddressFree),
    MOCK_SYM(cuMemMap), MOCK_SYM(cuMemUnmap), MOCK_SYM(cuMemSetAccess), MOCK_SYM(cuMemGetAllocationGranularity),
    MOCK_SYM(cuMemGetHandleForAddressRange), MOCK_SYM(cuMemGetAddressRange),
};

/* A pre-12 driver has no cuGetProcAddress_v2. */
#ifndef MOCK_PRE12
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    unsigned i;

    *pfn    = NULL;
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!mock_initialized) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (!strcmp(mock_mode(), "nosym") && !strcmp(symbol, "cuPointerGetAttributes")) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (!strcmp(mock_mode(), "nosetflags") && !strcmp(symbol, "cuCtxSetFlags")) {
        return CUDA_ERROR_NOT_FOUND;
    }
    for (i = 0; i < sizeof(mock_syms) / sizeof(mock_syms[0]); ++i) {
        if (!strcmp(mock_syms[i].name, symbol)) {
            *pfn    = mock_syms[i].fn;
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}
#endif

/* The driver's exported names, for programs that call the driver directly (test/cux_ucp_check.c): through
 * them, interposers such as libcux_memtype.so see the calls as they would with the real libcuda. */
CUresult cuDeviceGetCount(int *n) { return m_cuDeviceGetCount(n); }
CUresult cuDriverGetVersion(int *v) { return m_cuDriverGetVersion(v); }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { return m_cuDeviceGet(d, ordinal); }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { return m_cuDeviceGetName(name, len, d); }
CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) { return m_cuDeviceCanAccessPeer(can, a, b); }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return m_cuDevicePrimaryCtxRetain(c, d); }
CUresult cuCtxSetCurrent(CUcontext c) { return m_cuCtxSetCurrent(c); }
CUresult cuMemAlloc(CUdeviceptr *p, size_t n) { return m_cuMemAlloc(p, n); }
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f) { return m_cuMemAllocManaged(p, n, f); }
CUresult cuMemFree(CUdeviceptr p) { return m_cuMemFree(p); }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    return m_cuMemCreate(h, size, prop, flags);
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return m_cuMemRelease(h); }
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long f)
{
    return m_cuMemAddressReserve(p, size, align, addr, f);
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t size) { return m_cuMemAddressFree(p, size); }
CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long f)
{
    return m_cuMemMap(p, size, offset, h, f);
}
CUresult cuMemUnmap(CUdeviceptr p, size_t size) { return m_cuMemUnmap(p, size); }
CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    return m_cuMemSetAccess(p, size, desc, count);
}
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    return m_cuMemGetAllocationGranularity(g, prop, option);
}

CUresult cuCtxSynchronize(void) { return m_cuCtxSynchronize(); }
CUresult cuCtxGetFlags(unsigned *flags) { return m_cuCtxGetFlags(flags); }
CUresult cuCtxSetFlags(unsigned flags)
{
    return !strcmp(mock_mode(), "nosetflags") ? CUDA_ERROR_NOT_SUPPORTED : m_cuCtxSetFlags(flags);
}
CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr p)
{
    return m_cuPointerSetAttribute(value, attr, p);
}

/* Stream-ordered memory from a device's default pool, which has no shareable handle type: like the driver,
 * cuIpcGetMemHandle refuses it. Allocated and freed at once (the mock's streams are synchronous). */
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d)
{
    *pool = (CUmemoryPool)(uintptr_t)(d + 1);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    CUresult res = mock_alloc(p, n, 0);

    if (res == CUDA_SUCCESS) {
        pthread_mutex_lock(&mock_lock);
        mock_find(*p)->pool = 1;
        pthread_mutex_unlock(&mock_lock);
    }
    return res;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { return m_cuMemFree(p); }
CUresult cuStreamSynchronize(CUstream s) { return m_cuStreamSynchronize(s); }

/* Synchronous copies, as applications fill and read their buffers. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return mock_sync_copy(dst, src, n); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return mock_sync_copy(dst, (CUdeviceptr)src, n);
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return mock_sync_copy((CUdeviceptr)dst, src, n);
}
