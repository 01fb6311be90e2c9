/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Copy performance of the links between host memory and the GPUs, measured once per process per link, on
 * first use: what the transports report to UCP when their BW and LAT are "auto", instead of guessed figures.
 */
#ifndef CUX_LINK_PERF_H_
#define CUX_LINK_PERF_H_

#include "driver/cux_device.h"

/* An end of a link that is host memory (pinned) rather than a device ordinal. */
#define CUX_LINK_HOST (-1)

typedef struct cux_link_perf {
    double bandwidth;   /* bytes per second, back-to-back 16 MB copies on one stream */
    double latency;     /* seconds, an 8-byte copy from issue to completion (median) */
} cux_link_perf_t;

/* Copies from src to dst (device ordinals or CUX_LINK_HOST; equal devices: within one GPU). Thread-safe. */
ucs_status_t cux_link_perf_get(int src, int dst, cux_link_perf_t *perf);

#endif
