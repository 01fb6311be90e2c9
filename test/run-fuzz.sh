#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds test/fuzz/fuzz_ipc_key.c into BUILDDIR/test/fuzz-run with clang (libFuzzer, AddressSanitizer,
# UndefinedBehaviorSanitizer) against a configured and built tree, and runs it for CUX_FUZZ_SECONDS (default
# 60) from the committed seeds plus seeds of this host. Prints one line: "fuzz: N executions in S s, F findings" and exits 0, 1 on a finding,
# or 77 when clang's libFuzzer is not installed (contrib/install-deps.sh installs it).
#
#   test/run-fuzz.sh [BUILDDIR]
set -u
builddir=$(cd "${1:-${CUX_BUILDDIR:-$PWD}}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${CUX_FUZZ_SECONDS:-60}
work="$builddir/test/fuzz-run" # not test/fuzz: make dist would take what is there for the sources
logs="$builddir/test/logs"
mkdir -p "$work/corpus" "$logs"

cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ] || ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
        "$cc" -x c -fsanitize=fuzzer - -o "$work/probe" 2>/dev/null; then
    echo "fuzz: skipped: no clang with libFuzzer (packages clang, libclang-rt-dev)"
    exit 77
fi

mk() { sed -n "s/^$1 = //p" "$builddir/Makefile" | sed "s|\$(abs_top_builddir)|$builddir|g"; }
cppflags="-I$top/src $(mk UCX_CPPFLAGS) $(mk CUDA_CPPFLAGS) -DCUX_UCX_VERNUM=$(mk CUX_UCX_VERNUM)"
libs="-L$builddir/ucx-build/lib -Wl,-rpath,$(mk UCX_LIBDIR) -luct -lucs"
module="$builddir/.libs/libuct_cuda.so.0"

# The key checks are compiled into the target, instrumented; the module's unpack and reachability run from
# the built module (uninstrumented: crashes are caught, not coverage).
"$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $cppflags \
    "$top/test/fuzz/fuzz_ipc_key.c" "$top/src/ipc/cux_ipc_rkey.c" "$module" $libs \
    -Wl,-rpath,"$builddir/.libs" -o "$work/fuzz_ipc_key" >"$logs/fuzz-build.log" 2>&1 ||
    { echo "fuzz: build failed"; tail -n 20 "$logs/fuzz-build.log"; exit 1; }
"$cc" -O1 $cppflags "$top/test/fuzz/make_seeds.c" "$top/src/ipc/cux_ipc_rkey.c" $libs -o "$work/make_seeds" \
    >>"$logs/fuzz-build.log" 2>&1 || { echo "fuzz: seed maker build failed"; exit 1; }

cp "$top"/test/fuzz/corpus/* "$work/corpus/"
"$work/make_seeds" "$work/corpus" || exit 1

# UCX's allocations at exit are not ours to report; everything else is a finding.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 UCX_MODULES=^cuda \
    CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" UCX_LOG_LEVEL=fatal \
    "$work/fuzz_ipc_key" -max_total_time="$seconds" -seed=1 -timeout=10 -artifact_prefix="$work/" \
    "$work/corpus" >"$logs/fuzz.log" 2>&1
rc=$?
runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$logs/fuzz.log" | tail -n 1)
secs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$logs/fuzz.log" | tail -n 1)
findings=$(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | wc -l)
echo "fuzz: ${runs:-0} executions in ${secs:-?} s, $findings findings (log: $logs/fuzz.log)"
if [ $rc -ne 0 ] || [ "$findings" -ne 0 ]; then
    tail -n 30 "$logs/fuzz.log"
    exit 1
fi
exit 0
