#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ucx_perftest's device-level tests (-a cuda), UCX's module against ours.
#
# ucx_perftest's device-level tests (-a cuda: kernels calling UCP's device API, UCX 1.22+) with our module in
# place of UCX's and with UCX's own, on the same UCX core, interleaved (issue 33, item 4):
#
#   OUT=DIR gpu-host/run device-perftest PREFIX OUR_MODULE [ROUNDS]
#
# PREFIX: a UCX built with CUDA and nvcc (gpu-host/prepare/build-ucx-gtest.sh with CUX_UCX_GTEST_DEVICE=1; UCX's module in
# PREFIX/reference-module); OUR_MODULE: our libuct_cuda.so.0 built against it. Each module gets its own copy of
# PREFIX/lib, chosen with LD_LIBRARY_PATH (UCX finds its modules next to the libucs in use). Server and client
# are two processes on GPU 0, UCX_TLS=self,sm,cuda_copy,cuda_ipc. Shapes: ucp_put_bw at thread and warp (32
# threads) level, 8 B to 1 MB, and ucp_put_lat at thread level, ROUNDS (default 3) rounds, the two
# modules alternating. Writes $OUT/device-perftest.txt (per shape: each module's median and range over the
# rounds, and UCX's over ours) and $OUT/device-perftest-*.log. Exit 0 when every run finished.
set -u
prefix=${1:?usage: gpu-host/run device-perftest PREFIX OUR_MODULE [ROUNDS]}
ours=${2:?usage: gpu-host/run device-perftest PREFIX OUR_MODULE [ROUNDS]}
rounds=${3:-3}
out=${OUT:-/tmp/cux-out}
work=$(mktemp -d /tmp/cux-devperf.XXXXXX)
report="$out/device-perftest.txt"
raw="$work/raw"
mkdir -p "$out"
. "$(dirname "$0")/../lib.sh"
module_copies "$prefix" "$ours" "$work"

# test level threads size iterations (UCX 1.22's perftest kernels have no block level: "Unsupported level: 2")
shapes=(
    "ucp_put_bw thread 1 8 100000"     "ucp_put_bw thread 1 4096 2000"     "ucp_put_bw thread 1 1048576 20"
    "ucp_put_bw warp 32 8 100000"      "ucp_put_bw warp 32 4096 50000"     "ucp_put_bw warp 32 1048576 2000"
    "ucp_put_lat thread 1 8 1000"
)
port=20000
rc=0
run() { # module round test level threads size iterations
    local module=$1 round=$2 test=$3 level=$4 threads=$5 size=$6 iters=$7
    local log="$out/device-perftest-$module-$test-$level-$size-$round.log"
    local args=(-t "$test" -a cuda -m cuda -L "$level" -T "$threads" -s "$size" -n "$iters" -w 100 -p $((++port)))
    local env=(env LD_LIBRARY_PATH="$work/$module:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
               UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_RESOLVE_REMOTE_EP_ID=y)
    "${env[@]}" timeout -k 5 60 "$prefix/bin/ucx_perftest" "${args[@]}" >"$log.server" 2>&1 &
    local server=$!
    sleep 1
    "${env[@]}" timeout -k 5 60 "$prefix/bin/ucx_perftest" localhost "${args[@]}" >"$log" 2>&1
    local r=$?
    wait $server
    # the last numeric row: iterations, latency (typical, average, overall us), bandwidth (average, overall
    # MB/s), message rate (average, overall per s)
    local row
    row=$(grep -E '^[[:space:]]*(Final:)?[[:space:]]*[0-9]+[[:space:]]+[0-9.]+' "$log" | tail -n 1 | sed 's/Final://')
    if [ $r -ne 0 ] || [ -z "$row" ]; then
        echo "$module $test $level $size round $round: exit $r, no result ($(tail -n 2 "$log" | tr '\n' ' '))" \
            >>"$report"
        rc=1
        return
    fi
    # figure of merit: overall latency (us) for _lat, overall bandwidth (MB/s) otherwise
    echo "$test $level $size $module $(echo "$row" | awk -v lat=$([ "${test%_lat}" != "$test" ] && echo 1 || echo 0) \
        '{print (lat ? $4 : $6)}')" >>"$raw"
}

echo "UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p'), $(nvidia-smi -L | head -n 1)," \
     "$rounds rounds, modules alternating" >"$report"
for ((round = 1; round <= rounds; ++round)); do
    for shape in "${shapes[@]}"; do
        for module in ucx ours; do
            run $module $round $shape
        done
    done
done

# per shape: median and range of each module, then UCX's over ours (for bandwidth: ours over UCX's)
python3 - "$raw" >>"$report" <<'EOF'
import sys, collections, statistics
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    test, level, size, module, value = line.split()
    runs[(test, level, int(size))].append((module, float(value)))
print("| test | level | size (B) | UCX's module | ours | ours against UCX's |")
print("|---|---|---|---|---|---|")
for (test, level, size), vals in runs.items():
    per = {m: sorted(v for mm, v in vals if mm == m) for m in ("ucx", "ours")}
    if not per["ucx"] or not per["ours"]:
        continue
    med = {m: statistics.median(v) for m, v in per.items()}
    unit = "us" if test.endswith("_lat") else "MB/s"
    ratio = med["ucx"] / med["ours"] if unit == "us" else med["ours"] / med["ucx"]
    fmt = lambda m: "%.3f %s (%.3f-%.3f)" % (med[m], unit, per[m][0], per[m][-1])
    print("| %s | %s | %d | %s | %s | %.2fx |" % (test, level, size, fmt("ucx"), fmt("ours"), ratio))
EOF
cat "$report"
rm -rf "$work"
exit $rc
