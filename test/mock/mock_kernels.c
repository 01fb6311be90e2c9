/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver (test/mock/mock.h): modules and kernel launches, for the kernels the module loads
 * (src/base/cux_copy_kernel.cu): cuModuleLoadData accepts PTX that declares one of them, and a launch of it queues
 * its copies on the stream as copies (MOCK_CUDA_ASYNC applies), up to as many as its parameter holds (128, or 1,024
 * for the large kernel). A copy from or to memory that is not device memory (pageable host memory, which a kernel
 * cannot reach) fails the launch with CUDA_ERROR_ILLEGAL_ADDRESS, as the kernel would fault.
 * MOCK_CUDA_NO_KERNELS=1: no PTX loads (a driver without the JIT compiler); MOCK_CUDA_NO_LARGE_PARAMS=1: PTX of
 * ISA 8.1 and later (kernel parameters over 4 KB) does not load, as on drivers before CUDA 12.1.
 */
#include "mock.h"

#define MOCK_MODULE          ((CUmodule)(uintptr_t)0x4d4f44)
#define MOCK_MODULE_LARGE    ((CUmodule)(uintptr_t)0x4d4f4c)
#define MOCK_FUNCTION        ((CUfunction)(uintptr_t)0x46554e)
#define MOCK_FUNCTION_LARGE  ((CUfunction)(uintptr_t)0x46554c)
#define MOCK_KERNEL_COPIES       128
#define MOCK_KERNEL_COPIES_LARGE 1024

long mock_kernel_launches;       /* launches accepted so far */
long mock_kernel_launches_large; /* of them, of the large kernel */

static int mock_env_set(const char *name)
{
    const char *value = getenv(name);

    return (value != NULL) && !strcmp(value, "1");
}

CUresult m_cuModuleLoadData(CUmodule *module, const void *image)
{
    const char *ptx = (const char*)image;
    const char *version;

    if (mock_env_set("MOCK_CUDA_NO_KERNELS")) {
        return CUDA_ERROR_INVALID_PTX;
    }
    if (strstr(ptx, ".entry cux_copy_batch(") != NULL) {
        *module = MOCK_MODULE;
        return CUDA_SUCCESS;
    }
    if (strstr(ptx, ".entry cux_copy_batch_large(") == NULL) {
        return CUDA_ERROR_INVALID_PTX;
    }
    /* the large parameter needs PTX ISA 8.1 (ptxas refuses it before): a driver before 12.1 knows no 8.1 */
    version = strstr(ptx, ".version ");
    if ((version == NULL) || (strtod(version + 9, NULL) < 8.1 - 1e-9)) {
        return CUDA_ERROR_INVALID_PTX;
    }
    if (mock_env_set("MOCK_CUDA_NO_LARGE_PARAMS")) {
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    *module = MOCK_MODULE_LARGE;
    return CUDA_SUCCESS;
}

CUresult m_cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name)
{
    if ((module == MOCK_MODULE) && !strcmp(name, "cux_copy_batch")) {
        *function = MOCK_FUNCTION;
    } else if ((module == MOCK_MODULE_LARGE) && !strcmp(name, "cux_copy_batch_large")) {
        *function = MOCK_FUNCTION_LARGE;
    } else {
        return CUDA_ERROR_NOT_FOUND;
    }
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
    static __thread unsigned long long table[3 * MOCK_KERNEL_COPIES_LARGE];
    const unsigned long long *copy;
    CUresult res = mock_injected("cuLaunchKernel", CUDA_ERROR_LAUNCH_FAILED);
    unsigned i;

    if (res != CUDA_SUCCESS) {
        return res;
    }
    if (((function != MOCK_FUNCTION) && (function != MOCK_FUNCTION_LARGE)) || (params == NULL) || (extra != NULL) ||
        (gx == 0) || (gy == 0) ||
        (gy > ((function == MOCK_FUNCTION) ? MOCK_KERNEL_COPIES : MOCK_KERNEL_COPIES_LARGE)) || (gz != 1) ||
        (bx == 0) || (bx > 1024) || (by != 1) || (bz != 1)) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the driver copies the kernel's whole declared parameter, whatever gy: so does the mock (a sanitizer sees a
     * caller's array too short for it) */
    memcpy(table, params[0], 3 * sizeof(*table) * ((function == MOCK_FUNCTION) ? MOCK_KERNEL_COPIES :
                                                                                 MOCK_KERNEL_COPIES_LARGE));
    copy = table; /* {src, dst, size} per copy */
    for (i = 0; i < gy; ++i) {
        if (!mock_device_memory(copy[3 * i], copy[3 * i + 2]) ||
            !mock_device_memory(copy[3 * i + 1], copy[3 * i + 2])) {
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        }
    }
    __atomic_add_fetch(&mock_kernel_launches, 1, __ATOMIC_RELAXED);
    if (function == MOCK_FUNCTION_LARGE) {
        __atomic_add_fetch(&mock_kernel_launches_large, 1, __ATOMIC_RELAXED);
    }
    for (i = 0; (i < gy) && (res == CUDA_SUCCESS); ++i) {
        res = m_cuMemcpyAsync(copy[3 * i + 1], copy[3 * i], copy[3 * i + 2], s);
    }
    return res;
}
