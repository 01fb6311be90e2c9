#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# First contact with a cuda_ipc peer, two builds side by side: bench/cux_opcost's proof and first-transfer lines.
#
#   OUT=DIR gpu-host/run first-contact CARRY BEFORE AFTER [REPEATS]
#
# CARRY: Debian's UCX packages (.deb), as gpu-host/run containers takes them. BEFORE and AFTER: two cux_opcost
# binaries built against those packages (for instance the commit before a change to the proofs and the one after,
# both with this tree's bench/cux_opcost.c). Each runs REPEATS times (default 5), interleaved, with OPCOST_IPC_ONLY=1:
# once with the exporter beside it (pidfd, /proc, read-back) and once with the exporter as pid 1 of a PID namespace
# of its own (OPCOST_EXPORTER_PIDNS=1: proven over its socket in UCX_CUDA_IPC_SOCKET_DIR; root). Every line is a
# median of 5 rounds; the table gives the median over the repeats and their range. Writes $OUT/first-contact.txt.
set -u
. "$(dirname "$0")/../lib.sh"
carry_dir=$(cd "${1:?usage: gpu-host/run first-contact CARRY BEFORE AFTER [REPEATS]}" && pwd)
before=$(realpath "${2:?BEFORE: a cux_opcost binary}")
after=$(realpath "${3:?AFTER: a cux_opcost binary}")
repeats=${4:-5}
out=${OUT:-/tmp/cux-out}
report="$out/first-contact.txt"
mkdir -p "$out/first-contact"
gh_report "$report"
gh_stock_ucx "$carry_dir" /tmp/cux-first-contact-root || exit 1
chmod +x "$before" "$after"
sockets=$(mktemp -d /tmp/cux-first-contact-sockets-XXXXXX)

for r in $(seq 1 "$repeats"); do
    for build in before after; do
        bin=$before
        [ "$build" = before ] || bin=$after
        for placement in host pidns; do
            log="$out/first-contact/$build-$placement-$r.txt"
            pidns=0
            [ "$placement" = host ] || pidns=1
            OPCOST_IPC_ONLY=1 OPCOST_EXPORTER_PIDNS=$pidns UCX_CUDA_IPC_SOCKET_DIR=$sockets UCX_MODULES=^cuda \
                timeout -k 5 120 "$bin" 2000 >"$log" 2>&1 || failed "$build, $placement, repeat $r (see $log)"
        done
    done
done

say "cux_opcost, $repeats interleaved repeats per build and placement: median [min, max] in us"
python3 - "$out/first-contact" "$repeats" <<'PY' | tee -a "$report"
import glob, os, re, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
lines = ["proof of the peer's address", "proof of a key", "first of an allocation", "first of a pool allocation",
         "cached mapping"]
rows = {}
for f in glob.glob(os.path.join(d, "*.txt")):
    build, placement, _ = os.path.basename(f)[:-4].split("-")
    for line in open(f):
        m = re.match(r"cuda_ipc (.*?)\s+([0-9.]+) ns$", line.strip())
        if not m:
            continue
        for key in lines:
            if key in m.group(1):
                rows.setdefault((placement, key), {}).setdefault(build, []).append(float(m.group(2)) / 1000)
def cell(v):
    if not v:
        return "-"
    return "%.1f [%.1f, %.1f] (%d)" % (statistics.median(v), min(v), max(v), len(v))
print("| exporter | cost | before | after | after / before |")
print("|---|---|---|---|---|")
for placement in ("host", "pidns"):
    for key in lines:
        v = rows.get((placement, key), {})
        b, a = v.get("before", []), v.get("after", [])
        ratio = "%.2f" % (statistics.median(a) / statistics.median(b)) if a and b else "-"
        print("| %s | %s | %s | %s | %s |" % ("beside it" if placement == "host" else "pid 1 of its own namespace",
                                              key, cell(b), cell(a), ratio))
PY
rm -rf "$sockets"
exit "$rc"
