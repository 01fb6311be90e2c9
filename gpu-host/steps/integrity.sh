#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Data checks with plain synchronous fills, repeated; peer error handling; memory-operation cost.
#
# Data integrity on a GPU host (issue 9), after gpu-host/run verify (which builds the reference UCX with
# CUDA, builds and tests the plugin, and installs our module into that UCX in place of UCX's own):
#
#   OUT=/some/dir gpu-host/run integrity STEP [RUNS]
#
# STEP repeat: test/cux_ucp_datacheck, fills by plain synchronous cuMemcpy and nothing after them, RUNS times in a
#              row (default 20) with our module installed (the drop-in use: UCX's own allocation hooks report
#              buffers, UCP asks our memory domain about them); then the same with CUX_SYNC_MEMOPS=n (what the
#              module did before) and with UCX's own module, a few runs each; then the threshold sweep.
# STEP errors: the data check with peer error handling, with our module and with UCX's own: which lanes UCP
#              picks in that mode.
# STEP cost:   bench/cux_opcost's memory query and registration with and without synchronous memory operations,
#              and ucx_perftest, ours against ours with CUX_SYNC_MEMOPS=n and UCX's own module (bench "integrity").
# Writes $OUT/integrity-STEP.txt.
set -u
. "$(dirname "$0")/../lib.sh" # say, module_in_place, the shared set-up
step=${1:?usage: gpu-host/run integrity repeat|errors|cost [RUNS]}
runs=${2:-20}
out=${OUT:-/tmp/cux-out}
prefix=${UCX_REF_PREFIX:-/opt/ucx-ref}
work=/tmp/cux-work
check="$work/plugin-build/test/cux_ucp_datacheck"
log="$out/integrity-$step.txt"
mkdir -p "$out"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_TLS=${UCX_TLS:-self,sm,cuda_copy,cuda_ipc}
[ -x "$check" ] || { echo "no $check: run gpu-host/run verify first" | tee -a "$log"; exit 1; }

gh_report "$log"
use_module() { module_in_place "$prefix" "$prefix/$1/libuct_cuda.so.0"; }
note() { say "$@"; }

# N runs of the data check; prints one line per run and a total.
repeat() {
    local label=$1 n=$2 failed=0 i r; shift 2
    for i in $(seq 1 "$n"); do
        r=$(timeout 600 "$check" "$@" 2>&1)
        echo "$r" >>"$log.full"
        if echo "$r" | grep -q ' 0 failed'; then
            echo "$label run $i: $(echo "$r" | tail -n 1)" >>"$log"
        else
            failed=$((failed + 1))
            echo "$label run $i: FAILED: $(echo "$r" | grep -E '^FAIL|stale|expected' | head -n 3 | tr '\n' ' ')" >>"$log"
        fi
    done
    note "$label: $((n - failed)) of $n runs passed"
}

nvidia-smi -L >>"$log" 2>&1
"$prefix/bin/ucx_info" -v | head -1 >>"$log"
case "$step" in
repeat)
    use_module cux-module
    note "our module, $runs runs, default sizes (8, 65539, 1 MiB, 16 MiB), 2 round trips, no synchronisation after fills"
    repeat "ours" "$runs"
    note "our module with CUX_SYNC_MEMOPS=n (the behaviour before the fix)"
    CUX_SYNC_MEMOPS=n repeat "ours, CUX_SYNC_MEMOPS=n" 5
    note "the same with the application-side remedy (--fill-sync)"
    CUX_SYNC_MEMOPS=n repeat "ours, CUX_SYNC_MEMOPS=n, --fill-sync" 2 --fill-sync
    use_module reference-module
    note "UCX's own module"
    repeat "UCX's module" 5
    use_module cux-module
    note "our module, every size across UCP's protocol thresholds (--sweep)"
    repeat "ours, sweep" 2 --sweep
    ;;
errors)
    for m in cux-module reference-module; do
        use_module "$m"
        note "$m: peer error handling (UCX_TLS=self,tcp,cuda_copy,cuda_ipc: UCP 1.13's shm has none)"
        UCX_TLS=self,tcp,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info timeout 300 "$check" --peer-errors --only 0,1 8 1048576 \
            >>"$log" 2>&1
    done
    use_module cux-module
    ;;
cost)
    for sync in y n; do
        note "bench/cux_opcost with CUX_SYNC_MEMOPS=$sync (memory query and registration lines)"
        CUX_SYNC_MEMOPS=$sync UCX_MODULES=^cuda "$work/plugin-build/bench/cux_opcost" 2>&1 |
            grep -E 'mem_query|mem_reg|cux_ptr_query' >>"$log"
    done
    python3 "$work"/uct-cuda-plugin-*/bench/perftest_compare.py --prefix "$prefix" \
        --module reference="$prefix/reference-module/libuct_cuda.so.0" \
        --module ours="$prefix/cux-module/libuct_cuda.so.0" \
        --module ours-nosync="$prefix/cux-module/libuct_cuda.so.0,CUX_SYNC_MEMOPS=n" \
        --cases integrity --repeats "$runs" --out "$out" >>"$log" 2>&1
    note "perftest exit $?"
    use_module cux-module
    ;;
esac
