// SPDX-License-Identifier: BSD-3-Clause
// KV-cache transfers through NIXL, as an inference server's prefill and decode processes make them (issue 46):
// k blocks of one size, in one GPU allocation or one allocation per block, registered with NIXL's UCX backend,
// moved as one NIXL transfer of k descriptors (WRITE or READ), timed, and checked with a pattern of its own
// per block and per generation (nixlbench fills every buffer with one constant, which a block written to the
// wrong place or not at all can still match). Two processes meet through files in DIR:
//
//   cux_nixl_kv target DIR [options] &  cux_nixl_kv initiator DIR [options]
//   options: -s SIZE (45k) -k BLOCKS (1024) -l one|many -o write|read -i ITERS (20) -w WARMUP (3)
//            -f kill|release: the fault cases (initiator only; it starts its targets itself)
//
// One line "RESULT key=value ..." per run. Faults: "kill" kills the target (SIGKILL) right after posting a
// batch, bounds the time until the transfer ends (success into memory the import keeps alive, or an error),
// releases the peer (NIXL's invalidateRemoteMD), shows the dead peer's memory freed (cuMemGetInfo), and moves
// and checks data with a new target at once. "release" releases a transfer still in flight and shows that the
// target's memory is no longer written afterwards.
#include <nixl.h>
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace {

using clk = std::chrono::steady_clock;

struct options {
    std::string role, dir, layout = "one", op = "write", fault, name = "target";
    size_t size = 45 * 1024, blocks = 1024;
    int iters = 20, warmup = 3;
};

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, "cux_nixl_kv: %s\n", what.c_str());
    std::exit(2);
}

void check_cu(CUresult rc, const char *what) {
    if (rc != CUDA_SUCCESS) {
        const char *s = nullptr;
        cuGetErrorString(rc, &s);
        die(std::string(what) + ": " + (s ? s : "?"));
    }
}

void check_nixl(nixl_status_t st, const char *what) {
    if (st != NIXL_SUCCESS && st != NIXL_IN_PROG) die(std::string(what) + ": " + nixlEnumStrings::statusStr(st));
}

size_t parse_size(const char *s) {
    char *end;
    double v = std::strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    }
    return (size_t)v;
}

double us_since(clk::time_point t) {
    return std::chrono::duration<double, std::micro>(clk::now() - t).count();
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Files: written whole under a temporary name, then renamed, so that a reader never sees half of one.
void put_file(const std::string &path, const std::string &data) {
    std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(data.data(), data.size());
    if (std::rename(tmp.c_str(), path.c_str()) != 0) die("rename " + path);
}

bool get_file(const std::string &path, std::string &data) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    data = ss.str();
    return true;
}

// While it waits, a process drives its agent (progress): UCP connects an endpoint only when both workers
// progress, and a target that only sleeps would hold the initiator's first transfer forever.
nixlAgent *progress_agent = nullptr;

