/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * This process's multi-node NVLink domain (GB200/GB300 NVL72, GH200 NVL32): whether peers on other hosts may be
 * reached over cuda_ipc (UCX_CUDA_IPC_ENABLE_MNNVL), and the domain's cluster and clique, which such peers must
 * share. Decided when a memory domain opens (the last one opened decides, process-wide): on only where the
 * setting allows it, an IMEX channel is present (a file check, so hosts without one ask NVML nothing) and NVML
 * says every GPU of this process finished its registration with the fabric, in one cluster and clique. What
 * peers on other hosts may then do, and what ours proves about them, is docs/threat-model.md, "Fabric handles".
 */
#ifndef CUX_IPC_DOMAIN_H_
#define CUX_IPC_DOMAIN_H_

#include <stdint.h>

typedef struct cux_ipc_domain {
    int      on;          /* peers on other hosts of this domain are reachable */
    uint8_t  cluster[16]; /* NVML's cluster UUID of this process's GPUs */
    uint32_t clique;
} cux_ipc_domain_t;

/* Decides it from UCX_CUDA_IPC_ENABLE_MNNVL (a ucs_ternary_auto_value_t: no, yes or try). With yes and no domain
 * here, one error line says why (cuda_ipc goes on between processes of this host, as UCX's module does). */
void cux_ipc_domain_decide(int setting);

/* Is it on? (Asked for every key unpacked: one load.) */
int cux_ipc_domain_on(void);

/* The domain, when on: 1 with *domain filled, 0 otherwise. */
int cux_ipc_domain_get(cux_ipc_domain_t *domain);

#endif
