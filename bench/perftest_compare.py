#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare CUDA transport modules with two-process ucx_perftest runs on one UCX build.

Each module file is put in turn into the UCX module directory (as libuct_cuda.so.0), so both run on the same
UCX core. Runs are interleaved (the module order alternates between repeats), every case is repeated, and
the report gives median, min and max per case and module, and the ratio ours/reference of the medians.
Bandwidth is decimal GB/s (ucx_perftest prints MiB/s); latency is microseconds (ucx_perftest's average).

  perftest_compare.py --prefix /opt/ucx-ref --module reference=/path/a.so --module ours=/path/b.so \
      --cases copy --repeats 3 --out DIR

A module path of "-" installs nothing: the module comes from that entry's environment (LD_PRELOAD), which is
how a stock UCX without CUDA is measured (gpu-host/run stock-ucx).
"""
import argparse
import csv
import datetime
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

MB = 1 << 20

KB = 1 << 10
COPY_TLS = "self,sm,cuda_copy"
IPC_TLS = "self,sm,cuda_copy,cuda_ipc"
TCP_TLS = "self,tcp,cuda_copy"  # shared memory off, as between two hosts without RDMA

# name, test, size, memory types, iterations, warm-up, UCX_TLS, CUDA_VISIBLE_DEVICES of (server, client) or
# None for all GPUs (ucx_perftest then puts the server on GPU0 and the client on GPU1).
IPC_BW_CASES = [
    ("tag_bw cuda 64KB GPU0->GPU1", "tag_bw", 64 * KB, "cuda", 2000, 200, IPC_TLS, None),
    ("tag_bw cuda 1MB GPU0->GPU1", "tag_bw", MB, "cuda", 1000, 100, IPC_TLS, None),
    ("tag_bw cuda 16MB GPU0->GPU1", "tag_bw", 16 * MB, "cuda", 200, 20, IPC_TLS, None),
    ("tag_bw cuda 256MB GPU0->GPU1", "tag_bw", 256 * MB, "cuda", 40, 4, IPC_TLS, None),
]

IPC_RMA_CASES = [
        ("ucp_put_bw cuda 1MB GPU0->GPU1", "ucp_put_bw", MB, "cuda", 1000, 100, IPC_TLS, None),
        ("ucp_put_bw cuda 64MB GPU0->GPU1", "ucp_put_bw", 64 * MB, "cuda", 100, 10, IPC_TLS, None),
        ("ucp_get cuda 1MB GPU0->GPU1", "ucp_get", MB, "cuda", 1000, 100, IPC_TLS, None),
        ("ucp_get cuda 64MB GPU0->GPU1", "ucp_get", 64 * MB, "cuda", 100, 10, IPC_TLS, None),
]

# Both processes on GPU0: two processes time-slice one GPU.
ONE_GPU_HOST_CASES = [
        ("one GPU: tag_bw host->cuda 16MB", "tag_bw", 16 * MB, "host,cuda", 40, 4, COPY_TLS, (0, 0)),
        ("one GPU: tag_lat host->cuda 8B", "tag_lat", 8, "host,cuda", 2000, 200, COPY_TLS, (0, 0)),
]


def small_cases(where, placement, tests=("tag_bw", "ucp_put_bw", "ucp_get")):
    """Issue 22, item 2: tag_bw, put and get of GPU memory from 1 KB to 64 KB."""
    return [(f"{where}: {test} cuda {size // KB}KB", test, size, "cuda", 2000, 200, IPC_TLS, placement)
            for test in tests
            for size in (1 * KB, 2 * KB, 4 * KB, 8 * KB, 16 * KB, 32 * KB, 64 * KB)]


def read_cases(where, placement):
    """UCX_CUDA_IPC_ENABLE_GET_ZCOPY: rendezvous (which reads or writes) and gets of GPU memory."""
    return [(f"{where}: tag_bw cuda {label}", "tag_bw", size, "cuda", iters, iters // 10, IPC_TLS, placement)
            for label, size, iters in (("64KB", 64 * KB, 2000), ("1MB", MB, 1000), ("16MB", 16 * MB, 200))] + \
           [(f"{where}: ucp_get cuda 1MB", "ucp_get", MB, "cuda", 1000, 100, IPC_TLS, placement)]


CASE_SETS = {
    "copy": [
        ("tag_bw host->cuda 16MB", "tag_bw", 16 * MB, "host,cuda", 40, 4, COPY_TLS, (0, 0)),
        ("tag_bw cuda->host 16MB", "tag_bw", 16 * MB, "cuda,host", 40, 4, COPY_TLS, (0, 0)),
        ("tag_lat cuda 8B", "tag_lat", 8, "cuda", 10000, 1000, COPY_TLS, (0, 0)),
        ("tag_lat host->cuda 8B", "tag_lat", 8, "host,cuda", 10000, 1000, COPY_TLS, (0, 0)),
    ],
    "ipc": [("tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 10000, 1000, IPC_TLS, None)] + IPC_BW_CASES,
    # The matrix of issue #5.
    "full": [
        ("tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 10000, 1000, IPC_TLS, None),
        ("tag_lat cuda 64KB GPU0<->GPU1", "tag_lat", 64 * KB, "cuda", 2000, 200, IPC_TLS, None),
        ("tag_lat cuda 1MB GPU0<->GPU1", "tag_lat", MB, "cuda", 500, 50, IPC_TLS, None),
    ] + IPC_BW_CASES + IPC_RMA_CASES + [
        ("tag_bw host->cuda 16MB", "tag_bw", 16 * MB, "host,cuda", 40, 4, COPY_TLS, (0, 0)),
        ("tag_bw cuda->host 16MB", "tag_bw", 16 * MB, "cuda,host", 40, 4, COPY_TLS, (0, 0)),
        ("tag_lat host->cuda 8B", "tag_lat", 8, "host,cuda", 10000, 1000, COPY_TLS, (0, 0)),
    ],
    # What synchronous memory operations cost (issue 9): GPU buffers UCP asks about, processes on GPU0 and GPU1.
    "integrity": [
        ("tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 10000, 1000, IPC_TLS, None),
        ("tag_bw cuda 1MB GPU0->GPU1", "tag_bw", MB, "cuda", 1000, 100, IPC_TLS, None),
        ("tag_lat host->cuda 8B GPU0<->GPU1", "tag_lat", 8, "host,cuda", 10000, 1000, COPY_TLS, (0, 1)),
    ],
    # Issue 12, on UCX 1.22: the two-GPU placement is the headline (host<->GPU with the processes on GPU0 and
    # GPU1), the one-GPU placement its own rows, and a run with shared memory off (as between hosts without RDMA).
    "v122": [
        ("tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 10000, 1000, IPC_TLS, None),
    ] + IPC_BW_CASES + IPC_RMA_CASES + [
        # users name both transports; UCP 1.22 then stages host data through GPU memory
        ("tag_bw host->cuda 16MB GPU0,GPU1", "tag_bw", 16 * MB, "host,cuda", 40, 4, IPC_TLS, (0, 1)),
        ("tag_bw cuda->host 16MB GPU0,GPU1", "tag_bw", 16 * MB, "cuda,host", 40, 4, IPC_TLS, (0, 1)),
        ("tag_lat host->cuda 8B GPU0,GPU1", "tag_lat", 8, "host,cuda", 10000, 1000, IPC_TLS, (0, 1)),
        ("cuda_copy only: tag_bw host->cuda 16MB GPU0,GPU1", "tag_bw", 16 * MB, "host,cuda", 40, 4, COPY_TLS,
         (0, 1)),
        ("cuda_copy only: tag_bw cuda->host 16MB GPU0,GPU1", "tag_bw", 16 * MB, "cuda,host", 40, 4, COPY_TLS,
         (0, 1)),
        ("cuda_copy only: tag_lat host->cuda 8B GPU0,GPU1", "tag_lat", 8, "host,cuda", 10000, 1000, COPY_TLS,
         (0, 1)),
        ("tcp: tag_bw cuda 16MB GPU0->GPU1", "tag_bw", 16 * MB, "cuda", 40, 4, TCP_TLS, (0, 1)),
        ("tcp: tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 5000, 500, TCP_TLS, (0, 1)),
    ] + ONE_GPU_HOST_CASES,
    # Issue 12's stretch: two processes on one GPU (run it once as it is, once with the MPS daemon started).
    "one-gpu": [("one GPU: tag_lat cuda 8B", "tag_lat", 8, "cuda", 2000, 200, IPC_TLS, (0, 0))] + ONE_GPU_HOST_CASES,
    # Issue 22, item 2: small messages, every size from 1 KB to 64 KB, both processes on one GPU ("small") or
    # on GPU0 and GPU1 ("small-two-gpus").
    "small": small_cases("one GPU", (0, 0)),
    "small-two-gpus": small_cases("GPU0->GPU1", None),
    "small-tag-bw": small_cases("one GPU", (0, 0), ("tag_bw",)),
    # Reads offered to UCP or not (module entries carry UCX_CUDA_IPC_ENABLE_GET_ZCOPY), both processes on one GPU
    # ("reads") or on GPU0 and GPU1 ("reads-two-gpus").
    "reads": read_cases("one GPU", (0, 0)),
    "reads-two-gpus": read_cases("GPU0->GPU1", None),
    # Host memory only, with the CUDA transports enabled: what they change for messages that never touch a GPU
    # (compare with a module entry whose UCX_TLS is ^cuda).
    "host": [
        ("host: tag_bw host 16MB", "tag_bw", 16 * MB, "host", 40, 4, IPC_TLS, (0, 1)),
        ("host: tag_bw host 1MB", "tag_bw", MB, "host", 200, 20, IPC_TLS, (0, 1)),
        ("host: tag_lat host 8B", "tag_lat", 8, "host", 10000, 1000, IPC_TLS, (0, 1)),
    ],
    # A stock UCX with the module preloaded: both transports, and what GPU-memory detection costs host buffers.
    "stock": [
        ("tag_lat cuda 8B GPU0<->GPU1", "tag_lat", 8, "cuda", 10000, 1000, IPC_TLS, None),
        ("tag_bw cuda 16MB GPU0->GPU1", "tag_bw", 16 * MB, "cuda", 200, 20, IPC_TLS, None),
        ("tag_bw host->cuda 16MB", "tag_bw", 16 * MB, "host,cuda", 40, 4, COPY_TLS, (0, 0)),
        ("tag_bw cuda->host 16MB", "tag_bw", 16 * MB, "cuda,host", 40, 4, COPY_TLS, (0, 0)),
        ("tag_lat host 8B", "tag_lat", 8, "host", 10000, 1000, IPC_TLS, (0, 0)),
    ],
}


def not_supported(test, ucx_version):
    """Why a test cannot run on this UCX core, or None."""
    if test in ("ucp_put_bw", "ucp_get") and re.search(r"\b1\.13\.", ucx_version):
        return "UCP 1.13 sends GPU memory through sysv am_bcopy for RMA and crashes, whatever the module"
    return None


def is_latency(test):
    return test.endswith("_lat")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def module_entries(specs):
    """--module NAME=PATH[,VAR=VALUE...] entries: [(name, path)] in order, and {name: {VAR: VALUE}} for their runs
    (one module file under two names, each with its own setting, compares the setting interleaved)."""
    modules, module_env = [], {}
    for spec in specs:
        name, rest = spec.split("=", 1)
        path, *env_items = rest.split(",")
        modules.append((name, path))
        module_env[name] = dict(item.split("=", 1) for item in env_items)
    return modules, module_env


def install_module(src, moddir):
    dst = os.path.join(moddir, "libuct_cuda.so.0")
    tmp = dst + ".swap"
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o755)
    os.replace(tmp, dst)


def pinned(cmd, cpu):
    """Bind a process to one core (ucx_perftest warns, and wanders, without it)."""
    return (["taskset", "-c", str(cpu)] + cmd) if cpu is not None and shutil.which("taskset") else cmd


def protocol_lines(text):
    """The protocol tables UCX prints with UCX_PROTO_INFO=y (1.16+): log lines ("[time] [host:pid:thread] ")
    that hold a table's border or row, without that prefix (ucx_perftest's own result table has none)."""
    lines = []
    for line in text.splitlines():
        body = re.sub(r"^(\[[^\]]*\]\s*)+", "", line)
        if body != line and re.match(r"^[|+]", body):
            lines.append(body.rstrip())
    return lines


def run_case(prefix, case, timeout, cpus, extra_env, proto_info=False):
    name, test, size, mem, iters, warmup, tls, gpus = case
    perftest = os.path.join(prefix, "bin", "ucx_perftest")
    port = str(free_port())
    base_env = dict(os.environ, UCX_TLS=tls)
    base_env.update(extra_env)  # a module entry may set its own UCX_TLS
    if proto_info:
        base_env["UCX_PROTO_INFO"] = "y"
    server_env, client_env = dict(base_env), dict(base_env)
    if gpus is not None:
        server_env["CUDA_VISIBLE_DEVICES"] = str(gpus[0])
        client_env["CUDA_VISIBLE_DEVICES"] = str(gpus[1])
    server = subprocess.Popen(pinned([perftest, "-p", port], cpus[0]), env=server_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    cmd = [perftest, "localhost", "-p", port, "-t", test, "-m", mem, "-s", str(size), "-n", str(iters),
           "-w", str(warmup)]
    try:
        client = subprocess.run(pinned(cmd, cpus[1]), env=client_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, timeout=timeout)
        out, rc = client.stdout, client.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or "") + "\n[timed out]", -1
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    server_out = server.stdout.read()
    final = [line for line in out.splitlines() if line.startswith("Final:")]
    protocols = {"client": protocol_lines(out), "server": protocol_lines(server_out)}
    if rc != 0 or not final:
        return None, " ".join(cmd) + "\n" + out[-3000:] + "\n--- server ---\n" + server_out[-2000:], protocols
    f = final[-1].split()
    # Final: iters p50_lat avg_lat overall_lat avg_bw overall_bw avg_rate overall_rate
    if is_latency(test):
        value = float(f[3])
    else:
        value = float(f[6]) * MB / 1e9
    return value, final[-1], protocols


def plot_bandwidth(cases, modules, results, skipped, path, env):
    """PNG of tag_bw GPU-to-GPU bandwidth against size, median with min-max bars, one line per module."""
    series = [c for c in cases if c[1] == "tag_bw" and c[3] == "cuda" and c[6] == IPC_TLS and not skipped[c[0]]]
    if len(series) < 2:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot")
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mname, _ in modules:
        xs, ys, lo, hi = [], [], [], []
        for case in series:
            vals = results.get((case[0], mname))
            if vals:
                med = statistics.median(vals)
                xs.append(case[2])
                ys.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=mname)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    gpu_name = env["gpu"].split(";")[0].split(",")[-1].strip()
    where = "both processes on GPU0" if all(c[7] == (0, 0) for c in series) else "GPU0->GPU1"
    ax.set_title("ucx_perftest tag_bw -m cuda, %s\n%s, %s" % (where, env["ucx"], gpu_name))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def write_protocols(path, cases, modules, proto, env):
    """protocols-full.md: per case and module, the protocol tables of both processes (UCX_PROTO_INFO=y)."""
    out = ["# Protocols UCP chose (UCX_PROTO_INFO=y, first repeat)", "", "- core: %(ucx)s" % env, ""]
    for case in cases:
        for mname, _ in modules:
            p = proto.get((case[0], mname))
            if p is None:
                continue
            out += ["## %s, %s" % (case[0], mname), ""]
            for side in ("client", "server"):
                out += ["%s (%s):" % (side, "no protocol lines" if not p[side] else "%d lines" % len(p[side])),
                        "```"] + p[side] + ["```", ""]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def read_protocols(path):
    """The tables of a protocols-full.md: {(case name, module): {"client": [lines], "server": [lines]}}."""
    proto, key, side, lines = {}, None, None, None
    with open(path) as f:
        text = f.read()
    for line in text.splitlines():
        m = re.match(r"^## (.*), ([^,]+)$", line)
        if m:
            key = (m.group(1), m.group(2))
            proto[key] = {"client": [], "server": []}
            continue
        m = re.match(r"^(client|server) \(", line)
        if m and key:
            side, lines = m.group(1), proto[key][m.group(1)]
            continue
        if side and (line.startswith("+") or line.startswith("|")):
            lines.append(line)
    return proto


def parse_tables(lines):
    """UCX's protocol tables: [(title lines, [[range, description, config], ...])]."""
    tables, i = [], 0
    while i < len(lines):
        if lines[i].startswith("+") and i + 1 < len(lines) and lines[i + 1].count("|") == 2:
            j, title = i + 1, []
            while j < len(lines) and lines[j].startswith("|") and lines[j].count("|") == 2:
                title.append(lines[j].strip("| ").strip())
                j += 1
            k, rows = j + 3, []  # border, header, border
            while k < len(lines) and lines[k].startswith("|") and lines[k].count("|") >= 4:
                rows.append([c.strip() for c in lines[k].strip().strip("|").split("|")][:3])
                k += 1
            tables.append((title, rows))
            i = k
        else:
            i += 1
    return tables


