/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Issue 47: peers on other hosts of one multi-node NVLink domain. Two "hosts" on one machine: the peer says it runs
 * on another (test/preload/other_host.c answers its ucs_get_system_id) and lives in a PID namespace of its own, so
 * that nothing the kernel shows here names it; both see an IMEX channel (a file, test/mock/mock_vmm.c) and the mock
 * NVML's word on their GPUs' fabric (MOCK_NVML_FABRIC). The mock driver imports fabric handles across processes and
 * namespaces as the driver does within an IMEX domain. What may cross, and what is refused: docs/threat-model.md,
 * "Fabric handles".
 */
#include "ipc_transport.h"

#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "driver/cux_nvml.h"
}

using namespace cux_test;

namespace {

const char *const our_fabric   = "completed:7:0123456789abcdef0123456789abcdef";
const char *const other_host   = "00c0ffee00c0ffee";

/* Variables set while it lives, as they were before afterwards. */
class scoped_env {
public:
    ~scoped_env()
    {
        for (auto it = m_saved.rbegin(); it != m_saved.rend(); ++it) {
            if (it->had) {
                setenv(it->name.c_str(), it->value.c_str(), 1);
            } else {
                unsetenv(it->name.c_str());
            }
        }
    }
    void set(const std::string &name, const std::string &value) { set(name, value.c_str()); }
    void set(const std::string &name, const char *value)
    {
        const char *old = getenv(name.c_str());
        m_saved.push_back({name, old != nullptr, (old != nullptr) ? old : ""});
        if (value != nullptr) {
            setenv(name.c_str(), value, 1);
        } else {
            unsetenv(name.c_str());
        }
    }

private:
    struct saved {
        std::string name;
        bool        had;
        std::string value;
    };
    std::vector<saved> m_saved;
};

/* How the peer is started. */
struct peer_setup {
    bool        other_host       = true;       /* it says it runs on another host */
    bool        own_namespace    = true;       /* in a PID namespace of its own */
    const char *fabric           = our_fabric; /* MOCK_NVML_FABRIC for it */
    bool        channel          = true;       /* it sees the IMEX channel */
};

class ipc_hosts : public ipc_transport {
protected:
    void SetUp() override
    {
        if (!using_mock_driver()) {
            GTEST_SKIP() << "no multi-node NVLink domain on this host: the mock driver plays two hosts of one";
        }
        if (access(build_path("test/.libs/libmocknvml.so").c_str(), R_OK) ||
            access(build_path("test/.libs/libcux_other_host.so").c_str(), R_OK)) {
            GTEST_SKIP() << "the mock NVML or the other-host preload is not built here";
        }
        if (!can_make_pid_namespace()) {
            GTEST_SKIP() << "a peer of another host must not be a process the kernel shows here: PID namespaces "
                            "need root";
        }
        m_channel.reset(new imex_channel());
        m_env.set("MOCK_NVML_FABRIC", our_fabric);
        m_env.set(CUX_NVML_PATH_ENV, build_path("test/.libs/libmocknvml.so").c_str());
        transport_test::SetUp(); /* the memory domain decides the NVLink domain when it opens */
    }

    void TearDown() override
    {
        ipc_transport::TearDown();
        m_channel.reset();
    }

    /* Starts the peer; true if our interface finds its address reachable (and then m_ep connects to it). */
    bool start_remote_peer(const peer_setup &how = peer_setup())
    {
        destroy_ep();
        {
            scoped_env env;
            if (how.other_host) {
                env.set("LD_PRELOAD", build_path("test/.libs/libcux_other_host.so").c_str());
                env.set("CUX_TEST_SYSTEM_ID", other_host);
                /* a build with AddressSanitizer's runtime as a shared library wants it first in the list */
                const char *asan = getenv("ASAN_OPTIONS");
                env.set("ASAN_OPTIONS", ((asan != nullptr) ? std::string(asan) + ":" : std::string()) +
                                        "verify_asan_link_order=0");
            }
            env.set("MOCK_NVML_FABRIC", how.fabric);
            if (!how.channel) {
                env.set(CUX_IMEX_CHANNELS_DIR_ENV, "/nonexistent");
            }
            m_peer.reset(new ipc_peer(nullptr, how.own_namespace));
        }
        EXPECT_TRUE(m_peer->alive());
        m_hello = m_peer->greeting();
        EXPECT_EQ(0, m_hello.status) << "peer did not start";
        bool reachable = uct_iface_is_reachable(m_iface, dev_addr(), iface_addr());
        m_ep = ep_to(m_iface, m_hello.blob, m_hello.blob + m_hello.a);
        EXPECT_EQ(reachable, m_ep != nullptr) << "reachability and the endpoint disagree";
        return reachable;
    }

