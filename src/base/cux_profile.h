/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where the posting path's time goes, stage by stage, for the benchmarks (issue 62): built in only with
 * `configure --enable-posting-profile` (CUX_PROFILE); otherwise every macro here is empty. Each stage adds the
 * CPU cycles it took, how often it ran and how many items (list elements, copies) it handled; the totals go to
 * standard error when the module is unloaded, as nanoseconds per call and per item. Single-threaded use only:
 * the counters are plain, as the benchmark's posting thread is one.
 */
#ifndef CUX_PROFILE_H_
#define CUX_PROFILE_H_

#ifdef CUX_PROFILE

#include <ucs/time/time.h>
#include <stdint.h>

typedef enum {
    CUX_PROF_SGL_TOTAL,   /* a whole scatter-gather call, from UCT's entry to its return */
    CUX_PROF_SGL_CHECK,   /* its keys' owner and bounds */
    CUX_PROF_SGL_LOOKUP,  /* local sides and remote mappings, per run of elements sharing them (the three below
                             included) */
    CUX_PROF_SGL_RUNS,    /* the runs found, each with its local side and queue */
    CUX_PROF_SGL_HELD,    /* the mappings the cache holds ready, looked up under one lock; items: runs */
    CUX_PROF_MAP_NEW,     /* a mapping the cache did not hold: proven and mapped (any caller, lists or not) */
    CUX_PROF_SGL_QUEUE,   /* pieces merged into copies and queued, full batches issued on the way (also in SUBMIT) */
    CUX_PROF_SGL_END,     /* the list's descriptor on each queue it used */
    CUX_PROF_SUBMIT,      /* a batch issued: context, kernel arguments and launch (or copy calls), event */
    CUX_PROF_PROGRESS,    /* a progress call that completed something: event queries, releases, completions, and
                             the batches it issued first (also in SUBMIT); items: operations completed */
    CUX_PROF_RELEASE,     /* a list's mappings given back */
    CUX_PROF_LAST
} cux_prof_stage_t;

typedef struct {
    uint64_t cycles;
    uint64_t calls;
    uint64_t items;
} cux_prof_counter_t;

extern cux_prof_counter_t cux_prof_counters[CUX_PROF_LAST];

#define CUX_PROF_START(_t) ucs_time_t _t = ucs_get_time()
#define CUX_PROF_END(_stage, _t, _items) \
    do { \
        cux_prof_counters[_stage].cycles += ucs_get_time() - (_t); \
        cux_prof_counters[_stage].calls  += 1; \
        cux_prof_counters[_stage].items  += (_items); \
    } while (0)

#else

#define CUX_PROF_START(_t)
#define CUX_PROF_END(_stage, _t, _items) do { } while (0)

#endif

#endif