def range_covers(text, size):
    """Whether a table's range ("0", "2285..210934", "256K..inf", "1..4M") holds size."""
    def value(v):
        if v == "inf":
            return float("inf")
        mult = {"K": KB, "M": MB, "G": 1 << 30}.get(v[-1:], 1)
        return int(v[:-1] if mult > 1 else v) * mult
    lo, _, hi = text.partition("..")
    try:
        return value(lo) <= size <= value(hi or lo)
    except ValueError:
        return False


def case_operation(case, title):
    """Whether a table title describes the operation a case runs (device names dropped: 'cuda/GPU1' -> 'cuda')."""
    _, test, _, mem, *_ = case
    mems = mem.split(",")
    send, recv = mems[0], mems[-1]
    pairs = {(send, recv), (recv, send)} if is_latency(test) else {(send, recv)}  # a ping-pong sends both ways
    src = re.search(r"\bfrom (cuda|host)", title)
    dst = re.search(r"\b(?:into|to) (cuda|host)", title)
    src, dst = src and src.group(1), dst and dst.group(1)
    if test.startswith("tag_"):
        if title.startswith("tagged message"):
            return src in {a for a, _ in pairs}
        return title.startswith("rendezvous data") and (src, dst) in pairs
    if test == "ucp_put_bw":
        return title.startswith("remote memory write") and (src, dst) == (send, recv)
    if test == "ucp_get":
        return title.startswith("remote memory read") and (src, dst) == (recv, send)
    return False


