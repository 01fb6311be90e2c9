#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a message of VMM memory costs on Debian's UCX 1.13.1 with our module, against cuMemAlloc memory (issue 59).
#
#   OUT=DIR gpu-host/run vmm-cost [--built-ucx] CARRY [CARRY...]
#
# Each CARRY as gpu-host/run containers takes it (Debian's UCX packages, our module, ucx-cuda-run,
# cux_ucp_datacheck); several are interleaved (a module before a change and after it, one UCX core). Per memory kind
# (cuMemAlloc; cuMemCreate with a POSIX descriptor; two cuMemCreate in one reserved range; a pool made with the
# POSIX descriptor type) two processes on GPU 0
# check every size (cux_ucp_datacheck --only CASE --timed N SIZES), then send it N times there and back with
# nothing between the transfers, the sender timing them (the time per message printed is half a round trip), and
# check it again: a figure is kept only from a run that passed. CUX_VMM_COST_REPEATS (default 3) interleaved
# repeats, CUX_VMM_COST_TIMED round trips (default 300), CUX_VMM_COST_SIZES (64 KB, 1 MB, 64 MB).
# --built-ucx: also UCX built with CUDA from the UCX source tarball in $carry (lib.sh), our module from the dist
# tarball there in place of UCX's and UCX's own (no launcher: UCX's memory hooks), interleaved with the rest.
# UCX_TLS=self,tcp,cuda_copy,cuda_ipc; CUX_VMM_COST_ENV adds variables (for instance CUX_MEMTYPE=hooks).
# Writes $OUT/vmm-cost.txt (the tables: median [min, max] per carry, and each kind's ratio to cuMemAlloc),
# $OUT/vmm-cost-table.txt (the tables so far, after each repeat), $OUT/vmm-cost-times.tsv (every figure) and
# $OUT/vmm-cost.tgz (every run's output, build logs).
set -u
. "$(dirname "$0")/../lib.sh"
built=0
[ "${1:-}" != --built-ucx ] || { built=1; shift; }
[ $# -ge 1 ] || { echo "usage: gpu-host/run vmm-cost [--built-ucx] CARRY [CARRY...]" >&2; exit 2; }
carries=()
for c in "$@"; do carries+=("$(cd "$c" && pwd)"); done
repeats=${CUX_VMM_COST_REPEATS:-3}
timed=${CUX_VMM_COST_TIMED:-300}
sizes=${CUX_VMM_COST_SIZES:-65536 1048576 67108864}
out=${OUT:-/tmp/cux-out}
report="$out/vmm-cost.txt"
logs="$out/vmm-cost"
times="$out/vmm-cost-times.tsv" # beside the logs: it comes back even from a run cut short
mkdir -p "$logs"
gh_report "$report"
# one UCX core for all: the first carry's packages
gh_stock_ucx "${carries[0]}" /tmp/cux-vmm-cost-root || exit 1
export UCX_WARN_UNUSED_ENV_VARS=n UCX_TLS=self,tcp,cuda_copy,cuda_ipc
# shellcheck disable=SC2086
[ -z "${CUX_VMM_COST_ENV:-}" ] || export ${CUX_VMM_COST_ENV}
check="${carries[0]}/cux_ucp_datacheck" # one check program for all: only the module differs
chmod +x "$check"
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -1)${CUX_VMM_COST_ENV:+, $CUX_VMM_COST_ENV}"

# --built-ucx: UCX with CUDA and ours against it; its runs are named ucx-VERSION-ours and ucx-VERSION-ucx
if [ "$built" = 1 ]; then
    prefix=/opt/cux-vmm-cost-ucx work=/tmp/cux-vmm-cost-work
    say "building UCX with CUDA, googletest and ours against it"
    if gh_ucx_and_ours "$prefix" "$work" "$logs"; then
        carries+=("$ucx_name-ours" "$ucx_name-ucx")
    else
        failed "building UCX or ours against it (vmm-cost.tgz: ucx-build.log, plugin-*.log)"
    fi
