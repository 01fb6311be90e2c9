/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The BW setting of a transport: one bandwidth, "auto", or the list UCX's own cuda_copy takes since UCX 1.19
 * ("10000MBs,h2d:8300MBs,d2h:11660MBs,d2d:320GBs": an unkeyed or "default:" figure, then figures for copies
 * host -> GPU, GPU -> host and GPU -> GPU). Users who set UCX's list keep a working set-up: a parser of one
 * bandwidth would fail the interface's configuration, and with it UCP's initialisation.
 */
#ifndef CUX_BW_SPEC_H_
#define CUX_BW_SPEC_H_

#include <ucs/type/status.h>

typedef enum {
    CUX_BW_PAIR_H2D,  /* host -> GPU memory */
    CUX_BW_PAIR_D2H,  /* GPU -> host memory */
    CUX_BW_PAIR_D2D,  /* GPU -> GPU memory */
    CUX_BW_PAIR_LAST
} cux_bw_pair_t;

typedef struct {
    double dflt;                      /* bytes/s, or "auto" (CUX_CONFIG_BW_IS_AUTO) */
    double pair[CUX_BW_PAIR_LAST];    /* bytes/s where has_pair says so */
    int    has_pair[CUX_BW_PAIR_LAST];
} cux_bw_spec_t;

/* Parses text. An unkeyed figure is the default, which is "auto" when the list gives none; a key may be
 * given once. UCS_ERR_INVALID_PARAM for anything else, with one error line naming what (setting: its name). */
ucs_status_t cux_bw_spec_parse(const char *setting, const char *text, cux_bw_spec_t *spec);

/* Whether the list gave a figure for any pair. */
int cux_bw_spec_has_pairs(const cux_bw_spec_t *spec);

#endif
