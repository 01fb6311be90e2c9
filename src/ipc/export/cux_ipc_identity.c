/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: this process's identity (cux_ipc_identity.h): its record, its address, the secrets of
 * its keys, and the answer to a peer's challenge.
 */
#define _GNU_SOURCE
#include "ipc/export/cux_ipc_identity.h"
#include "ipc/common/cux_ipc_pidfs.h"
#include "ipc/export/cux_ipc_key_table.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "base/cux_siphash.h"

#include <ucs/debug/log.h>
#include <ucs/sys/math.h>
#include <ucs/sys/sys.h>
#include <ucs/sys/uid.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t cux_ipc_identity_lock = PTHREAD_MUTEX_INITIALIZER;
static cux_ipc_identity_t cux_ipc_identity;
static uint64_t cux_ipc_secret_key[2]; /* SipHash key of the keys' secrets */

void cux_ipc_random(void *buf, size_t len)
{
    uint8_t *p = buf;
    ssize_t n;

    while (len > 0) {
        n = getrandom(p, len, 0);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            /* no entropy source at all: still different per process and per call, but guessable */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t v = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16);
            ucs_warn("cuda_ipc: getrandom failed (%m): peer proofs use a weaker secret");
            memcpy(p, &v, ucs_min(len, sizeof(v)));
            n = ucs_min(len, sizeof(v));
        }
        p   += n;
        len -= n;
    }
}

/* The identity of the calling process: made at first use, and again in a forked child. */
static void cux_ipc_identity_current(cux_ipc_identity_t *id)
{
    pid_t pid = getpid();

    pthread_mutex_lock(&cux_ipc_identity_lock);
    if (cux_ipc_identity.pid != pid) {
        cux_ipc_identity.magic      = 0; /* a peer reading meanwhile sees no valid record */
        cux_ipc_identity.pid        = pid;
        cux_ipc_identity.start_time = ucs_sys_get_proc_create_time(pid);
        cux_ipc_identity.process    = cux_ipc_own_pidfs_inode();
        cux_ipc_identity.keys       = cux_ipc_key_table_directory();
        cux_ipc_random(&cux_ipc_identity.secret, sizeof(cux_ipc_identity.secret));
        cux_ipc_random(cux_ipc_secret_key, sizeof(cux_ipc_secret_key));
        __atomic_store_n(&cux_ipc_identity.magic, CUX_IPC_IDENTITY_MAGIC, __ATOMIC_RELEASE);
    }
    *id = cux_ipc_identity;
    pthread_mutex_unlock(&cux_ipc_identity_lock);
}

void cux_ipc_proof_own_address(cux_ipc_iface_addr_t *addr, uint64_t pid_ns)
{
    cux_ipc_identity_t id;

    cux_ipc_identity_current(&id);
    memset(addr, 0, sizeof(*addr)); /* no domain part: the interface adds its own (cux_ipc_iface.c) */
    addr->magic      = CUX_IPC_ADDR_MAGIC;
    addr->pid        = id.pid;
    addr->pid_ns     = pid_ns;
    addr->start_time = id.start_time;
    addr->identity   = (uintptr_t)&cux_ipc_identity;
    addr->secret     = id.secret;
    addr->channel    = cux_ipc_channel_token();
    addr->process    = id.process;
}

uint64_t cux_ipc_host_id(void)
{
    static uint64_t system_id;
    uint64_t id = __atomic_load_n(&system_id, __ATOMIC_RELAXED);

    if (id == 0) { /* threads that ask at once all find the same */
        id = ucs_get_system_id();
        __atomic_store_n(&system_id, id, __ATOMIC_RELAXED);
    }
    return id;
}

uint64_t cux_ipc_pid_namespace(void)
{
    static uint64_t pid_ns = UINT64_MAX; /* a process never leaves its PID namespace: asked once */
    uint64_t ns            = __atomic_load_n(&pid_ns, __ATOMIC_RELAXED);
    struct stat st;

    if (ns == UINT64_MAX) { /* threads that ask at once all find the same */
        ns = (stat("/proc/self/ns/pid", &st) == 0) ? (uint64_t)st.st_ino : 0;
        __atomic_store_n(&pid_ns, ns, __ATOMIC_RELAXED);
    }
    return ns;
}

int cux_ipc_proof_key_is_own(const cux_ipc_rkey_t *key)
{
    /* the host first: pid and namespace numbers repeat on every host (the initial namespace's among them) */
    return (key->system_id == cux_ipc_host_id()) && (key->pid == getpid()) &&
           (key->pid_ns == cux_ipc_pid_namespace());
}

int cux_ipc_proof_own_key_use(const cux_ipc_rkey_t *key, void (*use)(const cux_ipc_rkey_t *key, void *arg),
                              void *arg)
{
    /* the table compares the whole key as it was handed out, its secret among it: a key made up, or one taken
     * back whose slot now holds another, is not there */
    return cux_ipc_proof_key_is_own(key) && cux_ipc_key_table_use(key, use, arg);
}

uint64_t cux_ipc_proof_key_secret(const cux_ipc_rkey_t *key)
{
    /* what names the allocation; not the descriptor number or the key's place, which differ per registration */
    struct {
        uint64_t       system_id, base, length, buffer_id, pid_ns;
        int32_t        pid;
        uint32_t       kind;
        CUuuid         dev_uuid;
        CUipcMemHandle handle;
    } in;
    cux_ipc_identity_t id;

    cux_ipc_identity_current(&id);
    memset(&in, 0, sizeof(in));
    in.system_id = key->system_id;
    in.base      = key->base;
    in.length    = key->length;
    in.buffer_id = key->buffer_id;
    in.pid       = key->pid;
    in.pid_ns    = key->pid_ns;
    in.kind      = key->kind;
    in.dev_uuid  = key->dev_uuid;
    in.handle    = key->handle;
    if (key->kind == CUX_IPC_KIND_VMM_SPAN) {
        /* a span's secret is of its pieces, not of where their table is */
        memset((uint8_t*)&in.handle + ucs_offsetof(cux_ipc_rkey_t, span.table) - ucs_offsetof(cux_ipc_rkey_t, handle),
               0, sizeof(key->span.table));
    }
    return cux_siphash(cux_ipc_secret_key, &in, sizeof(in));
}

uint64_t cux_ipc_proof_hello_hash(const cux_ipc_iface_addr_t *addr, uint64_t nonce)
{
    const uint64_t key[2] = {addr->secret, ~addr->secret};
    struct {
        uint64_t             nonce;
        cux_ipc_iface_addr_t addr;
    } UCS_S_PACKED in;

    /* the address's part of this host: its domain part is for peers on other hosts, which no channel reaches */
    memset(&in.addr, 0, sizeof(in.addr));
    memcpy(&in.addr, addr, CUX_IPC_ADDR_HOST_LEN);
    in.nonce       = nonce;
    in.addr.magic  = CUX_IPC_ADDR_MAGIC;
    in.addr.secret = 0;
    return cux_siphash(key, &in, sizeof(in));
}
