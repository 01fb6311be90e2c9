/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_copy endpoint operations (the endpoint itself is cux_ep_t): put/get short (synchronous) and zcopy
 * (asynchronous, completed through progress).
 */
#ifndef CUX_COPY_EP_H_
#define CUX_COPY_EP_H_

#include "cux_copy_iface.h"

ucs_status_t cux_copy_ep_put_short(uct_ep_h tl_ep, const void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey);

ucs_status_t cux_copy_ep_get_short(uct_ep_h tl_ep, void *buffer, unsigned length, uint64_t remote_addr,
                                   uct_rkey_t rkey);

ucs_status_t cux_copy_ep_put_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp);

ucs_status_t cux_copy_ep_get_zcopy(uct_ep_h tl_ep, const uct_iov_t *iov, size_t iovcnt, uint64_t remote_addr,
                                   uct_rkey_t rkey, uct_completion_t *comp);

#endif
