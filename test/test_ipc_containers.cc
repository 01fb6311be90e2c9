/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_ipc between containers (UCX_CUDA_IPC_SOCKET_DIR): peers of other PID namespaces asked over a socket
 * (issue 36), who answers there as the kernel says, and what a mapping proven over a connection serves (issue 45,
 * the fourth review's probes: ../shared/probes/ipc-review-4-probes.diff). Tests that put a peer in a PID
 * namespace of its own need root (unshare) and skip without it.
 */
#include "ipc_transport.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include <ucs/sys/sys.h>
#include "base/cux_fd_passing.h"
#include "ipc/import/cux_ipc_cache.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/cux_ipc_ep.h"
#include "ipc/import/cux_ipc_import.h"
#include "ipc/import/cux_ipc_proof.h"
#include "ipc/import/cux_ipc_proof_channel.h"
#include "ipc/common/cux_ipc_pidfs.h"
#include "ipc/common/cux_ipc_rkey.h"
}

using namespace cux_test;

namespace {

std::string socket_path(const std::string &dir, uint64_t token)
{
    char name[64];
    snprintf(name, sizeof(name), "/cuda-ipc-%016llx", (unsigned long long)token);
    return dir + name;
}

/* A connection to the socket of token in dir, its replies waited for up to 10 s; -1 if refused. */
int connect_to(const std::string &dir, uint64_t token)
{
    struct sockaddr_un sa = {};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", socket_path(dir, token).c_str());
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends a message with n descriptors (each fd) attached. */
void send_with_fds(int conn, const void *buf, size_t len, const int *fds, int n)
{
    union {
        struct cmsghdr align;
        char           buf[CMSG_SPACE(32 * sizeof(int))];
    } control = {};
    struct iovec iov  = {(void*)buf, len};
    struct msghdr msg = {};
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;
    if (n > 0) {
        msg.msg_control      = control.buf;
        msg.msg_controllen   = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level     = SOL_SOCKET;
        cmsg->cmsg_type      = SCM_RIGHTS;
        cmsg->cmsg_len       = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(cmsg), fds, n * sizeof(int));
    }
    (void)!sendmsg(conn, &msg, MSG_NOSIGNAL);
}

/* What a process of our uid serving a socket in the directory answers (it need not run the module at all). */
struct fake_server {
    cux_ipc_iface_addr_t claim;     /* HELLO: answers the challenge for this address (its secret known) */
    bool                 prove_ok;  /* PROVE: every key held */
    int                  take_fd;   /* TAKE_FD: this descriptor (a refusal when -1) */
    int                  extra_fds; /* descriptors attached to every reply (0: none) */
    bool                 own_pid_namespace; /* runs as pid 1 of a PID namespace of its own (root) */
    bool                 guesses;   /* HELLO: answers without the secret (a stranger that found the socket) */
    bool                 nodump;    /* non-dumpable: a process without CAP_SYS_PTRACE may not read its namespace */
    bool                 itself;    /* the claim names its own pid, start time and pidfs inode */
    int                  pid_offset; /* with itself and own_pid_namespace: the claim names its own namespace, and
                                        the pid of another process of it (its own plus this) */
    int                  span_pieces; /* SPAN: this many pieces (0: a refusal) */
};

/* A child process listening as token in dir and answering as told; its pid (the outer one where it runs in a
 * namespace of its own), or -1. *claimed: the address it answers for. */
pid_t start_fake_server(const std::string &dir, uint64_t token, const fake_server &how,
                        cux_ipc_iface_addr_t *claimed = nullptr)
{
    int ready[2];
    if (pipe(ready) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test */
        if (how.nodump) {
            prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
        if (how.own_pid_namespace) {
            enter_own_pid_namespace();
        }
        struct sockaddr_un sa = {};
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", socket_path(dir, token).c_str());
        int fd  = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        bool ok = (fd >= 0) && (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) && (listen(fd, 64) == 0);
        int nul = open("/dev/null", O_RDONLY);
        fake_server me = how;
        if (how.itself) {
            struct stat ns;
            me.claim.pid        = getpid() + how.pid_offset;
            me.claim.start_time = ucs_sys_get_proc_create_time(getpid());
            me.claim.process    = cux_ipc_own_pidfs_inode();
            if (how.own_pid_namespace && (stat("/proc/self/ns/pid", &ns) == 0)) {
                me.claim.pid_ns = (uint64_t)ns.st_ino;
            }
        }
        (void)!write(ready[1], ok ? "y" : "n", 1);
        (void)!write(ready[1], &me.claim, sizeof(me.claim));
        for (;;) {
            int conn = accept(fd, nullptr, nullptr);
            if (conn < 0) {
                continue;
            }
            cux_ipc_channel_request_t req;
            while (recv(conn, &req, sizeof(req), 0) == (ssize_t)sizeof(req)) {
                cux_ipc_channel_reply_t reply = {};
                size_t len  = CUX_IPC_CHANNEL_REPLY_HEADER;
                int fds[4]  = {nul, nul, nul, nul}, n = how.extra_fds;
                reply.magic  = CUX_IPC_CHANNEL_MAGIC;
                reply.seq    = req.seq;
                reply.status = UCS_ERR_UNREACHABLE;
                if (req.op == CUX_IPC_CHANNEL_HELLO) {
                    reply.status = UCS_OK;
                    cux_ipc_iface_addr_t known = me.claim;
                    known.secret = how.guesses ? 0 : known.secret;
                    reply.proof  = cux_ipc_proof_hello_hash(&known, req.hello.nonce);
                    len         += sizeof(reply.proof);
                } else if ((req.op == CUX_IPC_CHANNEL_SPAN) && (how.span_pieces > 0)) {
                    reply.status = UCS_OK;
                    for (int i = 0; i < how.span_pieces; ++i) {
                        reply.piece[i].base   = (uint64_t)i << 21;
                        reply.piece[i].length = 2 << 20;
                    }
                    len += how.span_pieces * sizeof(reply.piece[0]);
                } else if ((req.op == CUX_IPC_CHANNEL_PROVE) && how.prove_ok) {
                    reply.status = UCS_OK;
                } else if ((req.op == CUX_IPC_CHANNEL_TAKE_FD) && (how.take_fd >= 0)) {
                    reply.status = UCS_OK;
                    fds[0]       = how.take_fd;
                    n            = (n > 0) ? n : 1;
                }
                send_with_fds(conn, &reply, len, fds, n);
            }
            close(conn);
        }
    }
    close(ready[1]);
    char answer = 0;
    cux_ipc_iface_addr_t claim;
    bool ok = (read(ready[0], &answer, 1) == 1) && (answer == 'y') &&
              (read(ready[0], &claim, sizeof(claim)) == (ssize_t)sizeof(claim));
    close(ready[0]);
    if (ok && (claimed != nullptr)) {
        *claimed = claim;
    }
    if (!ok && (pid > 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return -1;
    }
    return pid;
}

void stop_fake_server(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
}

/* While it lives, the proof sees the kernel as how says (cux_ipc_proof_channel.h): listeners not shown here, as
 * between two containers (CUX_IPC_TEST_UNSHOWN: bound to their pidfd's inode; ..._UNSHOWN_NO_PIDFS: to their
 * connection), or shown by a kernel without pidfs (CUX_IPC_TEST_NO_PIDFS): a test process cannot stand beside
 * its peer's namespace nor run on an older kernel. */
class kernel_seen_as {
public:
    explicit kernel_seen_as(int flags) { cux_ipc_proof_channel_test_kernel(flags); }
    ~kernel_seen_as() { cux_ipc_proof_channel_test_kernel(CUX_IPC_TEST_KERNEL_AS_IS); }
};

/* This process and its peers with UCX_CUDA_IPC_SOCKET_DIR naming a directory of the test's own, as two containers
 * mount one. This process listens there too. */
class ipc_channel : public ipc_transport {
protected:
    void SetUp() override
    {
        char dir[] = "/tmp/cux-sockets-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        m_dir = dir;
        setenv("UCX_CUDA_IPC_SOCKET_DIR", m_dir.c_str(), 1);
        ipc_transport::SetUp();
    }

    void TearDown() override
    {
        ipc_transport::TearDown();
        unsetenv("UCX_CUDA_IPC_SOCKET_DIR");
        run_command("rm -rf " + m_dir);
    }

    /* The peer's interface address (the fixture's, or the contained one start_peer made). */
    cux_ipc_iface_addr_t peer_addr() const
    {
        cux_ipc_iface_addr_t addr;
        cux_ipc_addr_unpack(&addr, m_hello.blob + m_hello.a, SIZE_MAX);
        return addr;
    }

    /* The greeting's device and interface addresses with the interface address changed by f. */
    template <typename F> std::vector<uint8_t> forged_addresses(F f) const
    {
        std::vector<uint8_t> out(m_hello.blob, m_hello.blob + m_hello.a + m_hello.b);
        cux_ipc_iface_addr_t addr = peer_addr();
        f(addr);
        memcpy(out.data() + m_hello.a, &addr, cux_ipc_addr_length(&addr));
        return out;
    }

    static cux_ipc_iface_addr_t iface_addr_of(const std::vector<uint8_t> &addresses, size_t at)
    {
        cux_ipc_iface_addr_t addr;
        cux_ipc_addr_unpack(&addr, addresses.data() + at, SIZE_MAX);
        return addr;
    }

    /* A fake server on token that serves the peer's address (naming that token) and answers as how says is neither
     * reachable nor given an endpoint. */
    void expect_refused_under_the_peers_address(uint64_t token, fake_server how)
    {
        std::vector<uint8_t> forged = forged_addresses([&](cux_ipc_iface_addr_t &a) { a.channel = token; });
        how.claim    = iface_addr_of(forged, m_hello.a);
        pid_t server = start_fake_server(m_dir, token, how);
        ASSERT_GT(server, 0);
        EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)forged.data(),
                                            (const uct_iface_addr_t*)(forged.data() + m_hello.a)));
        EXPECT_EQ(nullptr, ep_to(m_iface, forged.data(), forged.data() + m_hello.a));
        stop_fake_server(server);
    }

