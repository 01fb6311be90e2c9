/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc peer proofs, peers on other hosts of our multi-node NVLink domain (cux_ipc_proof.h). No proof reaches
 * them: no pid, pidfd, /proc, memory or socket of ours. So what is taken from them is bounded instead: only
 * peers whose address names our domain's cluster and clique, only where this process is in that domain
 * (cux_ipc_domain.h), never a process that the kernel shows on this host, and only keys that cross hosts by
 * themselves: fabric handles, which the driver opens for a holder of the bytes with an IMEX channel, the
 * boundary the administrator draws. A key is used on an endpoint to its exporter alone (host, pid, namespace),
 * and its mappings are that peer's (CUX_IPC_OWNER_REMOTE). docs/threat-model.md, "Fabric handles".
 */
#include "ipc/import/cux_ipc_proof_channel.h"
#include "ipc/common/cux_ipc_domain.h"

#include <ucs/debug/log.h>
#include <ucs/sys/sys.h>
#include <inttypes.h>
#include <string.h>

int cux_ipc_remote_peer_acceptable(const cux_ipc_iface_addr_t *addr, uint64_t pid_ns, const char **why_p)
{
    cux_ipc_domain_t ours;

    if (!cux_ipc_domain_get(&ours)) {
        *why_p = "another host, and multi-node NVLink is off here (UCX_LOG_LEVEL=debug says why)";
    } else if (addr->magic != CUX_IPC_ADDR_MAGIC_DOMAIN) {
        *why_p = "another host, in no multi-node NVLink domain";
    } else if (memcmp(addr->cluster, ours.cluster, sizeof(ours.cluster)) || (addr->clique != ours.clique)) {
        *why_p = "another host, of another NVLink domain (cluster or clique)";
    } else if ((addr->pid > 0) && (ucs_sys_get_proc_create_time(addr->pid) == addr->start_time)) {
        /* its pid and start time name a process here, whatever namespace the address writes beside them: a process
         * of this host that says it is elsewhere would step around every proof of this host (a pid and start time
         * of another host's process match one here only by chance) */
        *why_p = "a process of this host whose address says it is on another";
    } else {
        return 1;
    }
    return 0;
}

ucs_status_t cux_ipc_remote_peer_open(cux_ipc_peer_t *peer, const cux_ipc_iface_addr_t *addr, uint64_t system_id,
                                      uint64_t pid_ns)
{
    const uint64_t words[] = {system_id, (uint64_t)(uint32_t)addr->pid, addr->pid_ns, addr->start_time,
                              addr->secret};
    uint64_t hash = 0xcbf29ce484222325ull;
    const char *why;
    unsigned i;

    memset(peer, 0, sizeof(*peer));
    peer->pidfd   = -1;
    peer->channel = -1;
    if (!cux_ipc_remote_peer_acceptable(addr, pid_ns, &why)) {
        ucs_debug("cuda_ipc: pid %d of host 0x%" PRIx64 " is not reachable: %s", addr->pid, system_id, why);
        return UCS_ERR_UNREACHABLE;
    }
    /* its mappings serve no other peer: one of this host whose pid and namespace happen to be the same is of
     * another kind of owner, and one of another host has another hash */
    for (i = 0; i < sizeof(words) / sizeof(words[0]); ++i) {
        hash = (hash ^ words[i]) * 0x100000001b3ull;
    }
    peer->system_id  = system_id;
    peer->pid        = addr->pid;
    peer->pid_ns     = addr->pid_ns;
    peer->start_time = addr->start_time;
    peer->owner      = CUX_IPC_OWNER_REMOTE | (hash & ~(3ull << 62));
    ucs_debug("cuda_ipc: pid %d of host 0x%" PRIx64 " is in our NVLink domain: its fabric handles are imported",
              peer->pid, system_id);
    return UCS_OK;
}
