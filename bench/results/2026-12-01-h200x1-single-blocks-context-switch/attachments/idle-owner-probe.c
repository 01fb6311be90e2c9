/* SPDX-License-Identifier: BSD-3-Clause */
/* diagnostic: cost of one small copy from/to another process's cuMemAlloc memory on the same GPU */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s; cuGetErrorString(r_, &s); fprintf(stderr, "%s: %s (line %d)\n", #x, s, __LINE__); exit(1);} } while (0)
static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }
static int cmpd(const void *a, const void *b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
static size_t sizes[] = {16 << 10, 64 << 10, 128 << 10, 2 << 20};
#define NS 4
#define IT 200
int main(int argc, char **argv)
{
    int sv[2], spin = argc > 1 ? atoi(argv[1]) : 0;
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    CK(cuInit(0));
    CUdevice dev; CUcontext ctx;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    if (pid == 0) {
        CUipcMemHandle h[NS]; CUdeviceptr p[NS];
        for (int i = 0; i < NS; ++i) { CK(cuMemAlloc(&p[i], sizes[i])); CK(cuMemsetD8(p[i], i + 1, sizes[i])); CK(cuIpcGetMemHandle(&h[i], p[i])); }
        write(sv[1], h, sizeof(h));
        char c;
        if (spin) { /* like a worker progressing: a driver query in a loop until told to stop */
            CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
            struct timeval tv = {0, 0};
            setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            for (;;) { if (recv(sv[1], &c, 1, MSG_DONTWAIT) == 1) break; cuStreamQuery(s); }
        } else {
            read(sv[1], &c, 1);
        }
        _exit(0);
    }
    CUipcMemHandle h[NS]; CUdeviceptr rem[NS], loc_small[NS], loc_big, loc2[NS];
    read(sv[0], h, sizeof(h));
    for (int i = 0; i < NS; ++i) {
        CK(cuIpcOpenMemHandle(&rem[i], h[i], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CK(cuMemAlloc(&loc_small[i], sizes[i]));
        CK(cuMemAlloc(&loc2[i], sizes[i]));
    }
    CK(cuMemAlloc(&loc_big, 4 << 20));
    CUstream s; CUevent ev;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    printf("child %s\n", spin ? "spinning on cuStreamQuery" : "idle");
    for (int i = 0; i < NS; ++i) {
        for (int v = 0; v < 5; ++v) {
            size_t len = (v == 4) ? sizes[i] : 16 << 10;
            CUdeviceptr dst, src; const char *name;
            switch (v) {
            case 0: dst = loc_small[i]; src = rem[i]; name = "get  mapped->local(same size)"; break;
            case 1: dst = loc_big; src = rem[i]; name = "get  mapped->local(4MB alloc) "; break;
            case 2: dst = rem[i]; src = loc_small[i]; name = "put  local->mapped            "; break;
            case 3: dst = loc2[i]; src = loc_small[i]; name = "copy local->local            "; break;
            default: dst = loc_small[i]; src = rem[i]; name = "get  whole allocation        "; break;
            }
            double t[IT];
            for (int k = 0; k < IT; ++k) {
                double t0 = now_us();
                CK(cuMemcpyAsync(dst, src, len, s));
                CK(cuEventRecord(ev, s));
                CUresult r;
                while ((r = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {}
                CK(r);
                t[k] = now_us() - t0;
            }
            qsort(t, IT, sizeof(double), cmpd);
            printf("alloc %7zu %s %7zu B: median %7.1f us  p10 %7.1f  p90 %7.1f\n", sizes[i], name, len, t[IT / 2], t[IT / 10], t[IT * 9 / 10]);
        }
    }
    /* same with a device-to-device copy through cuMemcpyDtoDAsync */
    for (int i = 0; i < NS; ++i) {
        double t[IT];
        for (int k = 0; k < IT; ++k) {
            double t0 = now_us();
            CK(cuMemcpyDtoDAsync(loc_small[i], rem[i], 16 << 10, s));
            CK(cuStreamSynchronize(s));
            t[k] = now_us() - t0;
        }
        qsort(t, IT, sizeof(double), cmpd);
        printf("alloc %7zu get DtoD+sync 16 KB: median %7.1f us\n", sizes[i], t[IT / 2]);
    }
    write(sv[0], "x", 1);
    waitpid(pid, NULL, 0);
    return 0;
}
