/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeds for fuzz_ipc_key that only this host can make: keys carrying its system id, so that the fuzzer starts
 * from inputs that pass the first checks (addresses and keys on the endpoint start from the helper's true ones). Writes one file per seed into
 * the directory named on the command line (the committed seeds in corpus/ are host-independent).
 */
#include "ipc/common/cux_ipc_rkey.h"

#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>
#include <stdio.h>
#include <string.h>

static void seed_write(const char *dir, const char *name, uint8_t selector, const void *data, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return;
    }
    fwrite(&selector, 1, 1, f);
    fwrite(data, 1, len, f);
    fclose(f);
}

int main(int argc, char **argv)
{
    uint64_t system_id = ucs_get_system_id();
    cux_ipc_rkey_t key;

    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    memset(&key, 0, sizeof(key));
    key.system_id = system_id;
    key.pid       = 1;
    key.base      = 0x7f0000200000ull;
    key.length    = 1 << 21;
    key.buffer_id = 7;
    for (uint16_t kind = 0; kind < 3; ++kind) {
        char name[32];
        key.kind      = kind;
        key.export_fd = (kind == 1) ? 5 : -1;
        cux_ipc_rkey_seal(&key);
        snprintf(name, sizeof(name), "host-key-kind%u", kind);
        seed_write(argv[1], name, 1, &key, sizeof(key));
        snprintf(name, sizeof(name), "host-check-kind%u", kind);
        seed_write(argv[1], name, 0, &key, sizeof(key));
    }

    return 0;
}
