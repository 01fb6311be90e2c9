/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issues 36 and 57, item 1: what the driver does for two processes in different PID namespaces (containers
 * without a shared PID namespace), before any design. One process exports GPU memory, the other imports it; each
 * runs in the probe's namespace or in PID, mount, IPC and UTS namespaces of its own (unshare, as root: a
 * container's or a pod's), as pid 1 or deeper; both see the GPU:
 *   - a legacy IPC handle (cuIpcGetMemHandle: it carries the exporter's pid at bytes 8-11) opened by the
 *     importer as exported, and with those bytes changed (0, a pid nobody has, the importer's own);
 *   - a VMM allocation's POSIX descriptor passed over a UNIX socket (SCM_RIGHTS) and imported.
 * Each import's driver result and a check of every byte are printed, for each pair of places (one namespace; a
 * child namespace either way round; sibling namespaces with equal and with different pids). Not a test: a
 * measurement for the GPU host (the mock answers as the driver does where the tests need it).
 *
 *   bench/cux_pidns_probe            (root; CUX_DRIVER_PATH as for the module)
 */
#define _GNU_SOURCE
#include "driver/cux_device.h"
#include "../src/base/cux_fd_passing.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_SIZE (2u << 20)

static unsigned char probe_byte(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + seed) ^ (i >> 9));
}

static CUresult probe_fill(CUdeviceptr p, unsigned seed)
{
    static unsigned char host[PROBE_SIZE];
    CUresult res;
    size_t i;

    for (i = 0; i < PROBE_SIZE; ++i) {
        host[i] = probe_byte(i, seed);
    }
    res = cux_drv.cuMemcpyAsync(p, (CUdeviceptr)host, PROBE_SIZE, NULL);
    return (res == CUDA_SUCCESS) ? cux_drv.cuStreamSynchronize(NULL) : res;
}

/* "data ok", or how many bytes differ */
static const char *probe_check(CUdeviceptr p, unsigned seed, char *what, size_t size)
{
    static unsigned char host[PROBE_SIZE];
    size_t i, wrong = 0;

    if ((cux_drv.cuMemcpyAsync((CUdeviceptr)host, p, PROBE_SIZE, NULL) != CUDA_SUCCESS) ||
        (cux_drv.cuStreamSynchronize(NULL) != CUDA_SUCCESS)) {
        return "the read-back copy failed";
    }
    for (i = 0; i < PROBE_SIZE; ++i) {
        wrong += (host[i] != probe_byte(i, seed));
    }
    snprintf(what, size, wrong ? "%zu bytes wrong" : "data ok", wrong);
    return what;
}

static const char *probe_error(CUresult res)
{
    const char *name = NULL;

    return (cux_drv.cuGetErrorName(res, &name) == CUDA_SUCCESS) ? name : "?";
}

/* A VMM allocation mapped read-write for device 0 at a new address: what exporter and importer both do. */
static CUresult probe_map(CUmemGenericAllocationHandle vmm, size_t granularity, CUdeviceptr *va_p)
{
    CUmemAccessDesc access = {0};
    CUresult res;

    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = 0;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (((res = cux_drv.cuMemAddressReserve(va_p, PROBE_SIZE, granularity, 0, 0)) != CUDA_SUCCESS) ||
        ((res = cux_drv.cuMemMap(*va_p, PROBE_SIZE, 0, vmm, 0)) != CUDA_SUCCESS)) {
        return res;
    }
    return cux_drv.cuMemSetAccess(*va_p, PROBE_SIZE, &access, 1);
}

