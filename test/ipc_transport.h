/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The cuda_ipc fixture: a transport opened through libuct and a peer process (test/ipc_peer.h) that allocates,
 * exports, fills and checks GPU buffers on request; an endpoint to it.
 */
#ifndef CUX_IPC_TRANSPORT_H_
#define CUX_IPC_TRANSPORT_H_

#include "cux_test.h"
#include "ipc_peer.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "cux_introspection.h"
#include "ipc/common/cux_ipc_fabric.h"
#include "ipc/common/cux_ipc_rkey.h"
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
}

namespace cux_test {

/* A sealed key of a made-up allocation of another process, for the CPU-only suites. */
inline cux_ipc_rkey_t sample_key(uint64_t system_id)
{
    cux_ipc_rkey_t key;
    memset(&key, 0, sizeof(key));
    key.system_id = system_id;
    key.pid       = 1234;
    key.base      = 0x7f0000000000ull;
    key.length    = 1 << 20;
    key.buffer_id = 42;
    memset(&key.handle, 0x5a, sizeof(key.handle));
    cux_ipc_rkey_seal(&key);
    return key;
}

/* An endpoint of iface to the device and interface address in a peer's greeting; nullptr if refused. */
inline uct_ep_h ep_to(uct_iface_h iface, const uint8_t *dev_addr, const uint8_t *iface_addr)
{
    uct_ep_params_t params = {};
    uct_ep_h ep            = nullptr;
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = iface;
    params.dev_addr   = (const uct_device_addr_t*)dev_addr;
    params.iface_addr = (const uct_iface_addr_t*)iface_addr;
    return (uct_ep_create(&params, &ep) == UCS_OK) ? ep : nullptr;
}

/* A field of the interface address at iface_offset in a greeting's addresses, set to value. */
template <typename T> void set_addr_field(std::vector<uint8_t> &addr, size_t iface_offset, size_t field, T value)
{
    memcpy(addr.data() + iface_offset + field, &value, sizeof(value));
}

/* Log lines of warning level or worse (or of `level`) while it lives (that level switched on meanwhile). */
class warnings_captured {
public:
    explicit warnings_captured(ucs_log_level_t level = UCS_LOG_LEVEL_WARN) :
        m_level(ucs_global_opts.log_component.log_level)
    {
        lines()     = &m_lines;
        max_level() = level;
        ucs_global_opts.log_component.log_level = level;
        ucs_log_push_handler(handler);
    }
    ~warnings_captured()
    {
        ucs_log_pop_handler();
        ucs_global_opts.log_component.log_level = m_level;
        lines() = nullptr;
    }
    size_t count(const std::string &text) const
    {
        return std::count_if(m_lines.begin(), m_lines.end(),
                             [&](const std::string &l) { return l.find(text) != std::string::npos; });
    }

private:
    static std::vector<std::string> *&lines()
    {
        static std::vector<std::string> *current = nullptr;
        return current;
    }
    static ucs_log_level_t &max_level()
    {
        static ucs_log_level_t level = UCS_LOG_LEVEL_WARN;
        return level;
    }

    static ucs_log_func_rc_t handler(const char *, unsigned, const char *, ucs_log_level_t level,
                                     const ucs_log_component_config_t *, const char *fmt, va_list ap)
    {
        if ((lines() != nullptr) && (level <= max_level())) {
            char buf[1024];
            va_list aq;
            va_copy(aq, ap);
            vsnprintf(buf, sizeof(buf), fmt, aq);
            va_end(aq);
            lines()->push_back(buf);
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }

    std::vector<std::string> m_lines;
    ucs_log_level_t          m_level;
};

/* CAP_SYS_PTRACE out of the calling thread's effective set while it lives (root may read any process otherwise;
 * threads made before keep theirs). */
class without_ptrace_capability {
public:
    without_ptrace_capability() { m_changed = set(false); }
    ~without_ptrace_capability()
    {
        if (m_changed) {
            set(true);
        }
    }

private:
    static bool set(bool on)
    {
        __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) != 0) {
            return false;
        }
        bool had = data[0].effective & (1u << CAP_SYS_PTRACE);
        if (on) {
            data[0].effective |= (1u << CAP_SYS_PTRACE);
        } else {
            data[0].effective &= ~(1u << CAP_SYS_PTRACE);
        }
        return (syscall(SYS_capset, &hdr, data) == 0) && (on || had);
    }
    bool m_changed;
};

/* A directory with a channel file this process may read and write: an IMEX channel for the mock and the module
 * while it lives (set before a peer starts, which inherits it; test/mock/mock_vmm.c). */
class imex_channel {
public:
    imex_channel()
    {
        char dir[] = "/tmp/cux-imex-XXXXXX";
        if (mkdtemp(dir) != nullptr) {
            m_dir = dir;
            FILE *f = fopen((m_dir + "/channel0").c_str(), "w");
            if (f != nullptr) {
                fclose(f);
            }
            setenv(CUX_IMEX_CHANNELS_DIR_ENV, m_dir.c_str(), 1);
        }
        cux_ipc_fabric_ask_again();
    }
    ~imex_channel()
    {
        withdraw();
        if (!m_dir.empty()) {
            unlink((m_dir + "/channel0").c_str());
            rmdir(m_dir.c_str());
        }
    }
    /* This process has no channel from now on (a peer started before keeps its own). */
    void withdraw()
    {
        unsetenv(CUX_IMEX_CHANNELS_DIR_ENV);
        cux_ipc_fabric_ask_again();
    }

private:
    std::string m_dir;
};

