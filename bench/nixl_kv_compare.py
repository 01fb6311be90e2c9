#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compare CUDA transport modules with bench/cux_nixl_kv (KV-cache blocks through NIXL) on one UCX build.

As nixl_compare.py does for nixlbench: each module file is put in turn into the UCX module directory, runs are
interleaved, and the report gives median (min-max) per case and module and the ratio of the medians. A case is
one cux_nixl_kv argument string (size, blocks, layout, operation); a run counts only when both processes exit 0
and the initiator's RESULT line says data=ok (two transfers of their own generation checked block by block).
With --faults, each module also runs the fault cases (-f kill, -f release) once per repeat. With more than two
modules the report also gives every module's cells beside the first's; --from-raw rebuilds the report from
DIR/raw (runs read back count as exit 0: a run that failed left no data=ok RESULT line).

  nixl_kv_compare.py --prefix UCX --nixl NIXL --kv cux_nixl_kv --module ucx=A.so --module ours=B.so \
      --case "-s 45k -k 1024 -l many -o write" --repeats 3 --out DIR
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perftest_compare import install_module  # noqa: E402
from nixl_compare import fmt, nixl_env, setup  # noqa: E402


def result(text):
    for line in text.splitlines():
        if line.startswith("RESULT "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    return None


def run(args, case_args, extra_env, fault=None):
    env = nixl_env(args, extra_env)
    rendezvous = tempfile.mkdtemp(prefix="cux-nixl-kv-")
    killer = ["timeout", "-k", "5", str(args.timeout)]
    try:
        if fault:
            p = subprocess.run(killer + [args.kv, "initiator", rendezvous] + case_args.split() + ["-f", fault],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return p.returncode, p.stdout
        target = subprocess.Popen(killer + args.target_wrap.split() + [args.kv, "target", rendezvous] +
                                  case_args.split(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        time.sleep(0.2)
        init = subprocess.run(killer + [args.kv, "initiator", rendezvous] + case_args.split(), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out_t, _ = target.communicate()
        rc = init.returncode or target.returncode
        return rc, init.stdout + ("\n--- target ---\n" + out_t if out_t.strip() else "")
    finally:
        shutil.rmtree(rendezvous, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--nixl", required=True)
    ap.add_argument("--kv", required=True, help="the cux_nixl_kv program")
    ap.add_argument("--module", action="append", required=True, metavar="NAME=PATH[,VAR=VALUE...]")
    ap.add_argument("--case", action="append", default=[], help="cux_nixl_kv arguments of one case")
    ap.add_argument("--faults", help="cux_nixl_kv arguments for the fault cases (-f kill, -f release)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=180)
    ap.add_argument("--target-wrap", default="")
    ap.add_argument("--title", default="cux_nixl_kv")
    ap.add_argument("--out", required=True)
    ap.add_argument("--from-raw", action="store_true", help="read DIR/raw instead of running")
    args = ap.parse_args()

    modules, module_env, moddir, env = setup(args)
    if args.from_raw:
        env.update(date="(from %s)" % os.path.join(args.out, "raw"), driver="(as run)", cuda="(as run)",
                   gpu="(as run)")
    results, failed, faults = {}, [], []
    for rep in range(args.repeats):
        order = modules if rep % 2 == 0 else list(reversed(modules))
        for mname, mpath in order:
            if not args.from_raw:
                install_module(mpath, moddir)
            jobs = [(c, None) for c in args.case]
            if args.faults:
                jobs += [(args.faults, "kill"), (args.faults, "release")]
            for n, (case, fault) in enumerate(jobs):
                raw = os.path.join(args.out, "raw", "%s-%d-%d%s.txt" % (mname, rep, n, "-" + fault if fault else ""))
                if args.from_raw:
                    if not os.path.exists(raw):
                        failed.append("%s repeat %d `%s`: not done" % (mname, rep, case))
                        continue
                    rc, text = 0, open(raw).read()
                else:
                    rc, text = run(args, case, module_env.get(mname, {}), fault)
                    with open(raw, "w") as f:
                        f.write(text)
                res = result(text)
                ok = rc == 0 and res is not None and res.get("data") == "ok"
                print("%s repeat %d %s%s: exit %d%s" % (mname, rep, case, " fault " + fault if fault else "", rc,
                                                       "" if ok else " (not counted)"), flush=True)
                if fault:
                    faults.append((mname, rep, fault, rc, res))
                    if not ok:
                        failed.append("%s repeat %d fault %s: exit %d" % (mname, rep, fault, rc))
                    continue
                if not ok:
                    failed.append("%s repeat %d `%s`: exit %d%s" % (mname, rep, case, rc,
                                                                   ", data " + res["data"] if res else ""))
                    continue
                cell = results.setdefault((case, mname), {})
                for key in ("gbps", "us_per_desc", "post_us_per_desc", "prep_us", "reg_us"):
                    cell.setdefault(key, []).append(float(res[key]))

    ref, ours = modules[0][0], modules[-1][0]
    out = ["# %s: %s against %s" % (args.title, ours, ref), "",
           "%s; driver %s; CUDA %s; %s" % (env["date"], env["driver"], env["cuda"], env["gpu"]), "",
           "%d repeats, interleaved%s. Each run: one NIXL transfer of k descriptors, repeated; two transfers of "
           "their own pattern checked block by block. Cells: median (min-max); ratio %s / %s of the GB/s medians."
           % (args.repeats, "; target under `%s`" % args.target_wrap if args.target_wrap else "", ours, ref), "",
           "| case | %s GB/s | %s GB/s | ratio | %s us/desc | %s us/desc | %s post us/desc | %s post us/desc | "
           "%s createXferReq us | %s createXferReq us | %s registerMem us | %s registerMem us |" %
           ((ref, ours) * 5), "|---|---|---|---:|---|---|---|---|---|---|---|---|"]
    for case in args.case:
        a, b = results.get((case, ref), {}), results.get((case, ours), {})
        ratio = statistics.median(b["gbps"]) / statistics.median(a["gbps"]) if a and b else None
        out.append("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            case, fmt(a.get("gbps", [])), fmt(b.get("gbps", [])), "%.2fx" % ratio if ratio else "n/a",
            fmt(a.get("us_per_desc", []), 3), fmt(b.get("us_per_desc", []), 3),
            fmt(a.get("post_us_per_desc", []), 3), fmt(b.get("post_us_per_desc", []), 3),
            fmt(a.get("prep_us", []), 0), fmt(b.get("prep_us", []), 0),
            fmt(a.get("reg_us", []), 0), fmt(b.get("reg_us", []), 0)))
    if len(modules) > 2:
        out += ["", "Every module: GB/s median (min-max), ratio of GB/s medians to %s, post us/desc median." % ref, "",
                "| case | %s |" % " | ".join(m for m, _ in modules), "|---|%s" % ("---|" * len(modules))]
        for case in args.case:
            a = results.get((case, ref), {})
            cells = []
            for m, _ in modules:
                c = results.get((case, m), {})
                if not c:
                    cells.append("n/a")
                    continue
                ratio = statistics.median(c["gbps"]) / statistics.median(a["gbps"]) if a else None
                cells.append("%s %s, post %s" % (fmt(c["gbps"]), "%.2fx" % ratio if ratio else "",
                                                 "%.3f" % statistics.median(c["post_us_per_desc"])))
            out.append("| `%s` | %s |" % (case, " | ".join(cells)))
    if faults:
        out += ["", "Faults (`%s`):" % args.faults, ""]
        for mname, rep, fault, rc, res in faults:
            out.append("- %s repeat %d, %s: exit %d; %s" % (mname, rep, fault, rc, " ".join(
                "%s=%s" % kv for kv in res.items()) if res else "no RESULT line"))
    out += ["", "Runs that do not count: %s" % ("; ".join(failed) if failed else "none")]
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
