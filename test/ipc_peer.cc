/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cuda_ipc tests' peer process and its connection: see ipc_peer.h.
 */
#include "cux_test.h"
#include "ipc_peer.h"
#include "../src/base/cux_fd_passing.h"
#include "cux_own_pidns.h"
#include "driver/cux_device.h"

#include <map>
#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace cux_test {

bool peer_send(int fd, const peer_msg &msg)
{
    return send(fd, &msg, sizeof(msg), MSG_NOSIGNAL) == (ssize_t)sizeof(msg);
}

bool peer_recv(int fd, peer_msg &msg)
{
    size_t got = 0;
    while (got < sizeof(msg)) {
        ssize_t n = recv(fd, (char*)&msg + got, sizeof(msg) - got, 0);
        if (n <= 0) {
            return false;
        }
        got += n;
    }
    return true;
}

/* In the forked child: the rest runs as pid 1 of a new PID namespace, with /proc of that namespace mounted in
 * a mount namespace of its own (a container's view). This process stays outside, waits for it and ends with it;
 * it dies with this process. Returns only in the new namespace. */
void enter_own_pid_namespace()
{
    if (cux_enter_own_pid_namespace(0) != 0) {
        _exit(126);
    }
}

/* The steps of enter_own_pid_namespace in a child that then ends: all of them must be allowed here. */
bool can_make_pid_namespace()
{
    pid_t pid = fork();
    int st;

    if (pid == 0) {
        enter_own_pid_namespace();
        _exit(0);
    }
    return (pid > 0) && (waitpid(pid, &st, 0) == pid) && WIFEXITED(st) && (WEXITSTATUS(st) == 0);
}

ipc_peer::ipc_peer(const char *visible_devices, bool own_pid_namespace) : m_fd(-1), m_pid(-1)
{
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return;
    }
    m_pid = fork();
    if (m_pid == 0) {
        close(sv[0]);
        if (own_pid_namespace) {
            enter_own_pid_namespace();
        }
        if (visible_devices != nullptr) {
            setenv("CUDA_VISIBLE_DEVICES", visible_devices, 1);
        }
        std::string fd = std::to_string(sv[1]);
        execl("/proc/self/exe", "cux_gtest", "--ipc-peer", fd.c_str(), (char*)nullptr);
        _exit(127);
    }
    close(sv[1]);
    m_fd = sv[0];
}

ipc_peer::~ipc_peer()
{
    stop();
}

peer_msg ipc_peer::greeting()
{
    peer_msg msg = {};

    if ((m_fd < 0) || !peer_recv(m_fd, msg)) {
        msg.status = -1;
    }
    return msg;
}

peer_msg ipc_peer::call(const peer_msg &req)
{
    peer_msg reply = {};

    reply.status = -1;
    if ((m_fd < 0) || !peer_send(m_fd, req) || !peer_recv(m_fd, reply)) {
        reply.status = -1;
    }
    return reply;
}

peer_msg ipc_peer::call_for_fd(const peer_msg &req, int *fd)
{
    peer_msg reply = {};

    *fd = -1;
    if ((m_fd < 0) || !peer_send(m_fd, req) || (cux_fd_passing_recv(m_fd, &reply, sizeof(reply), fd) != 0)) {
        reply.status = -1;
    }
    return reply;
}

void ipc_peer::stop()
{
    if (m_pid > 0) {
        peer_msg req = {};
        req.op = peer_op::exit;
        peer_send(m_fd, req);
        int st;
        waitpid(m_pid, &st, 0);
        m_pid = -1;
    }
    if (m_fd >= 0) {
        close(m_fd);
        m_fd = -1;
    }
}

/* Driver functions the module does not call, found in the driver it loaded. */
static void *driver_sym(const char *name)
{
    const char *path = getenv("CUX_DRIVER_PATH");
    void *lib        = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    return (lib != nullptr) ? dlsym(lib, name) : nullptr;
}

/* The device's pool of a kind: made once with the POSIX descriptor handle type or the fabric type, or the
 * device's default. */