std::string wait_file(const std::string &path, double seconds) {
    std::string data;
    auto t0 = clk::now();
    while (!get_file(path, data)) {
        if (us_since(t0) > seconds * 1e6) die("no " + path + " after " + std::to_string(seconds) + " s");
        if (progress_agent) {
            nixl_notifs_t notifs;
            progress_agent->getNotifs(notifs);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return data;
}

// A word per block and generation: a block written from the wrong place, or left from another generation,
// does not match.
uint32_t pattern(size_t block, uint32_t gen) {
    return gen == 0 ? 0 : ((uint32_t)(block + 1) * 0x9E3779B1u) ^ (gen * 0x85EBCA77u) ^ 1u;
}

struct blocks {
    std::vector<CUdeviceptr> allocs, addrs;
    size_t size = 0;

    void allocate(const options &o) {
        size = o.size;
        if (o.layout == "one") {
            CUdeviceptr base;
            check_cu(cuMemAlloc(&base, o.size * o.blocks), "cuMemAlloc");
            allocs.push_back(base);
            for (size_t b = 0; b < o.blocks; b++) addrs.push_back(base + b * o.size);
        } else {
            for (size_t b = 0; b < o.blocks; b++) {
                CUdeviceptr p;
                check_cu(cuMemAlloc(&p, o.size), "cuMemAlloc");
                allocs.push_back(p);
                addrs.push_back(p);
            }
        }
    }

    size_t alloc_len(const options &o) const { return o.layout == "one" ? o.size * o.blocks : o.size; }

    void fill(uint32_t gen) {
        for (size_t b = 0; b < addrs.size(); b++)
            check_cu(cuMemsetD32(addrs[b], pattern(b, gen), size / 4), "cuMemsetD32");
        check_cu(cuCtxSynchronize(), "cuCtxSynchronize");
    }

    // The number of blocks that do not hold generation gen throughout.
    size_t verify(uint32_t gen) const {
        std::vector<uint32_t> host(size / 4);
        size_t bad = 0;
        for (size_t b = 0; b < addrs.size(); b++) {
            check_cu(cuMemcpyDtoH(host.data(), addrs[b], size), "cuMemcpyDtoH");
            uint32_t want = pattern(b, gen);
            bad += std::any_of(host.begin(), host.end(), [want](uint32_t w) { return w != want; });
        }
        return bad;
    }

    uint64_t checksum() const {
        std::vector<uint64_t> host(size / 8);
        uint64_t sum = 0;
        for (size_t b = 0; b < addrs.size(); b++) {
            check_cu(cuMemcpyDtoH(host.data(), addrs[b], size / 8 * 8), "cuMemcpyDtoH");
            for (uint64_t w : host) sum = sum * 1099511628211ull + w;
        }
        return sum;
    }

    nixl_reg_dlist_t reg_list(const options &o) const {
        nixl_reg_dlist_t l(VRAM_SEG);
        for (CUdeviceptr a : allocs) l.addDesc(nixlBlobDesc((uintptr_t)a, alloc_len(o), 0, ""));
        return l;
    }

    void free_all() {
        for (CUdeviceptr a : allocs) cuMemFree(a);
    }
};

nixl_xfer_dlist_t xfer_list(const std::vector<uintptr_t> &addrs, size_t size) {
    nixl_xfer_dlist_t l(VRAM_SEG);
    for (uintptr_t a : addrs) l.addDesc(nixlBasicDesc(a, size, 0));
    return l;
}

struct agent {
    nixlAgent a;
    nixlBackendH *backend = nullptr;
    nixl_opt_args_t extra;

    explicit agent(const std::string &name) : a(name, nixlAgentConfig(false)) {
        nixl_b_params_t params;
        nixl_mem_list_t mems;
        check_nixl(a.getPluginParams("UCX", mems, params), "getPluginParams(UCX)");
        check_nixl(a.createBackend("UCX", params, backend), "createBackend(UCX)");
        extra.backends.push_back(backend);
    }
};

// This process's side: its agent (driven while the process waits), its blocks, registered with NIXL.
struct side {
    agent ag;
    blocks mem;
    nixl_reg_dlist_t reg{VRAM_SEG};
    double reg_us = 0;

    side(const options &o, const std::string &name) : ag(name) {
        progress_agent = &ag.a;
        mem.allocate(o);
        reg = mem.reg_list(o);
        auto t0 = clk::now();
        check_nixl(ag.a.registerMem(reg, &ag.extra), "registerMem");
        reg_us = us_since(t0);
    }

    ~side() {
        ag.a.deregisterMem(reg, &ag.extra);
        mem.free_all();
        progress_agent = nullptr;
    }
};

// The target: registers its blocks, publishes its metadata and block addresses, then answers the initiator's
// commands (check GEN, fill GEN, checksum, quit) one file at a time.
int run_target(const options &o) {
    side me(o, o.name);
    blocks &mem = me.mem;
    mem.fill(o.op == "read" ? 1 : 0);
    nixl_blob_t md;
    check_nixl(me.ag.a.getLocalMD(md), "getLocalMD");
    std::ostringstream desc;
    for (CUdeviceptr a : mem.addrs) desc << a << "\n";
    put_file(o.dir + "/" + o.name + ".md", md);
    put_file(o.dir + "/" + o.name + ".desc", desc.str());
    put_file(o.dir + "/" + o.name + ".ready", std::to_string(getpid()));
    for (int n = 0;; n++) {
        std::string cmd = wait_file(o.dir + "/" + o.name + ".cmd." + std::to_string(n), 600), answer;
        std::istringstream in(cmd);
        std::string verb;
        uint32_t gen = 0;
        in >> verb >> gen;
        if (verb == "check") answer = std::to_string(mem.verify(gen));
        else if (verb == "fill") { mem.fill(gen); answer = "0"; }
        else if (verb == "checksum") answer = std::to_string(mem.checksum());
        put_file(o.dir + "/" + o.name + ".ans." + std::to_string(n), answer);
        if (verb == "quit") break;
    }
    return 0;
}

struct peer {
    std::string name, dir;
    std::vector<uintptr_t> addrs;
    pid_t pid = 0;
    int cmds = 0;

    std::string ask(const std::string &cmd) {
        int n = cmds++;
        put_file(dir + "/" + name + ".cmd." + std::to_string(n), cmd);
        return wait_file(dir + "/" + name + ".ans." + std::to_string(n), 600);
    }
};

peer meet(agent &ag, const options &o, const std::string &name) {
    peer p;
    p.name = name;
    p.dir = o.dir;
    p.pid = std::atoi(wait_file(o.dir + "/" + name + ".ready", 120).c_str());
    std::string md, remote, desc;
    get_file(o.dir + "/" + name + ".md", md);
    get_file(o.dir + "/" + name + ".desc", desc);
    check_nixl(ag.a.loadRemoteMD(md, remote), "loadRemoteMD");
    std::istringstream in(desc);
    for (uintptr_t a; in >> a;) p.addrs.push_back(a);
    if (p.addrs.size() != o.blocks) die("the target has another number of blocks");
    return p;
}

pid_t spawn_target(const options &o, const std::string &name, size_t size, size_t count) {
    std::string self = "/proc/self/exe", sz = std::to_string(size), k = std::to_string(count);
    const char *argv[] = {"cux_nixl_kv", "target", o.dir.c_str(), "-s", sz.c_str(), "-k", k.c_str(), "-l",
                          o.layout.c_str(), "-o", o.op.c_str(), "-n", name.c_str(), nullptr};
    pid_t pid;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, (char **)argv, environ) != 0) die("posix_spawn");
    return pid;
}

