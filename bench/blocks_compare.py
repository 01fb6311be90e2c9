#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare CUDA transport modules with bench/cux_blocks (many-block transfers) on one UCX build.

As perftest_compare.py does: each module file is put in turn into the UCX module directory, so both run on the
same UCX core; runs are interleaved (the order alternates between repeats); every case is repeated and reported
as median, min and max per module, with the ratio of the medians (ours / the first module). A case counts only
where every run's data check passed.

  blocks_compare.py --prefix /opt/ucx --module ucx=/path/a.so --module ours=/path/b.so \
      --blocks build/bench/cux_blocks --args "-s 16k,64k -k 1,100,1000" --repeats 3 --out DIR

Writes DIR/blocks.md (the table), DIR/blocks.csv (every run), DIR/raw/ (each run's output) and DIR/blocks.png
(GB/s against blocks per transfer) when matplotlib is there. With --drvcount LIB, one more run per module with
the driver call counter (bench/cux_drvcount) gives DIR/drvcalls.md: driver calls per block; not timed.
--from-raw rebuilds the table and plot from an earlier run's DIR/raw (same --module names and --args).
A module entry may carry variables for its runs (NAME=PATH,VAR=VALUE,...), as in perftest_compare.py: one module
file under two names, each with its own setting, compares the setting interleaved as two modules would be.
"""
import argparse
import csv
import os
import shlex
import signal
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perftest_compare import environment, install_module, module_entries  # noqa: E402

KEY = ("pattern", "op", "layout", "size", "count")
METRICS = [("gbps", "GB/s", True), ("post_us", "post us/block", False), ("cpu_us", "CPU us/block", False),
           ("first_per_alloc_us", "first: us/new alloc", False)]


def parse(text, tag):
    rows = []
    for line in text.splitlines():
        if line.startswith(tag + " "):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            rows.append(fields)
    return rows


def case_key(row):
    return tuple(row[k] for k in KEY)


def run(prefix, blocks, args, extra_env, timeout):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(prefix, "lib") + ":" + env.get("LD_LIBRARY_PATH", "")
    env.setdefault("UCX_TLS", "self,sm,cuda_copy,cuda_ipc")
    env.update(extra_env)
    # its own process group: on a time-out the ranks it forked go too, not only rank 0
    p = subprocess.Popen([blocks] + shlex.split(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, start_new_session=True)
    try:
        text, _ = p.communicate(timeout=timeout)
        return p.returncode, text
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        text, _ = p.communicate()
        return 124, text or ""


def fmt(vals):
    if not vals:
        return "n/a"
    med = statistics.median(vals)
    return "%.3g (%.3g-%.3g)" % (med, min(vals), max(vals))


def plot(cases, modules, results, path, env):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot")
        return None
    panels = sorted({(c[0], c[1], c[2]) for c in cases})
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.5), squeeze=False)
    for ax, (pattern, op, layout) in zip(axes[0], panels):
        for mname, _ in modules:
            for color, size in enumerate(sorted({c[3] for c in cases}, key=int)):
                pts = [(int(c[4]), results.get((c, mname), {}).get("gbps", [])) for c in cases
                       if c[:4] == (pattern, op, layout, size)]
                pts = [(x, v) for x, v in sorted(pts) if v]
                if not pts:
                    continue
                xs = [x for x, _ in pts]
                meds = [statistics.median(v) for _, v in pts]
                lo = [m - min(v) for m, (_, v) in zip(meds, pts)]
                hi = [max(v) - m for m, (_, v) in zip(meds, pts)]
                ax.errorbar(xs, meds, yerr=[lo, hi], marker="o", capsize=3, color="C%d" % color,
                            label="%s %s KB" % (mname, int(size) >> 10),
                            linestyle="-" if mname == modules[-1][0] else "--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("blocks per transfer")
        ax.set_ylabel("GB/s")
        ax.set_title("%s, %s allocation%s, %s" % (op, layout, "" if layout == "one" else "s",
                                                  "rank 0 -> 1" if pattern == "one" else "all to all"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("cux_blocks, %s, %s" % (env.get("ucx", ""), env["gpu"].split(";")[0].split(",")[-1].strip()))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", required=True, help="UCX installation (with CUDA) whose module directory is used")
    ap.add_argument("--module", action="append", required=True, metavar="NAME=PATH[,VAR=VALUE...]",
                    help="module to compare, with optional environment for its runs; the first is the reference")
    ap.add_argument("--blocks", required=True, help="the cux_blocks program, built against PREFIX")
    ap.add_argument("--args", default="", help="arguments of cux_blocks")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--drvcount", help="bench/cux_drvcount's library: one more run per module counting driver calls")
    ap.add_argument("--drvcount-args", help="arguments of cux_blocks for the counting runs (default: --args)")
    ap.add_argument("--from-raw", action="store_true", help="read DIR/raw/MODULE-REPEAT.txt instead of running")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    modules, module_env = module_entries(args.module)
    moddir = os.path.join(args.prefix, "lib", "ucx")
    os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)
    env = environment()
    env["ucx"] = subprocess.run([os.path.join(args.prefix, "bin", "ucx_info"), "-v"], stdout=subprocess.PIPE,
                                text=True).stdout.splitlines()[0].replace("# ", "").replace("Version", "UCX")
    if args.from_raw:  # the GPUs from gpus.txt, which gpu-host/run blocks writes next to raw/
        gpus = os.path.join(args.out, "gpus.txt")
        gpu = ";".join(",".join(l.split(",")[:2]) for l in open(gpus).read().splitlines()) if os.path.exists(gpus) \
            else "(as run)"
        env.update(date="(from %s)" % os.path.join(args.out, "raw"), driver="(as run)", cuda="(as run)", gpu=gpu)
    results, cases, runs, failed, timed_out = {}, [], [], [], set()
    for rep in range(args.repeats):
        order = modules if rep % 2 == 0 else list(reversed(modules))
        for mname, mpath in order:
            raw = os.path.join(args.out, "raw", "%s-%d.txt" % (mname, rep))
            if mname in timed_out:  # a module that ran out of time once is not given the time again
                failed.append("%s repeat %d: not run (an earlier repeat timed out)" % (mname, rep))
                continue
            if args.from_raw and not os.path.exists(raw):  # a call cut short before this run
                failed.append("%s repeat %d: not done" % (mname, rep))
                continue
            if args.from_raw:
                with open(raw) as f:
                    text = f.read()
                rc = 0 if "cux_blocks: done" in text else 1
            else:
                install_module(mpath, moddir)
                rc, text = run(args.prefix, args.blocks, args.args, module_env.get(mname, {}), args.timeout)
                with open(raw, "w") as f:
                    f.write(text)
            print("%s repeat %d: exit %d" % (mname, rep, rc), flush=True)
            if rc == 124:
                timed_out.add(mname)
                failed.append("%s repeat %d: timed out after %d s (the cases it finished count)" %
                              (mname, rep, args.timeout))
                rc = 0
            if rc != 0:
                failed.append("%s repeat %d: %s" % (mname, rep, "exit %d" % rc if not args.from_raw else "not done"))
            for row in parse(text, "RESULT"):
                key = case_key(row)
                if key not in cases:
                    cases.append(key)
                runs.append(dict(row, module=mname, repeat=rep))
                cell = results.setdefault((key, mname), {"data": []})
                cell["data"].append(row["data"])
                for metric, _, _ in METRICS:
                    if metric in row:  # an older cux_blocks has no cpu_us
                        cell.setdefault(metric, []).append(float(row[metric]))

    with open(os.path.join(args.out, "blocks.csv"), "w", newline="") as f:
        fields = ["module", "repeat"] + [k for k in runs[0] if k not in ("module", "repeat")] if runs else []
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(runs)

    ref, ours = modules[0][0], modules[-1][0]
    out = ["# cux_blocks: %s against %s" % (ours, ref), "",
           "%s; %s; driver %s; CUDA %s; %s" % (env["date"], env["ucx"], env["driver"], env["cuda"], env["gpu"]),
           "", "Arguments: `%s`; %d repeats, interleaved. Cells: median (min-max). Ratio: %s / %s of the medians "
           "(GB/s: higher is better for %s; post and first-transfer cost: lower is better)." %
           (args.args, args.repeats, ours, ref, ours), ""]
    head = "| case |"
    for _, title, _ in METRICS:
        head += " %s %s | %s %s | ratio |" % (ref, title, ours, title)
    head += " data checked |"
    out += [head, "|" + "---|" * (2 + 3 * len(METRICS))]
    for key in cases:
        line = "| %s %s %s, %s B x %s |" % key
        data = []
        for metric, _, _ in METRICS:
            a = results.get((key, ref), {}).get(metric, [])
            b = results.get((key, ours), {}).get(metric, [])
            ratio = (statistics.median(b) / statistics.median(a)) if a and b and statistics.median(a) else None
            line += " %s | %s | %s |" % (fmt(a), fmt(b), "%.2fx" % ratio if ratio else "n/a")
        for mname, _ in modules:
            checks = results.get((key, mname), {}).get("data", [])
            data.append("%s %s" % (mname, ("ok" if all(d == "ok" for d in checks) else "**BAD**") if checks
                                   else "not run"))
        out.append(line + " %s |" % ", ".join(data))
    if len(modules) > 2:
        out += ["", "Every module, GB/s and post us/block: median (min-max), ratio of GB/s medians to %s." % ref, "",
                "| case |" + "".join(" %s |" % m for m, _ in modules),
                "|---|" + "---|" * len(modules)]
        for key in cases:
            line = "| %s %s %s, %s B x %s |" % key
            base = results.get((key, ref), {}).get("gbps", [])
            for mname, _ in modules:
                cell = results.get((key, mname), {})
                g = cell.get("gbps", [])
                ratio = " %.2fx" % (statistics.median(g) / statistics.median(base)) if g and base else ""
                line += " %s GB/s%s, post %s |" % (fmt(g), ratio, fmt(cell.get("post_us", [])))
            out.append(line)
    if failed:
        out += ["", "Runs that failed: " + "; ".join(failed)]
    png = plot(cases, modules, results, os.path.join(args.out, "blocks.png"), env) if cases else None
    if png:
        out += ["", "![GB/s](blocks.png)"]

    if args.drvcount:
        counts = ["# Driver calls per block (rank 0's timed transfers, CUPTI; not a timed run)", "",
                  "Arguments: `%s`" % (args.drvcount_args or args.args), ""]
        for mname, mpath in modules:
            install_module(mpath, moddir)
            rc, text = run(args.prefix, args.blocks, args.drvcount_args or args.args,
                           dict(module_env.get(mname, {}), CUDA_INJECTION64_PATH=args.drvcount), args.timeout)
            with open(os.path.join(args.out, "raw", "%s-drvcount.txt" % mname), "w") as f:
                f.write(text)
            counts += ["## %s (exit %d)" % (mname, rc), "", "| case | calls per block |", "|---|---|"]
            for line in text.splitlines():
                if line.startswith("DRVCALLS "):
                    head, _, calls = line.partition(" per block:")
                    counts.append("| %s | %s |" % (head[len("DRVCALLS "):], calls.strip() or "none"))
            counts.append("")
        with open(os.path.join(args.out, "drvcalls.md"), "w") as f:
            f.write("\n".join(counts) + "\n")
    with open(os.path.join(args.out, "blocks.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
