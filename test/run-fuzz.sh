#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds test/fuzz/fuzz_ipc_key.c with the whole module compiled in (every source instrumented: libFuzzer
# coverage, AddressSanitizer, UndefinedBehaviorSanitizer) into BUILDDIR/test/fuzz-run with clang, against a
# configured and built tree, and runs it on the mock driver in CUX_TEST_FUZZ_JOBS processes (default: the number of
# cores), from the committed seeds plus seeds of this host, until they have made CUX_TEST_FUZZ_RUNS executions
# together (default 10 million) or CUX_TEST_FUZZ_SECONDS have passed (default 900: a bound for a machine that is
# very busy, not the plan). Prints one line: "fuzz: N executions in S s, F findings" and exits 0; 1 on a finding,
# or when the processes made fewer than CUX_TEST_FUZZ_MIN_RATE executions a second each (default 1000, against
# some 50,000 on an idle core: a fuzzer that slow is broken, not busy); or 77 when clang's libFuzzer is not
# installed (contrib/install-deps.sh installs it). The verdict does not depend on the machine's speed.
#
#   test/run-fuzz.sh [BUILDDIR]
set -u
builddir=$(cd "${1:-${CUX_TEST_BUILDDIR:-$PWD}}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${CUX_TEST_FUZZ_SECONDS:-900}
jobs=${CUX_TEST_FUZZ_JOBS:-$(nproc)}
total_runs=${CUX_TEST_FUZZ_RUNS:-10000000}
min_rate=${CUX_TEST_FUZZ_MIN_RATE:-1000}
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
cppflags="-I$top/src $(mk UCX_CPPFLAGS) -DCUX_UCX_VERNUM=$(mk CUX_UCX_VERNUM) -DCUX_UCX_RELEASE=$(mk CUX_UCX_RELEASE)"
libs="-L$builddir/ucx-build/lib -Wl,-rpath,$(mk UCX_LIBDIR) -luct -lucs -ldl -lpthread"

# The module's own sources, all of them instrumented: the target registers the components itself (the module's
# constructor), so the installed UCX's module is kept out with UCX_MODULES=^cuda. UBSan's null and
# object-size checks are left out: UCS's ucs_offsetof (in ucs_derived_of) is a member access through a null
# pointer, which clang reports under either at -O1; AddressSanitizer still catches real bad accesses.
module_sources=$(ls "$top"/src/cux_module.c "$top"/src/driver/*.c "$top"/src/base/*.c "$top"/src/copy/*.c \
    "$top"/src/ipc/*.c "$top"/src/ipc/*/*.c)
"$cc" -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize=null,object-size -fno-sanitize-recover=undefined \
    $cppflags "$top/test/fuzz/fuzz_ipc_key.c" $module_sources $libs -o "$work/fuzz_ipc_key" >"$logs/fuzz-build.log" 2>&1 ||
    { echo "fuzz: build failed"; tail -n 20 "$logs/fuzz-build.log"; exit 1; }
"$cc" -O1 $cppflags "$top/test/fuzz/make_seeds.c" "$top/src/ipc/common/cux_ipc_rkey.c" $libs -o "$work/make_seeds" \
    >>"$logs/fuzz-build.log" 2>&1 || { echo "fuzz: seed maker build failed"; exit 1; }

cp "$top"/test/fuzz/corpus/* "$work/corpus/"
"$work/make_seeds" "$work/corpus" || exit 1

# UCX's allocations at exit are not ours to report; everything else is a finding. One process per job, each
# with its own seed and helper peer, sharing the corpus.
rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$logs"/fuzz-[0-9]*.log
pids=
for j in $(seq 1 "$jobs"); do
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 UCX_MODULES=^cuda \
        CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" UCX_LOG_LEVEL=fatal MOCK_CUDA_ASYNC=1 \
        "$work/fuzz_ipc_key" -runs=$(((total_runs + jobs - 1) / jobs)) -max_total_time="$seconds" -seed="$j" \
        -timeout=10 -artifact_prefix="$work/" \
        "$work/corpus" >"$logs/fuzz-$j.log" 2>&1 &
    pids="$pids $!"
done
rc=0
for p in $pids; do
    wait "$p" || rc=1
done
runs=0 secs=0
for j in $(seq 1 "$jobs"); do
    r=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$logs/fuzz-$j.log" | tail -n 1)
    s=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$logs/fuzz-$j.log" | tail -n 1)
    runs=$((runs + ${r:-0}))
    [ "${s:-0}" -gt "$secs" ] && secs=$s
done
cov=$(grep -ho "cov: [0-9]*" "$logs"/fuzz-[0-9]*.log | sort -t' ' -k2 -n | tail -n 1)
findings=$(ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | wc -l)
echo "fuzz: $runs executions in $secs s ($jobs processes, $cov edges), $findings findings (logs: $logs/fuzz-*.log)"
if [ $rc -ne 0 ] || [ "$findings" -ne 0 ]; then
    tail -n 30 "$logs"/fuzz-[0-9]*.log
    exit 1
fi
if [ "$runs" -lt "$total_runs" ]; then
    # the time bound came first: a busy machine, unless the rate says the fuzzer itself is broken
    if [ "$runs" -lt $((min_rate * jobs * (secs > 0 ? secs : 1))) ]; then
        echo "fuzz: $((runs / (secs > 0 ? secs : 1) / jobs)) executions a second per process, under" \
             "CUX_TEST_FUZZ_MIN_RATE=$min_rate: the fuzzer is not working"
        exit 1
    fi
    echo "fuzz: the time bound (CUX_TEST_FUZZ_SECONDS=$seconds) came before $total_runs executions: a busy machine"
fi
exit 0
