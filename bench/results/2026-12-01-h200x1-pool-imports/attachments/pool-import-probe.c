/* SPDX-License-Identifier: BSD-3-Clause */
/* diagnostic: does importing one pool twice in a process give the same handle, and when may it be destroyed */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s; cuGetErrorString(r_, &s); fprintf(stderr, "%s: %s (line %d)\n", #x, s, __LINE__); exit(1);} } while (0)
static const char *es(CUresult r) { const char *s; cuGetErrorName(r, &s); return s; }
static void send_fd(int sock, int fd, const void *data, size_t len)
{
    struct msghdr m = {0}; struct iovec io = {(void*)data, len}; char buf[CMSG_SPACE(sizeof(int))];
    memset(buf, 0, sizeof(buf)); m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = buf; m.msg_controllen = sizeof(buf);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m); c->cmsg_level = SOL_SOCKET; c->cmsg_type = SCM_RIGHTS; c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int)); sendmsg(sock, &m, 0);
}
static int recv_fd(int sock, void *data, size_t len)
{
    struct msghdr m = {0}; struct iovec io = {data, len}; char buf[CMSG_SPACE(sizeof(int))]; int fd;
    m.msg_iov = &io; m.msg_iovlen = 1; m.msg_control = buf; m.msg_controllen = sizeof(buf);
    if (recvmsg(sock, &m, MSG_WAITALL) <= 0) exit(3);
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int)); return fd;
}
int main(void)
{
    int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    CK(cuInit(0)); CUdevice dev; CUcontext ctx; CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    CUmemPoolPtrExportData ed[2];
    if (pid == 0) {
        CUmemPoolProps p = {0}; CUmemoryPool pool; CUdeviceptr d[2]; int fd;
        p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0;
        CK(cuMemPoolCreate(&pool, &p));
        for (int i = 0; i < 2; ++i) { CK(cuMemAllocFromPoolAsync(&d[i], 1 << 20, pool, NULL)); }
        CK(cuStreamSynchronize(NULL));
        CK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        for (int i = 0; i < 2; ++i) { CK(cuMemPoolExportPointer(&ed[i], d[i])); }
        send_fd(sv[1], fd, ed, sizeof(ed));
        int fd2; CK(cuMemPoolExportToShareableHandle(&fd2, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        printf("exporter: two exports of one pool give fds %d and %d\n", fd, fd2);
        send_fd(sv[1], fd2, ed, sizeof(ed));
        char c; read(sv[1], &c, 1); _exit(0);
    }
    int fd1 = recv_fd(sv[0], ed, sizeof(ed));
    int fd2 = recv_fd(sv[0], ed, sizeof(ed));
    CUmemoryPool h1, h2, h3; CUdeviceptr p1, p2;
    CK(cuMemPoolImportFromShareableHandle(&h1, (void*)(uintptr_t)fd1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CK(cuMemPoolImportFromShareableHandle(&h2, (void*)(uintptr_t)fd2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CK(cuMemPoolImportFromShareableHandle(&h3, (void*)(uintptr_t)fd1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("importer: handles %p %p %p (same fd twice: %s, two exports: %s)\n", (void*)h1, (void*)h2, (void*)h3,
           h1 == h3 ? "same" : "different", h1 == h2 ? "same" : "different");
    CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemPoolSetAccess(h1, &a, 1));
    CK(cuMemPoolImportPointer(&p1, h1, &ed[0]));
    CK(cuMemPoolImportPointer(&p2, h2, &ed[1]));
    printf("importer: pointers %llx %llx\n", (unsigned long long)p1, (unsigned long long)p2);
    CUresult r;
    r = cuMemPoolDestroy(h3); printf("destroy h3 (no pointer imported through it, two live): %s\n", es(r));
    CK(cuMemFree(p1));
    r = cuMemPoolDestroy(h1); printf("destroy h1 after freeing p1, p2 live: %s\n", es(r));
    CK(cuMemFree(p2));
    r = cuMemPoolDestroy(h2); printf("destroy h2 after freeing p2: %s\n", es(r));
    r = cuMemPoolDestroy(h1); printf("destroy h1 again: %s\n", es(r));
    r = cuMemPoolDestroy(h3); printf("destroy h3 again: %s\n", es(r));
    /* a fresh import after all that */
    CUmemoryPool h4; r = cuMemPoolImportFromShareableHandle(&h4, (void*)(uintptr_t)fd1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    printf("import again: %s, handle %p\n", es(r), (void*)h4);
    if (r == CUDA_SUCCESS) { r = cuMemPoolDestroy(h4); printf("destroy it: %s\n", es(r)); }
    write(sv[0], "x", 1); waitpid(pid, NULL, 0);
    return 0;
}
