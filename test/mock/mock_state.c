/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver's shared state.
 */
#include "mock.h"

mock_vmm_t mock_vmm[MOCK_MAX_VMM];
mock_range_t mock_reserved[MOCK_MAX_RESERVED];
mock_alloc_t mock_allocs[MOCK_MAX_ALLOCS];
int mock_ctx_retained[MOCK_MAX_DEVICES]; /* retains of each primary context */
__thread CUcontext mock_current;
__thread CUcontext mock_stack[16];
__thread int mock_stack_depth;
unsigned long long mock_next_id = 1;
pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
int mock_initialized;
struct CUctx_st mock_ctx[MOCK_MAX_DEVICES];
