/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Probes of the fifth review of cuda_ipc (peers on other hosts of a multi-node NVLink domain, the socket channel's
 * server after the fourth review's fixes; ../shared/probes/ipc-review-5-probes.diff, issue 58): each failed at
 * 303645f because of the weakness its comment names, and passes since that weakness is gone (the names say what
 * holds now; the comments, what went wrong). Run with the mock suite's settings and GTEST_FILTER='*audit5*'. The cross-host probes play the other host in this process (its device address names
 * another host; our interface sees an IMEX channel and the mock NVML's fabric), so they need no second process.
 */
#include "ipc_transport.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include <ucs/sys/sys.h>
#include "ipc/common/cux_ipc_addr.h"
#include "ipc/common/cux_ipc_rkey.h"
#include "ipc/channel/cux_ipc_channel.h"
#include "ipc/export/cux_ipc_identity.h"
#include "driver/cux_nvml.h"
}

using namespace cux_test;

namespace {

const char *const audit5_fabric     = "completed:7:0123456789abcdef0123456789abcdef";
const uint64_t    audit5_other_host = 0x00c0ffee00c0ffeeull;

/* Our interface in a multi-node NVLink domain (a fake IMEX channel, the mock NVML's fabric), as ipc_hosts sets it
 * up, with no peer process: each probe writes the other host's addresses and keys itself. */
class ipc_audit5 : public ipc_transport {
protected:
    void SetUp() override
    {
        if (!using_mock_driver()) {
            GTEST_SKIP() << "the mock driver and NVML play a multi-node NVLink domain";
        }
        if (access(build_path("test/.libs/libmocknvml.so").c_str(), R_OK)) {
            GTEST_SKIP() << "the mock NVML is not built here";
        }
        m_channel.reset(new imex_channel());
        save_env("MOCK_NVML_FABRIC");
        save_env(CUX_NVML_PATH_ENV);
        setenv("MOCK_NVML_FABRIC", audit5_fabric, 1);
        setenv(CUX_NVML_PATH_ENV, build_path("test/.libs/libmocknvml.so").c_str(), 1);
        transport_test::SetUp(); /* the memory domain decides the NVLink domain when it opens; no peer */
    }

    void TearDown() override
    {
        ipc_transport::TearDown();
        m_channel.reset();
        for (auto &s : m_saved) {
            if (s.second.first) {
                setenv(s.first.c_str(), s.second.second.c_str(), 1);
            } else {
                unsetenv(s.first.c_str());
            }
        }
    }

    void save_env(const char *name)
    {
        const char *v = getenv(name);
        m_saved.push_back({name, {v != nullptr, (v != nullptr) ? v : ""}});
    }

    /* Our own interface address, as our peers receive it. */
    cux_ipc_iface_addr_t own_address()
    {
        std::vector<uint8_t> buf(sizeof(cux_ipc_iface_addr_t) + 64);
        cux_ipc_iface_addr_t addr;
        EXPECT_EQ(UCS_OK, uct_iface_get_address(m_iface, (uct_iface_addr_t*)buf.data()));
        cux_ipc_addr_unpack(&addr, buf.data(), SIZE_MAX);
        return addr;
    }

    /* A device address naming host and an interface address, as UCP hands them to ep_create. */
    static std::vector<uint8_t> addresses(uint64_t host, const cux_ipc_iface_addr_t &addr)
    {
        std::vector<uint8_t> out(sizeof(host) + sizeof(addr));
        memcpy(out.data(), &host, sizeof(host));
        memcpy(out.data() + sizeof(host), &addr, sizeof(addr));
        return out;
    }

    ucs_status_t zcopy_on(uct_ep_h ep, bool put, void *local, size_t size, uint64_t raddr, uct_rkey_t rkey)
    {
        uct_iov_t iov = {local, size, UCT_MEM_HANDLE_NULL, 0, 1};
        counting_completion comp;
        ucs_status_t status = put ? uct_ep_put_zcopy(ep, &iov, 1, raddr, rkey, &comp.comp) :
                                    uct_ep_get_zcopy(ep, &iov, 1, raddr, rkey, &comp.comp);
        return (status == UCS_INPROGRESS) ? wait(&comp.comp) : status;
    }

