/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for everything a peer sends to cuda_ipc, with the whole module compiled into the target
 * (instrumented, test/run-fuzz.sh) and running on the mock driver (CUX_DRIVER_PATH), so no GPU is needed.
 *
 * A helper process, forked before the driver is loaded, is a real exporting peer: it allocates a legacy and a
 * VMM buffer, registers them and sends its addresses and keys. The first input byte picks the entry point; the
 * rest is the peer's bytes:
 *   0: cux_ipc_rkey_check and the range check on the bytes as a key;
 *   1: uct_rkey_unpack and release through the cuda_ipc component;
 *   2: uct_iface_is_reachable of the helper's true device and interface address XORed with the input;
 *   3: uct_ep_create from that address (the proof of the address, the pidfd, keepalive), then destroy;
 *   4: a get through the endpoint to the helper with one of its true keys XORed with the input (byte 1 picks the
 *      key, bytes 2-9 the offset): unpack, the endpoint binding, the proof read back from the helper, the cache
 *      lookup, the mapping and the copy.
 * An all-zero input is the true address or key, so the fuzzer starts from the paths that succeed. Inputs shorter
 * than what UCX hands over are zero-padded to it: UCP always passes the sizes the transport declared.
 */
#include "ipc/common/cux_ipc_rkey.h"
#include "driver/cux_driver.h"
#include "driver/cux_device.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <ucs/sys/math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_ADDR_LEN 192 /* device address (64 bytes), then interface address (64, and room for what it claims) */

typedef struct {
    uint8_t  addr[FUZZ_ADDR_LEN];
    uint64_t buf[2];                       /* legacy, VMM */
    uint8_t  key[2][sizeof(cux_ipc_rkey_t)];
} fuzz_peer_msg_t;

static uct_component_h      fuzz_component;
static uct_md_h             fuzz_md;
static uct_worker_h         fuzz_worker;
static uct_iface_h          fuzz_iface;
static uct_ep_h             fuzz_ep;
static ucs_async_context_t  *fuzz_async;
static size_t               fuzz_dev_addr_len, fuzz_iface_addr_len;
static fuzz_peer_msg_t      fuzz_peer;
static CUdeviceptr          fuzz_local;

static void fuzz_die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "fuzz_ipc_key: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

static void fuzz_open_iface(void)
{
    uct_component_h *components;
    unsigned num_components, i;
    uct_md_config_t *md_config;
    uct_iface_config_t *iface_config;
    uct_iface_params_t params = {};
    uct_iface_attr_t attr;
    ucs_status_t status;

    status = uct_query_components(&components, &num_components);
    if (status != UCS_OK) {
        fuzz_die("uct_query_components", status);
    }
    for (i = 0; i < num_components; ++i) {
        uct_component_attr_t cattr = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME};
        if ((uct_component_query(components[i], &cattr) == UCS_OK) && !strcmp(cattr.name, "cuda_ipc")) {
            fuzz_component = components[i];
        }
    }
    uct_release_component_list(components);
    if (fuzz_component == NULL) {
        fuzz_die("no cuda_ipc component (is the module built in?)", UCS_ERR_NO_DEVICE);
    }
    if (((status = uct_md_config_read(fuzz_component, NULL, NULL, &md_config)) != UCS_OK) ||
        ((status = uct_md_open(fuzz_component, "cuda_ipc", md_config, &fuzz_md)) != UCS_OK)) {
        fuzz_die("cuda_ipc md (CUX_DRIVER_PATH must name the mock driver)", status);
    }
    uct_config_release(md_config);
    if (((status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &fuzz_async)) != UCS_OK) ||
        ((status = uct_worker_create(fuzz_async, UCS_THREAD_MODE_SINGLE, &fuzz_worker)) != UCS_OK) ||
        ((status = uct_md_iface_config_read(fuzz_md, "cuda_ipc", NULL, NULL, &iface_config)) != UCS_OK)) {
        fuzz_die("worker", status);
    }
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "cuda_ipc";
    params.mode.device.dev_name = "cuda";
    status = uct_iface_open(fuzz_md, fuzz_worker, &params, iface_config, &fuzz_iface);
    uct_config_release(iface_config);
    if ((status != UCS_OK) || ((status = uct_iface_query(fuzz_iface, &attr)) != UCS_OK)) {
        fuzz_die("cuda_ipc iface", status);
    }
    uct_iface_progress_enable(fuzz_iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    fuzz_dev_addr_len   = attr.device_addr_len;
    fuzz_iface_addr_len = attr.iface_addr_len;
    if ((fuzz_dev_addr_len > 64) || (fuzz_iface_addr_len > 64)) {
        fuzz_die("addresses larger than the harness expects", UCS_ERR_INVALID_PARAM);
    }
}

