#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What recognising GPU memory costs a program that allocates between its messages (issue 61), side by side.
#
#   OUT=DIR gpu-host/run memtype-cost CARRY [ITERATIONS]
#
# CARRY as gpu-host/run containers takes it (Debian's UCX packages, our module, libcux_memtype.so, ucx-cuda-run)
# with bench/cux_alloc_churn beside them. Modes, interleaved CUX_MEMTYPE_COST_REPEATS times (default 3), each
# with host and with GPU messages (8 bytes, UCX_TLS=self,cuda_copy):
#   stock-query   Debian's UCX through ucx-cuda-run, CUX_MEMTYPE=query (UCP's cache off, a query per buffer)
#   stock-hooks   the same with CUX_MEMTYPE=hooks (libcux_memtype reports allocations to UCP's cache)
#   ucx-ours      UCX built with CUDA from the source tarball in $carry (its own libucm_cuda hooks), ours in place
#   ucx-ucx       the same UCX with UCX's own module
# cux_alloc_churn prints alloc_free, message and churn (both in turn) in ns per iteration, its data checked; a
# run that fails its check gives no figure. Writes $OUT/memtype-cost.txt (median [min, max] of the repeats per
# mode), $OUT/memtype-cost-times.tsv (every figure) and $OUT/memtype-cost.tgz (every run's output, build logs).
set -u
. "$(dirname "$0")/../lib.sh"
stock=$(cd "${1:?usage: gpu-host/run memtype-cost CARRY [ITERATIONS]}" && pwd)
iterations=${2:-5000}
repeats=${CUX_MEMTYPE_COST_REPEATS:-3}
out=${OUT:-/tmp/cux-out}
logs=$out/memtype-cost
report=$out/memtype-cost.txt
times=$out/memtype-cost-times.tsv
mkdir -p "$logs"
gh_report "$report"
gh_stock_ucx "$stock" /tmp/cux-memtype-cost-root || exit 1
stock_path=$LD_LIBRARY_PATH
chmod +x "$stock"/cux_* "$stock/ucx-cuda-run"
export UCX_WARN_UNUSED_ENV_VARS=n UCX_TLS=self,cuda_copy
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -1)"
modes=(stock-query stock-hooks)

prefix=/opt/cux-memtype-cost-ucx work=/tmp/cux-memtype-cost-work
say "building UCX with CUDA and ours against it"
if gh_ucx_and_ours "$prefix" "$work" "$logs"; then
    modes+=(ucx-ours ucx-ucx)
    say "and $ucx_name"
else
    failed "building UCX or ours against it (memtype-cost.tgz: ucx-build.log, plugin-*.log)"
fi

run_mode() { # MODE MEM LOG
    case $1 in
    stock-*)
        LD_LIBRARY_PATH=$stock_path CUX_MODULE="$stock/libuct_cuda.so.0" CUX_PERFTEST_LIB="$stock/libcux_perftest.so" \
            CUX_MEMTYPE_LIB="$stock/libcux_memtype.so" CUX_MEMTYPE=${1#stock-} timeout -k 5 120 \
            "$stock/ucx-cuda-run" "$stock/cux_alloc_churn" --mem "$2" "$iterations" ;;
    ucx-*)
        module_use "$prefix" "${1#ucx-}" "$work/plugin-build/.libs/libuct_cuda.so.0"
        LD_LIBRARY_PATH="$prefix/lib" timeout -k 5 120 "$work/plugin-build/bench/cux_alloc_churn" --mem "$2" \
            "$iterations" ;;
    esac >"$3" 2>&1 && grep -q '^PASS' "$3"
}

: >"$times"
for r in $(seq 1 "$repeats"); do
    for mem in host cuda; do
        for mode in "${modes[@]}"; do
            log="$logs/$mode-$mem-$r.log"
            if run_mode "$mode" "$mem" "$log"; then
                awk -v m="$mode" -v k="$mem" -v r="$r" '$1 ~ /^(alloc_free|message|churn)$/ {
                    printf "%s\t%s\t%s\t%s\t%s\n", m, k, $1, r, $2 }' "$log" >>"$times"
            else
                failed "$mode, $mem messages (log: $(basename "$log"))"
            fi
        done
    done
done

say "ns per iteration ($iterations iterations, median of 5 rounds each), median [min, max] of $repeats interleaved repeats"
python3 - "$times" <<'PY' | tee -a "$report"
import collections, statistics, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, mem, loop, _, ns = line.rstrip("\n").split("\t")
    t[(mode, mem, loop)].append(float(ns))
modes = list(dict.fromkeys(k[0] for k in t))
for mem in ("host", "cuda"):
    print("\n%s messages\n\n| mode | alloc_free | message | churn |\n|---|---|---|---|" % mem)
    for m in modes:
        cells = []
        for loop in ("alloc_free", "message", "churn"):
            v = t.get((m, mem, loop), [])
            cells.append("%.0f [%.0f, %.0f]" % (statistics.median(v), min(v), max(v)) if v else "-")
        print("| %s | %s |" % (m, " | ".join(cells)))
PY
tar -C "$out" -czf "$out/memtype-cost.tgz" memtype-cost && rm -rf "$logs"
exit "$rc"