// Posts a prepared request and waits for it; returns the status it ended with and the posting time.
nixl_status_t transfer(agent &ag, nixlXferReqH *req, double &post_us, double limit_s = 60) {
    auto t0 = clk::now();
    nixl_status_t st = ag.a.postXferReq(req);
    post_us = us_since(t0);
    while (st == NIXL_IN_PROG) {
        if (us_since(t0) > limit_s * 1e6) return NIXL_IN_PROG;
        st = ag.a.getXferStatus(req);
    }
    return st;
}

nixlXferReqH *prepare(agent &ag, const options &o, blocks &mem, const peer &p, double &prep_us) {
    std::vector<uintptr_t> local(mem.addrs.begin(), mem.addrs.end());
    nixl_xfer_dlist_t l = xfer_list(local, o.size), r = xfer_list(p.addrs, o.size);
    nixlXferReqH *req = nullptr;
    auto t0 = clk::now();
    check_nixl(ag.a.createXferReq(o.op == "write" ? NIXL_WRITE : NIXL_READ, l, r, p.name, req, &ag.extra),
               "createXferReq");
    prep_us = us_since(t0);
    return req;
}

// One checked transfer of generation gen: written from here and checked there, or read from there (which the
// target filled with gen) into blocks cleared here and checked here. Returns the number of bad blocks.
size_t checked_transfer(agent &ag, const options &o, blocks &mem, peer &p, nixlXferReqH *req, uint32_t gen) {
    double post;
    if (o.op == "write") mem.fill(gen);
    else { p.ask("fill " + std::to_string(gen)); mem.fill(0); }
    nixl_status_t st = transfer(ag, req, post);
    if (st != NIXL_SUCCESS) die(std::string("checked transfer: ") + nixlEnumStrings::statusStr(st));
    return o.op == "write" ? std::stoul(p.ask("check " + std::to_string(gen))) : mem.verify(gen);
}

size_t free_bytes() {
    size_t fr, total;
    check_cu(cuMemGetInfo(&fr, &total), "cuMemGetInfo");
    return fr;
}

