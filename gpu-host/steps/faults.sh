#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU suites under compute-sanitizer, a soak of 10^6 operations, the threaded tests, in a ucx-versions build.
#
# Issue 10, item 4, on a GPU host: the GPU suites under compute-sanitizer, a soak, and the threaded tests on real
# GPUs, in a plugin build that gpu-host/run ucx-versions has made (its set-up's build directory):
#
#   OUT=DIR gpu-host/run faults BUILD_DIR PREFIX
#
# 1. soak: CUX_TEST_SOAK_OPS (default 500000) operations over CUX_TEST_SOAK_BUFFERS (default 10000) buffers on cuda_copy
#    and again on cuda_ipc (10^6 operations in all), holdings printed at start and end;
# 2. the threaded tests (threads with workers of their own; cux_ucp_datacheck --threads 4, one UCP worker in
#    UCS_THREAD_MODE_MULTI, processes on GPU0 and GPU1);
# 3. compute-sanitizer's CUX_TEST_SANITIZE_TOOLS (default "memcheck racecheck"; memcheck with --leak-check full) over
#    the GPU suites in CUX_TEST_SANITIZE_FILTER, each bounded by CUX_TEST_SANITIZE_SECONDS (default 300). The default filter
#    leaves out the three tests that hand the driver bad input on purpose (an invalid copy, a VMM key naming
#    another allocation, a handle of an exited peer): the driver's error for each is an error in memcheck's
#    report. The module launches no kernels of its own, so memcheck sees the driver calls (errors returned,
#    leaked allocations) and racecheck has no shared memory to check.
# CUX_TEST_FAULTS_PARTS picks some of "soak threads sanitize" (default all three). PREFIX is the UCX the build was made
# against. Writes $OUT/faults.txt and $OUT/faults-logs.tar.gz.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, say, failed, the shared set-up
build=${1:?usage: gpu-host/run faults BUILD_DIR PREFIX}
prefix=${2:?usage: gpu-host/run faults BUILD_DIR PREFIX}
out=${OUT:-/tmp/cux-out}
work=/tmp/cux-faults
report="$out/faults.txt"
mkdir -p "$out" "$work/logs"

gh_report "$report"
# the logs come back even when a time limit stops the script
trap 'tar -C "$work" -czf "$out/faults-logs.tar.gz" logs' EXIT
trap 'say "stopped by a signal"; exit 143' TERM INT

cd "$build" || exit 1
export UCX_MODULES=^cuda CUX_TEST_REQUIRE_GPU=1 UCX_WARN_UNUSED_ENV_VARS=n
gtest="$build/test/cux_gtest"
say "faults and soak on $(nvidia-smi -L | wc -l) GPUs, build $build, UCX $prefix"

# gtest with a filter, its log kept; the summary lines into the report
gtest_run() {
    local name=$1 filter=$2; shift 2
    env "$@" "$gtest" --gtest_filter="$filter" >"$work/logs/$name.log" 2>&1
    local grc=$?
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \] [a-z]' "$work/logs/$name.log" | sed 's/^/    /' >>"$report"
    [ $grc -eq 0 ] || failed "$name (exit $grc)"
}

parts=" ${CUX_TEST_FAULTS_PARTS:-soak threads sanitize} "
part() { [[ $parts == *" $1 "* ]]; }

if part soak; then
ops=${CUX_TEST_SOAK_OPS:-500000}
bufs=${CUX_TEST_SOAK_BUFFERS:-10000}
say "soak: $ops operations over $bufs buffers per transport"
gtest_run soak '*soak*' CUX_TEST_SOAK_OPS="$ops" CUX_TEST_SOAK_BUFFERS="$bufs"
grep -E 'soak,|start:|end:|mappings made' "$work/logs/soak.log" | sed 's/^/    /' >>"$report"
fi

if part threads; then
say "threads with workers of their own, on the GPUs"
gtest_run threads 'threads*:ipc_transport.threads*'
grep -E 'round trips' "$work/logs/threads.log" | sed 's/^/    /' >>"$report"

say "cux_ucp_datacheck --threads 4 (one UCP worker in UCS_THREAD_MODE_MULTI), through ucx-cuda-run"
launcher="env CUX_MODULE=$build/.libs/libuct_cuda.so.0 CUX_PERFTEST_LIB=$build/.libs/libcux_perftest.so"
launcher="$launcher CUX_MEMTYPE_LIB=$build/.libs/libcux_memtype.so $build/ucx-cuda-run"
[ -f "$prefix/lib/ucx/libuct_cuda.so.0" ] && launcher= # our module installed in UCX's module directory
UCX_TLS=self,sm,cuda_copy,cuda_ipc timeout 300 $launcher "$build/test/cux_ucp_datacheck" --threads 4 8 65539 1048576 \
    >"$work/logs/ucp-threads.log" 2>&1 || failed "cux_ucp_datacheck --threads 4"
grep -E '^(PASS|FAIL|SKIP)|passed' "$work/logs/ucp-threads.log" | sed 's/^/    /' >>"$report"
fi

if part sanitize; then
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
filter=${CUX_TEST_SANITIZE_FILTER:-'copy*:ipc_transport*:threads*:soak*:parity*:-copy.bad_input*:ipc_transport.a_vmm_key_naming*:ipc_transport.peer_that_exited*'}
if [ -z "$sanitizer" ]; then
    say "compute-sanitizer: not in this toolkit, skipped"
else
    say "$("$sanitizer" --version | grep -i version | head -1)"
    for tool in ${CUX_TEST_SANITIZE_TOOLS:-memcheck racecheck}; do
        extra=
        [ $tool = memcheck ] && extra="--leak-check full"
        say "compute-sanitizer --tool $tool $extra (at most ${CUX_TEST_SANITIZE_SECONDS:-300} s)"
        timeout "${CUX_TEST_SANITIZE_SECONDS:-300}" "$sanitizer" --tool $tool $extra --target-processes all \
            --error-exitcode 86 "$gtest" --gtest_filter="$filter" >"$work/logs/sanitizer-$tool.log" 2>&1
        src=$?
        grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \] [a-z]|ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY' \
            "$work/logs/sanitizer-$tool.log" | sort | uniq -c | sed 's/^/    /' >>"$report"
        case $src in
        0) say "$tool: clean ($(grep -c '^\[       OK \]' "$work/logs/sanitizer-$tool.log") tests ran)" ;;
        124) say "$tool: stopped at the time limit after $(grep -c '^\[       OK \]' "$work/logs/sanitizer-$tool.log") tests, no error before it"
             grep -q 'ERROR SUMMARY: [1-9]' "$work/logs/sanitizer-$tool.log" && failed "$tool reported errors" ;;
        *) failed "$tool (exit $src)" ;;
        esac
    done
fi
fi

say "done: exit $rc"
exit $rc
