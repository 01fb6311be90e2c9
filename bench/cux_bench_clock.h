/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the benchmark programs share: the clock they time with and the order they sort their rounds in.
 */
#ifndef CUX_BENCH_CLOCK_H
#define CUX_BENCH_CLOCK_H

#include <time.h>

static inline double cux_bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* for qsort of doubles, ascending */
static inline int cux_bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

#endif
