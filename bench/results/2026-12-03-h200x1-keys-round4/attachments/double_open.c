/* What the driver answers when one process opens the same legacy IPC handle twice in one context, and imports
 * the same pool allocation twice; and what the kernel gives a client of a UNIX socket about its listener. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s; cuGetErrorName(r_, &s); printf("%s -> %s\n", #x, s); } } while (0)

typedef struct { CUipcMemHandle h; CUmemPoolPtrExportData pd; } msg_t;

static int sendfd(int s, void *buf, size_t len, int fd) {
    char c[CMSG_SPACE(sizeof(int))]; struct iovec iov = {buf, len}; struct msghdr m = {0};
    m.msg_iov = &iov; m.msg_iovlen = 1; m.msg_control = c; m.msg_controllen = sizeof c;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m); h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int)); memcpy(CMSG_DATA(h), &fd, sizeof fd);
    return sendmsg(s, &m, 0) == (ssize_t)len ? 0 : -1;
}
static int recvfd(int s, void *buf, size_t len) {
    char c[CMSG_SPACE(sizeof(int))]; struct iovec iov = {buf, len}; struct msghdr m = {0}; int fd = -1;
    m.msg_iov = &iov; m.msg_iovlen = 1; m.msg_control = c; m.msg_controllen = sizeof c;
    if (recvmsg(s, &m, MSG_WAITALL) != (ssize_t)len) return -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m); if (h) memcpy(&fd, CMSG_DATA(h), sizeof fd); return fd;
}

int main(void) {
    struct utsname u; uname(&u); printf("kernel %s\n", u.release);
    int sv[2]; socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv);
    pid_t pid = fork();
    CUdevice dev; CUcontext ctx;
    if (pid == 0) {
        close(sv[0]);
        CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
        msg_t m; memset(&m, 0, sizeof m);
        CUdeviceptr p, q; CK(cuMemAlloc(&p, 1 << 20)); CK(cuIpcGetMemHandle(&m.h, p));
        CUmemPoolProps props; memset(&props, 0, sizeof props);
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE; props.location.id = 0;
        CUmemoryPool pool; CK(cuMemPoolCreate(&pool, &props));
        CK(cuMemAllocFromPoolAsync(&q, 1 << 20, pool, 0)); CK(cuStreamSynchronize(0));
        int pfd = -1; CK(cuMemPoolExportToShareableHandle(&pfd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        CK(cuMemPoolExportPointer(&m.pd, q));
        sendfd(sv[1], &m, sizeof m, pfd);
        char c; read(sv[1], &c, 1); _exit(0);
    }
    close(sv[1]);
    msg_t m; int pfd = recvfd(sv[0], &m, sizeof m);
    CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    CUdeviceptr a = 0, b = 0; CUresult r1, r2, c1, c2, c3;
    r1 = cuIpcOpenMemHandle(&a, m.h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    r2 = cuIpcOpenMemHandle(&b, m.h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    printf("legacy: open 1 -> %d (0x%llx), open 2 -> %d (0x%llx), same pointer: %s\n", r1, (unsigned long long)a, r2,
           (unsigned long long)b, a == b ? "yes" : "no");
    c1 = cuIpcCloseMemHandle(a);
    unsigned v = 0; CUresult rd = cuMemcpyDtoH(&v, b, 4);
    printf("legacy: close 1 -> %d; a copy from the second pointer after -> %d\n", c1, rd);
    c2 = cuIpcCloseMemHandle(b); c3 = cuIpcCloseMemHandle(b);
    printf("legacy: close 2 -> %d, close 3 -> %d\n", c2, c3);
    CUmemoryPool ip; CK(cuMemPoolImportFromShareableHandle(&ip, (void*)(uintptr_t)pfd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemAccessDesc acc; memset(&acc, 0, sizeof acc); acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE; acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; CK(cuMemPoolSetAccess(ip, &acc, 1));
    a = b = 0;
    r1 = cuMemPoolImportPointer(&a, ip, &m.pd); r2 = cuMemPoolImportPointer(&b, ip, &m.pd);
    printf("pool: import 1 -> %d (0x%llx), import 2 -> %d (0x%llx), same pointer: %s\n", r1, (unsigned long long)a, r2,
           (unsigned long long)b, a == b ? "yes" : "no");
    c1 = cuMemFree(a); rd = cuMemcpyDtoH(&v, b, 4);
    printf("pool: free 1 -> %d; a copy from the second pointer after -> %d\n", c1, rd);
    c2 = cuMemFree(b); printf("pool: free 2 -> %d\n", c2);
    write(sv[0], "x", 1); waitpid(pid, NULL, 0);
    /* the kernel's word on a listener */
    struct sockaddr_un sa = {.sun_family = AF_UNIX}; snprintf(sa.sun_path, sizeof sa.sun_path, "/tmp/probe-%d", getpid());
    int l = socket(AF_UNIX, SOCK_SEQPACKET, 0); bind(l, (void*)&sa, sizeof sa); listen(l, 1);
    int cfd = socket(AF_UNIX, SOCK_SEQPACKET, 0); connect(cfd, (void*)&sa, sizeof sa);
    int pidfd = -1; socklen_t len = sizeof pidfd; int rc = getsockopt(cfd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len);
    struct statfs sf; struct stat st; memset(&sf, 0, sizeof sf); memset(&st, 0, sizeof st);
    if (pidfd >= 0) { fstatfs(pidfd, &sf); fstat(pidfd, &st); }
    printf("SO_PEERPIDFD -> %d (fd %d), its filesystem 0x%lx (pidfs: 0x50494446), inode %lu\n", rc, pidfd,
           (unsigned long)sf.f_type, (unsigned long)st.st_ino);
    unlink(sa.sun_path);
    return 0;
}
