#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare CUDA transport modules under NIXL's own benchmark, nixlbench, on one UCX build (issue 46).

Each module file is put in turn into the UCX module directory (as libuct_cuda.so.0), so every module runs on
the same UCX core and the same NIXL. A run is two nixlbench processes with the ASIO runtime (no etcd): the
first to start listens and is the initiator, the second (the target, optionally under --target-wrap, such as
`unshare --pid --fork --mount-proc`) connects. Runs are interleaved (module order alternates between
repeats); the report gives, per operation, block size and batch size (descriptors per transfer), the median
GB/s with min and max per module, the ratio of the medians, and the time per descriptor. nixlbench's
consistency check (--check_consistency, which this script always passes) must pass in both processes for a
run's figures to count: nixlbench stops at the first configuration that fails it and exits non-zero.

  nixl_compare.py --prefix UCX --nixl NIXL_PREFIX --module ucx=A.so --module ours=B.so \
      --args "--initiator_seg_type VRAM --target_seg_type VRAM" --ops WRITE,READ --repeats 3 --out DIR

With more than two modules the report also gives every module's cells beside the first's. --from-raw rebuilds the
report from an earlier run's DIR/raw (same --module names, --ops and --repeats; --prefix and --nixl are then not
used): a run whose files are missing (a call cut short) is listed as not done, and exit statuses are not known
there (the run's log has them), only the consistency check's word in the output.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perftest_compare import environment, free_port, install_module, module_entries  # noqa: E402

COLUMNS = ["block", "batch", "gbps", "lat_us", "prep_us", "prep_p99_us", "post_us", "post_p99_us", "tx_us",
           "tx_p99_us"]


def parse(text):
    """nixlbench's result rows (block size, batch size, GB/s, then latencies in us), one per configuration."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != len(COLUMNS):
            continue
        try:
            values = [float(f) for f in fields]
        except ValueError:
            continue
        row = dict(zip(COLUMNS, values))
        row["block"], row["batch"] = int(row["block"]), int(row["batch"])
        rows.append(row)
    return rows


def nixl_env(args, extra_env):
    """The environment of a NIXL process: the run's module settings, UCX and NIXL found where they lie."""
    env = dict(os.environ)
    env.update(extra_env)
    libs = [os.path.join(args.prefix, "lib"), os.path.join(args.nixl, "lib")]
    env["LD_LIBRARY_PATH"] = ":".join(libs + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    env["NIXL_PLUGIN_DIR"] = os.path.join(args.nixl, "lib", "plugins")
    return env


def setup(args):
    """What every comparison starts from: the modules in order, their settings, UCX's module folder, the machine."""
    modules, module_env = module_entries(args.module)
    os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)
    return modules, module_env, os.path.join(args.prefix, "lib", "ucx"), environment()


def run(args, op, extra_env):
    env = nixl_env(args, extra_env)
    port = str(free_port())
    cmd = [os.path.join(args.nixl, "bin", "nixlbench"), "--runtime_type", "ASIO", "--asio_port", port,
           "--backend", "UCX", "--op_type", op, "--check_consistency"] + args.args.split()
    killer = ["timeout", "-k", "5", str(args.timeout)]
    pin_i, pin_t = (["taskset", "-c", c] for c in args.cpus.split(":")) if args.cpus else ([], [])
    initiator = subprocess.Popen(killer + pin_i + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
    time.sleep(1.0)  # the initiator must be the one that listens
    target = subprocess.Popen(killer + args.target_wrap.split() + pin_t + cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    out_i, _ = initiator.communicate()
    out_t, _ = target.communicate()
    return initiator.returncode, target.returncode, out_i, out_t


def fmt(values, digits=2):
    if not values:
        return "n/a"
    return ("%.*f (%.*f-%.*f)" % (digits, statistics.median(values), digits, min(values), digits, max(values)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", required=True, help="UCX installation (with CUDA) whose module directory is used")
    ap.add_argument("--nixl", required=True, help="NIXL installation (bin/nixlbench, lib/plugins)")
    ap.add_argument("--module", action="append", required=True, metavar="NAME=PATH[,VAR=VALUE...]",
                    help="module to compare, with optional environment for its runs; the first is the reference")
    ap.add_argument("--args", default="", help="nixlbench arguments besides runtime, backend, operation, check")
    ap.add_argument("--ops", default="WRITE,READ")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--target-wrap", default="", help="command the target process runs under")
    ap.add_argument("--cpus", default="", metavar="INITIATOR:TARGET",
                    help="CPU lists (taskset -c) for the two processes, so that no run lands on a slower core")
    ap.add_argument("--title", default="nixlbench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--from-raw", action="store_true", help="read DIR/raw instead of running")
    args = ap.parse_args()
    if args.cpus and args.cpus.count(":") != 1:
        ap.error("--cpus takes INITIATOR:TARGET, such as 2-3:4-5")

    modules, module_env, moddir, env = setup(args)
    if args.from_raw:
        env.update(date="(from %s)" % os.path.join(args.out, "raw"), driver="(as run)", cuda="(as run)",
                   gpu="(as run)")
    results, keys, runs, failed = {}, [], [], []
    for rep in range(args.repeats):
        order = modules if rep % 2 == 0 else list(reversed(modules))
        for op in args.ops.split(","):
            for mname, mpath in order:
                base = os.path.join(args.out, "raw", "%s-%s-%d" % (mname, op, rep))
                if args.from_raw:
                    if not os.path.exists(base + "-initiator.txt"):
                        failed.append("%s %s repeat %d: not done" % (mname, op, rep))
                        continue
                    rc_i, rc_t = 0, 0
                    out_i, out_t = (open("%s-%s.txt" % (base, s)).read() for s in ("initiator", "target"))
                else:
                    install_module(mpath, moddir)
                    rc_i, rc_t, out_i, out_t = run(args, op, module_env.get(mname, {}))
                    for suffix, text in (("initiator", out_i), ("target", out_t)):
                        with open("%s-%s.txt" % (base, suffix), "w") as f:
                            f.write(text)
                checked = rc_i == 0 and rc_t == 0 and "Consistency check failed" not in out_i + out_t
                print("%s %s repeat %d: initiator exit %d, target exit %d%s" %
                      (mname, op, rep, rc_i, rc_t, "" if checked else " (figures not counted)"), flush=True)
                if not checked:
                    failed.append("%s %s repeat %d: initiator exit %d, target exit %d%s" % (
                        mname, op, rep, rc_i, rc_t,
                        ", consistency check failed" if "Consistency check failed" in out_i + out_t else ""))
                    continue
                for row in parse(out_i):
                    key = (op, row["block"], row["batch"])
                    if key not in keys:
                        keys.append(key)
                    runs.append(dict(row, module=mname, op=op, repeat=rep))
                    cell = results.setdefault((key, mname), {})
                    for col in ("gbps", "lat_us", "post_us"):
                        cell.setdefault(col, []).append(row[col])

    with open(os.path.join(args.out, "nixlbench.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["module", "op", "repeat"] + COLUMNS)
        w.writeheader()
        w.writerows(runs)

    ref, ours = modules[0][0], modules[-1][0]
    out = ["# %s: %s against %s" % (args.title, ours, ref), "",
           "%s; driver %s; CUDA %s; %s" % (env["date"], env["driver"], env["cuda"], env["gpu"]), "",
           "nixlbench arguments: `%s`%s; %d repeats, interleaved; consistency check on in every run. Cells: median "
           "(min-max). Ratio: %s / %s of the GB/s medians. Per descriptor: nixlbench's average latency (a "
           "transfer's time divided by its descriptors), and posting time divided by the batch." %
           (args.args, ("; target under `%s`" % args.target_wrap if args.target_wrap else "") +
            ("; CPUs (initiator:target) %s" % args.cpus if args.cpus else ""), args.repeats, ours, ref),
           "", "| op | block | batch | %s GB/s | %s GB/s | ratio | %s us/desc | %s us/desc | %s post us/desc | "
           "%s post us/desc |" % (ref, ours, ref, ours, ref, ours), "|---|---:|---:|---|---|---:|---|---|---|---|"]
    below = []
    for key in keys:
        op, block, batch = key
        a = results.get((key, ref), {})
        b = results.get((key, ours), {})
        ratio = statistics.median(b["gbps"]) / statistics.median(a["gbps"]) if a and b and statistics.median(
            a["gbps"]) else None
        if ratio is not None and ratio < 1 and max(b["gbps"]) < min(a["gbps"]):
            below.append("%s %d B x %d: %.2fx" % (op, block, batch, ratio))
        post = lambda c: [v / batch for v in c.get("post_us", [])]  # noqa: E731
        out.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            op, block, batch, fmt(a.get("gbps", [])), fmt(b.get("gbps", [])), "%.2fx" % ratio if ratio else "n/a",
            fmt(a.get("lat_us", [])), fmt(b.get("lat_us", [])), fmt(post(a), 3), fmt(post(b), 3)))
    if len(modules) > 2:
        out += ["", "Every module: GB/s median (min-max), ratio of GB/s medians to %s, post us/desc median." % ref, "",
                "| op | block | batch |" + "".join(" %s |" % m for m, _ in modules),
                "|---|---:|---:|" + "---|" * len(modules)]
        for key in keys:
            op, block, batch = key
            base = results.get((key, ref), {}).get("gbps", [])
            line = "| %s | %d | %d |" % key
            for mname, _ in modules:
                cell = results.get((key, mname), {})
                g = cell.get("gbps", [])
                ratio = " %.2fx" % (statistics.median(g) / statistics.median(base)) if g and base else ""
                post = [v / batch for v in cell.get("post_us", [])]
                line += " %s%s, post %s |" % (fmt(g), ratio, "%.3f" % statistics.median(post) if post else "-")
            out.append(line)
    out += ["", "Runs whose figures do not count: %s" % ("; ".join(failed) if failed else "none"),
            "", "Cells where %s is below %s beyond the spread (its max under the other's min): %s" %
            (ours, ref, "; ".join(below) if below else "none")]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
