#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What a message of VMM memory costs on Debian's UCX 1.13.1 with our module, against cuMemAlloc memory (issue 59).
#
#   OUT=DIR gpu-host/run vmm-cost CARRY [REPEATS] [DRVCOUNT_LIB]
#
# CARRY as gpu-host/run containers takes it (Debian's UCX packages, our module, ucx-cuda-run, cux_ucp_datacheck).
# Per memory kind (cuMemAlloc; cuMemCreate with a POSIX descriptor; two cuMemCreate in one reserved range) and
# size, two processes on GPU 0 send one buffer back and forth with every message checked
# (cux_ucp_datacheck --only CASE --rounds N SIZE; the VMM cases send every size twice): the time of a run with
# many rounds less that of one with few, divided by the messages between, is the cost of one message (start-up and
# set-up cancel out). REPEATS
# (default 3) interleaved. With DRVCOUNT_LIB (bench/cux_drvcount), each process's driver calls per message of a
# further run. UCX_TLS=self,tcp,cuda_copy,cuda_ipc; CUX_VMM_COST_ENV adds variables (for instance
# CUX_MEMTYPE=hooks); CUX_VMM_COST_SIZES the sizes (64 KB, 1 MB, 64 MB). Writes $OUT/vmm-cost.txt.
set -u
. "$(dirname "$0")/../lib.sh"
carry_dir=$(cd "${1:?usage: gpu-host/run vmm-cost CARRY [REPEATS] [DRVCOUNT_LIB]}" && pwd)
repeats=${2:-3}
drvcount=${3:+$(realpath "$3")}
out=${OUT:-/tmp/cux-out}
report="$out/vmm-cost.txt"
mkdir -p "$out/vmm-cost"
gh_report "$report"
gh_stock_ucx "$carry_dir" /tmp/cux-vmm-cost-root || exit 1
chmod +x "$carry_dir"/cux_* "$carry_dir/ucx-cuda-run"
export CUX_MODULE="$carry_dir/libuct_cuda.so.0" CUX_PERFTEST_LIB="$carry_dir/libcux_perftest.so" \
    CUX_MEMTYPE_LIB="$carry_dir/libcux_memtype.so" UCX_WARN_UNUSED_ENV_VARS=n UCX_TLS=self,tcp,cuda_copy,cuda_ipc
# shellcheck disable=SC2086
[ -z "${CUX_VMM_COST_ENV:-}" ] || export ${CUX_VMM_COST_ENV}
run="$carry_dir/ucx-cuda-run"
check="$carry_dir/cux_ucp_datacheck"
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -1)${CUX_VMM_COST_ENV:+, $CUX_VMM_COST_ENV}"

# the cases by the names cux_ucp_datacheck prints (their indices differ with the number of GPUs)
cases=$("$check" --list 2>/dev/null)
index_of() { awk -v want="$1" -F '\t' '$2 == want {print $1}' <<<"$cases"; }
kinds=("GPU0 -> GPU0, two processes" "VMM GPU0 -> VMM GPU0, two processes"
       "VMM across two allocations GPU0 -> GPU0, two processes")
few=3 many=63

timed() { # CASE ROUNDS SIZE LOG: seconds, or nothing when the check failed
    local t0 t1
    t0=$(date +%s.%N)
    timeout -k 5 300 "$run" "$check" --only "$1" --rounds "$2" "$3" >"$4" 2>&1 || return 1
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}

: >"$out/vmm-cost/times.tsv"
for r in $(seq 1 "$repeats"); do
    for size in ${CUX_VMM_COST_SIZES:-65536 1048576 67108864}; do
        for kind in "${kinds[@]}"; do
            i=$(index_of "$kind")
            [ -n "$i" ] || { failed "no case '$kind' in cux_ucp_datacheck --list"; continue; }
            a=$(timed "$i" "$few" "$size" "$out/vmm-cost/$i-$size-few-$r.log") || failed "$kind, $size, $few rounds"
            b=$(timed "$i" "$many" "$size" "$out/vmm-cost/$i-$size-many-$r.log") || failed "$kind, $size, $many rounds"
            # cases of descriptor-exported memory send their sizes twice (cux_ucp_datacheck counts descriptors)
            passes=1
            grep -q 'descriptors after the first pass' "$out/vmm-cost/$i-$size-many-$r.log" && passes=2
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$size" "$r" "${a:-}" "${b:-}" "$passes" \
                >>"$out/vmm-cost/times.tsv"
        done
    done
done

say "per message (two per round and pass: there and back), ($many - $few) rounds' difference, median [min, max] of $repeats"
python3 - "$out/vmm-cost/times.tsv" "$few" "$many" <<'PY' | tee -a "$report"
import collections, statistics, sys
path, few, many = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cost = collections.defaultdict(list)
for line in open(path):
    kind, size, _, a, b, passes = line.rstrip("\n").split("\t")
    if a and b:
        cost[(kind, int(size))].append((float(b) - float(a)) / (2 * int(passes) * (many - few)) * 1e6)
sizes = sorted({s for _, s in cost})
kinds = list(dict.fromkeys(k for k, _ in cost))
print("| memory | " + " | ".join("%d KB" % (s >> 10) for s in sizes) + " |")
print("|---|" + "---|" * len(sizes))
for k in kinds:
    cells = []
    for s in sizes:
        v = cost.get((k, s), [])
        cells.append("%.0f us [%.0f, %.0f]" % (statistics.median(v), min(v), max(v)) if v else "-")
    print("| %s | %s |" % (k, " | ".join(cells)))
PY

if [ -n "$drvcount" ]; then
    say "driver calls per message and process (bench/cux_drvcount, $many rounds)"
    for kind in "${kinds[@]}"; do
        i=$(index_of "$kind")
        [ -n "$i" ] || continue
        for size in 65536; do
            passes=1
            [ "$kind" = "${kinds[0]}" ] || passes=2
            CUDA_INJECTION64_PATH=$drvcount CUX_DRVCOUNT_AT_EXIT=$((2 * passes * many)) timeout -k 5 300 "$run" "$check" \
                --only "$i" --rounds "$many" "$size" >"$out/vmm-cost/drvcount-$i-$size.log" 2>&1 ||
                failed "$kind with cux_drvcount"
            { echo "-- $kind, $size bytes"; grep -v '^PASS\|^SKIP\|passed,' "$out/vmm-cost/drvcount-$i-$size.log"; } |
                tee -a "$report"
        done
    done
fi
exit "$rc"
