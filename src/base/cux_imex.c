/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IMEX channels: see cux_imex.h.
 */
#include "base/cux_imex.h"

#include <ucs/debug/log.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cux_imex_channel = -1; /* -1: not asked yet */
static int cux_imex_refused;      /* the driver refused a fabric allocation */

static int cux_imex_find_channel(void)
{
    const char *dir_path = getenv(CUX_IMEX_CHANNELS_DIR_ENV);
    struct dirent *entry;
    int found = 0;
    DIR *dir;

    if ((dir_path == NULL) || (*dir_path == '\0')) {
        dir_path = CUX_IMEX_CHANNELS_DIR;
    }
    dir = opendir(dir_path);
    if (dir == NULL) {
        ucs_debug("no IMEX channels (%s: %m): fabric handles are not used", dir_path);
        return 0;
    }
    while (!found && ((entry = readdir(dir)) != NULL)) {
        found = !strncmp(entry->d_name, "channel", 7) &&
                (faccessat(dirfd(dir), entry->d_name, R_OK | W_OK, 0) == 0);
        if (found) {
            ucs_debug("IMEX channel %s/%s: fabric handles can be used",
                      dir_path, entry->d_name);
        }
    }
    closedir(dir);
    if (!found) {
        ucs_debug("no IMEX channel in %s that this process may use: fabric handles are not used",
                  dir_path);
    }
    return found;
}

int cux_imex_channel_present(void)
{
    int channel = __atomic_load_n(&cux_imex_channel, __ATOMIC_RELAXED);

    if (channel < 0) { /* two threads may both look: they find the same */
        channel = cux_imex_find_channel();
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
