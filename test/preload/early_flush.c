/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test preload: a worker flush returns at once while an RMA operation is still in progress, as UCP's own does
 * (1.13 to 1.22 and master) when such operations wait in a transport's pending queue: its worker flush counts only
 * operations already sent, and asks each interface, and a shared-memory interface says "flushed" with its
 * endpoints' pending queues full (a receiver's FIFO full of other ranks' traffic). On a busy machine that happens
 * at random; here every time an operation is outstanding, so that a program that trusts the flush alone reads its
 * data too early on every run, and one that waits for its requests does not.
 *
 * An operation is outstanding from the request UCP returns until its callback (the preload wraps it); a request
 * the program takes without a callback counts as outstanding until the next flush. A flush with nothing
 * outstanding goes to UCP. Each process says once "early_flush: ..." on stderr.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long outstanding; /* requests returned whose callback has not run */
static int  untracked;   /* a request without a callback was returned since the last flush */

typedef struct {
    ucp_send_nbx_callback_t cb;
    void                    *user_data;
} wrapped_t;

static void *next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "early_flush: %s not found\n", name);
        _exit(3);
    }
    return f;
}

static void wrapped_done(void *request, ucs_status_t status, void *arg)
{
    wrapped_t w = *(wrapped_t*)arg;
    free(arg);
    __atomic_sub_fetch(&outstanding, 1, __ATOMIC_RELAXED);
    w.cb(request, status, w.user_data);
}

/* Calls post with the program's parameters, its callback wrapped, and notes what is outstanding. */
#define TRACKED(_post, _param) \
    ({ \
        ucp_request_param_t _p = *(_param); \
        wrapped_t *_w          = NULL; \
        ucs_status_ptr_t _r; \
        if ((_p.op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK) && ((_w = malloc(sizeof(*_w))) != NULL)) { \
            _w->cb        = _p.cb.send; \
            _w->user_data = (_p.op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA) ? _p.user_data : NULL; \
            _p.cb.send    = wrapped_done; \
            _p.user_data  = _w; \
            _p.op_attr_mask |= UCP_OP_ATTR_FIELD_USER_DATA; \
        } \
        _r = _post(&_p); \
        if (!UCS_PTR_IS_PTR(_r) || (_r == NULL)) { \
            free(_w); /* done at once: no callback */ \
        } else if (_w != NULL) { \
            __atomic_add_fetch(&outstanding, 1, __ATOMIC_RELAXED); \
        } else { \
            __atomic_store_n(&untracked, 1, __ATOMIC_RELAXED); \
        } \
        _r; \
    })

ucs_status_ptr_t ucp_put_nbx(ucp_ep_h ep, const void *buffer, size_t count, uint64_t remote_addr, ucp_rkey_h rkey,
                             const ucp_request_param_t *param)
{
    static ucs_status_ptr_t (*real)(ucp_ep_h, const void*, size_t, uint64_t, ucp_rkey_h,
                                    const ucp_request_param_t*);
    if (real == NULL) {
        *(void**)&real = next("ucp_put_nbx");
    }
#define POST_PUT(_p) real(ep, buffer, count, remote_addr, rkey, _p)
    return TRACKED(POST_PUT, param);
}

ucs_status_ptr_t ucp_get_nbx(ucp_ep_h ep, void *buffer, size_t count, uint64_t remote_addr, ucp_rkey_h rkey,
                             const ucp_request_param_t *param)
{
    static ucs_status_ptr_t (*real)(ucp_ep_h, void*, size_t, uint64_t, ucp_rkey_h, const ucp_request_param_t*);
    if (real == NULL) {
        *(void**)&real = next("ucp_get_nbx");
    }
#define POST_GET(_p) real(ep, buffer, count, remote_addr, rkey, _p)
    return TRACKED(POST_GET, param);
}

ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h worker, const ucp_request_param_t *param)
{
    static ucs_status_ptr_t (*real)(ucp_worker_h, const ucp_request_param_t*);
    static int said;
    int early;
    if (real == NULL) {
        *(void**)&real = next("ucp_worker_flush_nbx");
    }
    early = __atomic_exchange_n(&untracked, 0, __ATOMIC_RELAXED) |
            (__atomic_load_n(&outstanding, __ATOMIC_RELAXED) > 0);
    if (early) {
        if (said++ == 0) {
            fprintf(stderr, "early_flush: a worker flush returns at once while RMA is in progress (pid %d)\n",
                    (int)getpid());
        }
        return NULL; /* UCS_OK, done */
    }
    return real(worker, param);
}