    ucs_status_t zcopy_on(uct_ep_h ep, bool put, void *local, size_t size, uint64_t raddr, uct_rkey_t rkey)
    {
        uct_iov_t iov = {local, size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = put ? uct_ep_put_zcopy(ep, &iov, 1, raddr, rkey, &comp.comp) :
                                    uct_ep_get_zcopy(ep, &iov, 1, raddr, rkey, &comp.comp);
        return (status == UCS_INPROGRESS) ? wait(&comp.comp) : status;
    }

    std::string m_dir;
};

/* The same, where each test starts a peer that runs as pid 1 of a PID namespace of its own (root only). */
class ipc_containers : public ipc_channel {
protected:
    void SetUp() override
    {
        ipc_channel::SetUp();
        if (!IsSkipped() && !HasFatalFailure() && !can_make_pid_namespace()) {
            GTEST_SKIP() << "makes a PID namespace for the peer (unshare: root)";
        }
    }

    /* The contained peer's interface address. */
    cux_ipc_iface_addr_t contained_addr() const { return peer_addr(); }
};

} // namespace

/* A peer in a PID namespace of its own proves its address over its socket, and buffers of every kind it exports
 * (a legacy handle, a VMM descriptor it hands over the socket, a span of two allocations whose table it sends, a
 * shareable pool's descriptor and pointer)
 * carry the data both ways; the endpoint holds no pid of it. */
TEST_F(ipc_containers, a_contained_peer_proves_itself_over_its_socket_and_every_kind_of_buffer_carries_data)
{
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    const cux_ipc_iface_addr_t addr = contained_addr();
    EXPECT_EQ(1, addr.pid) << "the peer's pid in its own namespace";
    EXPECT_NE(0u, addr.channel) << "its address names its socket";
    EXPECT_NE(cux_ipc_pid_namespace(), addr.pid_ns);

    const size_t size = 4 << 20;
    for (uint64_t kind : {alloc_legacy, alloc_vmm_fd, alloc_vmm_split, alloc_pool_fd}) {
        SCOPED_TRACE("alloc kind " + std::to_string(kind));
        buffer local(buf_kind::cuda0, size);
        remote_buf rb = remote_alloc(size, 0, 40 + kind, kind);
        ASSERT_NE(0u, rb.addr);
        const cux_ipc_rkey_t *key = &((const cux_ipc_unpacked_rkey_t*)rb.rkey.rkey)->key;
        EXPECT_EQ(addr.pid_ns, key->pid_ns) << "the key names the exporter's namespace";
        round_trip(local, rb, size, 50 + kind);
        remote_free(rb);
    }
}

/* Fabric-only memory of a contained peer (issue 47): its key is proven over the socket like any other, and then
 * imported from its fabric bytes, which need no descriptor and no pid of the peer. */
TEST_F(ipc_containers, a_contained_peers_fabric_memory_is_proven_over_its_socket)
{
    if (!using_mock_driver()) {
        GTEST_SKIP() << "the mock's IMEX channel (a host with a real one makes its own fabric memory)";
    }
    imex_channel channel;
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    const size_t size = 2 << 20;
    buffer local(buf_kind::cuda0, size);
    for (uint64_t kind : {(uint64_t)alloc_vmm_fabric, (uint64_t)alloc_pool_fabric}) {
        SCOPED_TRACE((kind == alloc_vmm_fabric) ? "VMM memory" : "a fabric pool's memory");
        remote_buf rb = remote_alloc(size, 0, 81 + kind, kind);
        ASSERT_NE(0u, rb.addr);
        const cux_ipc_rkey_t *key = &((const cux_ipc_unpacked_rkey_t*)rb.rkey.rkey)->key;
        EXPECT_EQ((kind == alloc_vmm_fabric) ? CUX_IPC_KIND_VMM_FABRIC : CUX_IPC_KIND_POOL_FABRIC, key->kind);
        round_trip(local, rb, size, 82 + kind);
        remote_free(rb);
    }
}

/* The contained peer answers each key's proof itself: a key it did not hand out (made up, or re-sealed with another
 * allocation's id), or one naming its pid in our namespace, is refused; its true keys still work. */
TEST_F(ipc_containers, keys_a_contained_peer_did_not_hand_out_are_refused)
{
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    const size_t size = 65536;
    buffer local(buf_kind::cuda0, size);
    remote_buf rb = remote_alloc(size, 0, 61, alloc_legacy);
    ASSERT_NE(0u, rb.addr);
    const cux_ipc_rkey_t held = *(const cux_ipc_rkey_t*)rb.rkey.rkey;

    cux_ipc_rkey_t made_up = held, other_id = held, our_ns = held;
    made_up.secret ^= 1;
    other_id.buffer_id += 1;
    our_ns.pid_ns = cux_ipc_pid_namespace();
    for (cux_ipc_rkey_t *forged : {&made_up, &other_id, &our_ns}) {
        cux_ipc_rkey_seal(forged);
        uct_rkey_bundle_t bundle;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, forged, &bundle));
        EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy(true, local.ptr(), size, rb.addr, bundle.rkey));
        uct_rkey_release(m_component, &bundle);
    }
    round_trip(local, rb, size, 62);
    remote_free(rb);
}

/* A peer whose socket is not in the directory this process looks in (another directory, as a container that
 * mounts another one) is unreachable at once, said once with the setting; so is one served by a process of
 * another uid under the peer's socket name. */
