#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the gtest suites of a configured and built tree and prints one line: N passed, N failed, N skipped.
#
#   1. against the system's libcuda.so.1: loader, registration and configure tests always run; the copy
#      suite runs on a GPU host and is reported skipped elsewhere;
#   2. against the mock driver (test/mock/): the copy suite on two emulated devices, then on one, so
#      CI exercises the data path through the real libuct, then with PCI addresses, then the fuzzer on what a
#      peer sends to cuda_ipc (test/run-fuzz.sh, one test: 10 million executions; passed, failed (a finding, or a
#      rate that means the fuzzer is broken), or skipped without clang), then the
#      Debian package (test/run-deb.sh, one test, with CUX_TEST_DEB=1 only: it installs into the system), then
#      make distcheck (test/run-distcheck.sh, one test, with CUX_TEST_DISTCHECK=1 only), then a build with no CUDA
#      toolkit in sight (test/run-no-toolkit.sh, one test, with CUX_TEST_NO_TOOLKIT=1 only), then whether the module
#      the README's first command installed still loads (test/run-installed.sh, one test, skipped where none was
#      installed by hand), then the parity suite as on a 12.0 driver.
#      Skipped with CUX_TEST_NO_MOCK=1.
#   3. with CUX_TEST_ASAN_BUILDDIR (set by test/run-all.sh): the same suites' CPU and cuda_ipc parts under
#      AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer; with CUX_TEST_TSAN_BUILDDIR the threaded tests
#      under ThreadSanitizer.
# Logs go to test/logs/. Exit status is non-zero when anything failed.
set -u
builddir=${CUX_TEST_BUILDDIR:-$PWD}
bin="$builddir/test/cux_gtest"
logs="$builddir/test/logs"
mkdir -p "$logs"

# The installed UCX's own cuda module (if it has one) must not register a second cuda_cpy component.
export UCX_MODULES=${UCX_MODULES:-^cuda}

passed=0 failed=0 skipped=0 broken=0
t_start=$(date +%s)

# What a step usually takes on CI's machine (2 cores, test/run-all.sh), so that whoever watches knows where the
# run is; a GPU host or a busy machine takes otherwise.
about() {
    local m
    case $1 in
    system-driver) m=1 ;; mock-driver) m=7 ;; mock-driver-1gpu) m=2 ;; fuzz) m=2 ;; deb) m=2 ;; distcheck) m=4 ;;
    sanitizers-cpu) m=1 ;; sanitizers-mock) m=3 ;; sanitizers-thread) m=1 ;; no-toolkit) m=8 ;; *) m=0 ;;
    esac
    if [ "$m" -gt 0 ]; then
        echo "about $m min, $(( ($(date +%s) - t_start) / 60 )) min in"
    else
        echo "under a minute, $(( ($(date +%s) - t_start) / 60 )) min in"
    fi
}

run_suite() {
    local name=$1; shift
    local log="$logs/$name.log" xml="$logs/$name.xml"
    echo "=== suite $name ($(about "$name")): $*"
    env "$@" "${suite_bin:-$bin}" --gtest_output="xml:$xml" >"$log" 2>&1
    local rc=$?
    grep -E '^\[  (PASSED|FAILED|SKIPPED)  ?\] [0-9]|^\[  FAILED  \] [a-z]|^cuda driver|events,' "$log" | sed 's/^/    /'
    if [ ! -s "$xml" ]; then
        echo "    suite $name produced no report (exit $rc): see $log"
        tail -n 30 "$log" | sed 's/^/    /'
        broken=$((broken + 1))
        return
    fi
    # Count from the XML report: every testcase is run, skipped or failed.
    local t f s
    t=$(grep '<testcase ' "$xml" | grep -vc 'status="notrun"') # DISABLED_ tests run only in a child process
    f=$(grep -c '<failure' "$xml")
    s=$(grep -c '<skipped' "$xml")
    # a test with several failed assertions has several <failure> elements: count tests, not assertions
    f=$(awk '/<testcase /{tc=1; fail=0} /<failure/{if (tc && !fail) {n++; fail=1}} END{print n+0}' "$xml")
    passed=$((passed + t - f - s))
    failed=$((failed + f))
    skipped=$((skipped + s))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "    suite $name exited $rc without a failed test: counted as a failure"
        failed=$((failed + 1))
    fi
}

# A test script of this directory counted as one test: exit 0 passed, 77 skipped, anything else failed.
run_script() {
    "$(dirname "$0")/$1" "$builddir" | sed 's/^/    /'
    case ${PIPESTATUS[0]} in
    0) passed=$((passed + 1)) ;;
    77) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)) ;;
    esac
}

# A test script that runs only where a variable asks for it (=1), and is reported skipped otherwise.
run_script_if_asked() { # variable, name, script, what it does
    if [ "${!1:-0}" = 1 ]; then
        echo "=== $2 ($(about "$2")): test/$3"
        run_script "$3"
    else
        echo "=== $2: skipped ($1=1 $4)"
        skipped=$((skipped + 1))
    fi
}

