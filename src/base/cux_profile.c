/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The posting profile's counters and their report (cux_profile.h); nothing without --enable-posting-profile.
 */
#include "cux_profile.h"

#ifdef CUX_PROFILE

#include <stdio.h>
#include <unistd.h>

cux_prof_counter_t cux_prof_counters[CUX_PROF_LAST];

static const char *cux_prof_names[CUX_PROF_LAST] = {
    [CUX_PROF_SGL_TOTAL] = "sgl.total", [CUX_PROF_SGL_CHECK] = "sgl.check", [CUX_PROF_SGL_LOOKUP] = "sgl.lookup",
    [CUX_PROF_SGL_RUNS] = "sgl.runs",   [CUX_PROF_SGL_HELD] = "sgl.held",
    [CUX_PROF_MAP_NEW] = "map.new",     [CUX_PROF_SGL_QUEUE] = "sgl.queue", [CUX_PROF_SGL_END] = "sgl.end",
    [CUX_PROF_SUBMIT] = "submit",       [CUX_PROF_PROGRESS] = "progress",   [CUX_PROF_RELEASE] = "release"};

/* One line per stage that ran, when the module goes (the process's end, or UCX unloading it). */
static void __attribute__((destructor)) cux_prof_report(void)
{
    const cux_prof_counter_t *c;
    double ns;
    int i;

    for (i = 0; i < CUX_PROF_LAST; ++i) {
        c = &cux_prof_counters[i];
        if (c->calls == 0) {
            continue;
        }
        ns = ucs_time_to_nsec(c->cycles);
        fprintf(stderr, "CUXPROF pid=%d stage=%s calls=%lu items=%lu ns=%.0f ns_per_call=%.1f ns_per_item=%.2f\n",
                (int)getpid(), cux_prof_names[i], (unsigned long)c->calls, (unsigned long)c->items, ns,
                ns / c->calls, (c->items > 0) ? ns / c->items : 0.0);
    }
}

#else

typedef int cux_profile_not_built; /* ISO C wants something in a translation unit */

#endif
