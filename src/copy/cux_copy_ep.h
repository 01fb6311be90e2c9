/*
 * cuda_copy endpoint: put/get short (synchronous) and zcopy (asynchronous, completed through progress).
 */
#ifndef CUX_COPY_EP_H_
#define CUX_COPY_EP_H_

#include "cux_copy_iface.h"

typedef struct cux_copy_ep {
    uct_base_ep_t super;
} cux_copy_ep_t;

UCS_CLASS_DECLARE_NEW_FUNC(cux_copy_ep_t, uct_ep_t, const uct_ep_params_t*);
UCS_CLASS_DECLARE_DELETE_FUNC(cux_copy_ep_t, uct_ep_t);

ucs_status_t cux_copy_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey);

ucs_status_t cux_copy_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey);

ucs_status_t cux_copy_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t cux_copy_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp);

#endif