static CUresult pool_of(int device, uint64_t kind, CUmemoryPool *pool)
{
    static CUmemoryPool made_fd[CUX_MAX_DEVICES], made_fabric[CUX_MAX_DEVICES];
    CUmemoryPool *made = (kind == alloc_pool_fabric) ? made_fabric : made_fd;
    auto create      = (CUresult(*)(CUmemoryPool*, const CUmemPoolProps*))driver_sym("cuMemPoolCreate");
    auto get_default = (CUresult(*)(CUmemoryPool*, CUdevice))driver_sym("cuDeviceGetDefaultMemPool");
    CUmemPoolProps props = {};

    if (kind == alloc_pool_default) {
        return (get_default != nullptr) ? get_default(pool, device) : CUDA_ERROR_NOT_SUPPORTED;
    }
    if (made[device] == nullptr) {
        props.allocType     = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.handleTypes   = (kind == alloc_pool_fabric) ? CU_MEM_HANDLE_TYPE_FABRIC :
                                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id   = device;
        CUresult res = (create != nullptr) ? create(&made[device], &props) : CUDA_ERROR_NOT_SUPPORTED;
        if (res != CUDA_SUCCESS) {
            return res;
        }
    }
    *pool = made[device];
    return CUDA_SUCCESS;
}

/* Stream-ordered memory from a pool, on the default stream, complete on return (as an application that
 * synchronises before it hands the buffer to UCX). */
static CUresult pool_alloc(int device, uint64_t kind, size_t size, CUdeviceptr *dptr)
{
    auto alloc = (CUresult(*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream))driver_sym("cuMemAllocFromPoolAsync");
    CUmemoryPool pool;
    CUresult res = pool_of(device, kind, &pool);

    if (res != CUDA_SUCCESS) {
        return res;
    }
    res = (alloc != nullptr) ? alloc(dptr, size, pool, nullptr) : CUDA_ERROR_NOT_SUPPORTED;
    return (res == CUDA_SUCCESS) ? cux_drv.cuStreamSynchronize(nullptr) : res;
}

static CUresult pool_free(CUdeviceptr dptr)
{
    auto free_async = (CUresult(*)(CUdeviceptr, CUstream))driver_sym("cuMemFreeAsync");
    CUresult res    = (free_async != nullptr) ? free_async(dptr, nullptr) : CUDA_ERROR_NOT_SUPPORTED;

    return (res == CUDA_SUCCESS) ? cux_drv.cuStreamSynchronize(nullptr) : res;
}

/* Allocate device memory of a kind on a device; size is rounded up for cuMemCreate. */
CUresult ipc_alloc(int device, uint64_t kind, size_t *size, CUdeviceptr *dptr)
{
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUcontext ctx, prev;
    size_t granularity;
    CUresult res;

    cux_device_ctx(device, &ctx);
    cux_drv.cuCtxPushCurrent(ctx);
    if (kind == alloc_legacy) {
        res = cux_drv.cuMemAlloc(dptr, *size);
    } else if ((kind == alloc_pool_fd) || (kind == alloc_pool_default) || (kind == alloc_pool_fabric)) {
        res = pool_alloc(device, kind, *size, dptr);
    } else {
        /* one allocation, or two of half the size each in one range */
        const int pieces = (kind == alloc_vmm_split) ? 2 : 1;
        prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id          = device;
        prop.requestedHandleTypes = (kind == alloc_vmm_private) ? CU_MEM_HANDLE_TYPE_NONE :
                                    (kind == alloc_vmm_fabric) ? CU_MEM_HANDLE_TYPE_FABRIC :
                                    (kind == alloc_vmm_fabric_fd) ?
                                    (CUmemAllocationHandleType)(CU_MEM_HANDLE_TYPE_FABRIC |
                                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) :
                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        res = cux_drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (res == CUDA_SUCCESS) {
            size_t piece = (*size / pieces + granularity - 1) / granularity * granularity;
            *size        = piece * pieces;
            res          = cux_drv.cuMemAddressReserve(dptr, *size, 0, 0, 0);
            for (int i = 0; (i < pieces) && (res == CUDA_SUCCESS); ++i) {
                res = cux_drv.cuMemCreate(&handle, piece, &prop, 0);
                if (res == CUDA_SUCCESS) {
                    res = cux_drv.cuMemMap(*dptr + i * piece, piece, 0, handle, 0);
                    cux_drv.cuMemRelease(handle); /* the mapping keeps the allocation */
                }
            }
            /* every device may access it: the tests' helpers copy through device 0 */
            for (int d = 0; (d < cux_device_count()) && (res == CUDA_SUCCESS); ++d) {
                access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                access.location.id   = d;
                access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                res = cux_drv.cuMemSetAccess(*dptr, *size, &access, 1);
            }
        }
    }
    cux_drv.cuCtxPopCurrent(&prev);
    return res;
}

