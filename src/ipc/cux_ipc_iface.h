/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc interface: put/get zero-copy between this process's GPU memory and another
 * process's, through a cached mapping of the remote allocation. Per local device there is one stream queue
 * per peer device (and one for peers whose device is not visible here), so copies to different GPUs run
 * side by side.
 */
#ifndef CUX_IPC_IFACE_H_
#define CUX_IPC_IFACE_H_

#include "ipc/cux_ipc_device.h"
#include "ipc/cux_ipc_md.h"
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/common/cux_ipc_domain.h"
#include "base/cux_iface.h"

typedef struct cux_ipc_iface_config {
    cux_iface_config_t super;
    unsigned           max_batch;
    unsigned           list_batch;
    size_t             copy_kernel_max;
    ucs_on_off_auto_value_t enable_get_zcopy;
} cux_ipc_iface_config_t;

typedef struct cux_ipc_iface {
    cux_iface_t super;   /* queues per local device: one per peer device, then one for invisible peers */
    uint64_t    system_id;
    uint64_t    pid_ns;  /* our PID namespace */
    cux_ipc_proof_mode_t proof; /* what peers must prove (the memory domain's PEER_PROOF) */
    int         get_zcopy;  /* ENABLE_GET_ZCOPY: reads offered to UCP */
    cux_ipc_domain_t domain; /* its multi-node NVLink domain, as when it opened: peers on other hosts */
    cux_ipc_device_eps_t device_eps; /* UCX's device API (1.20+) */
} cux_ipc_iface_t;

#endif
