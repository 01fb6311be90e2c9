/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, exporting side: the keys this process has handed out and not withdrawn, where peers read them back.
 *
 * A key's `record` is its slot in this table, not an address: an importer reads slot `record` from the table
 * that the exporter's identity record names (cux_ipc_proof.h), never from a place the key chose, so a copy of a
 * key's bytes anywhere else in the exporter (a received message, a freed heap block) proves nothing. The table
 * is chunks of slots under a directory at a fixed address; chunks are never freed, so a peer may remember where
 * one is. A withdrawn key's slot is wiped before it is used again.
 */
#ifndef CUX_IPC_KEY_TABLE_H_
#define CUX_IPC_KEY_TABLE_H_

#include "ipc/common/cux_ipc_rkey.h"

#include <ucs/type/status.h>
#include <stdint.h>

#define CUX_IPC_KEY_CHUNK_SLOTS 1024u
#define CUX_IPC_KEY_CHUNKS      4096u /* at most 4 million keys out at once */

/* Where the directory is (an array of CUX_IPC_KEY_CHUNKS chunk addresses, 0 where none): for the identity. */
uint64_t cux_ipc_key_table_directory(void);

/* Takes a slot for the key, names it in key->record, seals the key and keeps a copy in the slot.
 * UCS_ERR_NO_MEMORY (with a log line) when the table is full or a chunk cannot be allocated. */
ucs_status_t cux_ipc_key_table_add(cux_ipc_rkey_t *key);

/* Withdraws the key: its slot is wiped and freed (nothing if the slot does not hold this key). */
void cux_ipc_key_table_remove(const cux_ipc_rkey_t *key);

/* Runs use(key, arg) with the table locked when slot key->record holds exactly this key, and says whether it
 * did: while it runs, the key cannot be withdrawn, so neither can its descriptors be closed nor its span's table
 * freed (the exporter lets them go only after the key). use may be NULL. */
int cux_ipc_key_table_use(const cux_ipc_rkey_t *key, void (*use)(const cux_ipc_rkey_t *key, void *arg), void *arg);

/* Keys out now, for tests. */
unsigned long cux_ipc_key_table_count(void);

#endif