    std::unique_ptr<imex_channel> m_channel;
    std::vector<std::pair<std::string, std::pair<bool, std::string>>> m_saved;
};

/* CPU time of this whole process (every thread), in seconds. */
double audit5_process_cpu()
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

size_t audit5_answer_ok(const cux_ipc_channel_request_t*, cux_ipc_channel_reply_t *reply, int*)
{
    reply->status = UCS_OK;
    return 0;
}

} // namespace

/*
 * High. A peer that says it is on another host of our NVLink domain, and whose address names OUR pid and PID
 * namespace (with any start time but ours), has us treat its keys as this process's own: cux_ipc_map
 * (src/ipc/import/cux_ipc_map.c, "if (cux_ipc_proof_key_is_own(key))") hands out key->base as the mapping, and
 * cux_ipc_proof_key_is_own (src/ipc/export/cux_ipc_identity.c) compares only pid and namespace, not the host. For a
 * peer on another host cux_ipc_peer_check_key returned after its check of the key's kind (a fabric-carrying kind
 * was all it asked), so the own-key proof (table and SipHash secret) is never made; cux_ipc_remote_peer_acceptable
 * refuses an address naming a process here only when its start time matches too. Any process that can connect over
 * UCP and claims another host (a real one of the domain, or one of this host: our pid, namespace, cluster and
 * clique are all in our own address) then reads and writes any address of this process through put/get: here,
 * GPU memory this process never registered.
 */
TEST_F(ipc_audit5, a_peer_of_another_host_naming_our_pid_reaches_none_of_our_memory)
{
    cux_ipc_iface_addr_t addr = own_address();
    ASSERT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, addr.magic) << "our interface is in the mock's NVLink domain";
    addr.start_time += 1;                   /* any start time but ours */
    addr.secret     ^= 0x5555555555555555ull; /* nothing of ours is needed */
    std::vector<uint8_t> forged = addresses(audit5_other_host, addr);

    const size_t size = 64 * 1024;
    buffer victim(buf_kind::cuda0, size); /* this process's GPU memory, never registered nor exported */
    std::vector<uint8_t> secret = pattern(5001, size);
    victim.write(secret);

    cux_ipc_rkey_t key;
    memset(&key, 0, sizeof(key));
    key.kind      = CUX_IPC_KIND_VMM_FABRIC;
    key.system_id = audit5_other_host;
    key.pid       = getpid();
    key.pid_ns    = cux_ipc_pid_namespace();
    key.base      = (uintptr_t)victim.ptr();
    key.length    = size;
    key.buffer_id = 1;
    memset(&key.fabric, 0x5a, sizeof(key.fabric)); /* made-up fabric bytes: never given to the driver */
    cux_ipc_rkey_seal(&key);

    bool reachable = uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)forged.data(),
                                            (const uct_iface_addr_t*)(forged.data() + sizeof(uint64_t)));
    uct_ep_h ep = ep_to(m_iface, forged.data(), forged.data() + sizeof(uint64_t));
    uct_rkey_bundle_t bundle = {};
    ucs_status_t unpacked    = uct_rkey_unpack(m_component, &key, &bundle);
    ucs_status_t got = UCS_ERR_UNREACHABLE, put = UCS_ERR_UNREACHABLE;
    buffer loot(buf_kind::cuda0, size);
    loot.write(std::vector<uint8_t>(size, 0));
    buffer overwrite(buf_kind::cuda0, size);
    overwrite.write(pattern(5002, size));
    if ((ep != nullptr) && (unpacked == UCS_OK)) {
        got = zcopy_on(ep, false, loot.ptr(), size, key.base, bundle.rkey);
        put = zcopy_on(ep, true, overwrite.ptr(), size, key.base, bundle.rkey);
    }
    std::vector<uint8_t> after = victim.read();
    EXPECT_FALSE(loot.read() == secret)
        << "reachable " << reachable << ", endpoint " << (ep != nullptr ? "made" : "refused") << ", unpack "
        << ucs_status_string(unpacked) << ", get " << ucs_status_string(got)
        << ": a peer claiming another host and our pid read this process's unregistered GPU memory";
    EXPECT_TRUE(after == secret) << "put " << ucs_status_string(put)
                                 << ": a peer claiming another host and our pid wrote this process's unregistered "
                                    "GPU memory";
    if (unpacked == UCS_OK) {
        uct_rkey_release(m_component, &bundle);
    }

    /* the same for this process's host memory (the heap): the copy goes where key->base says */
    std::vector<uint8_t> heap = pattern(5003, 4096);
    key.base   = (uintptr_t)heap.data();
    key.length = heap.size();
    cux_ipc_rkey_seal(&key);
    unpacked = uct_rkey_unpack(m_component, &key, &bundle);
    buffer heap_loot(buf_kind::cuda0, heap.size());
    heap_loot.write(std::vector<uint8_t>(heap.size(), 0));
    got = UCS_ERR_UNREACHABLE;
    if ((ep != nullptr) && (unpacked == UCS_OK)) {
        got = zcopy_on(ep, false, heap_loot.ptr(), heap.size(), key.base, bundle.rkey);
        uct_rkey_release(m_component, &bundle);
    }
    EXPECT_FALSE(heap_loot.read() == heap) << "get " << ucs_status_string(got)
                                           << ": the same peer read this process's heap";
    if (ep != nullptr) {
        uct_ep_destroy(ep);
    }
}