CUresult ipc_free(int device, uint64_t kind, CUdeviceptr dptr, size_t size)
{
    CUcontext ctx, prev;
    CUresult res;

    cux_device_ctx(device, &ctx);
    cux_drv.cuCtxPushCurrent(ctx);
    if (kind == alloc_legacy) {
        res = cux_drv.cuMemFree(dptr);
    } else if ((kind == alloc_pool_fd) || (kind == alloc_pool_default) || (kind == alloc_pool_fabric)) {
        res = pool_free(dptr);
    } else {
        const int pieces = (kind == alloc_vmm_split) ? 2 : 1;
        res = CUDA_SUCCESS;
        for (int i = 0; (i < pieces) && (res == CUDA_SUCCESS); ++i) {
            res = cux_drv.cuMemUnmap(dptr + i * (size / pieces), size / pieces);
        }
        if (res == CUDA_SUCCESS) {
            res = cux_drv.cuMemAddressFree(dptr, size);
        }
    }
    cux_drv.cuCtxPopCurrent(&prev);
    return res;
}

} // namespace cux_test

using namespace cux_test;

/* Peer side: serve requests until told to exit or the connection closes. */
int ipc_peer_main(int fd)
{
    struct peer_buffer {
        uct_mem_h memh;
        int       device;
        uint64_t  kind;
        size_t    size;
    };
    std::map<uint64_t, peer_buffer> buffers;
    uct_component_h *components, component = nullptr;
    uct_iface_config_t *iface_config;
    uct_iface_params_t params = {};
    ucs_async_context_t *async;
    uct_md_config_t *md_config;
    unsigned num_components;
    uct_worker_h worker;
    uct_iface_attr_t attr;
    uct_iface_h iface;
    uct_md_h md;
    peer_msg msg, reply;

    if ((cux_devices_init() != UCS_OK) || (uct_query_components(&components, &num_components) != UCS_OK)) {
        return 1;
    }
    for (unsigned i = 0; i < num_components; ++i) {
        uct_component_attr_t cattr = {};
        cattr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
        if ((uct_component_query(components[i], &cattr) == UCS_OK) && !strcmp(cattr.name, "cuda_ipc")) {
            component = components[i];
        }
    }
    uct_release_component_list(components);
    if ((component == nullptr) || (uct_md_config_read(component, NULL, NULL, &md_config) != UCS_OK) ||
        (uct_md_open(component, "cuda_ipc", md_config, &md) != UCS_OK) ||
        (ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async) != UCS_OK) ||
        (uct_worker_create(async, UCS_THREAD_MODE_SINGLE, &worker) != UCS_OK) ||
        (uct_md_iface_config_read(md, "cuda_ipc", NULL, NULL, &iface_config) != UCS_OK)) {
        return 1;
    }
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = "cuda_ipc";
    params.mode.device.dev_name = "cuda";
    if ((uct_iface_open(md, worker, &params, iface_config, &iface) != UCS_OK) ||
        (uct_iface_query(iface, &attr) != UCS_OK)) {
        return 1;
    }

    reply          = {};
    reply.op       = peer_op::hello;
    reply.a        = attr.device_addr_len;
    reply.b        = attr.iface_addr_len;
    reply.blob_len = attr.device_addr_len + attr.iface_addr_len;
    uct_iface_get_device_address(iface, (uct_device_addr_t*)reply.blob);
    uct_iface_get_address(iface, (uct_iface_addr_t*)(reply.blob + attr.device_addr_len));
    peer_send(fd, reply);

    while (peer_recv(fd, msg)) {
        reply        = {};
        reply.op     = msg.op;
        reply.status = UCS_OK;
        try {
            switch (msg.op) {
            case peer_op::alloc: {
                size_t size = msg.a;
                CUdeviceptr dptr;
                uct_mem_h memh;
                CUresult res = ipc_alloc((int)msg.b, msg.d, &size, &dptr);
                if (res != CUDA_SUCCESS) {
                    reply.status = UCS_ERR_NO_MEMORY;
                    break;
                }
                raw_copy((void*)dptr, pattern(msg.c, msg.a).data(), msg.a);
                reply.status = uct_md_mem_reg(md, (void*)dptr, msg.a,
                                              UCT_MD_MEM_ACCESS_ALL | UCT_MD_MEM_FLAG_HIDE_ERRORS, &memh);
                if (reply.status == UCS_OK) {
                    reply.status   = uct_md_mkey_pack(md, memh, reply.blob);
                    reply.blob_len = sizeof(reply.blob);
                } else {
                    memh = nullptr;
                }
                reply.a       = dptr;
                buffers[dptr] = {memh, (int)msg.b, msg.d, size};
                break;
            }
            case peer_op::free: {
                auto it = buffers.find(msg.a);
                if (it == buffers.end()) {
                    reply.status = UCS_ERR_NO_ELEM;
                    break;
                }
                if (it->second.memh != nullptr) {
                    uct_md_mem_dereg(md, it->second.memh);
                }
                reply.status = (ipc_free(it->second.device, it->second.kind, it->first, it->second.size) ==
                                CUDA_SUCCESS) ? UCS_OK : UCS_ERR_IO_ERROR;
                buffers.erase(it);
                break;
            }
            case peer_op::fill:
                raw_copy((void*)msg.a, pattern(msg.c, msg.b).data(), msg.b);
                break;
            case peer_op::check: {
                std::vector<uint8_t> got(msg.b);
                raw_copy(got.data(), (void*)msg.a, msg.b);
                reply.status = (got == pattern(msg.c, msg.b)) ? 0 : 1;
                break;
            }
            case peer_op::reg: {
                uct_mem_h memh;
                reply.status = uct_md_mem_reg(md, (void*)msg.a, msg.b, UCT_MD_MEM_ACCESS_ALL, &memh);
                if (reply.status == UCS_OK) {
                    reply.status   = uct_md_mkey_pack(md, memh, reply.blob);
                    reply.blob_len = sizeof(reply.blob);
                    reply.a        = (uint64_t)(uintptr_t)memh;
                }
                break;
            }
            case peer_op::dereg:
                reply.status = uct_md_mem_dereg(md, (uct_mem_h)(uintptr_t)msg.a);
                break;
            case peer_op::nodump:
                reply.status = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
                break;
            case peer_op::export_fd: {
                CUmemGenericAllocationHandle handle;
                int exported = -1;
                reply.status = UCS_ERR_IO_ERROR;
                if (cux_drv.cuMemRetainAllocationHandle(&handle, (void*)msg.a) == CUDA_SUCCESS) {
                    if (cux_drv.cuMemExportToShareableHandle(&exported, handle,
                                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ==
                        CUDA_SUCCESS) {
                        reply.status = UCS_OK;
                    }
                    cux_drv.cuMemRelease(handle);
                }
                cux_fd_passing_send(fd, &reply, sizeof(reply), exported);
                if (exported >= 0) {
                    close(exported);
                }
                continue; /* replied */
            }
            case peer_op::exit:
                _exit(0); /* like a process that simply ends: no cleanup */
            default:
                reply.status = UCS_ERR_INVALID_PARAM;
            }
        } catch (const std::exception &e) {
            fprintf(stderr, "ipc peer: %s\n", e.what());
            reply.status = UCS_ERR_IO_ERROR;
        }
        peer_send(fd, reply);
    }
    return 0;
}