TEST_F(ipc_containers, a_peer_out_of_reach_of_our_directory_or_of_another_user_is_refused_at_once)
{
    char other[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(other));
    setenv("UCX_CUDA_IPC_SOCKET_DIR", other, 1);
    ipc_peer elsewhere(nullptr, true);
    setenv("UCX_CUDA_IPC_SOCKET_DIR", m_dir.c_str(), 1);
    peer_msg hello = elsewhere.greeting();
    ASSERT_EQ(0, hello.status) << "the peer in its own PID namespace did not start";
    {
        warnings_captured warnings;
        for (int i = 0; i < 3; ++i) {
            EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)hello.blob,
                                                (const uct_iface_addr_t*)(hello.blob + hello.a)));
            EXPECT_EQ(nullptr, ep_to(m_iface, hello.blob, hello.blob + hello.a));
        }
        EXPECT_EQ(1u, warnings.count("SOCKET_DIR")) << "said once, with the setting";
    }
    elsewhere.stop();
    run_command(std::string("rm -rf ") + other);

    /* a process of another uid listening under a name of our directory, named by an otherwise true address,
     * which it answers with as the true peer would */
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    int ready[2];
    ASSERT_EQ(0, pipe(ready));
    const uint64_t token = 0x5eedull;
    std::vector<uint8_t> forged(m_hello.blob, m_hello.blob + m_hello.a + m_hello.b);
    set_addr_field(forged, m_hello.a, offsetof(cux_ipc_iface_addr_t, channel), token);
    pid_t impostor = fork();
    if (impostor == 0) {
        struct sockaddr_un sa = {};
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016llx", m_dir.c_str(), (unsigned long long)token);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        /* SO_PEERCRED gives the credentials the listener had at listen() */
        bool ok = (fd >= 0) && (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) && (chmod(sa.sun_path, 0666) == 0) &&
                  (setgid(65534) == 0) && (setuid(65534) == 0) && (listen(fd, 8) == 0);
        (void)!write(ready[1], ok ? "y" : "n", 1);
        for (;;) {
            cux_ipc_channel_request_t req;
            cux_ipc_channel_reply_t reply = {};
            int conn = accept(fd, nullptr, nullptr);
            if ((conn >= 0) && (recv(conn, &req, sizeof(req), 0) == (ssize_t)sizeof(req))) {
                cux_ipc_iface_addr_t addr;
                cux_ipc_addr_unpack(&addr, forged.data() + m_hello.a, SIZE_MAX);
                reply.magic  = CUX_IPC_CHANNEL_MAGIC;
                reply.seq    = req.seq;
                reply.status = UCS_OK;
                reply.proof  = cux_ipc_proof_hello_hash(&addr, req.hello.nonce);
                (void)!send(conn, &reply, CUX_IPC_CHANNEL_REPLY_HEADER + sizeof(reply.proof), 0);
            }
            if (conn >= 0) {
                close(conn);
            }
        }
    }
    char answer = 0;
    ASSERT_EQ(1, read(ready[0], &answer, 1));
    ASSERT_EQ('y', answer) << "the impostor could not listen as uid 65534";
    for (int how_unshown : {CUX_IPC_TEST_KERNEL_AS_IS, CUX_IPC_TEST_UNSHOWN_NO_PIDFS}) {
        /* 2: as between two containers, where the kernel shows no pid of the listener and no pidfs inode: the
         * listener's uid is then all that refuses it (it answers the challenge) */
        SCOPED_TRACE("listeners unshown: " + std::to_string(how_unshown));
        kernel_seen_as kernel(how_unshown);
        EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)forged.data(),
                                            (const uct_iface_addr_t*)(forged.data() + m_hello.a)));
        EXPECT_EQ(nullptr, ep_to(m_iface, forged.data(), forged.data() + m_hello.a));
    }
    kill(impostor, SIGKILL);
    waitpid(impostor, nullptr, 0);
    close(ready[0]);
    close(ready[1]);
}

/* A peer that cannot listen in its directory (it does not exist there) names no socket in its address, rather than
 * one nobody serves, and is refused at once with that cause. */
TEST_F(ipc_containers, a_peer_that_cannot_listen_names_no_socket)
{
    setenv("UCX_CUDA_IPC_SOCKET_DIR", "/nonexistent/cux-sockets", 1);
    ipc_peer unlistening(nullptr, true);
    setenv("UCX_CUDA_IPC_SOCKET_DIR", m_dir.c_str(), 1);
    peer_msg hello = unlistening.greeting();
    ASSERT_EQ(0, hello.status) << "the peer in its own PID namespace did not start";
    cux_ipc_iface_addr_t addr;
    cux_ipc_addr_unpack(&addr, hello.blob + hello.a, SIZE_MAX);
    EXPECT_EQ(0u, addr.channel);
    warnings_captured warnings;
    EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)hello.blob,
                                        (const uct_iface_addr_t*)(hello.blob + hello.a)));
    EXPECT_EQ(1u, warnings.count("has no socket")) << "the cause said";
    unlistening.stop();
}

/* A contained peer that exits: its connection closes, ep_check reports the endpoint to the interface's error
 * handler (no pid of it is looked up here: pid 1 is our init), and destroying the endpoint gives its mappings
 * back. */
TEST_F(ipc_containers, a_contained_peer_that_exits_is_reported_by_ep_check_and_its_mappings_go)
{
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    const long mappings_before = mock_live("mappings");
    const size_t size          = 65536;
    buffer local(buf_kind::cuda0, size);
    remote_buf rb = remote_alloc(size, 0, 71, alloc_legacy);
    round_trip(local, rb, size, 72);
    EXPECT_EQ(UCS_OK, uct_ep_check(m_ep, 0, NULL));
    uct_worker_progress(m_worker);
    EXPECT_TRUE(m_ep_errors.empty()) << "a live peer was reported";

    m_peer->stop();
    EXPECT_EQ(UCS_OK, uct_ep_check(m_ep, 0, NULL));
    for (int i = 0; (i < 1000) && m_ep_errors.empty(); ++i) {
        uct_worker_progress(m_worker);
    }
    ASSERT_EQ(1u, m_ep_errors.size()) << "the peer that exited was not reported";
    EXPECT_EQ(m_ep, m_ep_errors[0].first);
    uct_rkey_release(m_component, &rb.rkey);
    destroy_ep();
    if (using_mock_driver()) {
        EXPECT_EQ(mappings_before, mock_live("mappings")) << "the peer's mapping was kept";
    }
}

/* --- Issue 45: the fourth review's probes, and what it read but did not probe --- */

/* Probe "a process of our namespace claiming another passes a third process's legacy handle": a process of OUR
 * namespace that writes another namespace into an address naming a third process T (T's pid, here the fixture's
 * peer) and its own socket, and answers every challenge and proof, was a peer of another namespace: the channel
 * took pid, namespace and start time from the address, and T's buffer was read and written through it. The kernel
 * shows that listener in our own namespace: no peer of another one, refused at once. */
