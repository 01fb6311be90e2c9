/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The keys this process has handed out: see cux_ipc_key_table.h.
 */
#include "ipc/export/cux_ipc_key_table.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <pthread.h>
#include <string.h>

static pthread_mutex_t cux_ipc_key_lock = PTHREAD_MUTEX_INITIALIZER;
static cux_ipc_rkey_t *cux_ipc_key_chunks[CUX_IPC_KEY_CHUNKS]; /* the directory peers read */
static uint32_t *cux_ipc_key_free;     /* free slots, a stack */
static unsigned long cux_ipc_key_nfree, cux_ipc_key_free_cap;
static unsigned cux_ipc_key_nchunks;   /* chunks allocated */
static unsigned long cux_ipc_key_out;  /* keys out */

uint64_t cux_ipc_key_table_directory(void)
{
    return (uintptr_t)cux_ipc_key_chunks;
}

static cux_ipc_rkey_t *cux_ipc_key_slot(uint64_t record)
{
    cux_ipc_rkey_t *chunk;

    if (record >= (uint64_t)CUX_IPC_KEY_CHUNKS * CUX_IPC_KEY_CHUNK_SLOTS) {
        return NULL;
    }
    chunk = cux_ipc_key_chunks[record / CUX_IPC_KEY_CHUNK_SLOTS];
    return (chunk == NULL) ? NULL : &chunk[record % CUX_IPC_KEY_CHUNK_SLOTS];
}

/* One more chunk, its slots onto the free stack. Lock held. */
static ucs_status_t cux_ipc_key_grow(void)
{
    unsigned long cap = cux_ipc_key_free_cap + CUX_IPC_KEY_CHUNK_SLOTS;
    cux_ipc_rkey_t *chunk;
    uint32_t *stack;
    unsigned i;

    if (cux_ipc_key_nchunks == CUX_IPC_KEY_CHUNKS) {
        ucs_error("cuda_ipc: %lu keys are out, the most this process hands out at once: this key tells its "
                  "peer to take another path", cux_ipc_key_out);
        return UCS_ERR_NO_MEMORY;
    }
    chunk = ucs_calloc(CUX_IPC_KEY_CHUNK_SLOTS, sizeof(*chunk), "cux_ipc_key_chunk");
    stack = ucs_realloc(cux_ipc_key_free, cap * sizeof(*stack), "cux_ipc_key_free");
    if ((chunk == NULL) || (stack == NULL)) {
        ucs_free(chunk);
        cux_ipc_key_free = (stack != NULL) ? stack : cux_ipc_key_free;
        ucs_error("cuda_ipc: no memory for more keys");
        return UCS_ERR_NO_MEMORY;
    }
    cux_ipc_key_free     = stack;
    cux_ipc_key_free_cap = cap;
    for (i = CUX_IPC_KEY_CHUNK_SLOTS; i > 0; --i) { /* the chunk's first slot on top */
        cux_ipc_key_free[cux_ipc_key_nfree++] = cux_ipc_key_nchunks * CUX_IPC_KEY_CHUNK_SLOTS + i - 1;
    }
    /* published last: a peer that reads the directory finds a chunk of zeroed slots or none */
    __atomic_store_n(&cux_ipc_key_chunks[cux_ipc_key_nchunks++], chunk, __ATOMIC_RELEASE);
    return UCS_OK;
}

ucs_status_t cux_ipc_key_table_add(cux_ipc_rkey_t *key)
{
    ucs_status_t status = UCS_OK;

    pthread_mutex_lock(&cux_ipc_key_lock);
    if (cux_ipc_key_nfree == 0) {
        status = cux_ipc_key_grow();
    }
    if (status == UCS_OK) {
        key->record = cux_ipc_key_free[--cux_ipc_key_nfree];
        cux_ipc_rkey_seal(key);
        *cux_ipc_key_slot(key->record) = *key;
        ++cux_ipc_key_out;
    }
    pthread_mutex_unlock(&cux_ipc_key_lock);
    return status;
}

void cux_ipc_key_table_remove(const cux_ipc_rkey_t *key)
{
    cux_ipc_rkey_t *slot;

    pthread_mutex_lock(&cux_ipc_key_lock);
    slot = cux_ipc_key_slot(key->record);
    if ((slot != NULL) && (slot->magic != 0) && !memcmp(slot, key, sizeof(*key))) {
        explicit_bzero(slot, sizeof(*slot));
        cux_ipc_key_free[cux_ipc_key_nfree++] = (uint32_t)key->record;
        --cux_ipc_key_out;
    }
    pthread_mutex_unlock(&cux_ipc_key_lock);
}

int cux_ipc_key_table_use(const cux_ipc_rkey_t *key, void (*use)(const cux_ipc_rkey_t *key, void *arg), void *arg)
{
    cux_ipc_rkey_t *slot;
    int holds;

    pthread_mutex_lock(&cux_ipc_key_lock);
    slot  = cux_ipc_key_slot(key->record);
    holds = (slot != NULL) && (slot->magic != 0) && !memcmp(slot, key, sizeof(*key));
    if (holds && (use != NULL)) {
        use(slot, arg);
    }
    pthread_mutex_unlock(&cux_ipc_key_lock);
    return holds;
}

unsigned long cux_ipc_key_table_count(void)
{
    unsigned long count;

    pthread_mutex_lock(&cux_ipc_key_lock);
    count = cux_ipc_key_out;
    pthread_mutex_unlock(&cux_ipc_key_lock);
    return count;
}
