/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test/run-cross-dlsym.sh: a driver of three entry points, cuGetProcAddress handing out internal functions (as
 * the mock's table and the real driver's do) and the two exported names.
 */
#include <string.h>

typedef int                CUresult;
typedef unsigned long long CUdeviceptr;

static char     heap[1 << 16];
static unsigned used;

static CUresult cross_alloc(CUdeviceptr *p, size_t n)
{
    *p    = (CUdeviceptr)(heap + used);
    used += 4096;
    return 0;
}

static CUresult cross_free(CUdeviceptr p) { return 0; }

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status)
{
    *pfn = !strcmp(symbol, "cuMemAlloc") ? (void*)cross_alloc : !strcmp(symbol, "cuMemFree") ? (void*)cross_free
                                                                                                : NULL;
    *status = (*pfn != NULL) ? 0 : 1;
    return (*pfn != NULL) ? 0 : 500;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return cross_alloc(p, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { return cross_free(p); }