    const uct_device_addr_t *dev_addr() const { return (const uct_device_addr_t*)m_hello.blob; }
    const uct_iface_addr_t *iface_addr() const { return (const uct_iface_addr_t*)(m_hello.blob + m_hello.a); }

    cux_ipc_iface_addr_t peer_address() const
    {
        cux_ipc_iface_addr_t addr;
        cux_ipc_addr_unpack(&addr, iface_addr(), SIZE_MAX);
        return addr;
    }

    /* The peer's buffer of a kind: its address and packed key. */
    peer_msg peer_alloc(size_t size, uint64_t seed, uint64_t kind)
    {
        peer_msg req = {};
        req.op = peer_op::alloc; req.a = size; req.b = 0; req.c = seed; req.d = kind;
        return m_peer->call(req);
    }

    /* Frees a buffer of a peer (the fixture's by default). */
    void peer_free(uint64_t addr, ipc_peer *peer = nullptr)
    {
        peer_msg req = {};
        req.op = peer_op::free; req.a = addr;
        EXPECT_EQ(UCS_OK, ((peer != nullptr) ? peer : m_peer.get())->call(req).status);
    }

    static cux_ipc_rkey_t key_of(const peer_msg &reply)
    {
        cux_ipc_rkey_t key;
        memcpy(&key, reply.blob, sizeof(key));
        return key;
    }

    uct_iface_attr_t iface_attr()
    {
        uct_iface_attr_t attr;
        EXPECT_EQ(UCS_OK, uct_iface_query(m_iface, &attr));
        return attr;
    }

    std::unique_ptr<imex_channel> m_channel;
    scoped_env                    m_env;
};

} // namespace

TEST_F(ipc_hosts, a_peer_on_another_host_of_our_domain_is_reached_through_fabric_handles)
{
    uct_iface_attr_t attr = iface_attr();
    EXPECT_EQ(sizeof(cux_ipc_iface_addr_t), attr.iface_addr_len) << "our address names our NVLink domain";
    EXPECT_EQ((uint64_t)CUX_IFACE_FLAG_INTER_NODE, attr.cap.flags & CUX_IFACE_FLAG_INTER_NODE)
        << "UCP (1.18+) is told cuda_ipc reaches other hosts";
    ASSERT_TRUE(start_remote_peer());
    EXPECT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, peer_address().magic);

    for (uint64_t kind : {(uint64_t)alloc_vmm_fabric, (uint64_t)alloc_vmm_fabric_fd, (uint64_t)alloc_pool_fabric}) {
        SCOPED_TRACE((kind == alloc_vmm_fabric) ? "fabric handle alone" :
                     (kind == alloc_vmm_fabric_fd) ? "descriptor and fabric handle" : "a fabric pool");
        const size_t size = 2 << 20;
        peer_msg reply    = peer_alloc(size, 60 + kind, kind);
        ASSERT_EQ(UCS_OK, reply.status);
        cux_ipc_rkey_t key = key_of(reply);
        EXPECT_TRUE(cux_ipc_rkey_crosses_hosts(&key)) << "a key of memory with the fabric type carries its handle";
        EXPECT_EQ(strtoull(other_host, nullptr, 16), key.system_id);

        remote_buf rb = {reply.a, {}};
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
        long fabric_before = mock_live("fabric calls");
        buffer local(buf_kind::cuda0, size);
        round_trip(local, rb, size, 70 + kind);
        EXPECT_EQ(fabric_before + 1, mock_live("fabric calls")) << "imported once, by its fabric handle";
        /* a message inside the allocation lands at its offset */
        const size_t offset = 4096 + 17, length = 5000;
        buffer part(buf_kind::cuda0, length);
        part.write(pattern(80 + kind, length));
        ASSERT_EQ(UCS_OK, zcopy(true, part.ptr(), length, rb.addr + offset, rb.rkey.rkey));
        buffer back(buf_kind::cuda0, size);
        ASSERT_EQ(UCS_OK, zcopy(false, back.ptr(), size, rb.addr, rb.rkey.rkey));
        std::vector<uint8_t> whole = pattern(71 + kind, size), ours = pattern(80 + kind, length);
        std::copy(ours.begin(), ours.end(), whole.begin() + offset);
        EXPECT_TRUE(back.read() == whole);
        remote_free(rb);
    }
}