def protocol_summary(cases, modules, proto):
    """protocols.md: for each case, the protocol each module's processes chose for the case's operation at its
    message size, and whether the two modules differ."""
    out = ["# Protocols UCP chose, by case (UCX_PROTO_INFO=y, first repeat)", "",
           "For each case: the tables of the operation it runs, on both processes, and the row that covers its "
           "message size; device names are dropped (`cuda/GPU1` and `cuda/00:07.0` are the same buffer, named by "
           "UCX's topology or by the module's PCI address). `(?)` marks a choice the peer makes. Self "
           "(loopback) configurations are left out. The full tables: `protocols-full.md`.", ""]
    for case in cases:
        chosen = {}
        for mname, _ in modules:
            rows = []
            for side in ("client", "server"):
                for title, table in parse_tables(proto.get((case[0], mname), {}).get(side, [])):
                    if not title or " self cfg" in title[0]:
                        continue
                    op = re.sub(r"(cuda)/\S+", r"\1", title[-1])
                    if not case_operation(case, op):
                        continue
                    for rng, desc, config in table:
                        if range_covers(rng, case[2]) and (side, op, rng, desc, config) not in rows:
                            rows.append((side, op, rng, desc, config))
            chosen[mname] = rows
        if not any(chosen.values()):
            continue
        out += ["## %s (%d B)" % (case[0], case[2]), "", "| module | process | operation | range | protocol | "
                "transports |", "|---|---|---|---|---|---|"]
        for mname, rows in chosen.items():
            out += ["| %s | %s | %s | %s | %s | %s |" % ((mname,) + r) for r in rows]
        kinds = {mname: sorted({(r[0], r[1], r[3], r[4]) for r in rows}) for mname, rows in chosen.items()}
        same = len({tuple(k) for k in kinds.values()}) == 1
        out += ["", "Every module: the same protocols." if same else "The modules differ.", ""]
    return "\n".join(out) + "\n"