/* A VMM allocation exportable as a POSIX descriptor, mapped at *dptr (the mock gives granularity 4 KB). */
static CUresult fuzz_vmm_alloc(size_t size, CUdeviceptr *dptr)
{
    CUmemAllocationProp prop = {0};
    CUmemAccessDesc access   = {0};
    CUmemGenericAllocationHandle handle;
    CUresult res;

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    access.location           = prop.location;
    access.flags              = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (((res = cux_drv.cuMemCreate(&handle, size, &prop, 0)) != CUDA_SUCCESS) ||
        ((res = cux_drv.cuMemAddressReserve(dptr, size, 0, 0, 0)) != CUDA_SUCCESS) ||
        ((res = cux_drv.cuMemMap(*dptr, size, 0, handle, 0)) != CUDA_SUCCESS)) {
        return res;
    }
    return cux_drv.cuMemSetAccess(*dptr, size, &access, 1);
}

/* The helper: registers a legacy and a VMM buffer, sends its address and keys, lives until the fuzzer exits. */
static void fuzz_run_peer(int fd)
{
    fuzz_peer_msg_t msg;
    uct_mem_h memh;
    CUcontext ctx;
    char byte;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    memset(&msg, 0, sizeof(msg));
    fuzz_open_iface();
    uct_iface_get_device_address(fuzz_iface, (uct_device_addr_t*)msg.addr);
    uct_iface_get_address(fuzz_iface, (uct_iface_addr_t*)(msg.addr + 64));
    if ((cux_device_ctx(0, &ctx) != UCS_OK) || (cux_drv.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) ||
        (cux_drv.cuMemAlloc(&msg.buf[0], 1 << 16) != CUDA_SUCCESS) ||
        (fuzz_vmm_alloc(1 << 16, &msg.buf[1]) != CUDA_SUCCESS)) {
        fuzz_die("peer: allocation", UCS_ERR_NO_MEMORY);
    }
    for (int i = 0; i < 2; ++i) {
        if ((uct_md_mem_reg(fuzz_md, (void*)msg.buf[i], 1 << 16, UCT_MD_MEM_ACCESS_ALL, &memh) != UCS_OK) ||
            (uct_md_mkey_pack(fuzz_md, memh, msg.key[i]) != UCS_OK)) {
            fuzz_die("peer: registration", UCS_ERR_NO_RESOURCE);
        }
    }
    if (write(fd, &msg, sizeof(msg)) != sizeof(msg)) {
        _exit(1);
    }
    while (read(fd, &byte, 1) > 0) {
    }
    _exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    uct_ep_params_t ep_params = {};
    ucs_status_t status;
    size_t got = 0;
    ssize_t n;
    CUcontext ctx;
    int sv[2];
    pid_t pid;

    /* the helper first, before this process loads the driver: a process of its own */
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        fuzz_die("socketpair", UCS_ERR_IO_ERROR);
    }
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        fuzz_run_peer(sv[1]);
    }
    close(sv[1]);
    fuzz_open_iface();
    while ((got < sizeof(fuzz_peer)) && ((n = read(sv[0], (char*)&fuzz_peer + got, sizeof(fuzz_peer) - got)) > 0)) {
        got += n;
    }
    if (got != sizeof(fuzz_peer)) {
        fuzz_die("the helper's keys", UCS_ERR_IO_ERROR);
    }
    ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    ep_params.iface      = fuzz_iface;
    ep_params.dev_addr   = (const uct_device_addr_t*)fuzz_peer.addr;
    ep_params.iface_addr = (const uct_iface_addr_t*)(fuzz_peer.addr + 64);
    if ((status = uct_ep_create(&ep_params, &fuzz_ep)) != UCS_OK) {
        fuzz_die("endpoint to the helper", status);
    }
    if ((cux_device_ctx(0, &ctx) != UCS_OK) || (cux_drv.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) ||
        (cux_drv.cuMemAlloc(&fuzz_local, 1 << 16) != CUDA_SUCCESS)) {
        fuzz_die("local buffer", UCS_ERR_NO_MEMORY);
    }
    return 0;
}

