/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): Fault injection (MOCK_CUDA_FAIL) and the live-object counters tests read.
 */
#include "mock.h"

/*
 * Fault injection: MOCK_CUDA_FAIL="NAME[:AFTER[:COUNT]]" makes entry point NAME (cuDevicePrimaryCtxRetain,
 * cuMemAlloc, cuStreamCreate, cuEventCreate, cuMemcpyAsync, cuMemcpyDtoDAsync, cuMemcpyBatchAsync,
 * cuIpcOpenMemHandle) fail after AFTER more successful calls (default 0), COUNT times (default: every call). Read at
 * each call, so a test can set and unset it between operations; the calls are counted from the first one that sees
 * the current value.
 */
CUresult mock_injected(const char *name, CUresult error)
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
 * (device and managed memory), "mappings" (imported IPC memory) or "imported pools"; and "failed exports", the
 * export calls that failed so far, "fabric calls", the calls of the fabric handle type so far, "issued copies",
 * the copies accepted on a stream so far, "kernel launches", the launches of the copy kernels so far ("large kernel launches": of the
 * large one), "descriptor
 * exports" (cuMemExportToShareableHandle, cuMemPoolExportToShareableHandle) and "imports" (of another process's
 * memory: legacy handles, VMM descriptors, pools and pool pointers) so far, "pointer exports" (cuMemPoolExportPointer)
 * so far; "event records" (cuEventRecord) so far; "reserved bytes", the address space reserved now (cuMemAddressReserve less cuMemAddressFree). With
 * MOCK_CUDA_COUNTS_DIR, a process keeps the three counts in DIR/counts-PID ("descriptor exports N", "imports N",
 * "pointer exports N"), for tests of programs that know nothing of the mock. */
long mock_live_streams, mock_live_events;
long mock_failed_exports; /* cuIpcGetMemHandle and cuMemExportToShareableHandle calls that failed */
long mock_issued_copies;  /* copies accepted on a stream, alone or in a batch */
long mock_fabric_calls;   /* calls that asked the driver anything of the fabric handle type */
long mock_fd_exports;     /* descriptors exported */
long mock_imports;        /* memory of another process imported */
long mock_ptr_exports;    /* pool allocations exported */

MOCK_EXPORT long mock_cuda_live(const char *what)
{
    long n = 0;
    int i, imported;

    if (!strcmp(what, "streams")) {
        return __atomic_load_n(&mock_live_streams, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "events")) {
        return __atomic_load_n(&mock_live_events, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "failed exports")) {
        return __atomic_load_n(&mock_failed_exports, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "fabric calls")) {
        return __atomic_load_n(&mock_fabric_calls, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "descriptor exports")) {
        return __atomic_load_n(&mock_fd_exports, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "imports")) {
        return __atomic_load_n(&mock_imports, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "pointer exports")) {
        return __atomic_load_n(&mock_ptr_exports, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "issued copies")) {
        return __atomic_load_n(&mock_issued_copies, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "kernel launches")) {
        return __atomic_load_n(&mock_kernel_launches, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "large kernel launches")) {
        return __atomic_load_n(&mock_kernel_launches_large, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "event records")) {
        return __atomic_load_n(&mock_event_records, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "imported pools")) {
        return mock_imported_pools();
    } else if (!strcmp(what, "reserved bytes")) {
        pthread_mutex_lock(&mock_lock);
        for (i = 0; i < MOCK_MAX_RESERVED; ++i) {
            n += (long)mock_reserved[i].size;
        }
        pthread_mutex_unlock(&mock_lock);
        return n;
    }
    imported = !strcmp(what, "mappings");
    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        n += mock_allocs[i].size && !mock_allocs[i].host_pinned && (mock_allocs[i].imported == imported);
    }
    pthread_mutex_unlock(&mock_lock);
    return n;
}

void mock_count(long *counter)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* callers may hold mock_lock */
    const char *dir = getenv("MOCK_CUDA_COUNTS_DIR");
    char path[4096];
    FILE *f;

    __atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
    /* written at every change: the programs it is for end with _exit, which runs no destructor */
    if ((dir == NULL) || (snprintf(path, sizeof(path), "%s/counts-%d", dir, (int)getpid()) >= (int)sizeof(path))) {
        return;
    }
    pthread_mutex_lock(&lock);
    if ((f = fopen(path, "we")) != NULL) {
        fprintf(f, "descriptor exports %ld\nimports %ld\npointer exports %ld\n",
                __atomic_load_n(&mock_fd_exports, __ATOMIC_RELAXED), __atomic_load_n(&mock_imports, __ATOMIC_RELAXED),
                __atomic_load_n(&mock_ptr_exports, __ATOMIC_RELAXED));
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}