TEST_F(ipc_channel, a_process_of_our_namespace_that_claims_another_is_no_peer)
{
    const uint64_t token = 0xa4d17e0002ull;
    const size_t size    = 4096;
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = size; req.b = 0; req.c = 401; req.d = alloc_legacy;
    peer_msg reply = m_peer->call(req); /* T: the fixture's peer, in our namespace */
    ASSERT_EQ(UCS_OK, reply.status);
    const uint64_t made_up_ns = cux_ipc_pid_namespace() + 0x1000;
    cux_ipc_rkey_t forged_key;
    memcpy(&forged_key, reply.blob, sizeof(forged_key));
    forged_key.pid_ns = made_up_ns;
    cux_ipc_rkey_seal(&forged_key);

    std::vector<uint8_t> forged = forged_addresses([&](cux_ipc_iface_addr_t &a) {
        a.pid_ns  = made_up_ns;
        a.channel = token;
    });
    fake_server how = {};
    how.claim    = iface_addr_of(forged, m_hello.a);
    how.prove_ok = true;
    how.take_fd  = -1;
    pid_t server = start_fake_server(m_dir, token, how);
    ASSERT_GT(server, 0);

    uct_ep_h ep = ep_to(m_iface, forged.data(), forged.data() + m_hello.a);
    EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)forged.data(),
                                        (const uct_iface_addr_t*)(forged.data() + m_hello.a)));
    EXPECT_EQ(nullptr, ep) << "an endpoint to a made-up namespace served by a process of ours";
    if (ep != nullptr) {
        uct_rkey_bundle_t bundle;
        ASSERT_EQ(UCS_OK, uct_rkey_unpack(m_component, &forged_key, &bundle));
        buffer local(buf_kind::cuda0, size);
        local.write(std::vector<uint8_t>(size, 0xa5));
        EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy_on(ep, false, local.ptr(), size, reply.a, bundle.rkey));
        EXPECT_FALSE(local.read() == pattern(401, size)) << "the third process's buffer was read";
        local.write(pattern(402, size));
        EXPECT_EQ(UCS_ERR_UNREACHABLE, zcopy_on(ep, true, local.ptr(), size, reply.a, bundle.rkey));
        EXPECT_NE(0, remote(peer_op::check, reply.a, size, 402)) << "the third process's buffer was written";
        uct_rkey_release(m_component, &bundle);
        uct_ep_destroy(ep);
    }
    EXPECT_EQ(0, remote(peer_op::check, reply.a, size, 401)) << "the third process's buffer changed";
    stop_fake_server(server);

    /* A process of ours claiming its own pid, where its namespace cannot be read (it is non-dumpable, this thread
     * has no CAP_SYS_PTRACE): the kernel still shows it in our namespace (one level of pids), so it is no peer. */
    fake_server own = how;
    own.nodump      = true;
    own.itself      = true;
    own.claim.channel = token + 1;
    server = start_fake_server(m_dir, token + 1, own);
    ASSERT_GT(server, 0);
    {
        std::vector<uint8_t> itself = forged_addresses([&](cux_ipc_iface_addr_t &a) {
            a            = own.claim;
            a.pid        = server;
            a.start_time = ucs_sys_get_proc_create_time(server);
            int pidfd    = (int)syscall(SYS_pidfd_open, server, 0);
            a.process    = cux_ipc_pidfd_inode(pidfd); /* its own, as it would write it */
            close(pidfd);
        });
        without_ptrace_capability scope;
        EXPECT_EQ(nullptr, ep_to(m_iface, itself.data(), itself.data() + m_hello.a))
            << "a process of our namespace, whose namespace could not be read, taken for a peer of another";
    }
    stop_fake_server(server);
    req = {};
    req.op = peer_op::free; req.a = reply.a;
    m_peer->call(req);
}

/* A process that found a contained peer's socket name (the directory lists them) and serves one of its own under
 * the peer's address without knowing its secret cannot answer the challenge: refused, even where the kernel shows
 * no more of it than its connection. */
TEST_F(ipc_containers, a_listener_that_does_not_know_the_addresss_secret_is_refused)
{
    kernel_seen_as kernel(CUX_IPC_TEST_UNSHOWN_NO_PIDFS);
    start_peer(nullptr, true);
    ASSERT_FALSE(HasFatalFailure());
    fake_server how = {};
    how.prove_ok    = true;
    how.take_fd     = -1;
    how.guesses     = true;
    expect_refused_under_the_peers_address(0xa4d17e0005ull, how);
}

/* A listener the kernel shows in a namespace below ours is the process its address names, or no peer: a process
 * in a PID namespace of its own that serves a socket under a contained peer R's address (which R hands to every
 * peer, secret included) is refused, though it answers the challenge. R itself is bound to its process. */
TEST_F(ipc_containers, a_listener_the_kernel_shows_must_be_the_process_its_address_names)
{
    start_peer(nullptr, true); /* R, pid 1 of a namespace of its own, and m_ep to it */
    ASSERT_FALSE(HasFatalFailure());
    const cux_ipc_peer_t &r = ucs_derived_of(m_ep, cux_ipc_ep_t)->peer;
    EXPECT_EQ(CUX_IPC_OWNER_PROCESS, CUX_IPC_OWNER_KIND(r.owner)) << "R, which the kernel shows, is its process";
    EXPECT_EQ(CUX_IPC_OWNER_PROCESS | contained_addr().start_time, r.owner);

    fake_server how       = {};
    how.prove_ok          = true;
    how.take_fd           = -1;
    how.own_pid_namespace = true; /* pid 1 of another namespace, as R is of its own */
    for (int kernel : {CUX_IPC_TEST_KERNEL_AS_IS, CUX_IPC_TEST_NO_PIDFS}) {
        /* without pidfs the address names no process: its namespace and start time tell the impostor apart */
        SCOPED_TRACE(kernel ? "a kernel without pidfs" : "this kernel");
        kernel_seen_as seen(kernel);
        expect_refused_under_the_peers_address(0xa4d17e0004ull + kernel, how);
    }
}

/* A listener the kernel shows below us is the pid its address names in its namespace: one that names its own
 * namespace, start time and process but another pid of its namespace (a process of a container posing as its
 * neighbour, whose legacy handles carry that pid) is refused, though it answers the challenge for that address. */
TEST_F(ipc_containers, a_listener_the_kernel_shows_must_have_the_pid_its_address_names_in_its_namespace)
{
    const uint64_t token  = 0xa4d17e0006ull;
    fake_server how       = {};
    how.claim             = peer_addr(); /* its secret and device; the rest is the listener's own */
    how.prove_ok          = true;
    how.take_fd           = -1;
    how.own_pid_namespace = true;
    how.itself            = true;
    for (int offset : {0, 1}) {
        SCOPED_TRACE(offset ? "naming pid 2 of its namespace" : "naming itself, pid 1");
        how.pid_offset    = offset;
        how.claim.channel = token + offset;
        cux_ipc_iface_addr_t claim;
        pid_t server = start_fake_server(m_dir, token + offset, how, &claim);
        ASSERT_GT(server, 0);
        ASSERT_NE(cux_ipc_pid_namespace(), claim.pid_ns);
        std::vector<uint8_t> forged = forged_addresses([&](cux_ipc_iface_addr_t &a) { a = claim; });
        uct_ep_h ep = ep_to(m_iface, forged.data(), forged.data() + m_hello.a);
        if (offset == 0) {
            EXPECT_NE(nullptr, ep) << "the listener as its address names it (the test's own check)";
        } else {
            EXPECT_EQ(nullptr, ep) << "a listener naming another pid of its namespace was taken for it";
        }
        if (ep != nullptr) {
            uct_ep_destroy(ep);
        }
        stop_fake_server(server);
    }
}

/* Probe "an impostor of a contained peer poisons the mapping cache for the true peer": mappings were keyed by what
 * an address says (pid, namespace, start time). A same-uid process holding a contained peer R's key and address
 * copies the address with its own socket, answers the challenge (it knows R's secret: R hands its address to its
 * peers), "proves" R's key and hands over a descriptor of other memory (a third process Q's VMM allocation). That
 * mapping then served R's true endpoint: gets from R read Q's memory, puts to R landed in Q's buffer. Where the
 * kernel does not show the listeners (two containers side by side), the address's pidfs inode names R's process,
 * and the impostor is refused; on a kernel without pidfs each listener is bound to its connection: the impostor's
 * mapping serves only the impostor, and its endpoint's end purges nothing of R's. */
