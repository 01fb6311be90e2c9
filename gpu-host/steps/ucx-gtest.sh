#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own gtest against UCX's CUDA module and against ours, sharded, results compared.
#
# UCX's own gtest against UCX's CUDA module and against ours, on a GPU host (issue 20, item 3):
#
#   OUT=DIR gpu-host/run ucx-gtest PREFIX OUR_MODULE [SHARDS]
#
# PREFIX comes from gpu-host/prepare/build-ucx-gtest.sh (UCX with CUDA, its gtest in PREFIX/gtest/gtest, UCX's module
# in PREFIX/reference-module); OUR_MODULE is our libuct_cuda.so.0 built against that UCX. UCX finds its modules
# next to the libucs in use, so each module gets its own copy of PREFIX/lib, chosen with LD_LIBRARY_PATH. Both
# runs go at once, each split into SHARDS gtest shards (default 4), over the CUDA transport instances
# (`cuda*`) and the memory-type suites (`*mem_type*:*memtype*`). Writes $OUT/ucx-gtest-*.log and
# $OUT/ucx-gtest.txt: per module and filter, tests passed, failed (by name) and skipped, and the tests whose
# result differs between the modules. Exit 0 when ours fails no test that UCX's module passes.
# CUX_TEST_GTEST_TIMEOUT (default 540) bounds each shard, in seconds. CUX_UCX_GTEST_FILTERS replaces the two
# filters with "NAME=FILTER ..." (e.g. "device=*cuda_ipc*device*:*test_ucp_device*" for the device tests).
set -u
export LC_ALL=C # sort and join agree
prefix=${1:?usage: gpu-host/run ucx-gtest PREFIX OUR_MODULE [SHARDS]}
ours=${2:?usage: gpu-host/run ucx-gtest PREFIX OUR_MODULE [SHARDS]}
shards=${3:-4}
prefix=$(cd "$prefix" && pwd)
ours=$(cd "$(dirname "$ours")" && pwd)/$(basename "$ours")
out=${OUT:-/tmp/cux-out}
work=$(mktemp -d /tmp/cux-gtest.XXXXXX)
report="$out/ucx-gtest.txt"
mkdir -p "$out"

[ -x "$prefix/gtest/gtest" ] || { echo "gpu-host-ucx-gtest: no $prefix/gtest/gtest (gpu-host/prepare/build-ucx-gtest.sh)" >&2; exit 1; }
. "$(dirname "$0")/../lib.sh"
module_copies "$prefix" "$ours" "$work"

filters=("cuda*" "*mem_type*:*memtype*")
names=(cuda memtype)
if [ -n "${CUX_UCX_GTEST_FILTERS:-}" ]; then
    filters=() names=()
    for pair in $CUX_UCX_GTEST_FILTERS; do
        names+=("${pair%%=*}") filters+=("${pair#*=}")
    done
fi
run_shards() { # module filter-index
    local module=$1 f=$2 i
    for ((i = 0; i < shards; ++i)); do
        (cd "$work" && LD_LIBRARY_PATH="$work/$module:${LD_LIBRARY_PATH:-}" GTEST_TOTAL_SHARDS=$shards \
             GTEST_SHARD_INDEX=$i timeout ${CUX_TEST_GTEST_TIMEOUT:-540} "$prefix/gtest/gtest" --gtest_filter="${filters[$f]}" \
             >"$out/ucx-gtest-$module-${names[$f]}-$i.log" 2>&1) &
    done
}
start=$(date +%s)
for f in "${!names[@]}"; do
    for module in ucx ours; do
        run_shards $module $f
    done
done
wait
echo "UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p'), gtest $shards shards per module and" \
     "filter, both modules at once: $(( $(date +%s) - start )) s" >"$report"

# A test's result per log: "OK", "FAILED" or "SKIPPED" by name.
results() { # module name-index
    cat "$out"/ucx-gtest-$1-${names[$2]}-*.log |
        sed -n 's/^\[ *\(OK\|FAILED\|SKIPPED\) *\] \([^ ,]*\.[^ ,]*\).* ([0-9]* ms)$/\2 \1/p' | sort -u
}
rc=0
for f in "${!names[@]}"; do
    for module in ucx ours; do
        results $module $f >"$work/$module-$f"
        echo "${names[$f]} (${filters[$f]}), $module's module: $(grep -c ' OK$' "$work/$module-$f") passed," \
             "$(grep -c ' FAILED$' "$work/$module-$f") failed, $(grep -c ' SKIPPED$' "$work/$module-$f") skipped" \
             >>"$report"
        grep ' FAILED$' "$work/$module-$f" | sed 's/^/    /' >>"$report"
        for log in "$out"/ucx-gtest-$module-${names[$f]}-*.log; do
            # a shard that ran to its end prints gtest's summary line
            grep -q -E '^\[==========\] [0-9]+ tests? from .* ran' "$log" ||
                echo "    $(basename "$log") ended before its summary (crash, abort or timeout): last lines" \
                     "$(tail -n 3 "$log" | tr '\n' ' ' | cut -c1-300)" >>"$report"
        done
    done
    join "$work/ucx-$f" "$work/ours-$f" | awk '$2 != $3 {print "    differs: " $1 ": UCX " $2 ", ours " $3}' \
        >"$work/diff-$f"
    join -v1 "$work/ucx-$f" "$work/ours-$f" | sed 's/^/    only run with UCX'"'"'s: /' >>"$work/diff-$f"
    join -v2 "$work/ucx-$f" "$work/ours-$f" | sed 's/^/    only run with ours: /' >>"$work/diff-$f"
    echo "${names[$f]}: $(wc -l <"$work/diff-$f") tests with a different result" >>"$report"
    cat "$work/diff-$f" >>"$report"
    if grep -q 'UCX OK, ours FAILED' "$work/diff-$f"; then
        rc=1
    fi
done
cat "$report"
rm -rf "$work"
exit $rc
