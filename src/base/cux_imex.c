/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IMEX channels: see cux_imex.h.
 */
#include "base/cux_imex.h"

#include <ucs/debug/log.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cux_imex_channel = -1; /* -1: not asked yet */
static int cux_imex_refused;      /* the driver refused a fabric allocation */

const char *cux_imex_channel_name(char *name, size_t max)
{
    const char *dir_path = getenv(CUX_IMEX_CHANNELS_DIR_ENV);
    const char *found    = NULL;
    struct dirent *entry;
    DIR *dir;

    if ((dir_path == NULL) || (*dir_path == '\0')) {
        dir_path = CUX_IMEX_CHANNELS_DIR;
    }
    dir = opendir(dir_path);
    if (dir == NULL) {
        ucs_debug("no IMEX channels (%s: %m): fabric handles are not used", dir_path);
        return NULL;
    }
    while ((found == NULL) && ((entry = readdir(dir)) != NULL)) {
        if (!strncmp(entry->d_name, "channel", 7) && (faccessat(dirfd(dir), entry->d_name, R_OK | W_OK, 0) == 0)) {
            snprintf(name, max, "%s/%s", dir_path, entry->d_name);
            found = name;
        }
    }
    closedir(dir);
    if (found != NULL) {
        ucs_debug("IMEX channel %s: fabric handles can be used", found);
    } else {
        ucs_debug("no IMEX channel in %s that this process may use: fabric handles are not used", dir_path);
    }
    return found;
}

int cux_imex_channel_present(void)
{
    int channel = __atomic_load_n(&cux_imex_channel, __ATOMIC_RELAXED);

    if (channel < 0) { /* two threads may both look: they find the same */
        char name[PATH_MAX];
        channel = (cux_imex_channel_name(name, sizeof(name)) != NULL);
        __atomic_store_n(&cux_imex_channel, channel, __ATOMIC_RELAXED);
    }
    return channel;
}

int cux_imex_allocation_refused(void)
{
    return !__atomic_exchange_n(&cux_imex_refused, 1, __ATOMIC_RELAXED);
}

int cux_imex_allocations_refused(void)
{
    return __atomic_load_n(&cux_imex_refused, __ATOMIC_RELAXED);
}

void cux_imex_ask_again(void)
{
    __atomic_store_n(&cux_imex_channel, -1, __ATOMIC_RELAXED);
    __atomic_store_n(&cux_imex_refused, 0, __ATOMIC_RELAXED);
}