int run_initiator(const options &o) {
    side me(o, "initiator");
    agent &ag = me.ag;
    blocks &mem = me.mem;
    double reg_us = me.reg_us;
    peer p = meet(ag, o, o.name);
    double prep_us;
    nixlXferReqH *req = prepare(ag, o, mem, p, prep_us);
    size_t bad = checked_transfer(ag, o, mem, p, req, 2);
    std::vector<double> xfer_us, post_us;
    for (int it = 0; it < o.warmup + o.iters; it++) {
        double post;
        auto t0 = clk::now();
        nixl_status_t st = transfer(ag, req, post);
        double us = us_since(t0);
        if (st != NIXL_SUCCESS) die(std::string("transfer: ") + nixlEnumStrings::statusStr(st));
        if (it >= o.warmup) { xfer_us.push_back(us); post_us.push_back(post); }
    }
    bad += checked_transfer(ag, o, mem, p, req, 3);
    double xfer = median(xfer_us), bytes = double(o.size) * o.blocks;
    std::printf("RESULT op=%s layout=%s size=%zu blocks=%zu iters=%d gbps=%.3f xfer_us=%.1f xfer_min_us=%.1f "
                "xfer_max_us=%.1f us_per_desc=%.3f post_us=%.1f post_us_per_desc=%.3f prep_us=%.1f reg_us=%.1f "
                "bad_blocks=%zu data=%s\n", o.op.c_str(), o.layout.c_str(), o.size, o.blocks, o.iters,
                bytes / xfer / 1e3, xfer, *std::min_element(xfer_us.begin(), xfer_us.end()),
                *std::max_element(xfer_us.begin(), xfer_us.end()), xfer / o.blocks, median(post_us),
                median(post_us) / o.blocks, prep_us, reg_us, bad, bad ? "FAILED" : "ok");
    check_nixl(ag.a.releaseXferReq(req), "releaseXferReq");
    p.ask("quit");
    return bad ? 1 : 0;
}