/* Their end is out of sight: the endpoint's going drops the mappings its peer's keys made, and the peer's keys
 * cannot be mapped without an endpoint (rkey_ptr). */
TEST_F(ipc_hosts, a_remote_peers_mappings_go_with_its_endpoint_and_need_one)
{
    ASSERT_TRUE(start_remote_peer());
    const size_t size = 1 << 20;
    peer_msg reply    = peer_alloc(size, 91, alloc_vmm_fabric);
    ASSERT_EQ(UCS_OK, reply.status);
    remote_buf rb = {reply.a, {}};
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
    void *mapped = nullptr;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_ptr(m_component, &rb.rkey, rb.addr, &mapped))
        << "no endpoint, no peer: a key of another host is not mapped";

    unsigned long regions = cache().regions;
    buffer local(buf_kind::cuda0, size);
    round_trip(local, rb, size, 92);
    EXPECT_EQ(regions + 1, cache().regions);
    EXPECT_EQ(UCS_OK, uct_ep_check(m_ep, 0, nullptr)); /* nothing to ask of a process of another host */
    destroy_ep();
    EXPECT_EQ(regions, cache().regions) << "its mappings went with the endpoint";
    remote_free(rb);
}

/* Only fabric handles cross hosts: the other kinds' keys of another host are refused at unpack (UCP takes another
 * path at once), and so is a descriptor key that carries no handle. */
TEST_F(ipc_hosts, keys_of_another_host_without_a_fabric_handle_are_refused_at_unpack)
{
    ASSERT_TRUE(start_remote_peer());
    for (uint64_t kind : {(uint64_t)alloc_legacy, (uint64_t)alloc_vmm_fd, (uint64_t)alloc_pool_fd,
                          (uint64_t)alloc_vmm_split}) {
        SCOPED_TRACE("peer memory kind " + std::to_string(kind));
        peer_msg reply = peer_alloc(2 << 20, 100 + kind, kind);
        if (reply.status != UCS_OK) {
            continue; /* a kind this driver does not make */
        }
        cux_ipc_rkey_t key = key_of(reply);
        EXPECT_FALSE(cux_ipc_rkey_crosses_hosts(&key));
        uct_rkey_bundle_t bundle;
        EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, reply.blob, &bundle));
        peer_free(reply.a);
    }
}

/* A key reaches only the process that made it: a fabric key of the remote peer on an endpoint to a peer of this
 * host is refused, a key of this host's peer on the remote peer's endpoint too, and so is a key of a third host
 * whose pid and namespace are the peer's. */
