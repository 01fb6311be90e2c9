/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The other process of the cuda_ipc tests: a copy of the test binary started with --ipc-peer FD, which
 * allocates, exports, fills, checks and frees GPU buffers on request over a socket pair.
 */
#ifndef CUX_IPC_PEER_H_
#define CUX_IPC_PEER_H_

#include <cstdint>
#include "driver/cux_cuda.h"
#include <sys/types.h>

namespace cux_test {

/* nodump: the peer makes itself non-dumpable (PR_SET_DUMPABLE 0): a process without CAP_SYS_PTRACE may then
 * not read its memory nor take its descriptors, as under Yama's ptrace_scope=1 for a non-root sibling. */
/* export_fd: the cuMemCreate allocation at address a exported as a POSIX descriptor, which comes with the reply
 * (SCM_RIGHTS: ipc_peer::call_for_fd), as a process hands one to another over a UNIX socket. */
/* reg: register [a, a + b) of a buffer alloc made and pack its key (reply.a: a handle for dereg); dereg: a */
enum class peer_op : uint32_t { hello, alloc, free, fill, check, exit, nodump, export_fd, reg, dereg };

/* How the peer allocates: cuMemAlloc, cuMemCreate with or without a POSIX fd handle type, from a memory pool
 * made with that handle type or from the device's default pool (which has none), or two cuMemCreate allocations
 * with that handle type mapped one after another in one reserved range (PyTorch's expandable segments);
 * cuMemCreate with the fabric handle type alone or with the fd type too, and a pool made with the fabric type
 * alone (the driver refuses fabric allocations where the process has no IMEX channel). */
enum alloc_kind : uint64_t {
    alloc_legacy = 0, alloc_vmm_fd = 1, alloc_vmm_private = 2, alloc_pool_fd = 3, alloc_pool_default = 4,
    alloc_vmm_split = 5, alloc_vmm_fabric = 6, alloc_vmm_fabric_fd = 7, alloc_pool_fabric = 8
};

struct peer_msg {
    peer_op  op;
    int32_t  status;     /* ucs_status_t of the request; for check, 1 on a data mismatch */
    uint64_t a, b, c;    /* alloc: size, device, seed -> address; fill/check: address, size, seed */
    uint64_t d;          /* alloc: an alloc_kind */
    uint32_t blob_len;
    uint8_t  blob[512];  /* hello: device address, iface address; alloc: packed rkey */
};

bool peer_send(int fd, const peer_msg &msg);

/* Device memory of a kind on a device, as the peer allocates it (size rounded up for cuMemCreate), and its free. */
CUresult ipc_alloc(int device, uint64_t kind, size_t *size, CUdeviceptr *dptr);
CUresult ipc_free(int device, uint64_t kind, CUdeviceptr dptr, size_t size);
bool peer_recv(int fd, peer_msg &msg);

/* In a forked child: the rest runs as pid 1 of a new PID namespace with its own /proc (exits where it may not). */
void enter_own_pid_namespace();

/* Whether this process may make PID and mount namespaces and mount /proc in them (unshare, as root does). */
bool can_make_pid_namespace();

/* Parent side: a running peer process. */
class ipc_peer {
public:
    /* visible_devices: CUDA_VISIBLE_DEVICES for the peer, or null to inherit ours. own_pid_namespace: the peer
     * runs as pid 1 of a PID namespace of its own, with its own mount namespace and /proc, as in a container
     * without a shared PID namespace (root only: see can_make_pid_namespace). */
    explicit ipc_peer(const char *visible_devices = nullptr, bool own_pid_namespace = false);
    ~ipc_peer();

    bool     alive() const { return m_pid > 0; }
    pid_t    pid() const { return m_pid; }
    /* The greeting the peer sends when it is ready (status -1 if it died first). */
    peer_msg greeting();
    /* Sends a request and returns the reply (status -1 on a broken connection). */
    peer_msg call(const peer_msg &req);
    /* The same for a request whose reply brings a descriptor: *fd gets it (-1 if none came). */
    peer_msg call_for_fd(const peer_msg &req, int *fd);
    /* Asks the peer to exit and waits for it. */
    void     stop();

private:
    int   m_fd;
    pid_t m_pid;
};

} // namespace cux_test

#endif
