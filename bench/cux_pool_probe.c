/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 59, item 3: what the driver says of an allocation of a shareable memory pool that is larger than the
 * pool's chunk, before any design. One process makes a pool with the POSIX descriptor handle type, allocates
 * PROBE_SIZE from it and prints, at several offsets, the pointer attributes the module reads (range, mapping,
 * buffer id, pool) and cuMemGetAddressRange's answer; it exports the pointer at the allocation's start and further
 * in (are the two export data the same?), fills every 32-bit word with its index and passes the pool's descriptor
 * to a second process, which imports the pool and the pointer, prints the same attributes there and checks every
 * word. Not a test: a measurement for the GPU host (the mock answers as the driver does where the tests need it).
 *
 *   bench/cux_pool_probe            (CUX_DRIVER_PATH as for the module)
 */
#define _GNU_SOURCE
#include "driver/cux_device.h"
#include "../src/base/cux_fd_passing.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_SIZE ((64u << 20) + (8u << 10)) /* as the data check's 64 MB message inside a larger allocation */
#define PROBE_FAR  (40u << 20)                /* an offset in the allocation's second 32 MB */

static const size_t probe_offsets[] = {0, 16u << 20, (32u << 20) - 1, 32u << 20, PROBE_FAR, PROBE_SIZE - 1};

/* Pool calls the module does not load (it never makes pools), from the driver the module opened. */
static struct {
    CUresult (*create)(CUmemoryPool*, const CUmemPoolProps*);
    CUresult (*alloc)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
} probe_drv;

static int probe_load_pool_calls(void)
{
    void *cuda = dlopen(getenv("CUX_DRIVER_PATH") ? getenv("CUX_DRIVER_PATH") : "libcuda.so.1",
                        RTLD_NOW | RTLD_NOLOAD);

    *(void**)&probe_drv.create = cuda ? dlsym(cuda, "cuMemPoolCreate") : NULL;
    *(void**)&probe_drv.alloc  = cuda ? dlsym(cuda, "cuMemAllocFromPoolAsync") : NULL;
    return (probe_drv.create && probe_drv.alloc) ? 0 : -1;
}

typedef struct {
    CUmemPoolPtrExportData at_start, at_far;
} probe_msg_t;

static const char *probe_error(CUresult res)
{
    const char *name = NULL;
    return (res == CUDA_SUCCESS) ? "ok" : (cux_drv.cuGetErrorName(res, &name) == CUDA_SUCCESS) ? name : "?";
}

/* The attributes the module reads for each offset of [base, base + PROBE_SIZE). */
static void probe_attributes(const char *who, CUdeviceptr base)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                   CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, CU_POINTER_ATTRIBUTE_MAPPING_SIZE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
    for (unsigned i = 0; i < sizeof(probe_offsets) / sizeof(probe_offsets[0]); ++i) {
        CUdeviceptr start = 0, map_base = 0, ar_base = 0;
        size_t size = 0, map_size = 0, ar_size = 0;
        unsigned long long bid = 0;
        uint64_t pool = 0;
        void *data[] = {&start, &size, &map_base, &map_size, &bid, &pool};
        CUdeviceptr p = base + probe_offsets[i];
        CUresult res  = cux_drv.cuPointerGetAttributes(6, attrs, data, p);
        CUresult ar   = cux_drv.cuMemGetAddressRange(&ar_base, &ar_size, p);

        printf("%s +%zu: attributes %s: range +%lld size %zu, mapping +%lld size %zu, buffer id %llu, pool %s; "
               "cuMemGetAddressRange %s: +%lld size %zu\n", who, probe_offsets[i], probe_error(res),
               (long long)(start - base), size, (long long)(map_base - base), map_size, bid, pool ? "yes" : "no",
               probe_error(ar), (long long)(ar_base - base), ar_size);
    }
}