int reap(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

// Faults as a serving system meets them: the decode peer killed in the middle of a batch, and a transfer
// released while in flight. The targets here hold a large allocation (-s x -k) so that its release shows in
// the GPU's free memory.
int run_faults(const options &o) {
    side me(o, "initiator");
    agent &ag = me.ag;
    blocks &mem = me.mem;
    int rc = 0;
    if (o.fault == "kill") {
        size_t free_before = free_bytes();
        pid_t pid = spawn_target(o, "victim", o.size, o.blocks);
        peer p = meet(ag, o, "victim");
        double prep;
        nixlXferReqH *req = prepare(ag, o, mem, p, prep);
        size_t bad = checked_transfer(ag, o, mem, p, req, 2);
        double post;
        auto t0 = clk::now();
        nixl_status_t st = ag.a.postXferReq(req);
        kill(pid, SIGKILL);
        reap(pid);
        std::fprintf(stderr, "cux_nixl_kv: victim killed, batch posted (%s)\n", nixlEnumStrings::statusStr(st).c_str());
        while (st == NIXL_IN_PROG && us_since(t0) < 10e6) st = ag.a.getXferStatus(req);
        double end_ms = us_since(t0) / 1e3;
        std::fprintf(stderr, "cux_nixl_kv: killed batch ended %s after %.1f ms\n",
                     nixlEnumStrings::statusStr(st).c_str(), end_ms);
        // Later transfers to the dead peer: each must end (success or error) within a bound, none may hang; NIXL
        // refuses them once UCX has reported the peer's endpoint failed.
        int later = 0, later_err = 0;
        double later_max_ms = 0;
        for (; later < 50; later++) {
            auto t1 = clk::now();
            nixl_status_t s2 = transfer(ag, req, post, 10);
            later_max_ms = std::max(later_max_ms, us_since(t1) / 1e3);
            if (s2 == NIXL_IN_PROG) { later_err = -1; break; }
            if (s2 != NIXL_SUCCESS) { later_err++; break; }
        }
        std::fprintf(stderr, "cux_nixl_kv: %d later transfers, then %s\n", later,
                     later_err < 0 ? "one that did not end in 10 s" : later_err ? "an error" : "no error");
        size_t free_dead = free_bytes();
        ag.a.releaseXferReq(req);
        // NIXL forgets a peer whose connection failed by itself; then there is nothing left to invalidate.
        nixl_status_t inv = ag.a.invalidateRemoteMD("victim");
        if (inv != NIXL_SUCCESS && inv != NIXL_ERR_NOT_FOUND) check_nixl(inv, "invalidateRemoteMD");
        size_t free_released = free_bytes();
        for (int i = 0; i < 100 && free_released < free_dead + o.size * o.blocks / 2; i++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            free_released = free_bytes();
        }
        auto t2 = clk::now();
        pid_t pid2 = spawn_target(o, "successor", o.size, o.blocks);
        peer p2 = meet(ag, o, "successor");
        nixlXferReqH *req2 = prepare(ag, o, mem, p2, prep);
        size_t bad2 = checked_transfer(ag, o, mem, p2, req2, 4);
        double new_peer_ms = us_since(t2) / 1e3;
        ag.a.releaseXferReq(req2);
        p2.ask("quit");
        reap(pid2);
        std::printf("RESULT fault=kill op=%s size=%zu blocks=%zu first_check_bad=%zu killed_batch_status=%s "
                    "killed_batch_end_ms=%.1f later_transfers=%d later_status=%s later_max_ms=%.1f invalidate=%s "
                    "dead_peer_mb_held=%.0f released_mb=%.0f new_peer_ms=%.1f new_peer_bad_blocks=%zu data=%s\n",
                    o.op.c_str(), o.size, o.blocks, bad, nixlEnumStrings::statusStr(st).c_str(), end_ms, later,
                    later_err < 0 ? "HANG" : later_err ? "error" : "success", later_max_ms,
                    nixlEnumStrings::statusStr(inv).c_str(),
                    ((double)free_before - (double)free_dead) / 1e6,
                    ((double)free_released - (double)free_dead) / 1e6, new_peer_ms, bad2,
                    (bad || bad2 || st == NIXL_IN_PROG || later_err < 0) ? "FAILED" : "ok");
        rc = (bad || bad2 || st == NIXL_IN_PROG || later_err < 0) ? 1 : 0;
    } else if (o.fault == "release") {
        pid_t pid = spawn_target(o, "target", o.size, o.blocks);
        peer p = meet(ag, o, "target");
        double prep;
        nixlXferReqH *req = prepare(ag, o, mem, p, prep);
        size_t bad = checked_transfer(ag, o, mem, p, req, 2);
        mem.fill(5);
        auto t0 = clk::now();
        nixl_status_t posted = ag.a.postXferReq(req);
        nixl_status_t released = ag.a.releaseXferReq(req);
        double release_us = us_since(t0);
        if (released != NIXL_SUCCESS) { // refused (NIXL's word: "cannot be aborted"): it is still ours to end
            while (ag.a.getXferStatus(req) == NIXL_IN_PROG) {}
            check_nixl(ag.a.releaseXferReq(req), "releaseXferReq after the end");
        }
        std::string a = p.ask("checksum");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::string b = p.ask("checksum");
        // The agent must still work: a new request, checked.
        nixlXferReqH *req2 = prepare(ag, o, mem, p, prep);
        size_t bad2 = checked_transfer(ag, o, mem, p, req2, 6);
        ag.a.releaseXferReq(req2);
        p.ask("quit");
        reap(pid);
        bool quiet = a == b;
        std::printf("RESULT fault=release op=%s size=%zu blocks=%zu posted=%s released=%s release_us=%.1f "
                    "written_after_release=%s next_transfer_bad_blocks=%zu data=%s\n", o.op.c_str(), o.size,
                    o.blocks, nixlEnumStrings::statusStr(posted).c_str(),
                    nixlEnumStrings::statusStr(released).c_str(), release_us, quiet ? "no" : "YES", bad + bad2,
                    (bad || bad2 || !quiet) ? "FAILED" : "ok");
        rc = (bad || bad2 || !quiet) ? 1 : 0;
    } else {
        die("unknown fault " + o.fault);
    }
    return rc;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) die("usage: cux_nixl_kv target|initiator DIR [-s SIZE] [-k BLOCKS] [-l one|many] "
                      "[-o write|read] [-i ITERS] [-w WARMUP] [-f kill|release] [-n NAME]");
    options o;
    o.role = argv[1];
    o.dir = argv[2];
    for (int i = 3; i + 1 < argc; i += 2) {
        std::string f = argv[i];
        const char *v = argv[i + 1];
        if (f == "-s") o.size = parse_size(v);
        else if (f == "-k") o.blocks = parse_size(v);
        else if (f == "-l") o.layout = v;
        else if (f == "-o") o.op = v;
        else if (f == "-i") o.iters = std::atoi(v);
        else if (f == "-w") o.warmup = std::atoi(v);
        else if (f == "-f") o.fault = v;
        else if (f == "-n") o.name = v;
        else die("unknown option " + f);
    }
    if (o.size % 8 || o.blocks == 0 || (o.layout != "one" && o.layout != "many") ||
        (o.op != "write" && o.op != "read"))
        die("bad options");
    mkdir(o.dir.c_str(), 0700);
    check_cu(cuInit(0), "cuInit");
    CUdevice dev;
    CUcontext ctx;
    check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check_cu(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check_cu(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    if (o.role == "target") return run_target(o);
    if (o.role != "initiator") die("role must be target or initiator");
    return o.fault.empty() ? run_initiator(o) : run_faults(o);
}
