/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): Streams, events, host functions and asynchronous copies.
 */
#include "mock.h"

static CUresult mock_stream_run(CUstream s, unsigned long upto);
static CUresult mock_stream_copy(CUstream s, CUdeviceptr dst, CUdeviceptr src, size_t n);
static int mock_straddles_pinned(CUdeviceptr p, size_t n);

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
CUresult mock_ctx_streams_run(int device)
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

CUresult m_cuStreamCreate(CUstream *s, unsigned flags)
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
CUresult m_cuStreamDestroy(CUstream s)
{
    (void)mock_stream_run(s, ULONG_MAX);
    s->destroyed = 1;
    __atomic_sub_fetch(&mock_live_streams, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
CUresult m_cuStreamSynchronize(CUstream s)
{
    if (s == NULL) {
        mock_late_land(); /* the legacy stream: ordered after synchronous copies */
        return CUDA_SUCCESS;
    }
    return mock_stream_run(s, ULONG_MAX);
}
CUresult m_cuStreamQuery(CUstream s)
{
    return (s == NULL) ? CUDA_SUCCESS : mock_stream_run(s, ULONG_MAX);
}

CUresult m_cuEventCreate(CUevent *e, unsigned flags)
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
CUresult m_cuEventDestroy(CUevent e)
{
    __atomic_sub_fetch(&mock_live_events, 1, __ATOMIC_RELAXED);
    free(e);
    return CUDA_SUCCESS;
}

long mock_event_records; /* cuEventRecord calls so far */

CUresult m_cuEventRecord(CUevent e, CUstream s)
{
    __atomic_add_fetch(&mock_event_records, 1, __ATOMIC_RELAXED);
    e->pending = mock_event_delay();
    e->stream  = s;
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        e->seq = s->issued;
        pthread_mutex_unlock(&s->lock);
    }
    return CUDA_SUCCESS;
}

CUresult m_cuEventQuery(CUevent e)
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

CUresult m_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    (void)mock_stream_run(s, ULONG_MAX); /* every earlier copy has run when the function does */
    fn(arg);
    return CUDA_SUCCESS;
}

/* Like the driver: a host range that starts inside a pinned range must end inside it too. */
static int mock_straddles_pinned(CUdeviceptr p, size_t n)
{
    mock_where_t where = mock_where(p, n);

    return where.known && where.host_pinned && !where.fits;
}

/* A copy on a stream, either entry point's (each checks its own injected fault first). */
static CUresult mock_copy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    if ((s == NULL) ? (mock_current_device() < 0) : (s->device != mock_current_device())) {
        return CUDA_ERROR_INVALID_CONTEXT; /* like the driver: the stream's context must be current */
    }
    if (!dst || !src || mock_straddles_pinned(dst, n) || mock_straddles_pinned(src, n)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (s == NULL) { /* the legacy stream: ordered with everything, done by its next synchronisation */
        memmove((void*)dst, (void*)src, n);
        return CUDA_SUCCESS;
    }
    __atomic_add_fetch(&mock_issued_copies, 1, __ATOMIC_RELAXED);
    return mock_stream_copy(s, dst, src, n);
}

CUresult m_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    CUresult res = mock_injected("cuMemcpyAsync", CUDA_ERROR_ILLEGAL_ADDRESS);

    return (res != CUDA_SUCCESS) ? res : mock_copy_async(dst, src, n, s);
}

/* As the driver documents it: both ends device memory (an allocation, a mapping or an import; not host memory,
 * pinned or not). */
static int mock_is_device_memory(CUdeviceptr p, size_t n)
{
    mock_where_t where = mock_where(p, n);

    return where.known && !where.host_pinned;
}

CUresult m_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    CUresult res = mock_injected("cuMemcpyDtoDAsync", CUDA_ERROR_ILLEGAL_ADDRESS);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (!mock_is_device_memory(dst, n) || !mock_is_device_memory(src, n)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    return mock_copy_async(dst, src, n, s);
}

CUresult m_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
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