class ipc_transport : public transport_test {
protected:
    ipc_transport() : transport_test("cuda_ipc", "cuda_ipc", false) {}

    void SetUp() override
    {
        transport_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        start_peer();
    }

    void TearDown() override
    {
        destroy_ep();
        m_peer.reset();
        transport_test::TearDown();
    }

    /* own_pid_namespace: the peer runs as pid 1 of a PID namespace of its own (ipc_peer) */
    void start_peer(const char *visible_devices = nullptr, bool own_pid_namespace = false)
    {
        destroy_ep();
        m_peer.reset(new ipc_peer(visible_devices, own_pid_namespace));
        ASSERT_TRUE(m_peer->alive());
        peer_msg &hello = m_hello;
        hello = m_peer->greeting();
        ASSERT_EQ(0, hello.status) << "peer did not start";
        ASSERT_EQ(peer_op::hello, hello.op);
        uct_ep_params_t params = {};
        params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                            UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface      = m_iface;
        params.dev_addr   = (uct_device_addr_t*)hello.blob;
        params.iface_addr = (uct_iface_addr_t*)(hello.blob + hello.a);
        ASSERT_TRUE(uct_iface_is_reachable(m_iface, params.dev_addr, params.iface_addr));
        ASSERT_EQ(UCS_OK, uct_ep_create(&params, &m_ep));
    }

    void destroy_ep()
    {
        if (m_ep != nullptr) {
            uct_ep_destroy(m_ep);
            m_ep = nullptr;
        }
    }

    struct remote_buf {
        uint64_t          addr;
        uct_rkey_bundle_t rkey;
    };

    remote_buf remote_alloc(size_t size, int device, uint64_t seed, uint64_t kind = alloc_legacy)
    {
        return remote_alloc_on(*m_peer, size, device, seed, kind);
    }

    /* The same, on another peer process */
    remote_buf remote_alloc_on(ipc_peer &peer, size_t size, int device, uint64_t seed, uint64_t kind)
    {
        peer_msg req = {};
        remote_buf rb = {};
        req.op = peer_op::alloc; req.a = size; req.b = device; req.c = seed; req.d = kind;
        peer_msg reply = peer.call(req);
        EXPECT_EQ(UCS_OK, reply.status) << "peer could not allocate " << size << " bytes on device " << device;
        if (reply.status == UCS_OK) {
            rb.addr = reply.a;
            EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
        }
        return rb;
    }

    void remote_free(remote_buf &rb)
    {
        peer_msg req = {};
        req.op = peer_op::free; req.a = rb.addr;
        EXPECT_EQ(UCS_OK, m_peer->call(req).status);
        uct_rkey_release(m_component, &rb.rkey);
    }

    /* The key this process's memory domain packs for [dptr, dptr + size), registered meanwhile (deregistered
     * before it returns): its kind says how a peer would import the memory. */
    cux_ipc_rkey_t own_key(CUdeviceptr dptr, size_t size)
    {
        std::vector<uint8_t> packed(4096);
        cux_ipc_rkey_t key = {};
        uct_mem_h memh;
        if (uct_md_mem_reg(m_md, (void*)dptr, size, UCT_MD_MEM_ACCESS_ALL, &memh) != UCS_OK) {
            ADD_FAILURE() << "registration of " << size << " bytes failed";
            return key;
        }
        EXPECT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, packed.data()));
        memcpy(&key, packed.data(), sizeof(key));
        EXPECT_EQ(UCS_OK, uct_md_mem_dereg(m_md, memh));
        return key;
    }

    int32_t remote(peer_op op, uint64_t addr, size_t size, uint64_t seed)
    {
        peer_msg req = {};
        req.op = op; req.a = addr; req.b = size; req.c = seed;
        return m_peer->call(req).status;
    }

    ucs_status_t zcopy(bool put, void *local, size_t size, uint64_t raddr, uct_rkey_t rkey)
    {
        uct_iov_t iov = {local, size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = put ? uct_ep_put_zcopy(m_ep, &iov, 1, raddr, rkey, &comp.comp) :
                                    uct_ep_get_zcopy(m_ep, &iov, 1, raddr, rkey, &comp.comp);
        return (status == UCS_INPROGRESS) ? wait(&comp.comp) : status;
    }

    /* put our data (seed) into the remote buffer and check it there; then get the peer's data (seed + 1) back */
    void round_trip(buffer &local, const remote_buf &rb, size_t size, uint64_t seed)
    {
        local.write(pattern(seed, size));
        ASSERT_EQ(UCS_OK, zcopy(true, local.ptr(), size, rb.addr, rb.rkey.rkey));
        EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, seed)) << "put data mismatch";
        local.write(std::vector<uint8_t>(size, 0xa5));
        ASSERT_EQ(0, remote(peer_op::fill, rb.addr, size, seed + 1));
        ASSERT_EQ(UCS_OK, zcopy(false, local.ptr(), size, rb.addr, rb.rkey.rkey));
        EXPECT_TRUE(local.read() == pattern(seed + 1, size)) << "get data mismatch";
    }

    struct counters {
        unsigned long regions, hits, misses, stale, evictions;
        size_t        size;
    };

    counters cache()
    {
        counters c;
        cux_ipc_cache_counters(&c.regions, &c.size, &c.hits, &c.misses, &c.stale, &c.evictions);
        return c;
    }

    std::unique_ptr<ipc_peer> m_peer;
    peer_msg                  m_hello = {}; /* the peer's device and interface addresses */
};

} // namespace cux_test

#endif
