#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The data checks beside a busy loop per core: cux_blocks all to all, the UCP check, the rotation.
#
# Data checks on a busy GPU host (issue 31, item 3), after gpu-host/run ucx-versions inplace (a UCX built
# with CUDA, our module in place of its own, the plugin built against it in BUILD):
#
#   OUT=DIR gpu-host/run stress PREFIX BUILD [RUNS]
#
# With one busy loop per core beside them the whole time:
#   blocks  bench/cux_blocks -n 3 -p all, put and get, one allocation and one per block, 16 KB and 65,539-byte
#           blocks, 1 and 20 per transfer, every block checked: RUNS runs (default 50) with our module, then
#           RUNS/5 with UCX's own (PREFIX/reference-module), each run's flush_early summed;
#   ucp     test/cux_ucp_datacheck (every case one GPU allows, default sizes), RUNS/10 runs with ours;
#   stress  test/stress-datachecks.sh's rotation (cux_blocks and the UCP check), RUNS runs with ours.
# STEPS (default "blocks ucp stress") picks some. Writes $OUT/stress.txt and $OUT/stress-logs.tar.gz.
set -u
prefix=${1:?usage: gpu-host/run stress PREFIX BUILD [RUNS]}
build=$(cd "${2:?usage: gpu-host/run stress PREFIX BUILD [RUNS]}" && pwd)
runs=${3:-50}
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
out=${OUT:-/tmp/cux-out}
logs=/tmp/cux-stress-logs
report="$out/stress.txt"
moddir="$prefix/lib/ucx"
mkdir -p "$out" "$logs"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_TLS=${UCX_TLS:-self,sm,cuda_copy,cuda_ipc} UCX_WARN_UNUSED_ENV_VARS=n

gh_report "$report"
use_module() { module_in_place "$prefix" "$1"; }

hogs=()
trap '[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null' EXIT
for _ in $(seq "$(nproc)"); do
    (while :; do :; done) &
    hogs+=($!)
done

cp "$moddir/libuct_cuda.so.0" "$logs/ours.so"
ucx_version=$("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p')
say "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) cores, $(nproc) busy loops beside every run; UCX $ucx_version"

# cux_blocks RUNS times with module $2; counts failed runs and the transfers whose worker flush came first.
blocks() {
    local label=$1 module=$2 n=$3 failed=0 early=0 i r
    use_module "$module"
    for i in $(seq 1 "$n"); do
        r=$(timeout -k 10 300 "$build/bench/cux_blocks" -n 3 -p all -o put,get -l one,many -s 16k,65539 -k 1,20 \
            -r 2 -f 1 2>&1)
        local st=$?
        echo "### $label run $i (exit $st)" >>"$logs/blocks.log"
        echo "$r" >>"$logs/blocks.log"
        early=$((early + $(echo "$r" | sed -n 's/.*flush_early=\([0-9]*\).*/\1/p' | awk '{s += $1} END {print s + 0}')))
        if [ $st -ne 0 ] || echo "$r" | grep -q 'BAD'; then
            failed=$((failed + 1))
            echo "$label run $i FAILED (exit $st): $(echo "$r" | grep -E 'BAD|wrong|cux_blocks: ' | head -n 2 |
                tr '\n' ' ')" >>"$report"
        fi
    done
    say "cux_blocks -n 3 -p all, $label: $((n - failed)) of $n runs passed, every block checked (8 cases a run);" \
        "UCP's worker flush came first in $early transfers"
    [ $failed -eq 0 ] || rc=1
}

ucp_check() {
    local n=$1 failed=0 i r
    use_module "$logs/ours.so"
    for i in $(seq 1 "$n"); do
        r=$(timeout -k 10 600 "$build/test/cux_ucp_datacheck" 2>&1)
        echo "### run $i" >>"$logs/datacheck.log"
        echo "$r" >>"$logs/datacheck.log"
        echo "$r" | tail -n 1 | grep -q ' 0 failed' || {
            failed=$((failed + 1))
            echo "data check run $i: $(echo "$r" | grep -E 'FAIL|stale|expected' | head -n 3 | tr '\n' ' ')" >>"$report"
        }
    done
    say "test/cux_ucp_datacheck, ours: $((n - failed)) of $n runs passed ($(echo "$r" | tail -n 1))"
    [ $failed -eq 0 ] || rc=1
}

for step in ${STEPS:-blocks ucp stress}; do
    case $step in
    blocks)
        blocks "ours" "$logs/ours.so" "$runs"
        blocks "UCX's own module" "$prefix/reference-module/libuct_cuda.so.0" $((runs / 5))
        ;;
    ucp)
        ucp_check $((runs / 10))
        ;;
    stress)
        use_module "$logs/ours.so"
        say "test/stress-datachecks.sh, ours, cux_blocks and the UCP check: $(CUX_TEST_STRESS_RUN= \
            CUX_TEST_STRESS_LOAD=none CUX_TEST_STRESS_PROGRAMS=blocks,ucp CUX_TEST_STRESS_LOG="$logs/stress.log" \
            "$top/test/stress-datachecks.sh" "$build" "$runs" 2>&1 | tee -a "$logs/stress-summary.log" | tail -n 1)"
        grep -q ', 0 failed,' "$logs/stress-summary.log" || rc=1
        ;;
    esac
done
use_module "$logs/ours.so"
tar -C /tmp -czf "$out/stress-logs.tar.gz" cux-stress-logs
say "done: exit $rc"
exit $rc
