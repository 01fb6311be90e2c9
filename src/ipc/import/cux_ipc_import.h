/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc, importing side: what this process does with another process's memory. It checks the remote keys
 * peers send (unpack), maps the allocations they name into a local device's address space, and owns the
 * process-wide cache of those mappings (a handle can be opened only once per context, and opening one costs
 * about a millisecond). The endpoint asks it for a mapping and gives it back when its copy is done.
 */
#ifndef CUX_IPC_IMPORT_H_
#define CUX_IPC_IMPORT_H_

#include "ipc/import/cux_ipc_cache.h"
#include "ipc/import/cux_ipc_proof.h"
#include "compat/cux_ucx_compat.h"

/* A remote key as the endpoint uses it: the checked key and what this process resolves from it once, at
 * unpack, rather than on every operation. */
typedef struct cux_ipc_unpacked_rkey {
    cux_ipc_rkey_t    key;
    int               peer_device; /* local ordinal of the device owning the buffer, -1 if not visible here */
    cux_ipc_region_t **attached;   /* rkey_ptr's and device elements' mappings, one per local device, held until
                                      release; NULL until the first */
    uint64_t          id;          /* this unpacking's, never reused: a mapping remembers the last key it was
                                      found to serve by it (cux_ipc_cache.h) */
} cux_ipc_unpacked_rkey_t;

/* Mappings of other processes' memory, shared by every cuda_ipc interface of the process. */
extern cux_ipc_cache_t cux_ipc_cache;

/* A memory domain opens (and sets the cache's bounds: the last one opened wins) or closes; the last to close
 * empties the cache. */
void cux_ipc_import_attach(int cache_enable, unsigned long max_regions, size_t max_size, ucs_time_t max_idle);
void cux_ipc_import_detach(void);

/* rkey_unpack and rkey_release of the cuda_ipc component. */
ucs_status_t cux_ipc_import_rkey_unpack(uct_component_t *component, const void *rkey_buffer, uct_rkey_t *rkey_p,
                                        void **handle_p);
ucs_status_t cux_ipc_import_rkey_release(uct_component_t *component, uct_rkey_t rkey, void *handle);

/* rkey_ptr: where the remote address is mapped on the calling thread's device (else the owner's), valid until
 * the key is released. Like UCX's module since 1.21, for ucp_rkey_ptr; the key is proven in the peer's memory
 * first (UCS_ERR_UNREACHABLE), an address outside its allocation is UCS_ERR_INVALID_ADDR. */
ucs_status_t cux_ipc_import_rkey_ptr(uct_component_t *component, uct_rkey_t rkey, void *handle, uint64_t raddr,
                                     void **laddr_p);

/* Where the key's allocation is mapped on the calling thread's device (else the owner's): proven and mapped on
 * first use, held until the key is released (rkey_ptr's and the device API's memory elements). */
ucs_status_t cux_ipc_import_rkey_attach(cux_ipc_unpacked_rkey_t *ukey, void **mapped_base_p);

/* The same mapping, held apart from the key until cux_ipc_import_put (UCX 1.23's device memory elements, which
 * may outlive their key). */
ucs_status_t cux_ipc_import_rkey_hold(const cux_ipc_unpacked_rkey_t *ukey, cux_ipc_region_t **region_p);

/* The mapping of the key's allocation on a local device, held until cux_ipc_import_put. On a miss the key is
 * proven against the peer (cux_ipc_proof.h) before anything is mapped: UCS_ERR_UNREACHABLE if it fails. */
ucs_status_t cux_ipc_import_get(const cux_ipc_unpacked_rkey_t *ukey, int device, cux_ipc_peer_t *peer,
                                cux_ipc_region_t **region_p);
/* count more references of a held mapping, each given back with cux_ipc_import_put. */
void cux_ipc_import_hold(cux_ipc_region_t *region, unsigned count);
void cux_ipc_import_put(cux_ipc_region_t *region);

/* The same for many mappings under one lock of the cache (cux_ipc_cache_batch_begin): between begin and end, only
 * these. get_held returns the mapping the cache holds ready for the key on device (proven for this peer), else NULL:
 * cux_ipc_import_get then proves and maps it, after the batch. */
void cux_ipc_import_batch_begin(void);
cux_ipc_region_t *cux_ipc_import_batch_get_held(const cux_ipc_unpacked_rkey_t *ukey, int device,
                                                const cux_ipc_peer_t *peer);
void cux_ipc_import_batch_put(cux_ipc_region_t *region);
void cux_ipc_import_batch_end(void);
/* Where get_held will look for the key on device, asked ahead: stage 0 the table's slot, 1 the mapping in it. */
void cux_ipc_import_batch_prefetch(const cux_ipc_unpacked_rkey_t *ukey, int device, int stage);

/* A peer is gone, or what was proven for it serves no one else (its connection closes): give back the GPU memory
 * its mappings hold (those in use go at their last release). Mappings proven for another owner stay. */
void cux_ipc_import_forget_peer(const cux_ipc_peer_t *peer);

#endif