TEST_F(ipc_containers, an_impostor_of_a_contained_peer_is_never_served_the_true_peers_mappings)
{
    for (int how_unshown : {CUX_IPC_TEST_UNSHOWN, CUX_IPC_TEST_UNSHOWN_NO_PIDFS}) {
        SCOPED_TRACE(how_unshown == CUX_IPC_TEST_UNSHOWN ? "listeners bound to their pidfd, or their connection" :
                                        "listeners bound to their connection");
        kernel_seen_as kernel(how_unshown);
        start_peer(nullptr, true); /* R, pid 1 of a namespace of its own, and m_ep to it */
        ASSERT_FALSE(HasFatalFailure());
        EXPECT_NE(CUX_IPC_OWNER_PROCESS, CUX_IPC_OWNER_KIND(ucs_derived_of(m_ep, cux_ipc_ep_t)->peer.owner));
        const size_t size = 65536;
        remote_buf rb     = remote_alloc(size, 0, 501, alloc_vmm_fd);
        ASSERT_NE(0u, rb.addr);

        ipc_peer q; /* Q: another process of ours that hands the impostor a descriptor of its memory */
        ASSERT_EQ(0, q.greeting().status);
        peer_msg req = {};
        req.op = peer_op::alloc; req.a = size; req.b = 0; req.c = 502; req.d = alloc_vmm_fd;
        peer_msg qbuf = q.call(req);
        ASSERT_EQ(UCS_OK, qbuf.status);
        req = {};
        req.op = peer_op::export_fd; req.a = qbuf.a;
        int qfd = -1;
        ASSERT_EQ(UCS_OK, q.call_for_fd(req, &qfd).status);
        ASSERT_GE(qfd, 0);

        const uint64_t token = 0xa4d17e0030ull + how_unshown;
        std::vector<uint8_t> forged = forged_addresses([&](cux_ipc_iface_addr_t &a) { a.channel = token; });
        fake_server how = {};
        how.claim       = iface_addr_of(forged, m_hello.a);
        how.prove_ok    = true;
        how.take_fd     = qfd;
        pid_t server    = start_fake_server(m_dir, token, how);
        ASSERT_GT(server, 0);
        close(qfd);

        /* the impostor's mapping of "R's" allocation: Q's memory, which the impostor may hand to its own peers */
        buffer local(buf_kind::cuda0, size);
        uct_ep_h impostor = ep_to(m_iface, forged.data(), forged.data() + m_hello.a);
        if (how_unshown == CUX_IPC_TEST_UNSHOWN) {
            /* the address names R's process by its pidfs inode: another process serving a copy is refused at once */
            EXPECT_EQ(nullptr, impostor) << "a listener that is not the process the address names was taken";
        } else {
            ASSERT_NE(nullptr, impostor) << "a listener the kernel does not show answers for the address it holds";
        }
        if (impostor != nullptr) {
            local.write(std::vector<uint8_t>(size, 0xa5));
            EXPECT_EQ(UCS_OK, zcopy_on(impostor, false, local.ptr(), size, rb.addr, rb.rkey.rkey));
            EXPECT_TRUE(local.read() == pattern(502, size)) << "the impostor's endpoint reaches what it handed over";
        }

        /* now through the true endpoint to R */
        local.write(std::vector<uint8_t>(size, 0xa5));
        EXPECT_EQ(UCS_OK, zcopy(false, local.ptr(), size, rb.addr, rb.rkey.rkey));
        const std::vector<uint8_t> got = local.read();
        EXPECT_TRUE(got == pattern(501, size)) << "a get from the true peer R read "
                                               << ((got == pattern(502, size)) ? "Q's memory (the impostor's mapping)"
                                                                               : "something else");
        local.write(pattern(503, size));
        EXPECT_EQ(UCS_OK, zcopy(true, local.ptr(), size, rb.addr, rb.rkey.rkey));
        EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, 503)) << "a put to the true peer R did not reach R";
        peer_msg check = {};
        check.op = peer_op::check; check.a = qbuf.a; check.b = size; check.c = 503;
        EXPECT_NE(0, q.call(check).status) << "a put to the true peer R landed in Q's buffer";

        /* the impostor's end leaves R's mapping; one bound to its connection goes with it */
        if (impostor != nullptr) {
            const counters before = cache();
            const bool by_connection =
                    CUX_IPC_OWNER_KIND(ucs_derived_of(impostor, cux_ipc_ep_t)->peer.owner) == CUX_IPC_OWNER_CONNECTION;
            EXPECT_TRUE(by_connection);
            uct_ep_destroy(impostor);
            EXPECT_EQ(before.regions - (by_connection ? 1 : 0), cache().regions)
                << "the impostor's mapping outlived its connection";
            EXPECT_EQ(UCS_OK, zcopy(false, local.ptr(), size, rb.addr, rb.rkey.rkey));
            EXPECT_EQ(before.hits + 1, cache().hits) << "R's mapping went with the impostor's endpoint";
        }

        stop_fake_server(server);
        req = {};
        req.op = peer_op::free; req.a = qbuf.a;
        q.call(req);
        q.stop();
        remote_free(rb);
        destroy_ep();
        cux_ipc_cache_purge(&cux_ipc_cache);
    }
}

/* Two endpoints to one contained peer share its mappings where the kernel names its process (a pidfd inode of its
 * own, or its pid here); bound to a connection, each maps for itself, and data goes right either way. Mapping one
 * allocation twice in a process gives the driver's same pointer (legacy handles: counted; pool allocations: not,
 * the first free frees both, HACKING.md): the first endpoint's mappings still work after the second's go. */
TEST_F(ipc_containers, endpoints_to_one_contained_peer_share_its_mappings_where_the_kernel_names_its_process)
{
    for (int how_unshown : {CUX_IPC_TEST_KERNEL_AS_IS, CUX_IPC_TEST_UNSHOWN, CUX_IPC_TEST_UNSHOWN_NO_PIDFS}) {
        SCOPED_TRACE("listeners unshown: " + std::to_string(how_unshown));
        kernel_seen_as kernel(how_unshown);
        start_peer(nullptr, true);
        ASSERT_FALSE(HasFatalFailure());
        const uint64_t owner = ucs_derived_of(m_ep, cux_ipc_ep_t)->peer.owner;
        for (uint64_t kind : {alloc_legacy, alloc_vmm_fd, alloc_pool_fd}) {
            SCOPED_TRACE("alloc kind " + std::to_string(kind));
            uct_ep_h second = ep_to(m_iface, m_hello.blob, m_hello.blob + m_hello.a);
            ASSERT_NE(nullptr, second);
            const bool shared = (owner == ucs_derived_of(second, cux_ipc_ep_t)->peer.owner);
            EXPECT_EQ(CUX_IPC_OWNER_KIND(owner) != CUX_IPC_OWNER_CONNECTION, shared);
            const size_t size = 65536;
            remote_buf rb     = remote_alloc(size, 0, 511 + kind, kind);
            buffer local(buf_kind::cuda0, size);
            round_trip(local, rb, size, 520);
            const counters before = cache();
            local.write(pattern(524, size));
            ASSERT_EQ(UCS_OK, zcopy_on(second, true, local.ptr(), size, rb.addr, rb.rkey.rkey));
            EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, 524));
            EXPECT_EQ(before.hits + (shared ? 1 : 0), cache().hits);
            EXPECT_EQ(before.misses + (shared ? 0 : 1), cache().misses);
            uct_ep_destroy(second); /* bound to its connection: its mapping goes now */
            round_trip(local, rb, size, 530);
            remote_free(rb);
        }
        destroy_ep();
        cux_ipc_cache_purge(&cux_ipc_cache);
    }
}

/* Probe "a span request with a held non-span key sends the exporter's stack": the answer to SPAN was sized by the
 * request's span.count whenever the key was held, whatever its kind; for a pool key those bytes are its export
 * data, and the reply (on the serving thread's stack) went out with up to kilobytes beyond it. Now the reply is
 * sized by the held key, and only a span's has a body. Here this process is the exporter. */