TEST_F(ipc_hosts, a_key_is_used_only_on_an_endpoint_to_its_exporter)
{
    ASSERT_TRUE(start_remote_peer());
    ipc_peer local_peer;
    ASSERT_TRUE(local_peer.alive());
    peer_msg hello = local_peer.greeting();
    ASSERT_EQ(0, hello.status);
    uct_ep_h local_ep = ep_to(m_iface, hello.blob, hello.blob + hello.a);
    ASSERT_NE(nullptr, local_ep);

    const size_t size = 1 << 20;
    peer_msg remote_reply = peer_alloc(size, 111, alloc_vmm_fabric);
    ASSERT_EQ(UCS_OK, remote_reply.status);
    remote_buf remote_rb = {remote_reply.a, {}};
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, remote_reply.blob, &remote_rb.rkey));
    remote_buf local_rb = remote_alloc_on(local_peer, size, 0, 112, alloc_vmm_fd);

    buffer local(buf_kind::cuda0, size);
    uct_iov_t iov = {local.ptr(), size, UCT_MEM_HANDLE_NULL, 0, 1};
    counting_completion comp;
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_ep_put_zcopy(local_ep, &iov, 1, remote_rb.addr, remote_rb.rkey.rkey, &comp.comp))
        << "another host's key on an endpoint to a process of this one";
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_ep_put_zcopy(m_ep, &iov, 1, local_rb.addr, local_rb.rkey.rkey, &comp.comp))
        << "this host's key on an endpoint to a process of another";

    /* a key of a third host's process with the same pid and namespace (pid 1 of a container, or of the initial
     * namespace, is on every host): the host tells them apart, though the driver would open its fabric handle */
    cux_ipc_rkey_t third = key_of(remote_reply);
    third.system_id ^= 0x5a5a;
    cux_ipc_rkey_seal(&third);
    uct_rkey_bundle_t third_bundle;
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &third, &third_bundle));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_ep_put_zcopy(m_ep, &iov, 1, remote_rb.addr, third_bundle.rkey, &comp.comp))
        << "a third host's key with the peer's pid and namespace on an endpoint to the peer";
    uct_rkey_release(m_component, &third_bundle);

    uct_ep_destroy(local_ep);
    peer_free(local_rb.addr, &local_peer);
    uct_rkey_release(m_component, &local_rb.rkey);
    remote_free(remote_rb);
}

/* Memory with both types goes by its descriptor between processes of one host, even where its key carries its
 * fabric handle for other hosts. */
TEST_F(ipc_hosts, a_peer_of_this_host_takes_the_descriptor_of_memory_that_also_has_a_fabric_handle)
{
    start_peer(); /* of this host, as ipc_transport starts it */
    const size_t size = 2 << 20;
    peer_msg reply    = peer_alloc(size, 121, alloc_vmm_fabric_fd);
    ASSERT_EQ(UCS_OK, reply.status);
    cux_ipc_rkey_t key = key_of(reply);
    EXPECT_EQ(CUX_IPC_KIND_VMM_FD, key.kind);
    EXPECT_TRUE(cux_ipc_rkey_crosses_hosts(&key)) << "in a multi-node NVLink domain, for peers on other hosts";
    remote_buf rb = {reply.a, {}};
    ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, reply.blob, &rb.rkey));
    long fabric_before = mock_live("fabric calls");
    buffer local(buf_kind::cuda0, size);
    round_trip(local, rb, size, 122);
    EXPECT_EQ(fabric_before, mock_live("fabric calls")) << "imported by its descriptor";
    remote_free(rb);
}

/* A process of this host (our PID namespace) whose address says it is on another is no peer: it would step around
 * every proof of this host. */
TEST_F(ipc_hosts, a_process_of_this_host_that_says_it_is_on_another_is_no_peer)
{
    peer_setup how;
    how.own_namespace = false;
    EXPECT_FALSE(start_remote_peer(how));
}

/* Another domain, or no domain at all, is not reachable; nor is any other host where the domain is off here. */
TEST_F(ipc_hosts, hosts_outside_our_nvlink_domain_are_not_reachable)
{
    peer_setup other_clique;
    other_clique.fabric = "completed:8:0123456789abcdef0123456789abcdef";
    EXPECT_FALSE(start_remote_peer(other_clique)) << "another clique";
    peer_setup other_cluster;
    other_cluster.fabric = "completed:7:fedcba9876543210fedcba9876543210";
    EXPECT_FALSE(start_remote_peer(other_cluster)) << "another cluster";
    peer_setup no_fabric;
    no_fabric.fabric = "in-progress";
    EXPECT_FALSE(start_remote_peer(no_fabric)) << "a host whose registration has not finished";
    EXPECT_EQ(CUX_IPC_ADDR_MAGIC, peer_address().magic) << "it names no domain";
    peer_setup no_channel;
    no_channel.channel = false;
    EXPECT_FALSE(start_remote_peer(no_channel)) << "a host without an IMEX channel";
}