/*
 * Low. "A peer that claims another host, and whose claimed pid and start time name a process that the kernel shows
 * in our PID namespace, is refused" (docs/threat-model.md, "A peer that says it is on another host"). The check
 * (cux_ipc_remote_peer_acceptable, src/ipc/import/cux_ipc_proof_remote.c) looks at the pid only when the address
 * also claims our namespace: a process of this host that keeps its own pid and start time and writes any other
 * namespace number is taken as a peer of another host (its fabric keys as capabilities, unproven).
 */
TEST_F(ipc_audit5, a_process_of_this_host_cannot_pass_as_another_host_by_writing_another_namespace)
{
    int ready[2];
    ASSERT_EQ(0, pipe(ready));
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(ready[0]);
        (void)!write(ready[1], "y", 1);
        for (;;) {
            pause();
        }
    }
    ASSERT_GT(child, 0);
    char c;
    close(ready[1]);
    ASSERT_EQ(1, read(ready[0], &c, 1));
    close(ready[0]);

    cux_ipc_iface_addr_t addr = own_address(); /* our cluster and clique: readable by any process here */
    ASSERT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, addr.magic);
    addr.pid        = child;
    addr.start_time = ucs_sys_get_proc_create_time(child); /* its own pid and start time, as the kernel shows */
    std::vector<uint8_t> same_ns = addresses(audit5_other_host, addr);
    EXPECT_FALSE(uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)same_ns.data(),
                                        (const uct_iface_addr_t*)(same_ns.data() + sizeof(uint64_t))))
        << "the refusal the threat model describes (its pid, start time and our namespace)";
    addr.pid_ns += 1; /* the one lie added */
    std::vector<uint8_t> other_ns = addresses(audit5_other_host, addr);
    bool reachable = uct_iface_is_reachable(m_iface, (const uct_device_addr_t*)other_ns.data(),
                                            (const uct_iface_addr_t*)(other_ns.data() + sizeof(uint64_t)));
    uct_ep_h ep = ep_to(m_iface, other_ns.data(), other_ns.data() + sizeof(uint64_t));
    EXPECT_FALSE(reachable) << "pid " << child << " of this host, with its own start time, passed as a process of "
                            << "another host by writing another PID namespace number";
    EXPECT_EQ(nullptr, ep) << "and got an endpoint whose fabric keys are taken unproven";
    if (ep != nullptr) {
        uct_ep_destroy(ep);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
}

/*
 * Low (log flooding). "Refusals log one error line per peer (the rest at debug level)" (docs/threat-model.md, point
 * 5). Across hosts the driver's import is the only check of a fabric key, and its refusal is logged at error level
 * every time: CUX_DRV_CALL_ERR on cuMemImportFromShareableHandle (src/ipc/common/cux_ipc_fabric.c) and "cannot map"
 * in cux_ipc_map (src/ipc/import/cux_ipc_map.c), neither limited per peer. A peer on another host of the domain
 * (or a process of this host posing as one) that sends made-up fabric keys writes two error lines into the
 * application's log per transfer, as fast as it sends them.
 */
