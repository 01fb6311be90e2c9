/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two helpers that UCX's device gtests (test/gtest/uct/test_device.cc, 1.22+) call from UCX's CUDA module.
 * gpu-host/prepare/build-ucx-gtest.sh links this file into the test binary in place of that module, so the binary
 * reaches a CUDA module only through UCT and runs the same against UCX's module and against ours. Written here
 * from the functions' declarations in UCX's src/uct/cuda/base/cuda_util.h.
 */
#include <ucs/sys/topo/base/topo.h>
#include <cuda.h>
#include <stdio.h>

/* The CUDA device behind a system device: found by its PCI address, as the driver names devices. */
CUdevice uct_cuda_get_cuda_device(ucs_sys_device_t sys_dev)
{
    ucs_sys_bus_id_t bus_id;
    char pci[32];
    CUdevice dev;

    if ((sys_dev == UCS_SYS_DEVICE_ID_UNKNOWN) ||
        (ucs_topo_get_device_bus_id(sys_dev, &bus_id) != UCS_OK)) {
        return CU_DEVICE_INVALID;
    }

    snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", bus_id.domain, bus_id.bus, bus_id.slot, bus_id.function);
    return (cuDeviceGetByPCIBusId(&dev, pci) == CUDA_SUCCESS) ? dev : CU_DEVICE_INVALID;
}

const char *uct_cuda_cu_get_error_string(CUresult result)
{
    const char *name = NULL;

    return (cuGetErrorName(result, &name) == CUDA_SUCCESS) ? name : "unknown CUDA error";
}
