/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libFuzzer target for what a peer sends to cuda_ipc: remote keys and interface/device addresses.
 *
 * The first input byte picks the entry point, the rest is the peer's bytes:
 *   0: cux_ipc_rkey_check and the range check, on the key as this process would receive it;
 *   1: uct_rkey_unpack through the cuda_ipc component (the module's real unpack, then release);
 *   2: uct_iface_is_reachable of a cuda_ipc interface (device address, then interface address).
 * Inputs shorter than what UCX hands over are zero-padded to it: UCP always passes the sizes the transport
 * declared (rkey_packed_size, device_addr_len, iface_addr_len). The interface runs on the mock driver
 * (CUX_DRIVER_PATH), so the target needs no GPU. test/run-fuzz.sh builds and runs it.
 */
#include "ipc/cux_ipc_rkey.h"

#include <uct/api/uct.h>
#include <ucs/async/async.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uct_component_h fuzz_component;
static uct_md_h        fuzz_md;
static uct_worker_h    fuzz_worker;
static uct_iface_h     fuzz_iface;
static ucs_async_context_t *fuzz_async;
static size_t          fuzz_dev_addr_len, fuzz_iface_addr_len;

static void fuzz_die(const char *what, ucs_status_t status)
{
    fprintf(stderr, "fuzz_ipc_key: %s: %s\n", what, ucs_status_string(status));
    exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
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
        fuzz_die("no cuda_ipc component (is libuct_cuda.so.0 loaded?)", UCS_ERR_NO_DEVICE);
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
    fuzz_dev_addr_len   = attr.device_addr_len;
    fuzz_iface_addr_len = attr.iface_addr_len;
    return 0;
}

/* The peer's bytes as UCX would hand them over: exactly len bytes, zero-padded. */
static uint8_t *fuzz_padded(const uint8_t *data, size_t size, size_t len)
{
    uint8_t *buf = calloc(1, len ? len : 1);

    memcpy(buf, data, (size < len) ? size : len);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uct_rkey_bundle_t bundle;
    cux_ipc_rkey_t key;
    uint64_t offset;
    uint8_t *buf;

    if (size < 1) {
        return 0;
    }
    switch (data[0] % 3) {
    case 0:
        buf = fuzz_padded(data + 1, size - 1, sizeof(key) + sizeof(offset));
        memcpy(&key, buf, sizeof(key));
        memcpy(&offset, buf + sizeof(key), sizeof(offset));
        if (cux_ipc_rkey_check(&key, key.system_id, getpid()) == UCS_OK) {
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
    default:
        buf = fuzz_padded(data + 1, size - 1, fuzz_dev_addr_len + fuzz_iface_addr_len);
        (void)uct_iface_is_reachable(fuzz_iface, (const uct_device_addr_t*)buf,
                                     (const uct_iface_addr_t*)(buf + fuzz_dev_addr_len));
        free(buf);
        break;
    }
    return 0;
}
