/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeds for fuzz_ipc_key that only this host can make: keys and addresses carrying its system id and PID
 * namespace, so that the fuzzer starts from inputs that pass the first checks. Writes one file per seed into
 * the directory named on the command line (the committed seeds in corpus/ are host-independent).
 */
#include "ipc/cux_ipc_rkey.h"

#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
    struct stat st;
    uint8_t addr[sizeof(uint64_t) + sizeof(int32_t) + sizeof(uint64_t)];
    int32_t pid = 1;
    uint64_t pid_ns;

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

    pid_ns = (stat("/proc/self/ns/pid", &st) == 0) ? (uint64_t)st.st_ino : 0;
    memcpy(addr, &system_id, sizeof(system_id));
    memcpy(addr + sizeof(system_id), &pid, sizeof(pid));
    memcpy(addr + sizeof(system_id) + sizeof(pid), &pid_ns, sizeof(pid_ns));
    seed_write(argv[1], "host-address", 2, addr, sizeof(addr));
    return 0;
}
