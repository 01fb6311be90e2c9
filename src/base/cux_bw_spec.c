/* SPDX-License-Identifier: BSD-3-Clause */
#include "cux_bw_spec.h"

#include "compat/cux_ucx_compat.h"

#include <ucs/config/parser.h>
#include <ucs/debug/log.h>
#include <string.h>

#define CUX_BW_SPEC_MAX 256

static const char *cux_bw_pair_keys[CUX_BW_PAIR_LAST] = {"h2d", "d2h", "d2d"};

/* One item: "FIGURE" or "KEY:FIGURE" (KEY default, h2d, d2h or d2d), into spec unless given before. */
static int cux_bw_spec_item(char *item, cux_bw_spec_t *spec, int *has_dflt)
{
    char *colon = strchr(item, ':');
    const char *figure = (colon != NULL) ? colon + 1 : item;
    double value;
    int i;

    if (!ucs_config_sscanf_bw(figure, &value, NULL)) {
        return 0;
    }
    if (colon != NULL) {
        *colon = '\0';
        for (i = 0; i < CUX_BW_PAIR_LAST; ++i) {
            if (!strcmp(item, cux_bw_pair_keys[i])) {
                if (spec->has_pair[i] || CUX_CONFIG_BW_IS_AUTO(value)) {
                    return 0; /* twice, or "auto" for one pair: only the default is measured */
                }
                spec->pair[i]     = value;
                spec->has_pair[i] = 1;
                return 1;
            }
        }
        if (strcmp(item, "default")) {
            return 0;
        }
    }
    if (*has_dflt) {
        return 0;
    }
    spec->dflt = value;
    *has_dflt  = 1;
    return 1;
}

ucs_status_t cux_bw_spec_parse(const char *setting, const char *text, cux_bw_spec_t *spec)
{
    char buf[CUX_BW_SPEC_MAX], *item, *save = NULL;
    int has_dflt = 0, ok = 1;

    memset(spec, 0, sizeof(*spec));
    if ((text == NULL) || (strlen(text) >= sizeof(buf)) || !ucs_config_sscanf_bw("auto", &spec->dflt, NULL)) {
        ok = 0;
    } else {
        strcpy(buf, text);
        for (item = strtok_r(buf, ",", &save); ok && (item != NULL); item = strtok_r(NULL, ",", &save)) {
            ok = cux_bw_spec_item(item, spec, &has_dflt);
        }
        ok = ok && (has_dflt || cux_bw_spec_has_pairs(spec));
    }
    if (!ok) {
        ucs_error("%s=%s: expected a bandwidth (10GBs), auto, or a list of them as UCX's cuda_copy takes it "
                  "(10000MBs,h2d:8300MBs,d2h:11660MBs,d2d:320GBs)", setting, (text != NULL) ? text : "");
        return UCS_ERR_INVALID_PARAM;
    }
    return UCS_OK;
}

int cux_bw_spec_has_pairs(const cux_bw_spec_t *spec)
{
    int i;

    for (i = 0; i < CUX_BW_PAIR_LAST; ++i) {
        if (spec->has_pair[i]) {
            return 1;
        }
    }
    return 0;
}