fi
# One run of a case: a stock carry through ucx-cuda-run, a built UCX with the module named put in place.
# shellcheck disable=SC2086
run_case() { # CARRY CASE LOG
    case $1 in
    */*)
        CUX_MODULE="$1/libuct_cuda.so.0" CUX_PERFTEST_LIB="$1/libcux_perftest.so" CUX_MEMTYPE_LIB="$1/libcux_memtype.so" \
            timeout -k 5 300 "$1/ucx-cuda-run" "$check" --only "$2" --timed "$timed" $sizes ;;
    *-ours | *-ucx)
        module_use "$prefix" "${1##*-}" "$work/plugin-build/.libs/libuct_cuda.so.0"
        LD_LIBRARY_PATH="$prefix/lib" timeout -k 5 300 "$work/plugin-build/test/cux_ucp_datacheck" --only "$2" \
            --timed "$timed" $sizes ;;
    esac >"$3" 2>&1 && grep -q '^PASS' "$3"
}

# the cases by the names cux_ucp_datacheck prints (their indices differ with the number of GPUs)
cases=$("$check" --list 2>/dev/null)
index_of() { awk -v want="$1" -F '\t' '$2 == want {print $1}' <<<"$cases"; }
kinds=("GPU0 -> GPU0, two processes" "VMM GPU0 -> VMM GPU0, two processes"
       "VMM across two allocations GPU0 -> GPU0, two processes" "shareable pool GPU0 -> GPU0, two processes")

# The tables from every figure so far (after each repeat: a call cut short still leaves one).
table="$out/vmm-cost-table.txt"
summarize() {
    python3 - "$times" "${kinds[0]}" >"$table" <<'PY'
import collections, statistics, sys
path, base = sys.argv[1], sys.argv[2]
t = collections.defaultdict(list)
for line in open(path):
    carry, kind, size, _, us = line.rstrip("\n").split("\t")
    t[(carry, kind, int(size))].append(float(us))
carries = list(dict.fromkeys(k[0] for k in t))
kinds = list(dict.fromkeys(k[1] for k in t))
sizes = sorted({k[2] for k in t})
fmt = lambda s: "%d MB" % (s >> 20) if s >= 1 << 20 else "%d KB" % (s >> 10)
for c in carries:
    print("\n%s\n\n| memory | %s |" % (c, " | ".join(fmt(s) for s in sizes)))
    print("|---|" + "---|" * len(sizes))
    for k in kinds:
        cells = []
        for s in sizes:
            v, b = t.get((c, k, s), []), t.get((c, base, s), [])
            cell = "%.1f us [%.1f, %.1f]" % (statistics.median(v), min(v), max(v)) if v else "-"
            if v and b and k != base:
                cell += " %.2fx" % (statistics.median(v) / statistics.median(b))
            cells.append(cell)
        print("| %s | %s |" % (k, " | ".join(cells)))
PY
}

: >"$times"
for r in $(seq 1 "$repeats"); do
    for kind in "${kinds[@]}"; do
        i=$(index_of "$kind")
        [ -n "$i" ] || { failed "no case '$kind' in cux_ucp_datacheck --list"; continue; }
        for c in "${carries[@]}"; do
            name=$(basename "$c")
            log="$logs/$name-$i-$r.log"
            if run_case "$c" "$i" "$log"; then
                sed -n 's/^ *timed \([0-9]*\) bytes: \([0-9.]*\) us.*/\1 \2/p' "$log" | while read -r size us; do
                    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$size" "$r" "$us" >>"$times"
                done
            else
                failed "$name: $kind (log: $(basename "$log"))"
            fi
        done
    done
    summarize
done

say "time per message (half a round trip of $timed), median [min, max] of $repeats interleaved repeats; x: the" \
    "median's ratio to cuMemAlloc's of the same carry"
cat "$table" | tee -a "$report"
tar -C "$out" -czf "$out/vmm-cost.tgz" vmm-cost && rm -rf "$logs"
exit "$rc"