def environment():
    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=30).stdout.strip()
        except Exception as e:  # noqa: BLE001 - reported, never fatal
            return "n/a (%s)" % e
    return {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": sh("nvidia-smi --query-gpu=index,name --format=csv,noheader | paste -sd';'"),
        "driver": sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1"),
        "cuda": sh("nvidia-smi | sed -n 's/.*CUDA Version: \\([0-9.]*\\).*/\\1/p' | head -1"),
        "host": sh("hostname"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", required=True, help="UCX installation whose ucx_perftest is used")
    ap.add_argument("--module", action="append", required=True, metavar="NAME=PATH[,VAR=VALUE...]",
                    help="module to compare, with optional environment for its runs (a value cannot hold a comma; "
                         "UCX_TLS=^cuda can); the first is the reference")
    ap.add_argument("--cases", default="copy", help="comma-separated case sets: " + ", ".join(sorted(CASE_SETS)))
    ap.add_argument("--sizes", help="comma-separated message sizes in bytes: only the cases of these sizes")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run")
    ap.add_argument("--cpus", default="1,3", help="cores for server,client ('' for no binding)")
    ap.add_argument("--proto-info", action="store_true",
                    help="run the first repeat with UCX_PROTO_INFO=y: protocols.md says which protocol each case "
                         "used, protocols-full.md holds every table UCX printed (UCX 1.16 and later)")
    ap.add_argument("--summarize", metavar="PROTOCOLS_FULL_MD",
                    help="only write OUT/protocols.md from the tables of an earlier run's protocols-full.md (with "
                         "--cases and --module as in that run)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    modules, module_env = module_entries(args.module)
    if args.summarize:
        cases = [case for name in args.cases.split(",") for case in CASE_SETS[name]]
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "protocols.md"), "w") as f:
            f.write(protocol_summary(cases, modules, read_protocols(args.summarize)))
        return 0
    cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else [None, None]
    moddir = os.path.join(args.prefix, "lib", "ucx")
    os.makedirs(args.out, exist_ok=True)
    ucx_version = subprocess.run([os.path.join(args.prefix, "bin", "ucx_info"), "-v"], stdout=subprocess.PIPE,
                                 text=True).stdout.splitlines()[0].replace("# ", "")
    env = environment()
    env["ucx"] = ucx_version.replace("Version", "UCX").strip()
    cases = [case for name in args.cases.split(",") for case in CASE_SETS[name]]
    if args.sizes:
        cases = [case for case in cases if case[2] in {int(s) for s in args.sizes.split(",")}]

    results = {}  # (case name, module name) -> [values]
    proto = {}    # (case name, module name) -> {"client": [lines], "server": [lines]}
    errors = []
    rows = []
    skipped = {case[0]: not_supported(case[1], ucx_version) for case in cases}
    for rep in range(args.repeats):
        for case in cases:
            if skipped[case[0]]:
                continue
            order = modules if rep % 2 == 0 else list(reversed(modules))
            for mname, mpath in order:
                if mpath != "-":
                    install_module(mpath, moddir)
                value, detail, protocols = run_case(args.prefix, case, args.timeout, cpus, module_env[mname],
                                                    proto_info=args.proto_info and rep == 0)
                if args.proto_info and rep == 0:
                    proto[(case[0], mname)] = protocols
                print("repeat %d %-28s %-10s %s" % (rep, case[0], mname,
                                                    "FAILED" if value is None else "%.3f" % value), flush=True)
                if value is None:
                    errors.append("repeat %d, %s, %s:\n%s" % (rep, case[0], mname, detail))
                else:
                    results.setdefault((case[0], mname), []).append(value)
                rows.append([rep, case[0], case[1], case[2], case[3], mname,
                             "" if value is None else "%.4f" % value,
                             "us" if is_latency(case[1]) else "GB/s", detail if value is not None else "FAILED"])
    if modules[-1][1] != "-":
        install_module(modules[-1][1], moddir)  # leave the last module (ours) installed

    with open(os.path.join(args.out, "perftest.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["repeat", "case", "test", "size", "mem", "module", "value", "unit", "final_line"])
        w.writerows(rows)

    ref = modules[0][0]
    lines = ["# ucx_perftest: %s" % ", ".join(m for m, _ in modules), "",
             "- date: %(date)s" % env, "- GPUs: %(gpu)s" % env, "- driver: %(driver)s, CUDA %(cuda)s" % env,
             "- core: %(ucx)s (same build for every module)" % env] + \
            ["- %s: extra environment %s" % (m, " ".join("%s=%s" % kv for kv in e.items()))
             for m, e in module_env.items() if e] + [
             "- %d repeats per cell, interleaved; median (min-max); server/client on cores %s" %
             (args.repeats, args.cpus or "unbound"), "",
             "| case | unit | " + " | ".join(m for m, _ in modules) + " | ratio " +
             " | ".join("%s/%s" % (m, ref) for m, _ in modules[1:]) + " |",
             "|---|---|" + "---|" * len(modules) + "---|" * (len(modules) - 1)]
    for case in cases:
        unit = "us" if is_latency(case[1]) else "GB/s"
        if skipped[case[0]]:
            lines.append("| %s | %s | %s | n/a: %s |" % (case[0], unit, " | ".join("n/a" for _ in modules),
                                                      skipped[case[0]]))
            continue
        cells, medians = [], {}
        for mname, _ in modules:
            vals = results.get((case[0], mname), [])
            if vals:
                medians[mname] = statistics.median(vals)
                cells.append("%.2f (%.2f-%.2f)" % (medians[mname], min(vals), max(vals)))
            else:
                cells.append("failed")
        ratios = []
        for mname, _ in modules[1:]:
            if mname in medians and ref in medians and medians[ref] > 0:
                ratios.append("%.2fx" % (medians[mname] / medians[ref]))
            else:
                ratios.append("n/a")
        lines.append("| %s | %s | %s | %s |" % (case[0], unit, " | ".join(cells), " | ".join(ratios)))
    lines += ["", "Latency: lower is better (ratio < 1 means ours is faster). Bandwidth: higher is better."]
    plot = plot_bandwidth(cases, modules, results, skipped, os.path.join(args.out, "bandwidth.png"), env)
    if plot:
        lines += ["", "Bandwidth against message size (GPU0->GPU1, tag_bw): `%s`" % os.path.basename(plot)]
    if proto:
        write_protocols(os.path.join(args.out, "protocols-full.md"), cases, modules, proto, env)
        with open(os.path.join(args.out, "protocols.md"), "w") as f:
            f.write(protocol_summary(cases, modules, proto))
        lines += ["", "The protocols UCP chose in each case, for each module: `protocols.md` (all of UCX's tables: "
                  "`protocols-full.md`)"]
    if errors:
        lines += ["", "## Failed runs", ""] + ["```\n%s\n```" % e for e in errors]
    with open(os.path.join(args.out, "perftest.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
