/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How NIXL writes to a peer (issue 46): many ucp_put_nbx of GPU memory into one remote allocation, then
 * ucp_ep_flush_nbx, on an endpoint with peer error handling. Here the peer is killed (SIGKILL) while the writes
 * may still be in flight, and the flush must end, with an error or not, within a bound: a serving system cannot
 * wait on a dead decode peer.
 *
 *   cux_ucp_put_kill [-n PUTS] [-s SIZE] [-t SECONDS]
 *
 * Prints "flush ended: STATUS after N ms" (exit 0) or "flush still in progress after N s" (exit 1).
 */
#include <ucp/api/ucp.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int send_blob(int fd, const void *p, size_t len)
{
    uint64_t n = len;

    return ((send(fd, &n, sizeof(n), 0) == sizeof(n)) && (send(fd, p, len, 0) == (ssize_t)len)) ? 0 : -1;
}

static void *recv_blob(int fd, size_t *len_p)
{
    uint64_t n;
    void *p;

    if (recv(fd, &n, sizeof(n), MSG_WAITALL) != sizeof(n)) {
        return NULL;
    }
    p = malloc(n);
    if ((p != NULL) && (recv(fd, p, n, MSG_WAITALL) != (ssize_t)n)) {
        free(p);
        return NULL;
    }
    *len_p = n;
    return p;
}

static int ucp_setup(ucp_context_h *ctx, ucp_worker_h *worker)
{
    ucp_params_t params               = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    ucp_worker_params_t wparams       = {.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                         .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_config_t *config;
    ucs_status_t status;

    if (ucp_config_read(NULL, NULL, &config) != UCS_OK) {
        return -1;
    }
    status = ucp_init(&params, config, ctx);
    ucp_config_release(config);
    return ((status == UCS_OK) && (ucp_worker_create(*ctx, &wparams, worker) == UCS_OK)) ? 0 : -1;
}

/* GPU memory of UCP's own allocation (cuda_copy's mem_alloc), mapped for RMA. */
static int gpu_map(ucp_context_h ctx, size_t size, ucp_mem_h *memh, void **addr)
{
    ucp_mem_map_params_t mp = {.field_mask  = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                                              UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
                               .length      = size,
                               .flags       = UCP_MEM_MAP_ALLOCATE,
                               .memory_type = UCS_MEMORY_TYPE_CUDA};
    ucp_mem_attr_t attr     = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};

    if ((ucp_mem_map(ctx, &mp, memh) != UCS_OK) || (ucp_mem_query(*memh, &attr) != UCS_OK)) {
        return -1;
    }
    *addr = attr.address;
    return 0;
}

/* As NIXL's endpoint does: the failed endpoint is closed at once, from the error callback (its last lanes on this
 * worker go, and with them UCP's reason to progress their interfaces). */
static void peer_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    void *req;

    *(ucs_status_t*)arg = status;
    req = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(req)) {
        ucp_request_free(req);
    }
}

/* The target: its address, its GPU memory and its key go to the initiator; then it waits to be killed. */
static int target(int fd, size_t total)
{
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    ucp_mem_h memh;
    void *base, *rkey;
    uint64_t where;

    if ((ucp_setup(&ctx, &worker) != 0) || (gpu_map(ctx, total, &memh, &base) != 0) ||
        (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK) ||
        (ucp_rkey_pack(ctx, memh, &rkey, &rkey_len) != UCS_OK)) {
        return 2;
    }
    where = (uintptr_t)base;
    if ((send_blob(fd, addr, addr_len) != 0) || (send_blob(fd, &where, sizeof(where)) != 0) ||
        (send_blob(fd, rkey, rkey_len) != 0)) {
        return 2;
    }
    for (;;) {
        ucp_worker_progress(worker);
        usleep(100);
    }
}

int main(int argc, char **argv)
{
    size_t size = 4 << 20, puts = 64, addr_len, rkey_len, where_len, i;
    double limit = 30, t0;
    ucs_status_t ep_status = UCS_OK, status;
    ucp_request_param_t rp = {0};
    ucp_ep_params_t ep_params;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_mem_h memh;
    ucp_rkey_h rkey;
    void *addr, *rkey_buf, *where_p, *local, *req;
    int sv[2], opt, rc;
    ucp_ep_h ep;
    pid_t pid;

    while ((opt = getopt(argc, argv, "n:s:t:")) != -1) {
        if (opt == 'n') {
            puts = strtoul(optarg, NULL, 0);
        } else if (opt == 's') {
            size = strtoul(optarg, NULL, 0);
        } else if (opt == 't') {
            limit = atof(optarg);
        } else {
            fprintf(stderr, "usage: %s [-n PUTS] [-s SIZE] [-t SECONDS]\n", argv[0]);
            return 2;
        }
    }
    if ((puts == 0) || (size == 0) || (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)) {
        return 2;
    }
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(target(sv[1], puts * size));
    }
    close(sv[1]);
    if ((ucp_setup(&ctx, &worker) != 0) || (gpu_map(ctx, puts * size, &memh, &local) != 0)) {
        fprintf(stderr, "UCP set-up failed\n");
        goto err_kill;
    }
    addr     = recv_blob(sv[0], &addr_len);
    where_p  = recv_blob(sv[0], &where_len);
    rkey_buf = recv_blob(sv[0], &rkey_len);
    if ((addr == NULL) || (where_p == NULL) || (rkey_buf == NULL)) {
        fprintf(stderr, "the target did not start\n");
        goto err_kill;
    }
    ep_params = (ucp_ep_params_t){.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                                     UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                                     UCP_EP_PARAM_FIELD_ERR_HANDLER,
                                  .address         = addr,
                                  .err_mode        = UCP_ERR_HANDLING_MODE_PEER,
                                  .err_handler     = {.cb = peer_error, .arg = &ep_status}};
    if ((ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) || (ucp_ep_rkey_unpack(ep, rkey_buf, &rkey) != UCS_OK)) {
        fprintf(stderr, "endpoint or key failed\n");
        goto err_kill;
    }

    rp.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    rp.memh         = memh;
    for (i = 0; i < puts; ++i) {
        req = ucp_put_nbx(ep, (char*)local + i * size, size, *(uint64_t*)where_p + i * size, rkey, &rp);
        if (UCS_PTR_IS_ERR(req)) {
            fprintf(stderr, "put %zu: %s\n", i, ucs_status_string(UCS_PTR_STATUS(req)));
            goto err_kill;
        } else if (req != NULL) {
            ucp_request_free(req); /* the flush below covers it */
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);

    t0  = now_s();
    req = ucp_ep_flush_nbx(ep, &(ucp_request_param_t){0});
    status = UCS_PTR_IS_PTR(req) ? UCS_INPROGRESS : UCS_PTR_STATUS(req);
    while ((status == UCS_INPROGRESS) && (now_s() - t0 < limit)) {
        ucp_worker_progress(worker);
        status = ucp_request_check_status(req);
    }
    if (status == UCS_INPROGRESS) {
        printf("flush still in progress after %.0f s (peer error: %s)\n", limit, ucs_status_string(ep_status));
        rc = 1;
    } else {
        printf("flush ended: %s after %.1f ms (peer error: %s)\n", ucs_status_string(status), (now_s() - t0) * 1e3,
               ucs_status_string(ep_status));
        rc = 0;
    }
    fflush(stdout);
    _exit(rc); /* a dead peer's endpoint and requests are not for this test to take apart */

err_kill:
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 2;
}
