/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): modules and kernel launches, for the one kernel the module loads
 * (src/base/cux_copy_kernel.cu): cuModuleLoadData accepts PTX that declares it, and a launch of it queues its
 * copies on the stream as copies (MOCK_CUDA_ASYNC applies). A copy from or to memory that is not device memory
 * (pageable host memory, which a kernel cannot reach) fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS, as the
 * kernel would fault. MOCK_CUDA_NO_KERNELS=1: no PTX loads (a driver without the JIT compiler).
 */
#include "mock.h"

#define MOCK_MODULE   ((CUmodule)(uintptr_t)0x4d4f44)
#define MOCK_FUNCTION ((CUfunction)(uintptr_t)0x46554e)
#define MOCK_KERNEL_COPIES 128

long mock_kernel_launches; /* launches accepted so far */

CUresult m_cuModuleLoadData(CUmodule *module, const void *image)
{
    const char *no = getenv("MOCK_CUDA_NO_KERNELS");

    if (((no != NULL) && !strcmp(no, "1")) || (strstr((const char*)image, ".entry cux_copy_batch(") == NULL)) {
        return CUDA_ERROR_INVALID_PTX;
    }
    *module = MOCK_MODULE;
    return CUDA_SUCCESS;
}

CUresult m_cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name)
{
    if ((module != MOCK_MODULE) || strcmp(name, "cux_copy_batch")) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *function = MOCK_FUNCTION;
    return CUDA_SUCCESS;
}

static int mock_device_memory(CUdeviceptr p, size_t n)
{
    mock_where_t where = mock_where(p, n);

    return where.known && !where.host_pinned && where.fits;
}

CUresult m_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, CUstream s, void **params, void **extra)
{
    const unsigned long long *copy;
    CUresult res = mock_injected("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED);
    unsigned i;

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if ((function != MOCK_FUNCTION) || (params == NULL) || (extra != NULL) || (gx == 0) || (gy == 0) ||
        (gy > MOCK_KERNEL_COPIES) || (gz != 1) || (bx == 0) || (bx > 1024) || (by != 1) || (bz != 1)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    copy = (const unsigned long long*)params[0]; /* {src, dst, size} per copy */
    for (i = 0; i < gy; ++i) {
        if (!mock_device_memory(copy[3 * i], copy[3 * i + 2]) ||
            !mock_device_memory(copy[3 * i + 1], copy[3 * i + 2])) {
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        }
    }
    __atomic_add_fetch(&mock_kernel_launches, 1, __ATOMIC_RELAXED);
    for (i = 0; (i < gy) && (res == CUDA_SUCCESS); ++i) {
        res = m_cuMemcpyAsync(copy[3 * i + 1], copy[3 * i], copy[3 * i + 2], s);
    }
    return res;
}