# On a GPU host (CUX_TEST_REQUIRE_GPU=1) a missing device fails the GPU tests instead of skipping them.
run_suite system-driver CUX_TEST_SUITE=system ${CUX_TEST_REQUIRE_GPU:+CUX_TEST_REQUIRE_GPU=1}
if [ "${CUX_TEST_NO_MOCK:-0}" != 1 ]; then
    # copies are asynchronous, done only when an event after them completes (MOCK_CUDA_ASYNC)
    run_suite mock-driver CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" MOCK_CUDA_ASYNC=1 \
        GTEST_FILTER='copy*:ipc*:threads*:soak*:parity*:launcher_check.*:mpi.*:registration.*:ucp_programs.*:opcost.*' CUX_TEST_SUITE=mock \
        CUX_TEST_REQUIRE_GPU=1
    # one visible GPU takes its own fast path for short copies
    run_suite mock-driver-1gpu CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" MOCK_CUDA_DEVICES=1 \
        GTEST_FILTER='copy*:ipc_transport.*:parity.*' CUX_TEST_SUITE=mock1 CUX_TEST_REQUIRE_GPU=1
    # devices with PCI addresses, so that UCX's topology knows them (allocation on a given device and the device
    # API's memory lists, UCX 1.22)
    run_suite mock-driver-pci CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" MOCK_CUDA_PCI=1 \
        GTEST_FILTER='copy.md_*:copy_dmabuf.*:ipc_transport.ucp_builds_*' CUX_TEST_SUITE=mockpci CUX_TEST_REQUIRE_GPU=1
    # what a peer sends to cuda_ipc (addresses, keys, keys on an endpoint to a live exporter) under libFuzzer
    # with ASan and UBSan, the whole module instrumented: 10 million executions, however long they take
    echo "=== fuzz ($(about fuzz)): test/run-fuzz.sh, ${CUX_TEST_FUZZ_RUNS:-10000000} executions"
    run_script run-fuzz.sh
    # libcux_memtype's dlsym entry (assembly) on this machine's architecture and on aarch64 under qemu-user
    echo "=== cross-dlsym ($(about cross-dlsym)): test/run-cross-dlsym.sh"
    run_script run-cross-dlsym.sh
    # the Debian package: built, installed, checked and removed (test/run-deb.sh); it installs into the system,
    # so only where asked (test/run-all.sh, CI); then make distcheck (test/run-distcheck.sh), likewise
    run_script_if_asked CUX_TEST_DEB deb run-deb.sh "builds, installs and removes the Debian package"
    run_script_if_asked CUX_TEST_DISTCHECK distcheck run-distcheck.sh "runs make distcheck"
    # the module built, installed and loaded with no CUDA toolkit in sight (test/run-no-toolkit.sh), likewise
    run_script_if_asked CUX_TEST_NO_TOOLKIT no-toolkit run-no-toolkit.sh "builds it with /usr/local/cuda hidden"
    # the module the README's first command installed by hand still loads after all of it (skipped where none is)
    echo "=== installed ($(about installed)): test/run-installed.sh"
    run_script run-installed.sh
    # a 12.0 driver (no cuCtxSetFlags): synchronous memory operations through the pointer attribute
    run_suite mock-driver-pointer-sync CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" \
        MOCK_CUDA_MODE=nosetflags GTEST_FILTER='parity.*' CUX_TEST_SUITE=mockptr CUX_TEST_REQUIRE_GPU=1
fi

# The same binary built with AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer (test/run-all.sh
# builds it in build-asan): the CPU suites, and the cuda_ipc, parity and memory-domain suites on the mock.
san=${CUX_TEST_ASAN_BUILDDIR:-}
if [ -n "$san" ] && [ "${CUX_TEST_NO_MOCK:-0}" != 1 ]; then
    san_env="ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1"
    san_env="$san_env LSAN_OPTIONS=suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp"
    suite_bin="$san/test/cux_gtest"
    run_suite sanitizers-cpu $san_env CUX_TEST_SUITE=asan \
        GTEST_FILTER='ipc_rkey.*:ipc_cache.*:driver_loader.*:registration.component*:registration.md_config*:registration.bad*'
    run_suite sanitizers-mock $san_env CUX_DRIVER_PATH="$san/test/.libs/libmockcuda.so" CUX_TEST_SUITE=asanmock \
        CUX_TEST_REQUIRE_GPU=1 GTEST_FILTER='ipc*:parity*:copy_dmabuf.*:copy.md*:copy.bad*'
    unset suite_bin
fi

# ThreadSanitizer (test/run-all.sh builds it in build-tsan): threads with workers of their own sharing the memory
# domains and the mapping cache, and one UCP worker shared by threads. A report fails the suite (exit code 66).
tsan=${CUX_TEST_TSAN_BUILDDIR:-}
if [ -n "$tsan" ] && [ "${CUX_TEST_NO_MOCK:-0}" != 1 ]; then
    suite_bin="$tsan/test/cux_gtest"
    # UCX's memory hooks (libucm) catch the madvise of a thread's exit after ThreadSanitizer has let the thread
    # go, and crash there: they are off in this suite
    run_suite sanitizers-thread TSAN_OPTIONS="halt_on_error=0 exitcode=66" CUX_TEST_SUITE=tsan \
        UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no \
        CUX_DRIVER_PATH="$tsan/test/.libs/libmockcuda.so" MOCK_CUDA_ASYNC=1 CUX_TEST_REQUIRE_GPU=1 \
        GTEST_FILTER='threads*:ipc_transport.threads*:ucp_programs.ucp_data_check_with_threads*'
    unset suite_bin
fi

failed=$((failed + broken))
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
