/* What the driver and NVML answer about fabric handles (multi-node NVLink) on a host without an IMEX channel. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static const char *err(CUresult r) { const char *s = "?"; cuGetErrorName(r, &s); return s; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
typedef struct { unsigned char clusterUuid[16]; int status; unsigned int cliqueId; unsigned char state; } fabric_info_t;
int main(void) {
    CUdevice dev; CUcontext ctx; int v = -1; CUresult r;
    setvbuf(stdout, NULL, _IONBF, 0);
    cuInit(0); cuDeviceGet(&dev, 0); cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx);
    cuDriverGetVersion(&v); printf("driver API %d\n", v);
    r = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, dev);
    printf("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED -> %s, %d\n", err(r), v);
    printf("/dev/nvidia-caps-imex-channels: %s\n", access("/dev/nvidia-caps-imex-channels", F_OK) ? "absent" : "present");
    CUmemAllocationProp prop; memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
    size_t gran = 0;
    unsigned types[] = {CU_MEM_HANDLE_TYPE_FABRIC, CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    for (int i = 0; i < 3; ++i) {
        prop.requestedHandleTypes = types[i];
        r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        printf("handle types 0x%x: granularity -> %s (%zu)\n", types[i], err(r), gran);
        CUmemGenericAllocationHandle h; double t0 = now();
        r = cuMemCreate(&h, 2 << 20, &prop, 0);
        printf("handle types 0x%x: cuMemCreate 2 MB -> %s (%.1f us)\n", types[i], err(r), 1e6 * (now() - t0));
        if (r == CUDA_SUCCESS) {
            CUmemFabricHandle fh; int fd = -1;
            CUresult e = cuMemExportToShareableHandle(&fh, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
            printf("  export as fabric -> %s\n", err(e));
            e = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            printf("  export as fd -> %s\n", err(e));
            if (fd >= 0) close(fd);
            cuMemRelease(h);
        }
    }
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    printf("libnvidia-ml.so.1: %s\n", nvml ? "loads" : dlerror());
    if (nvml) {
        int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
        int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
        int (*fab)(void *, fabric_info_t *) = (int (*)(void *, fabric_info_t *))dlsym(nvml, "nvmlDeviceGetGpuFabricInfo");
        printf("nvml symbols: init %p handle %p fabric %p\n", (void*)init, (void*)get, (void*)fab);
        void *d = NULL; fabric_info_t fi; memset(&fi, 0, sizeof fi);
        int ri = init ? init() : -1, rg = get ? get(0, &d) : -1, rf = fab ? fab(d, &fi) : -1;
        printf("nvmlInit_v2 -> %d, handle -> %d, nvmlDeviceGetGpuFabricInfo -> %d: state %u, status %d, clique %u\n",
               ri, rg, rf, fi.state, fi.status, fi.cliqueId);
    }
    /* pools: created, allocated from, destroyed; then one exported as fabric before its destroy (last: it may crash) */
    for (int i = 0; i < 4; ++i) {
        unsigned t = (i < 3) ? types[i] : CU_MEM_HANDLE_TYPE_FABRIC;
        CUmemPoolProps pp; memset(&pp, 0, sizeof pp);
        pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; pp.handleTypes = t;
        pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE; pp.location.id = 0;
        CUmemoryPool pool = NULL; r = cuMemPoolCreate(&pool, &pp);
        printf("pool handle types 0x%x: cuMemPoolCreate -> %s\n", t, err(r));
        if (r != CUDA_SUCCESS) continue;
        CUdeviceptr p = 0; CUresult e = cuMemAllocFromPoolAsync(&p, 1 << 20, pool, 0);
        printf("  alloc from it -> %s\n", err(e));
        if (e == CUDA_SUCCESS) { cuStreamSynchronize(0); printf("  free -> %s\n", err(cuMemFreeAsync(p, 0))); cuStreamSynchronize(0); }
        if (i == 3) {
            /* a buffer much larger than CUmemFabricHandle, watched: does the failed export write past 64 bytes? */
            static unsigned char big[4096];
            memset(big, 0xa5, sizeof big);
            e = cuMemPoolExportToShareableHandle(big, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0);
            int last = -1;
            for (int k = 0; k < (int)sizeof big; ++k) if (big[k] != 0xa5) last = k;
            printf("  pool export as fabric -> %s; bytes written up to offset %d; destroying it next\n", err(e), last);
        }
        e = cuMemPoolDestroy(pool);
        printf("  pool destroy -> %s\n", err(e));
    }
    return 0;
}