TEST_F(ipc_audit5, a_peer_of_another_host_with_made_up_fabric_keys_logs_one_error_line)
{
    cux_ipc_iface_addr_t addr = own_address();
    ASSERT_EQ(CUX_IPC_ADDR_MAGIC_DOMAIN, addr.magic);
    addr.pid        = 4242; /* a process of the other host */
    addr.pid_ns    += 1;
    addr.start_time = 1;
    std::vector<uint8_t> forged = addresses(audit5_other_host, addr);
    uct_ep_h ep = ep_to(m_iface, forged.data(), forged.data() + sizeof(uint64_t));
    ASSERT_NE(nullptr, ep) << "a peer of another host of our domain";

    const size_t size = 4096;
    buffer local(buf_kind::cuda0, size);
    const int keys = 20;
    size_t lines;
    {
        warnings_captured logged(UCS_LOG_LEVEL_ERROR);
        for (int i = 0; i < keys; ++i) {
            cux_ipc_rkey_t key;
            memset(&key, 0, sizeof(key));
            key.kind      = CUX_IPC_KIND_VMM_FABRIC;
            key.system_id = audit5_other_host;
            key.pid       = addr.pid;
            key.pid_ns    = addr.pid_ns;
            key.base      = 0x7f0000000000ull + (uint64_t)i * (2 << 20);
            key.length    = size;
            key.buffer_id = 100 + i;
            memset(&key.fabric, 0x40 + i, sizeof(key.fabric)); /* no allocation's handle */
            cux_ipc_rkey_seal(&key);
            uct_rkey_bundle_t bundle = {};
            if (uct_rkey_unpack(m_component, &key, &bundle) == UCS_OK) {
                (void)zcopy_on(ep, false, local.ptr(), size, key.base, bundle.rkey);
                uct_rkey_release(m_component, &bundle);
            }
        }
        lines = logged.count("");
    }
    uct_ep_destroy(ep);
    EXPECT_LE(lines, 2u) << keys << " made-up fabric keys of one peer on another host wrote " << lines
                         << " error lines";
}

/*
 * Medium (availability). The socket server (src/ipc/channel/cux_ipc_channel_serve.c) keeps up to 1024 connections
 * (CUX_IPC_CHANNEL_CLIENTS_MAX) whatever this process's descriptor limit, and each is a descriptor of this process.
 * A process of our uid that can reach the socket directory (another container) opens connections until the
 * process's RLIMIT_NOFILE is spent (1024 is a common soft limit, the same number): the application's own open(),
 * socket() and accept() then fail with EMFILE, and so do cuda_ipc's own imports (pidfd_getfd, the channel's
 * connects). While a further connection waits in the backlog, accept4 fails with EMFILE and poll reports the
 * listening socket readable again at once: the server thread spins a core. (The exporter's own descriptors for
 * peers are bounded at a quarter of the limit, UCX_CUDA_IPC_MAX_EXPORTED_FDS; connections are not.) Here the limit
 * is lowered to leave 200 descriptors free, and a child of the same uid connects 600 times.
 */
TEST(ipc_audit5_server, a_client_of_our_uid_spends_neither_the_processs_descriptors_nor_a_core)
{
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    struct rlimit old;
    ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
    ASSERT_EQ(UCS_OK, cux_ipc_channel_listen(dir, audit5_answer_ok));
    const uint64_t token = cux_ipc_channel_token();
    ASSERT_NE(0u, token);
    struct rlimit low = old;
    low.rlim_cur      = open_descriptors() + 200;
    ASSERT_LT(low.rlim_cur, old.rlim_cur) << "the soft limit is already that low";
    struct restore_limit { /* the limit as it was, however the test ends */
        struct rlimit saved;
        ~restore_limit() { setrlimit(RLIMIT_NOFILE, &saved); }
    } restore = {old};
    ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &low));

    int ready[2];
    ASSERT_EQ(0, pipe(ready));
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        setrlimit(RLIMIT_NOFILE, &old);
        close(ready[0]);
        struct sockaddr_un sa = {};
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016llx", dir, (unsigned long long)token);
        int connected = 0;
        for (int i = 0; i < 600; ++i) {
            int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0);
            if ((fd >= 0) && (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0)) {
                ++connected;
            }
        }
        (void)!write(ready[1], &connected, sizeof(connected));
        for (;;) {
            pause();
        }
    }
    ASSERT_GT(child, 0);
    close(ready[1]);
    int connected = 0;
    EXPECT_EQ((ssize_t)sizeof(connected), read(ready[0], &connected, sizeof(connected)));
    close(ready[0]);
    /* the server accepts what it can: this process opens a file every 50 ms meanwhile, for up to 3 s */
    int probe = -1, err = 0;
    for (int i = 0; i < 60; ++i) {
        errno = 0;
        probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
        err   = errno;
        if (probe < 0) {
            break;
        }
        close(probe);
        usleep(50000);
    }
    double cpu0 = audit5_process_cpu();
    usleep(1000000); /* this thread sleeps: any CPU time is the server's */
    double cpu = audit5_process_cpu() - cpu0;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    usleep(200000); /* the server sees them hang up */
    setrlimit(RLIMIT_NOFILE, &old);
    cux_ipc_channel_unlisten();
    run_command(std::string("rm -rf ") + dir);

    EXPECT_GE(probe, 0) << "with " << connected << " connections of a client of our uid (200 descriptors were "
                        << "free), this process cannot open a file: " << strerror(err);
    EXPECT_LT(cpu, 0.3) << "the socket server used " << cpu << " s of CPU in 1 s while a connection waited and "
                        << "descriptors were spent (accept4 EMFILE, poll ready again at once)";
}

