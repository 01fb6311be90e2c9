/* SPDX-License-Identifier: BSD-3-Clause */
/* diagnostic: a reader's copy right after the owner's synchronous fill of a small buffer */
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
#define IT 200
enum { FILL_HTOD, FILL_HTOD_SYNC, FILL_MEMSET, FILL_NONE, NMODES };
static const char *mode_name[] = {"owner cuMemcpyHtoD (pageable)", "owner HtoD + cuCtxSynchronize", "owner cuMemsetD8", "owner does nothing"};
int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    {
        size_t len = strtoul(argv[1], NULL, 0); int m = atoi(argv[2]), put = atoi(argv[3]);
        int sv[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        pid_t pid = fork();
        CK(cuInit(0));
        CUdevice dev; CUcontext ctx;
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CK(cuCtxSetCurrent(ctx));
        if (pid == 0) {
            CUipcMemHandle h; CUdeviceptr p; char c = 0;
            char *host = malloc(len); memset(host, 7, len);
            CK(cuMemAlloc(&p, len)); CK(cuIpcGetMemHandle(&h, p));
            write(sv[1], &h, sizeof(h));
            for (int k = 0; k <= IT; ++k) {
                if (m == FILL_HTOD || m == FILL_HTOD_SYNC) CK(cuMemcpyHtoD(p, host, len));
                if (m == FILL_HTOD_SYNC) CK(cuCtxSynchronize());
                if (m == FILL_MEMSET) CK(cuMemsetD8(p, k, len));
                write(sv[1], &c, 1);
                if (read(sv[1], &c, 1) != 1) break;
            }
            _exit(0);
        }
        CUipcMemHandle h; CUdeviceptr rem, loc; CUstream s; char c = 0;
        read(sv[0], &h, sizeof(h));
        CK(cuIpcOpenMemHandle(&rem, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CK(cuMemAlloc(&loc, len));
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        double t[IT];
        for (int k = 0; k <= IT; ++k) {
            read(sv[0], &c, 1);
            double t0 = now_us();
            CK(put ? cuMemcpyAsync(rem, loc, 16 << 10, s) : cuMemcpyAsync(loc, rem, 16 << 10, s));
            CK(cuStreamSynchronize(s));
            if (k > 0) t[k - 1] = now_us() - t0;
            write(sv[0], &c, 1);
        }
        waitpid(pid, NULL, 0);
        qsort(t, IT, sizeof(double), cmpd);
        printf("buffer %6zu B, %-31s then reader %s 16 KB: median %7.1f us p10 %7.1f p90 %7.1f\n", len, mode_name[m], put ? "puts" : "gets", t[IT / 2], t[IT / 10], t[IT * 9 / 10]);
        fflush(stdout);
        CK(cuIpcCloseMemHandle(rem)); CK(cuMemFree(loc)); CK(cuStreamDestroy(s));
        CK(cuDevicePrimaryCtxRelease(dev));
        close(sv[0]); close(sv[1]);
    }
    return 0;
}