static void probe_export(int sock)
{
    CUmemAllocationProp prop = {0};
    CUmemGenericAllocationHandle vmm;
    CUipcMemHandle handle;
    CUdeviceptr legacy, va;
    size_t granularity;
    int fd = -1, none, pid = getpid();
    char done;

    cux_drv.cuMemAlloc(&legacy, PROBE_SIZE);
    probe_fill(legacy, 1);
    cux_drv.cuIpcGetMemHandle(&handle, legacy);
    cux_fd_passing_send(sock, &pid, sizeof(pid), -1);
    cux_fd_passing_send(sock, &handle, sizeof(handle), -1);

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    cux_drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    cux_drv.cuMemCreate(&vmm, PROBE_SIZE, &prop, 0);
    probe_map(vmm, granularity, &va);
    probe_fill(va, 2);
    cux_drv.cuMemExportToShareableHandle(&fd, vmm, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    cux_fd_passing_send(sock, &granularity, sizeof(granularity), fd);
    cux_fd_passing_recv(sock, &done, 1, &none); /* the importer is done with both */
}

/* The pid bytes a legacy handle is opened with (bytes 8-11, where the driver writes the exporting pid): as
 * exported, then changed, to learn whether the driver compares them with the importer's own pid only, or needs
 * them to find the exporter. */
typedef enum { PID_BYTES_AS_EXPORTED, PID_BYTES_ZERO, PID_BYTES_OTHER, PID_BYTES_OWN, PID_BYTES_LAST } probe_pid_bytes_t;

static const char *probe_pid_bytes_name[] = {
    [PID_BYTES_AS_EXPORTED] = "as exported",
    [PID_BYTES_ZERO]        = "set to 0",
    [PID_BYTES_OTHER]       = "set to a pid no process here has (0x7ffffff0)",
    [PID_BYTES_OWN]         = "set to the importer's own pid",
};

static void probe_import_legacy(const CUipcMemHandle *exported, int pid, const char *where)
{
    CUipcMemHandle handle;
    int32_t bytes;
    CUdeviceptr p;
    CUresult res;
    char what[64];
    int v;

    for (v = 0; v < PID_BYTES_LAST; ++v) {
        handle = *exported;
        bytes  = (v == PID_BYTES_ZERO) ? 0 : (v == PID_BYTES_OTHER) ? 0x7ffffff0 : (v == PID_BYTES_OWN) ? getpid() : pid;
        memcpy(handle.reserved + 8, &bytes, sizeof(bytes));
        res = cux_drv.cuIpcOpenMemHandle(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("legacy handle, exporter pid %d, importer pid %d, %s, pid bytes %s: cuIpcOpenMemHandle %s%s%s\n",
               pid, getpid(), where, probe_pid_bytes_name[v], probe_error(res), (res == CUDA_SUCCESS) ? ", " : "",
               (res == CUDA_SUCCESS) ? probe_check(p, 1, what, sizeof(what)) : "");
        if (res == CUDA_SUCCESS) {
            cux_drv.cuIpcCloseMemHandle(p);
        }
    }
}

static void probe_import(int sock, const char *where)
{
    CUmemGenericAllocationHandle vmm;
    CUipcMemHandle handle;
    CUdeviceptr va;
    size_t granularity;
    int fd, pid;
    CUresult res;
    char what[64];

    cux_fd_passing_recv(sock, &pid, sizeof(pid), &fd);
    cux_fd_passing_recv(sock, &handle, sizeof(handle), &fd);
    probe_import_legacy(&handle, pid, where);

    cux_fd_passing_recv(sock, &granularity, sizeof(granularity), &fd);
    res = (fd < 0) ? CUDA_ERROR_INVALID_HANDLE :
          cux_drv.cuMemImportFromShareableHandle(&vmm, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (res == CUDA_SUCCESS) {
        if ((res = probe_map(vmm, granularity, &va)) != CUDA_SUCCESS) {
            printf("VMM descriptor over SCM_RIGHTS, importer pid %d, %s: imported, map or access %s\n", getpid(),
                   where, probe_error(res));
        } else {
            printf("VMM descriptor over SCM_RIGHTS, exporter pid %d, importer pid %d, %s: imported and mapped, %s\n",
                   pid, getpid(), where, probe_check(va, 2, what, sizeof(what)));
        }
    } else {
        printf("VMM descriptor over SCM_RIGHTS, %s: %s\n", where, (fd < 0) ? "no descriptor arrived" : probe_error(res));
    }
    fflush(stdout);
    cux_fd_passing_send(sock, "d", 1, -1);
}

/* One side in its own PID, mount, IPC and UTS namespaces (a container's, or a pod's): it unshares, then its child
 * (pid 1 there) mounts its own /proc, as a container has (with the host's /proc the driver's cuInit fails:
 * CUDA_ERROR_OPERATING_SYSTEM, measured on an H200 with driver 580). With depth > 0, pid 1 forks that many times
 * and the last child (pid 1 + depth) plays the role. */
static int probe_role(int sock, int export, int namespaced, int depth, const char *where)
{
    cux_ctx_guard_t guard;
    pid_t inner;
    int wst = 0;

    if (namespaced) {
        if (unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
            fprintf(stderr, "unshare: %s (run as root)\n", strerror(errno));
            return 2;
        }
        inner = fork();
        if (inner != 0) {
            waitpid(inner, &wst, 0);
            return WIFEXITED(wst) ? WEXITSTATUS(wst) : 3;
        }
        if ((mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) ||
            (mount("proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL) != 0)) {
            fprintf(stderr, "mounting /proc in the new namespace: %s\n", strerror(errno));
            return 2;
        }
        for (; depth > 0; --depth) {
            inner = fork();
            if (inner != 0) {
                waitpid(inner, &wst, 0);
                return WIFEXITED(wst) ? WEXITSTATUS(wst) : 3;
            }
        }
    }
    if ((cux_devices_init() != UCS_OK) || (cux_device_ctx_enter(0, &guard) != UCS_OK)) {
        fprintf(stderr, "no CUDA device: %s\n", cux_driver_error());
        return 2;
    }
    if (export) {
        probe_export(sock);
    } else {
        probe_import(sock, where);
    }
    return 0;
}

/* Where each side runs: in the probe's namespace (a child of it), or in a namespace of its own as pid 1 + depth. */
typedef struct {
    const char *where;
    int         namespaced[2]; /* exporter, importer */
    int         depth[2];
} probe_pair_t;

static int probe_pair(const probe_pair_t *pair)
{
    int sv[2], wst = 0, rc = 0, i;
    pid_t child[2];

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return 2;
    }
    for (i = 0; i < 2; ++i) { /* 0 exports, 1 imports */
        child[i] = fork();
        if (child[i] == 0) {
            close(sv[1 - i]);
            _exit(probe_role(sv[i], i == 0, pair->namespaced[i], pair->depth[i], pair->where));
        }
    }
    close(sv[0]);
    close(sv[1]);
    for (i = 0; i < 2; ++i) {
        waitpid(child[i], &wst, 0);
        rc |= WIFEXITED(wst) ? WEXITSTATUS(wst) : 3;
    }
    return rc;
}

int main(void)
{
    static const probe_pair_t pairs[] = {
        {"same namespace", {0, 0}, {0, 0}},
        {"importer in its own PID namespace", {0, 1}, {0, 0}},
        {"exporter in its own PID namespace", {1, 0}, {0, 0}},
        {"sibling namespaces, both pid 1", {1, 1}, {0, 0}},
        {"sibling namespaces, both pid 3", {1, 1}, {2, 2}},
        {"sibling namespaces, exporter pid 1, importer pid 3", {1, 1}, {0, 2}},
        {"sibling namespaces, exporter pid 3, importer pid 1", {1, 1}, {2, 0}},
    };
    int rc = 0;
    size_t i;

    for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); ++i) {
        printf("## %s\n", pairs[i].where);
        fflush(stdout);
        rc |= probe_pair(&pairs[i]);
    }
    return rc;
}