static int probe_export(int sock)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    uint32_t *host = malloc(PROBE_SIZE);
    CUmemoryPool pool;
    CUdeviceptr p;
    probe_msg_t msg;
    CUresult res;
    int fd = -1;
    char done;

    if (host == NULL) {
        return 2;
    }
    for (size_t i = 0; i < PROBE_SIZE / 4; ++i) {
        host[i] = (uint32_t)i;
    }
    if (probe_load_pool_calls() != 0) {
        printf("exporter: the driver has no cuMemPoolCreate or cuMemAllocFromPoolAsync\n");
        cux_fd_passing_send(sock, "x", 1, -1);
        return 1;
    }
    const char *step = "cuMemPoolCreate";
    if (((res = probe_drv.create(&pool, &props)) != CUDA_SUCCESS) || (step = "cuMemAllocFromPoolAsync",
        (res = probe_drv.alloc(&p, PROBE_SIZE, pool, NULL)) != CUDA_SUCCESS) || (step = "cuMemcpyAsync",
        (res = cux_drv.cuMemcpyAsync(p, (CUdeviceptr)host, PROBE_SIZE, NULL)) != CUDA_SUCCESS) ||
        (step = "cuStreamSynchronize", (res = cux_drv.cuStreamSynchronize(NULL)) != CUDA_SUCCESS) ||
        (step = "cuMemPoolExportToShareableHandle",
         (res = cux_drv.cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) !=
         CUDA_SUCCESS) || /* a pointer is exported only from a pool shared already */
        (step = "cuMemPoolExportPointer", (res = cux_drv.cuMemPoolExportPointer(&msg.at_start, p)) != CUDA_SUCCESS)) {
        printf("exporter: a pool allocation of %u bytes and its export: %s: %s\n", PROBE_SIZE, step,
               probe_error(res));
        cux_fd_passing_send(sock, "x", 1, -1);
        return 1;
    }
    probe_attributes("exporter", p);
    res = cux_drv.cuMemPoolExportPointer(&msg.at_far, p + PROBE_FAR);
    printf("exporter: export at +%u: %s%s\n", PROBE_FAR, probe_error(res), (res != CUDA_SUCCESS) ? "" :
           memcmp(&msg.at_start, &msg.at_far, sizeof(msg.at_start)) ? ", data differ" : ", data the same");
    if (res != CUDA_SUCCESS) {
        msg.at_far = msg.at_start;
    }
    fflush(stdout);
    cux_fd_passing_send(sock, &msg, sizeof(msg), fd);
    (void)!read(sock, &done, 1); /* the importer is done with the memory */
    free(host);
    return 0;
}

/* Imports the pointer named by data and checks every word from its start; 0 if all are right. */
static int probe_import_one(CUmemoryPool pool, CUmemPoolPtrExportData *data, const char *which, uint32_t *host)
{
    CUdeviceptr p;
    CUresult res;
    size_t bad = 0, first = 0;

    if (((res = cux_drv.cuMemPoolImportPointer(&p, pool, data)) != CUDA_SUCCESS) ||
        ((res = cux_drv.cuMemcpyAsync((CUdeviceptr)host, p, PROBE_SIZE, NULL)) != CUDA_SUCCESS) ||
        ((res = cux_drv.cuStreamSynchronize(NULL)) != CUDA_SUCCESS)) {
        printf("importer: the pointer exported %s: %s\n", which, probe_error(res));
        return 1;
    }
    for (size_t i = PROBE_SIZE / 4; i-- > 0;) {
        if (host[i] != (uint32_t)i) {
            ++bad;
            first = i;
        }
    }
    printf("importer: the pointer exported %s: %zu of %u words wrong from the imported pointer (first at +%zu)\n",
           which, bad, PROBE_SIZE / 4, first * 4);
    if (strcmp(which, "at the start") == 0) {
        probe_attributes("importer", p);
    }
    (void)cux_drv.cuMemFree(p);
    return bad != 0;
}

static int probe_import(int sock)
{
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    uint32_t *host = malloc(PROBE_SIZE);
    struct msghdr mh;
    struct iovec iov;
    char control[CMSG_SPACE(sizeof(int))];
    probe_msg_t msg;
    CUmemoryPool pool;
    CUresult res;
    int fd, rc;

    cux_fd_passing_msg(&mh, &iov, &msg, sizeof(msg), control, sizeof(control));
    if ((host == NULL) || (recvmsg(sock, &mh, MSG_WAITALL) != (ssize_t)sizeof(msg)) ||
        ((fd = cux_fd_passing_take_first(&mh)) < 0)) {
        printf("importer: no export arrived\n");
        return 1;
    }
    if (((res = cux_drv.cuMemPoolImportFromShareableHandle(&pool, (void*)(uintptr_t)fd,
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) !=
         CUDA_SUCCESS) ||
        ((res = cux_drv.cuMemPoolSetAccess(pool, &access, 1)) != CUDA_SUCCESS)) {
        printf("importer: the pool: %s\n", probe_error(res));
        return 1;
    }
    rc = probe_import_one(pool, &msg.at_start, "at the start", host) |
         probe_import_one(pool, &msg.at_far, "further in", host);
    fflush(stdout);
    cux_fd_passing_send(sock, "d", 1, -1);
    free(host);
    return rc;
}

int main(void)
{
    int sv[2], wst = 0, rc = 0;
    pid_t child[2];

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return 2;
    }
    for (int i = 0; i < 2; ++i) { /* 0 exports, 1 imports */
        child[i] = fork();
        if (child[i] == 0) {
            cux_ctx_guard_t guard;
            close(sv[1 - i]);
            if ((cux_devices_init() != UCS_OK) || (cux_device_ctx_enter(0, &guard) != UCS_OK)) {
                fprintf(stderr, "no CUDA device: %s\n", cux_driver_error());
                _exit(2);
            }
            _exit((i == 0) ? probe_export(sv[0]) : probe_import(sv[1]));
        }
    }
    close(sv[0]);
    close(sv[1]);
    for (int i = 0; i < 2; ++i) {
        waitpid(child[i], &wst, 0);
        rc |= WIFEXITED(wst) ? WEXITSTATUS(wst) : 3;
    }
    printf("%s\n", rc ? "FAILED" : "done");
    return rc;
}
