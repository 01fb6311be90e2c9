/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): Fault injection (MOCK_CUDA_FAIL) and the live-object counters tests read.
 */
#include "mock.h"

/*
 * Fault injection: MOCK_CUDA_FAIL="NAME[:AFTER[:COUNT]]" makes entry point NAME (cuDevicePrimaryCtxRetain,
 * cuMemAlloc, cuStreamCreate, cuEventCreate, cuMemcpyAsync, cuMemcpyBatchAsync, cuIpcOpenMemHandle) fail after
 * AFTER more successful calls (default 0), COUNT times (default: every call). Read at each call, so a test can set and unset it between
 * operations; the calls are counted from the first one that sees the current value.
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
 * the copies accepted on a stream so far, and "kernel launches", the launches of the copy kernel so far. */
long mock_live_streams, mock_live_events;
long mock_failed_exports; /* cuIpcGetMemHandle and cuMemExportToShareableHandle calls that failed */
long mock_issued_copies;  /* copies accepted on a stream, alone or in a batch */
long mock_fabric_calls;   /* calls that asked the driver anything of the fabric handle type */

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
    } else if (!strcmp(what, "issued copies")) {
        return __atomic_load_n(&mock_issued_copies, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "kernel launches")) {
        return __atomic_load_n(&mock_kernel_launches, __ATOMIC_RELAXED);
    } else if (!strcmp(what, "imported pools")) {
        return mock_imported_pools();
    }
    imported = !strcmp(what, "mappings");
    pthread_mutex_lock(&mock_lock);
    for (i = 0; i < MOCK_MAX_ALLOCS; ++i) {
        n += mock_allocs[i].size && !mock_allocs[i].host_pinned && (mock_allocs[i].imported == imported);
    }
    pthread_mutex_unlock(&mock_lock);
    return n;
}