/* The peer's bytes as UCX would hand them over: exactly len bytes, zero-padded. */
static uint8_t *fuzz_padded(const uint8_t *data, size_t size, size_t len)
{
    uint8_t *buf = calloc(1, len ? len : 1);

    memcpy(buf, data, (size < len) ? size : len);
    return buf;
}

/* base XORed with the input, zero-padded: an all-zero input is base itself. */
static void fuzz_xor(uint8_t *out, const uint8_t *base, size_t len, const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < len; ++i) {
        out[i] = base[i] ^ ((i < size) ? data[i] : 0);
    }
}

static void fuzz_completed(uct_completion_t *self)
{
}

static void fuzz_get(const uint8_t *data, size_t size)
{
    uint8_t keybuf[sizeof(cux_ipc_rkey_t)];
    uct_completion_t comp = {.func = fuzz_completed, .count = 1, .status = UCS_OK};
    int which             = (size > 0) ? (data[0] & 1) : 0;
    uint64_t offset       = 0;
    uct_rkey_bundle_t bundle;
    uct_iov_t iov = {(void*)fuzz_local, 8, UCT_MEM_HANDLE_NULL, 0, 1};
    ucs_status_t status;

    if (size > 1) {
        memcpy(&offset, data + 1, ucs_min(size - 1, sizeof(offset)));
    }
    fuzz_xor(keybuf, fuzz_peer.key[which], sizeof(keybuf), data + ucs_min(size, 9), size - ucs_min(size, 9));
    if (uct_rkey_unpack(fuzz_component, keybuf, &bundle) != UCS_OK) {
        return;
    }
    status = uct_ep_get_zcopy(fuzz_ep, &iov, 1, fuzz_peer.buf[which] + (offset % (1 << 17)), bundle.rkey, &comp);
    for (int i = 0; (status == UCS_INPROGRESS) && (comp.count > 0) && (i < 100000); ++i) {
        uct_worker_progress(fuzz_worker);
    }
    uct_rkey_release(fuzz_component, &bundle);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uct_ep_params_t ep_params = {};
    uct_rkey_bundle_t bundle;
    uint8_t addr[FUZZ_ADDR_LEN];
    cux_ipc_rkey_t key;
    uint64_t offset;
    uct_ep_h ep;
    uint8_t *buf;

    if (size < 1) {
        return 0;
    }
    switch (data[0] % 5) {
    case 0:
        buf = fuzz_padded(data + 1, size - 1, sizeof(key) + sizeof(offset));
        memcpy(&key, buf, sizeof(key));
        memcpy(&offset, buf + sizeof(key), sizeof(offset));
        if (cux_ipc_rkey_check(&key, key.system_id, 0) == UCS_OK) {
            (void)cux_ipc_rkey_covers(&key, key.base + offset, offset >> 32);
        }
        free(buf);
        break;
    case 1:
        buf = fuzz_padded(data + 1, size - 1, sizeof(cux_ipc_rkey_t));
        if (uct_rkey_unpack(fuzz_component, buf, &bundle) == UCS_OK) {
            uct_rkey_release(fuzz_component, &bundle);
        }
        free(buf);
        break;
    case 2:
        fuzz_xor(addr, fuzz_peer.addr, sizeof(addr), data + 1, size - 1);
        (void)uct_iface_is_reachable(fuzz_iface, (const uct_device_addr_t*)addr,
                                     (const uct_iface_addr_t*)(addr + 64));
        break;
    case 3:
        fuzz_xor(addr, fuzz_peer.addr, sizeof(addr), data + 1, size - 1);
        ep_params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                               UCT_EP_PARAM_FIELD_IFACE_ADDR;
        ep_params.iface      = fuzz_iface;
        ep_params.dev_addr   = (const uct_device_addr_t*)addr;
        ep_params.iface_addr = (const uct_iface_addr_t*)(addr + 64);
        if (uct_ep_create(&ep_params, &ep) == UCS_OK) {
            uct_ep_destroy(ep);
        }
        break;
    default:
        fuzz_get(data + 1, size - 1);
        break;
    }
    return 0;
}