TEST_F(ipc_channel, a_span_request_for_a_held_key_of_another_kind_gets_the_header_alone)
{
    ASSERT_NE(0u, cux_ipc_channel_token()) << "this process does not listen in " << m_dir;
    /* the allocation's descriptor (what the mock writes at bytes 8-11 of its pool data) above 100 */
    std::vector<int> fillers;
    for (int fd = dup(0); (fd >= 0) && (fd < 110); fd = dup(0)) {
        fillers.push_back(fd);
    }
    size_t size = 65536;
    CUdeviceptr dptr;
    ASSERT_EQ(CUDA_SUCCESS, ipc_alloc(0, alloc_pool_fd, &size, &dptr));
    for (int fd : fillers) {
        close(fd);
    }
    uct_mem_h memh;
    ASSERT_EQ(UCS_OK, uct_md_mem_reg(m_md, (void*)dptr, size, UCT_MD_MEM_ACCESS_ALL, &memh));
    cux_ipc_rkey_t key;
    ASSERT_EQ(UCS_OK, uct_md_mkey_pack(m_md, memh, &key));
    ASSERT_EQ(CUX_IPC_KIND_POOL_FD, key.kind);

    int conn = connect_to(m_dir, cux_ipc_channel_token());
    ASSERT_GE(conn, 0);
    cux_ipc_channel_request_t req = {};
    req.magic = CUX_IPC_CHANNEL_MAGIC;
    req.op    = CUX_IPC_CHANNEL_SPAN;
    req.seq   = 7;
    req.key   = key;
    ASSERT_EQ((ssize_t)sizeof(req), send(conn, &req, sizeof(req), 0));
    std::vector<uint8_t> got(1 << 18);
    ssize_t n = recv(conn, got.data(), got.size(), 0);
    close(conn);
    EXPECT_EQ((ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER, n)
        << "a SPAN request for a held pool key (span.count read from its export data: " << key.span.count
        << ") was answered with " << n << " bytes";
    cux_ipc_channel_reply_t reply;
    memcpy(&reply, got.data(), sizeof(reply));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, reply.status);
    EXPECT_EQ(7u, reply.seq);

    uct_md_mem_dereg(m_md, memh);
    ipc_free(0, alloc_pool_fd, dptr, size);
}

/* A span's table over the channel is taken whole or not at all: an answer with fewer pieces than the key has is
 * refused, rather than the rest taken from whatever the reply buffer held. */
TEST_F(ipc_channel, a_span_table_shorter_than_the_key_says_is_refused)
{
    const uint64_t token = 0xa4d17e0007ull;
    cux_ipc_rkey_t key   = {};
    key.kind       = CUX_IPC_KIND_VMM_SPAN;
    key.span.count = 3;
    for (int pieces : {3, 2, 1}) {
        SCOPED_TRACE(std::to_string(pieces) + " pieces of 3");
        fake_server how = {};
        how.take_fd     = -1;
        how.span_pieces = pieces;
        pid_t server    = start_fake_server(m_dir, token + pieces, how);
        ASSERT_GT(server, 0);
        cux_ipc_peer_t peer = {};
        peer.channel        = connect_to(m_dir, token + pieces);
        ASSERT_GE(peer.channel, 0);
        pthread_mutex_init(&peer.channel_lock, nullptr);
        cux_ipc_span_piece_t got[CUX_IPC_SPAN_MAX];
        memset(got, 0xee, sizeof(got));
        EXPECT_EQ((pieces == 3) ? UCS_OK : UCS_ERR_UNREACHABLE, cux_ipc_proof_channel_span(&peer, &key, got));
        if (pieces == 3) {
            EXPECT_EQ(2ull << 21, got[2].base);
        }
        pthread_mutex_destroy(&peer.channel_lock);
        close(peer.channel);
        stop_fake_server(server);
    }
}

/* Probe "a reply with two descriptors leaves one open in the importer": the importer received each reply with room
 * for one descriptor, the kernel installed two, and the second stayed open, unnamed: any same-uid listener an
 * address names leaked one into the importer per reply. Every descriptor beyond the one expected is closed where
 * it arrives, and more than fit refuse the message. */
TEST_F(ipc_channel, descriptors_beyond_the_one_expected_are_closed_where_they_arrive)
{
    const uint64_t token = 0xa4d17e0001ull;
    std::vector<uint8_t> forged = forged_addresses([&](cux_ipc_iface_addr_t &a) {
        a.pid_ns  = cux_ipc_pid_namespace() + 0x1000; /* "another namespace" */
        a.channel = token;
    });
    fake_server how = {};
    how.claim       = iface_addr_of(forged, m_hello.a);
    how.extra_fds   = 2;
    pid_t server    = start_fake_server(m_dir, token, how);
    ASSERT_GT(server, 0);
    const long before = open_descriptors();
    for (int i = 0; i < 8; ++i) {
        (void)uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)forged.data(),
                                     (const uct_iface_addr_t*)(forged.data() + m_hello.a));
    }
    EXPECT_EQ(before, open_descriptors()) << "8 connections, each HELLO answered with two descriptors";
    stop_fake_server(server);

    /* the helper itself, as the module, the mock's broker and the tests' peer use it */
    int sv[2];
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
    int nul = open("/dev/null", O_RDONLY);
    std::vector<int> many(CUX_FD_PASSING_ROOM + 4, nul);
    const long start = open_descriptors();
    char byte = 'x', got = 0;
    int fd    = -2;
    send_with_fds(sv[0], &byte, 1, many.data(), 3);
    EXPECT_EQ(1, cux_fd_passing_recv_upto(sv[1], &got, 1, 0, &fd));
    EXPECT_GE(fd, 0) << "the first descriptor is the caller's";
    EXPECT_EQ(start + 1, open_descriptors()) << "the two beyond it were left open";
    close(fd);
    send_with_fds(sv[0], &byte, 1, many.data(), (int)many.size());
    errno = 0;
    EXPECT_EQ(-1, cux_fd_passing_recv_upto(sv[1], &got, 1, 0, &fd)) << "more descriptors than room: refused";
    EXPECT_EQ(EBADMSG, errno);
    EXPECT_EQ(-1, fd);
    EXPECT_EQ(start, open_descriptors()) << "descriptors of a refused message were left open";
    close(nul);
    close(sv[0]);
    close(sv[1]);
}

/* Probe "a client that reads no replies stalls every other peer's proof": the exporter answered on one thread with
 * sends that blocked up to the proof timeout, so a client asking without reading held it one timeout per
 * connection and other peers' proofs failed (with PROOF_TIMEOUT=inf, closing the memory domain hung). Replies go
 * out without waiting and such a client is dropped: a transfer to the contained peer meanwhile goes through. */
TEST_F(ipc_containers, a_client_that_reads_no_replies_delays_no_other_peers_proof)
{
    start_peer(nullptr, true); /* R, pid 1 of a namespace of its own, and m_ep to it */
    ASSERT_FALSE(HasFatalFailure());
    const size_t size = 65536;
    remote_buf rb     = remote_alloc(size, 0, 601, alloc_legacy);
    ASSERT_NE(0u, rb.addr);
    const uint64_t token = contained_addr().channel;
    /* the idle client: 4 connections that ask and never read, connecting again when one is dropped */
    const int conns = 4;
    std::atomic<bool> stop(false);
    std::atomic<unsigned long> sent(0), dropped(0);
    std::thread idle([&]() {
        cux_ipc_channel_request_t req = {};
        req.magic = CUX_IPC_CHANNEL_MAGIC;
        req.op    = CUX_IPC_CHANNEL_HELLO;
        int fd[conns];
        for (int k = 0; k < conns; ++k) {
            fd[k] = connect_to(m_dir, token);
        }
        while (!stop) {
            for (int k = 0; k < conns; ++k) {
                ssize_t n = send(fd[k], &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n == (ssize_t)sizeof(req)) {
                    ++sent;
                } else if ((errno != EAGAIN) && (errno != EWOULDBLOCK)) {
                    ++dropped;
                    close(fd[k]);
                    fd[k] = connect_to(m_dir, token);
                }
            }
            usleep(100);
        }
        for (int k = 0; k < conns; ++k) {
            close(fd[k]);
        }
    });
    usleep(500000);
    buffer local(buf_kind::cuda0, size);
    local.write(pattern(602, size));
    ucs_status_t status = zcopy(true, local.ptr(), size, rb.addr, rb.rkey.rkey);
    stop = true;
    idle.join();
    EXPECT_EQ(UCS_OK, status) << "a put to the contained peer while " << conns << " connections asked without "
                              << "reading (" << sent << " requests, " << dropped << " drops)";
    EXPECT_EQ(0, remote(peer_op::check, rb.addr, size, 602));
    remote_free(rb);
}