/*
 * Low (configuration). UCX_CUDA_IPC_PROOF_TIMEOUT bounds every question to a peer of another PID namespace, but
 * cux_ipc_channel_set_timeout (src/ipc/channel/cux_ipc_channel_ask.c) turns a timeout under one microsecond (0, or
 * "500ns") into a timeval of zero, which SO_RCVTIMEO and SO_SNDTIMEO take as "no timeout": the bound becomes none
 * at all (reads of a peer's memory time out at once with the same setting). A contained peer (or any process of
 * our uid on its socket) that never answers then holds the asking thread (endpoint creation, a put's first miss)
 * for ever, where the setting asked for no waiting. Here a listener that accepts and never answers, asked with a
 * timeout of 0.
 */
TEST(ipc_audit5_server, a_proof_timeout_under_its_floor_still_bounds_channel_questions)
{
    char dir[] = "/tmp/cux-sockets-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(dir));
    ASSERT_EQ(UCS_OK, cux_ipc_channel_listen(dir, audit5_answer_ok)); /* names the directory peers are asked in */
    const uint64_t silent = 0x5111e47000000001ull;
    int ready[2];
    ASSERT_EQ(0, pipe(ready));
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct sockaddr_un sa = {};
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/cuda-ipc-%016llx", dir, (unsigned long long)silent);
        int fd  = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        bool ok = (fd >= 0) && (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) && (listen(fd, 8) == 0);
        (void)!write(ready[1], ok ? "y" : "n", 1);
        for (;;) {
            (void)accept(fd, nullptr, nullptr); /* kept open, never answered */
        }
    }
    ASSERT_GT(child, 0);
    char c = 0;
    close(ready[1]);
    ASSERT_EQ(1, read(ready[0], &c, 1));
    close(ready[0]);
    ASSERT_EQ('y', c);

    cux_ipc_channel_listener_t listener;
    int channel = cux_ipc_channel_connect(silent, 0.0, &listener); /* PROOF_TIMEOUT=0 */
    ASSERT_GE(channel, 0);
    if (listener.pidfd >= 0) {
        close(listener.pidfd);
    }
    std::atomic<bool> answered(false);
    std::thread asker([&]() {
        cux_ipc_channel_request_t req = {};
        cux_ipc_channel_reply_t reply;
        int fd = -1;
        req.op = CUX_IPC_CHANNEL_HELLO;
        (void)cux_ipc_channel_ask(channel, &req, &reply, &fd);
        if (fd >= 0) {
            close(fd);
        }
        answered = true;
    });
    auto start = std::chrono::steady_clock::now();
    while (!answered && (std::chrono::steady_clock::now() - start < std::chrono::seconds(3))) {
        usleep(10000);
    }
    bool returned = answered;
    kill(child, SIGKILL); /* its end closes: the question returns */
    waitpid(child, nullptr, 0);
    asker.join();
    close(channel);
    cux_ipc_channel_unlisten();
    run_command(std::string("rm -rf ") + dir);
    EXPECT_TRUE(returned) << "with a proof timeout of 0 a question to a silent listener was still waiting after 3 s "
                             "(it returned only when the listener was killed)";
}