TEST_F(ipc_hosts, with_mnnvl_off_here_no_other_host_is_reached)
{
    for (const char *why : {"setting", "NVML", "channel"}) {
        SCOPED_TRACE(why);
        scoped_env env;
        std::vector<std::pair<std::string, std::string>> config;
        std::string channel_dir = getenv(CUX_IMEX_CHANNELS_DIR_ENV);
        destroy_ep();
        m_peer.reset();
        if (!strcmp(why, "setting")) {
            config.push_back({"ENABLE_MNNVL", "n"});
        } else if (!strcmp(why, "NVML")) {
            env.set("MOCK_NVML_FABRIC", "failed:3");
        } else {
            m_channel->withdraw();
        }
        open_md(config);
        uct_iface_attr_t attr = iface_attr();
        EXPECT_EQ(CUX_IPC_ADDR_HOST_LEN, attr.iface_addr_len) << "the address of a host outside any domain";
        EXPECT_EQ(0u, attr.cap.flags & CUX_IFACE_FLAG_INTER_NODE);
        /* the peer is in the domain whatever this process decided (its channel is a file; ours is asked once) */
        env.set(CUX_IMEX_CHANNELS_DIR_ENV, channel_dir.c_str());
        env.set("MOCK_NVML_FABRIC", our_fabric);
        EXPECT_FALSE(start_remote_peer());
        EXPECT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, peer_address().magic);
        peer_msg reply = peer_alloc(1 << 20, 131, alloc_vmm_fabric);
        ASSERT_EQ(UCS_OK, reply.status) << "the peer exports its fabric handle";
        uct_rkey_bundle_t bundle;
        EXPECT_EQ(UCS_ERR_UNREACHABLE, uct_rkey_unpack(m_component, reply.blob, &bundle));
        peer_free(reply.a);
    }
}

/* UCX_CUDA_IPC_ENABLE_MNNVL=y where there is no domain: one error line says why; cuda_ipc goes on within the
 * host. */
TEST_F(ipc_hosts, mnnvl_asked_for_where_there_is_none_says_why_once)
{
    scoped_env env;
    env.set("MOCK_NVML_FABRIC", "in-progress");
    warnings_captured logged;
    open_md({{"ENABLE_MNNVL", "y"}});
    EXPECT_EQ(1u, logged.count("UCX_CUDA_IPC_ENABLE_MNNVL=y, but GPU 0's NVLink fabric is pending"));
    EXPECT_EQ(CUX_IPC_ADDR_HOST_LEN, iface_attr().iface_addr_len);
    start_peer(); /* a peer of this host is reached as ever */
}

/* An address whose magic claims the domain part, in fewer bytes than that part needs (where UCT tells the length,
 * 1.18+), is no peer's: nothing is read past it. */
TEST(ipc_hosts_address, an_address_shorter_than_its_magic_claims_is_no_peers)
{
    cux_ipc_iface_addr_t full = {}, got;
    full.magic  = CUX_IPC_ADDR_MAGIC_DOMAIN;
    full.pid    = 42;
    full.clique = 7;
    std::vector<uint8_t> packed((const uint8_t*)&full, (const uint8_t*)&full + sizeof(full));
    cux_ipc_addr_unpack(&got, packed.data(), sizeof(full));
    EXPECT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, got.magic);
    EXPECT_EQ(7u, got.clique);
    packed.resize(CUX_IPC_ADDR_HOST_LEN);
    cux_ipc_addr_unpack(&got, packed.data(), packed.size());
    EXPECT_EQ(0u, got.magic);
    cux_ipc_addr_unpack(&got, packed.data(), CUX_IPC_ADDR_HOST_LEN - 1);
    EXPECT_EQ(0u, got.magic);
}