namespace {
/* An answer for the channel's own tests: a header with the status OK. */
size_t answer_ok(const cux_ipc_channel_request_t*, cux_ipc_channel_reply_t *reply, int*)
{
    reply->status = UCS_OK;
    return 0;
}
} // namespace

/* The server itself, with no memory domain: clients that ask without reading (4 connections, each until its socket
 * is full) hold up neither another client's answers nor the server's end, with no timeout at all. */
TEST(ipc_channel_server, clients_that_read_no_replies_hold_up_neither_other_clients_nor_the_close)
{
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(UCS_OK, cux_ipc_channel_listen(dir, answer_ok));
    const uint64_t token = cux_ipc_channel_token();
    ASSERT_NE(0u, token);
    std::vector<int> idle;
    cux_ipc_channel_request_t req = {};
    req.magic = CUX_IPC_CHANNEL_MAGIC;
    req.op    = CUX_IPC_CHANNEL_PROVE;
    for (int k = 0; k < 4; ++k) {
        int fd = connect_to(dir, token);
        ASSERT_GE(fd, 0);
        /* asks until its own socket takes no more: the server's replies fill the other way meanwhile */
        for (int i = 0; (i < 100000) && (send(fd, &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) > 0); ++i) {
        }
        idle.push_back(fd);
    }
    int good = connect_to(dir, token);
    ASSERT_GE(good, 0);
    for (uint32_t i = 1; i <= 100; ++i) {
        req.seq = i;
        ASSERT_EQ((ssize_t)sizeof(req), send(good, &req, sizeof(req), MSG_NOSIGNAL));
        cux_ipc_channel_reply_t reply;
        ASSERT_EQ((ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER, recv(good, &reply, sizeof(reply), 0))
            << "question " << i << " was not answered within 10 s";
        EXPECT_EQ(i, reply.seq);
    }
    close(good);
    std::atomic<bool> closed(false);
    std::thread closer([&]() {
        cux_ipc_channel_unlisten();
        closed = true;
    });
    for (int i = 0; (i < 6000) && !closed; ++i) {
        usleep(10000);
    }
    EXPECT_TRUE(closed) << "the server's end waits for clients that do not read";
    if (closed) {
        closer.join();
    } else {
        closer.detach();
    }
    for (int fd : idle) {
        close(fd);
    }
    run_command(std::string("rm -rf ") + dir);
}

/* The HELLO answer hands a stranger nothing that lets it pose as this process: a client that knows only where the
 * socket is (the directory lists it) gets a refusal for an address that is not this process's, and for this
 * process's own address only a keyed hash of its challenge, never the secret; each challenge gets its own. */
TEST_F(ipc_channel, the_answer_to_hello_hands_a_stranger_nothing_to_pose_as_this_process)
{
    cux_ipc_iface_addr_t own;
    cux_ipc_proof_own_address(&own, cux_ipc_pid_namespace());
    ASSERT_NE(0u, own.channel);
    int conn = connect_to(m_dir, own.channel);
    ASSERT_GE(conn, 0);
    auto hello = [&](const cux_ipc_iface_addr_t &claim, uint64_t nonce, cux_ipc_channel_reply_t *reply) {
        cux_ipc_channel_request_t req = {};
        req.magic             = CUX_IPC_CHANNEL_MAGIC;
        req.op                = CUX_IPC_CHANNEL_HELLO;
        req.hello.addr        = claim;
        req.hello.addr.secret = 0;
        req.hello.nonce       = nonce;
        EXPECT_EQ((ssize_t)sizeof(req), send(conn, &req, sizeof(req), 0));
        memset(reply, 0, sizeof(*reply));
        return recv(conn, reply, sizeof(*reply), 0);
    };
    cux_ipc_channel_reply_t reply;
    cux_ipc_iface_addr_t other = own;
    other.pid += 1;
    EXPECT_EQ((ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER, hello(other, 1, &reply));
    EXPECT_EQ(UCS_ERR_UNREACHABLE, reply.status);

    EXPECT_EQ((ssize_t)(CUX_IPC_CHANNEL_REPLY_HEADER + sizeof(uint64_t)), hello(own, 1, &reply));
    EXPECT_EQ(UCS_OK, reply.status);
    EXPECT_EQ(cux_ipc_proof_hello_hash(&own, 1), reply.proof);
    EXPECT_EQ(nullptr, memmem(&reply, sizeof(reply), &own.secret, sizeof(own.secret))) << "the secret was sent";
    const uint64_t first = reply.proof;
    hello(own, 2, &reply);
    EXPECT_NE(first, reply.proof) << "a recorded answer would do for another challenge";
    /* nor does any answer give the secret away to one who chose the challenge (zero, or anything it mixes in) */
    for (uint64_t nonce : {0ull, 1ull, 0x0123456789abcdefull}) {
        hello(own, nonce, &reply);
        EXPECT_EQ(nullptr, memmem(&reply, sizeof(reply), &own.secret, sizeof(own.secret))) << "nonce " << nonce;
        EXPECT_NE(own.secret, reply.proof ^ nonce) << "the answer to nonce " << nonce << " is the secret mixed with it";
        EXPECT_NE(own.secret, reply.proof + nonce);
        EXPECT_NE(own.secret, reply.proof - nonce);
    }
    close(conn);
}

/* The serving side's own check of who connected: a process of another uid that reaches the socket (its file and
 * directory opened to everyone here) gets no answer; the connection is closed. */
TEST_F(ipc_channel, a_client_of_another_uid_gets_no_answer)
{
    if (geteuid() != 0) {
        GTEST_SKIP() << "connects as another uid (setuid: root)";
    }
    const uint64_t token = cux_ipc_channel_token();
    ASSERT_NE(0u, token);
    ASSERT_EQ(0, chmod(m_dir.c_str(), 0777));
    ASSERT_EQ(0, chmod(socket_path(m_dir, token).c_str(), 0666));
    pid_t child = fork();
    if (child == 0) {
        if ((setgid(65534) != 0) || (setuid(65534) != 0)) {
            _exit(2);
        }
        int fd = connect_to(m_dir, token);
        if (fd < 0) {
            _exit(3);
        }
        cux_ipc_channel_request_t req = {};
        req.magic = CUX_IPC_CHANNEL_MAGIC;
        req.op    = CUX_IPC_CHANNEL_PROVE;
        cux_ipc_channel_reply_t reply;
        (void)!send(fd, &req, sizeof(req), MSG_NOSIGNAL);
        _exit((recv(fd, &reply, sizeof(reply), 0) > 0) ? 1 : 0);
    }
    int st = -1;
    ASSERT_EQ(child, waitpid(child, &st, 0));
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_NE(2, WEXITSTATUS(st)) << "the child could not become uid 65534";
    EXPECT_NE(3, WEXITSTATUS(st)) << "the child could not connect";
    EXPECT_EQ(0, WEXITSTATUS(st)) << "a client of uid 65534 was answered";
}

namespace {
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* In a forked child: the system calls listed get the action (a seccomp filter; x86-64 and arm64 numbering alike
 * through the libc's SYS_ names). */
bool filter_syscalls(const std::vector<long> &calls, uint32_t action)
{
    std::vector<sock_filter> prog;
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    for (long nr : calls) {
        prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
        prog.push_back(BPF_STMT(BPF_RET | BPF_K, action));
    }
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    struct sock_fprog fprog = {(unsigned short)prog.size(), prog.data()};
    return (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) &&
           (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0);
}

/* Runs f in a forked child and says how it ended: its exit code, or 128 + the signal that killed it. */
template <typename F> int in_child(F f)
{
    pid_t child = fork();
    if (child == 0) {
        _exit(f());
    }
    int st = -1;
    if ((child < 0) || (waitpid(child, &st, 0) != child)) {
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
} // namespace

/* The socket is made owner-only without following a path (a chmod of its name could be turned onto a file of
 * ours by a process that swaps the name meanwhile): with every chmod of a path killing the process, and no umask
 * to help, it still listens, mode 0600. */
TEST(ipc_channel_server, the_socket_is_made_owner_only_without_a_chmod_of_its_path)
{
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    int rc = in_child([&]() {
        umask(0);
        if (!filter_syscalls({SYS_chmod, SYS_fchmodat, SYS_fchmodat2}, SECCOMP_RET_KILL_PROCESS)) {
            return 2;
        }
        if ((cux_ipc_channel_listen(dir, answer_ok) != UCS_OK) || (cux_ipc_channel_token() == 0)) {
            return 3;
        }
        struct stat st;
        if ((lstat(socket_path(dir, cux_ipc_channel_token()).c_str(), &st) != 0) || !S_ISSOCK(st.st_mode)) {
            return 4;
        }
        return ((st.st_mode & 0777) == 0600) ? 0 : 5;
    });
    EXPECT_NE(128 + SIGSYS, rc) << "the socket's mode was set through its path";
    EXPECT_NE(2, rc) << "no seccomp filter here";
    EXPECT_EQ(0, rc) << "3: it did not listen; 4: no socket there; 5: not mode 0600";
    run_command(std::string("rm -rf ") + dir);
}

/* A bind that fails (the name is taken: another's file) unlinks nothing: it made nothing. */
TEST(ipc_channel_server, a_failed_bind_removes_no_file)
{
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    int rc = in_child([&]() {
        if (!filter_syscalls({SYS_bind}, SECCOMP_RET_ERRNO | EADDRINUSE) ||
            !filter_syscalls({SYS_unlink, SYS_unlinkat}, SECCOMP_RET_KILL_PROCESS)) {
            return 2;
        }
        return (cux_ipc_channel_listen(dir, answer_ok) == UCS_OK) && (cux_ipc_channel_token() != 0) ? 3 : 0;
    });
    EXPECT_NE(128 + SIGSYS, rc) << "a name this process did not bind was unlinked";
    EXPECT_NE(2, rc) << "no seccomp filter here";
    EXPECT_EQ(0, rc) << "3: it said it listens";
    run_command(std::string("rm -rf ") + dir);
}

/* Issue 49, item 7: a socket directory others may write (an emptyDir is 0777) is said once, with the remedy; one only
 * its owner writes, or a sticky one (where no other user may remove another's file), is not. */
TEST(ipc_channel_server, a_socket_directory_others_may_write_is_a_warning)
{
    for (mode_t mode : {0777, 0770, 01777, 0700}) {
        SCOPED_TRACE(mode);
        char dir[] = "/tmp/cux-sockets-XXXXXX";
        ASSERT_NE(nullptr, mkdtemp(dir));
        ASSERT_EQ(0, chmod(dir, mode));
        size_t warned;
        {
            warnings_captured warnings;
            ASSERT_EQ(UCS_OK, cux_ipc_channel_listen(dir, answer_ok));
            cux_ipc_channel_unlisten();
            warned = warnings.count("may be written by others");
        }
        EXPECT_EQ(((mode & 022) && !(mode & S_ISVTX)) ? 1u : 0u, warned);
        run_command(std::string("rm -rf ") + dir);
    }
}

/*
 * Fifth review (Medium): a peer of R that can write the socket directory takes R's own socket name, and every
 * endpoint made to R's true address from then on is its. The threat model grants a process of our uid holding R's
 * address and keys (any peer R handed them to) only "a socket of its own": "it is never served R's mappings, nor
 * are R's endpoints served its", and a replaced socket file only to one that "cannot answer the challenge for an
 * address it does not hold". One that holds it unlinks R's socket (R goes on listening on a socket no one reaches)
 * and binds its own under the same name; cux_ipc_proof_channel_open connects by name, finds a listener the kernel
 * does not show (as between two containers), which answers the challenge with R's secret, proves R's keys and hands
 * over descriptors of memory of its choice. Here a put to R's true address lands in Q's buffer and a get reads Q's.
 */
TEST_F(ipc_containers, audit5_a_process_that_takes_rs_socket_name_is_refused_on_endpoints_to_r)
{
    kernel_seen_as kernel(CUX_IPC_TEST_UNSHOWN);
    start_peer(nullptr, true); /* R, pid 1 of a namespace of its own */
    ASSERT_FALSE(HasFatalFailure());
    const size_t size = 65536;
    remote_buf rb     = remote_alloc(size, 0, 701, alloc_vmm_fd);
    ASSERT_NE(0u, rb.addr);

    ipc_peer q; /* Q: memory the impostor hands over as R's */
    ASSERT_EQ(0, q.greeting().status);
    peer_msg req = {};
    req.op = peer_op::alloc; req.a = size; req.b = 0; req.c = 702; req.d = alloc_vmm_fd;
    peer_msg qbuf = q.call(req);
    ASSERT_EQ(UCS_OK, qbuf.status);
    req = {};
    req.op = peer_op::export_fd; req.a = qbuf.a;
    int qfd = -1;
    ASSERT_EQ(UCS_OK, q.call_for_fd(req, &qfd).status);
    ASSERT_GE(qfd, 0);

    /* the impostor: R's address (as R's peers have it), under R's own socket name */
    const cux_ipc_iface_addr_t r = contained_addr();
    ASSERT_EQ(0, unlink(socket_path(m_dir, r.channel).c_str())) << "a process of our uid may write the directory";
    fake_server how = {};
    how.claim       = r;
    how.prove_ok    = true;
    how.take_fd     = qfd;
    pid_t server    = start_fake_server(m_dir, r.channel, how);
    ASSERT_GT(server, 0);
    close(qfd);

    /* an endpoint made now to R's true addresses (another worker's, or one made again after an error) */
    destroy_ep();
    uct_ep_h ep = ep_to(m_iface, m_hello.blob, m_hello.blob + m_hello.a);
    ucs_status_t put = UCS_ERR_UNREACHABLE, get = UCS_ERR_UNREACHABLE;
    buffer local(buf_kind::cuda0, size);
    std::vector<uint8_t> got;
    if (ep != nullptr) {
        local.write(std::vector<uint8_t>(size, 0xa5));
        get = zcopy_on(ep, false, local.ptr(), size, rb.addr, rb.rkey.rkey);
        got = local.read();
        local.write(pattern(703, size));
        put = zcopy_on(ep, true, local.ptr(), size, rb.addr, rb.rkey.rkey);
    }
    peer_msg check = {};
    check.op = peer_op::check; check.a = qbuf.a; check.b = size; check.c = 703;
    EXPECT_NE(0, q.call(check).status) << "endpoint to R's true address " << ((ep != nullptr) ? "made" : "refused")
                                       << ", put " << ucs_status_string(put)
                                       << ": a put to R landed in Q's buffer, handed over by the process that took "
                                          "R's socket name";
    EXPECT_FALSE(got == pattern(702, size)) << "get " << ucs_status_string(get)
                                            << ": a get from R read Q's memory";

    if (ep != nullptr) {
        uct_ep_destroy(ep);
    }
    stop_fake_server(server);
    req = {};
    req.op = peer_op::free; req.a = qbuf.a;
    q.call(req);
    q.stop();
    remote_free(rb);
    cux_ipc_cache_purge(&cux_ipc_cache);
}
