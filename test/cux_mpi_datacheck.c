/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cux_mpi_datacheck: two MPI ranks send GPU buffers to each other through the MPI library's UCX layer (Open MPI's pml
 * ucx), the way an application that is not CUDA-aware at the MPI level but hands GPU pointers to MPI does. Each
 * message sits inside a larger allocation between guard bytes; rank 0 fills it with a plain synchronous copy and
 * sends it, rank 1 receives into a poisoned buffer, checks, changes the content and sends it back into the same
 * buffer of rank 0, which checks it. Sizes 8 B to 4 MiB (eager and rendezvous).
 *
 *   mpirun -np 2 ... cux_mpi_datacheck        prints a line per size and "N passed, N failed"; exit 1 on a failure
 *
 * The driver is opened as cux_ucp_datacheck opens it (CUX_DRIVER_PATH, else libcuda.so.1), GPU i for rank i when
 * there are two.
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include <stdint.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAD   4168 /* the message's offset in its allocation */
#define GUARD  64   /* bytes after it that must stay untouched */
#define POISON 0xa5

static struct {
    CUresult (*init)(unsigned);
    CUresult (*count)(int*);
    CUresult (*retain)(CUcontext*, CUdevice);
    CUresult (*set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr*, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void*, size_t);
    CUresult (*dtoh)(void*, CUdeviceptr, size_t);
} cu;

static int gpu_open(int rank)
{
    const char *path = getenv("CUX_DRIVER_PATH") ? getenv("CUX_DRIVER_PATH") : "libcuda.so.1";
    int count = 0;
    CUcontext ctx;

    if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) {
        fprintf(stderr, "rank %d: no CUDA driver: %s\n", rank, dlerror());
        return -1;
    }
    *(void**)&cu.init   = dlsym(RTLD_DEFAULT, "cuInit");
    *(void**)&cu.count  = dlsym(RTLD_DEFAULT, "cuDeviceGetCount");
    *(void**)&cu.retain = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
    *(void**)&cu.set    = dlsym(RTLD_DEFAULT, "cuCtxSetCurrent");
    *(void**)&cu.alloc  = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    *(void**)&cu.free   = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    *(void**)&cu.htod   = dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2");
    *(void**)&cu.dtoh   = dlsym(RTLD_DEFAULT, "cuMemcpyDtoH_v2");
    if (!cu.init || !cu.count || !cu.retain || !cu.set || !cu.alloc || !cu.free || !cu.htod || !cu.dtoh ||
        cu.init(0) || cu.count(&count) || (count == 0) || cu.retain(&ctx, rank % count) || cu.set(ctx)) {
        fprintf(stderr, "rank %d: the CUDA driver does not initialise or has no GPU\n", rank);
        return -1;
    }
    return 0;
}

static uint8_t pattern(size_t i, size_t size, unsigned fill)
{
    return (uint8_t)((i * 131 + size + fill * 29) ^ (i >> 9) ^ (fill << 3));
}

/* The message of content `fill` between poison, or -1 and a line saying where it differs first. */
static int check(CUdeviceptr buf, uint8_t *host, size_t size, unsigned fill, int rank)
{
    size_t total = LEAD + size + GUARD, i;

    if (cu.dtoh(host, buf, total)) {
        return -1;
    }
    for (i = 0; i < total; ++i) {
        uint8_t expect = ((i >= LEAD) && (i - LEAD < size)) ? pattern(i - LEAD, size, fill) : POISON;
        if (host[i] != expect) {
            fprintf(stderr, "rank %d, %zu bytes, content %u: byte %zu of the allocation is 0x%02x, expected 0x%02x\n",
                    rank, size, fill, i, host[i], expect);
            return -1;
        }
    }
    return 0;
}

static int fill_message(CUdeviceptr buf, uint8_t *host, size_t size, unsigned fill)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        host[LEAD + i] = pattern(i, size, fill);
    }
    return cu.htod(buf + LEAD, host + LEAD, size) ? -1 : 0;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 4097, 65539, 1 << 20, 4 << 20};
    const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]), max = 4 << 20;
    int rank, nranks, passed = 0, failed = 0, rc = 0, all;
    CUdeviceptr buf;
    uint8_t *host;
    size_t s;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) {
        if (rank == 0) {
            fprintf(stderr, "cux_mpi_datacheck: run with two ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    host = malloc(LEAD + max + GUARD);
    if ((host == NULL) || gpu_open(rank) || cu.alloc(&buf, LEAD + max + GUARD)) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (s = 0; s < nsizes; ++s) {
        size_t size = sizes[s];
        memset(host, POISON, LEAD + max + GUARD);
        rc = cu.htod(buf, host, LEAD + size + GUARD) ? -1 : 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            rc = rc || fill_message(buf, host, size, 0) ||
                 MPI_Send((void*)(buf + LEAD), (int)size, MPI_BYTE, 1, (int)s, MPI_COMM_WORLD) ||
                 MPI_Recv((void*)(buf + LEAD), (int)size, MPI_BYTE, 1, (int)s, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ||
                 check(buf, host, size, 1, rank);
        } else { /* always answers, so that a failed check cannot leave rank 0 waiting */
            rc = rc ||
                 MPI_Recv((void*)(buf + LEAD), (int)size, MPI_BYTE, 0, (int)s, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ||
                 check(buf, host, size, 0, rank);
            rc = fill_message(buf, host, size, 1) ||
                 MPI_Send((void*)(buf + LEAD), (int)size, MPI_BYTE, 0, (int)s, MPI_COMM_WORLD) || rc;
        }
        rc = rc ? 1 : 0;
        MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%s %zu bytes, GPU buffers both ways\n", all ? "FAIL" : "PASS", size);
        }
        passed += !all;
        failed += !!all;
    }
    if (rank == 0) {
        printf("%d passed, %d failed\n", passed, failed);
    }
    cu.free(buf);
    free(host);
    MPI_Finalize();
    return failed ? 1 : 0;
}
