/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A uct_cuda framework submodule, as UCX's gdr_copy and 1.22's GPU-initiated InfiniBand module are: built as
 * libuct_cuda_fake.so.0, linked against libuct_cuda.so.0 (our module) with every name resolved at link time, and
 * loaded by UCX's module framework. When UCX loads it, it calls each function those modules call in
 * libuct_cuda and prints what came back, one line each ("fake: NAME -> ..."), for test_registration.cc.
 */
#include <uct/base/uct_component.h>
#include <uct/base/uct_md.h>
#include <uct/base/uct_iface.h>
#include <ucs/sys/module.h>
#include "driver/cux_cuda.h"
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* As UCX declares them (src/uct/cuda/base/cuda_md.h, cuda_ctx.h, cuda_util.h, cuda_copy/cuda_copy_md.h). */
ucs_status_t uct_cuda_base_query_md_resources(uct_component_t *component, uct_md_resource_desc_t **resources_p,
                                              unsigned *num_resources_p);
ucs_status_t uct_cuda_base_query_devices(uct_md_h md, uct_tl_device_resource_t **devices_p,
                                         unsigned *num_devices_p);
ucs_status_t uct_cuda_base_check_device_name(const uct_iface_params_t *params);
ucs_sys_device_t uct_cuda_get_sys_dev(CUdevice cuda_device);
ucs_status_t uct_cuda_ctx_primary_push(CUdevice cuda_device, int retain_inactive, ucs_log_level_t log_level);
ucs_status_t uct_cuda_ctx_primary_push_first_active(CUdevice *cuda_device_p);
void uct_cuda_ctx_primary_pop_and_release(CUdevice cuda_device);
int uct_cuda_copy_md_is_dmabuf_supported(void);
typedef struct {
    int    fd;
    size_t offset;
} fake_dmabuf_t;
fake_dmabuf_t uct_cuda_copy_md_get_dmabuf(const void *address, size_t length, ucs_sys_device_t sys_dev);

static uct_component_t fake_component = {.name = "cuda_fake"};

UCS_MODULE_INIT()
{
    uct_md_t md = {.ops = NULL, .component = &fake_component};
    uct_iface_params_t params = {.field_mask = UCT_IFACE_PARAM_FIELD_DEVICE};
    uct_md_resource_desc_t *resources = NULL;
    uct_tl_device_resource_t *devices = NULL;
    unsigned num = 0;
    ucs_status_t status;
    CUdevice device = -1;
    fake_dmabuf_t dmabuf;

    status = uct_cuda_base_query_md_resources(&fake_component, &resources, &num);
    printf("fake: uct_cuda_base_query_md_resources -> %s, %u resource(s)%s%s\n", ucs_status_string(status), num,
           num ? " named " : "", num ? resources[0].md_name : "");
    free(resources);
    status = uct_cuda_base_query_devices(&md, &devices, &num);
    printf("fake: uct_cuda_base_query_devices -> %s, %u device(s) named %s\n", ucs_status_string(status), num,
           (num > 0) ? devices[0].name : "-");
    free(devices);

    params.mode.device.tl_name  = "fake";
    params.mode.device.dev_name = "cuda";
    printf("fake: uct_cuda_base_check_device_name cuda -> %s\n",
           ucs_status_string(uct_cuda_base_check_device_name(&params)));
    params.mode.device.dev_name = "mlx5_0";
    printf("fake: uct_cuda_base_check_device_name mlx5_0 -> %s\n",
           ucs_status_string(uct_cuda_base_check_device_name(&params)));
    params.field_mask = 0;
    printf("fake: uct_cuda_base_check_device_name without a device -> %s\n",
           ucs_status_string(uct_cuda_base_check_device_name(&params)));

    status = uct_cuda_ctx_primary_push(0, 1, UCS_LOG_LEVEL_ERROR);
    printf("fake: uct_cuda_ctx_primary_push(0, retain inactive) -> %s\n", ucs_status_string(status));
    if (status == UCS_OK) {
        uct_cuda_ctx_primary_pop_and_release(0);
        printf("fake: uct_cuda_ctx_primary_pop_and_release -> returned\n");
    }
    status = uct_cuda_ctx_primary_push_first_active(&device);
    printf("fake: uct_cuda_ctx_primary_push_first_active -> %s, device %d\n", ucs_status_string(status), device);
    if (status == UCS_OK) {
        uct_cuda_ctx_primary_pop_and_release(device);
    }
    printf("fake: uct_cuda_get_sys_dev(0) -> %s\n",
           (uct_cuda_get_sys_dev(0) == UCS_SYS_DEVICE_ID_UNKNOWN) ? "unknown" : "known");
    printf("fake: uct_cuda_copy_md_is_dmabuf_supported -> %d\n", uct_cuda_copy_md_is_dmabuf_supported());
    dmabuf = uct_cuda_copy_md_get_dmabuf((void*)(uintptr_t)0x1000, 16, UCS_SYS_DEVICE_ID_UNKNOWN);
    printf("fake: uct_cuda_copy_md_get_dmabuf of no GPU memory -> fd %s, offset %zu\n",
           (dmabuf.fd < 0) ? "invalid" : "valid", dmabuf.offset);
    if (dmabuf.fd >= 0) {
        close(dmabuf.fd);
    }
    fflush(stdout);
    return UCS_OK;
}
