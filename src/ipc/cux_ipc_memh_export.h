/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, the memory domain's export of a registration: the key of an allocation. What the driver says the
 * allocation can be exported as (asked, not provoked by export calls that fail), the handle, descriptor or
 * fabric handle exported for it (export/), the key sealed and put in the table of keys out
 * (cux_ipc_key_table.h), and the memo of recent keys, since UCP registers the buffer of every rendezvous message.
 */
#ifndef CUX_IPC_MEMH_EXPORT_H_
#define CUX_IPC_MEMH_EXPORT_H_

#include "ipc/cux_ipc_md.h"
#include "base/cux_ptr.h"

/* Fill memh's key, device and descriptor for the allocation info describes: from the memo, or by exporting a
 * handle (a key of kind NONE when the allocation cannot be shared). */
ucs_status_t cux_ipc_memh_export(cux_ipc_md_t *md, const cux_ptr_info_t *info, cux_ipc_memh_t *memh);

#endif
