/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * This process's multi-node NVLink domain: see cux_ipc_domain.h.
 */
#include "ipc/common/cux_ipc_domain.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "driver/cux_device.h"
#include "driver/cux_nvml.h"

#include <ucs/config/types.h>
#include <ucs/debug/log.h>
#include <pthread.h>
#include <string.h>

static pthread_mutex_t cux_ipc_domain_lock = PTHREAD_MUTEX_INITIALIZER;
static cux_ipc_domain_t cux_ipc_domain_state; /* under the lock */
static int cux_ipc_domain_is_on;              /* its `on`, read without the lock */

/* The domain of every GPU this process sees; NULL when they are in one, or why not. */
static const char *cux_ipc_domain_of_gpus(cux_ipc_domain_t *domain, char *why, size_t max)
{
    static const uint8_t zero[16];
    cux_fabric_info_t info;
    int i;

    if (cux_device_count() <= 0) {
        return "no GPU";
    }
    for (i = 0; i < cux_device_count(); ++i) {
        cux_nvml_fabric_info(&cux_device_get(i)->uuid, &info);
        if (info.state != CUX_FABRIC_COMPLETE) {
            snprintf(why, max, "GPU %d's NVLink fabric is %s (%s)", i, cux_fabric_state_name(info.state), info.why);
            return why;
        }
        if (!memcmp(info.cluster, zero, sizeof(zero))) {
            snprintf(why, max, "GPU %d is in no cluster (NVML's cluster UUID is zero)", i);
            return why;
        }
        if (i == 0) {
            memcpy(domain->cluster, info.cluster, sizeof(domain->cluster));
            domain->clique = info.clique;
        } else if (memcmp(domain->cluster, info.cluster, sizeof(domain->cluster)) || (domain->clique != info.clique)) {
            snprintf(why, max, "GPUs 0 and %d are in different NVLink domains (cluster or clique)", i);
            return why;
        }
    }
    return NULL;
}

void cux_ipc_domain_decide(int setting)
{
    cux_ipc_domain_t domain = {};
    const char *why;
    char buf[192];

    if (setting == UCS_NO) {
        why = "UCX_CUDA_IPC_ENABLE_MNNVL=n";
    } else if (!cux_imex_channel_present()) {
        why = "no IMEX channel";
    } else {
        why = cux_ipc_domain_of_gpus(&domain, buf, sizeof(buf));
    }
    domain.on = (why == NULL);
    if ((setting == UCS_YES) && !domain.on) {
        ucs_error("cuda_ipc: UCX_CUDA_IPC_ENABLE_MNNVL=y, but %s: cuda_ipc reaches processes of this host only", why);
    } else if (domain.on) {
        ucs_debug("cuda_ipc: multi-node NVLink on (clique %u): peers on other hosts of this domain are reachable",
                  domain.clique);
    } else {
        ucs_debug("cuda_ipc: multi-node NVLink off (%s): cuda_ipc reaches processes of this host only", why);
    }
    pthread_mutex_lock(&cux_ipc_domain_lock);
    cux_ipc_domain_state = domain;
    __atomic_store_n(&cux_ipc_domain_is_on, domain.on, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cux_ipc_domain_lock);
}

int cux_ipc_domain_on(void)
{
    return __atomic_load_n(&cux_ipc_domain_is_on, __ATOMIC_ACQUIRE);
}

int cux_ipc_domain_get(cux_ipc_domain_t *domain)
{
    pthread_mutex_lock(&cux_ipc_domain_lock);
    *domain = cux_ipc_domain_state;
    pthread_mutex_unlock(&cux_ipc_domain_lock);
    return domain->on;
}
