/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test preload (UCX 1.22+): cuda_ipc's memory domain made to require UCS_MEM_FLAG_REGISTRABLE, as UCX 1.22's
 * InfiniBand domains do (required_mem_flags), so that a host without a NIC shows whether UCP would register
 * GPU buffers with one: UCP registers a buffer with such a domain only when the buffer's memory flags, from the
 * memory query or from the memory-type cache, say registrable. UCP queries each domain and registers through
 * libuct's public calls, so the preload sees both. Each process says once "require_registrable: cuda_ipc requires
 * it" and, at the first GPU buffer registered with the domain, "require_registrable: GPU memory registered"
 * (the check's processes may _exit: nothing is left for a destructor).
 */
#define _GNU_SOURCE
#include "compat/cux_ucx_compat.h"
#include <uct/api/uct.h>
#include <uct/api/v2/uct_v2.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if CUX_UCX_HAS_MEM_FLAGS

static int queried; /* the domain was made to require the flag in this process */
static int registered; /* GPU buffers registered with it */

static void say_once(int *count, const char *what)
{
    if ((*count)++ == 0) {
        fprintf(stderr, "require_registrable: %s (pid %d)\n", what, (int)getpid());
    }
}

static int is_cuda_ipc(uct_md_h md)
{
    static ucs_status_t (*real)(uct_md_h, uct_md_attr_v2_t*);
    uct_md_attr_v2_t attr = {.field_mask = UCT_MD_ATTR_FIELD_COMPONENT_NAME};

    if (real == NULL) {
        real = (ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t*))dlsym(RTLD_NEXT, "uct_md_query_v2");
    }
    return (real(md, &attr) == UCS_OK) && !strcmp(attr.component_name, "cuda_ipc");
}

ucs_status_t uct_md_query_v2(uct_md_h md, uct_md_attr_v2_t *md_attr)
{
    static ucs_status_t (*real)(uct_md_h, uct_md_attr_v2_t*);
    ucs_status_t status;

    if (real == NULL) {
        real = (ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t*))dlsym(RTLD_NEXT, "uct_md_query_v2");
    }
    status = real(md, md_attr);
    if ((status == UCS_OK) && (md_attr->field_mask & UCT_MD_ATTR_FIELD_REQUIRED_MEM_FLAGS) && is_cuda_ipc(md)) {
        md_attr->required_mem_flags = UCS_MEM_FLAG_REGISTRABLE;
        say_once(&queried, "cuda_ipc requires registrable memory");
    }
    return status;
}

ucs_status_t uct_md_mem_reg_v2(uct_md_h md, void *address, size_t length, const uct_md_mem_reg_params_t *params,
                               uct_mem_h *memh_p)
{
    static ucs_status_t (*real)(uct_md_h, void*, size_t, const uct_md_mem_reg_params_t*, uct_mem_h*);
    ucs_status_t status;

    if (real == NULL) {
        real = (ucs_status_t (*)(uct_md_h, void*, size_t, const uct_md_mem_reg_params_t*, uct_mem_h*))
               dlsym(RTLD_NEXT, "uct_md_mem_reg_v2");
    }
    status = real(md, address, length, params, memh_p);
    if ((status == UCS_OK) && is_cuda_ipc(md)) {
        say_once(&registered, "GPU memory registered"); /* cuda_ipc registers GPU memory only */
    }
    return status;
}

#else
typedef int require_registrable_needs_ucx_1_22;
#endif
