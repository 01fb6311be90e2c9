#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Our module against a UCX as its users have it: system, unpacked, plugin or in place.
#
# The module with UCX releases other than the reference 1.13.1, on a GPU host (issue 11). Each set-up builds
# the plugin from its dist tarball against an installed UCX and checks it the way users of that UCX run it:
#
#   OUT=DIR CUX_UCX_SRC=TREE gpu-host/run ucx-versions SETUP PREFIX
#
# SETUP system:  a distribution UCX installed without ucx_info or headers (Ubuntu 24.04's libucx0 1.16.0,
#                PREFIX /usr): configure --with-ucx-build-config=detect; the gtest GPU suite; `ucx-cuda-run
#                --check`; the UCP data check through ucx-cuda-run (the module preloaded), every memory kind
#                and every size across UCP's thresholds, processes on GPU0 and GPU1.
# SETUP plugin:  a UCX >= 1.22 built without CUDA: `make install` puts the module in UCX's module directory
#                and `ucx_info -d` lists cuda_copy and cuda_ipc with no preload; then ucx_perftest -m cuda
#                between two processes; then the same with the module only in UCX_PLUGIN_PATH; the gtest GPU
#                suite and the data check.
# SETUP unpacked: a distribution's own binary packages unpacked into a directory, nothing rebuilt (Debian 13's
#                libucx0, libucx-dev and ucx-utils 1.18.1, which need glibc 2.38; PREFIX is the unpacked usr/):
#                configured with the packages' own ucx_info; the gtest GPU suite; `ucx-cuda-run --check`; the data
#                check through ucx-cuda-run (every memory kind, --sweep); ucx_perftest -m cuda between two processes;
#                what UCX's other transports there (Debian 13's ROCm modules) say; and a module built for another
#                release (CUX_TEST_OTHER_MODULE) refused with its line.
# SETUP inplace: a UCX built with CUDA (PREFIX/reference-module holds its own module, as
#                contrib/build-reference-ucx.sh leaves it): the gtest GPU suite, then our module installed in
#                place of UCX's own, `ucx-cuda-run --check` and the data check, several runs, then UCX's own
#                module for comparison.
#
# CUX_TEST_DATACHECK_RUNS (default 5) sets the data check's repeats; CUX_TEST_VERSIONS_GTEST=0 leaves out the gtest suites,
# CUX_TEST_VERSIONS_OPCOST=0 the per-operation costs (bench/cux_opcost; system and inplace set-ups).
# CUX_UCX_SRC is the source tree of exactly PREFIX's version: `apt-get source ucx` of the installed package, or
# UCX's release tag (`git archive vX.Y.Z src configure.ac` is enough for the headers). A UCX to install under
# PREFIX is built from a tree with configure generated (gpu-host/prepare/prepare-ucx-src.sh here, where libtoolize is)
# by contrib/build-reference-ucx.sh there; on the 2x H200 host UCX 1.22 with CUDA needs
# CUX_UCX_CONFIGURE_EXTRA='--without-verbs --without-rdmacm ac_cv_path_NVCC='. ./gpu-carry holds the plugin's dist tarball and
# googletest/ (gpu-host/prepare/prepare-gpu-carry.sh). Writes $OUT/versions-SETUP.txt and versions-SETUP-logs.tar.gz.
set -u
setup=${1:?usage: gpu-host/run ucx-versions system|plugin|inplace|unpacked PREFIX}
prefix=${2:?usage: gpu-host/run ucx-versions system|plugin|inplace|unpacked PREFIX}
ucx_src=${CUX_UCX_SRC:?CUX_UCX_SRC must name the UCX source tree of PREFIX}
runs=${CUX_TEST_DATACHECK_RUNS:-5}
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
out=${OUT:-/tmp/cux-out}
work=/tmp/cux-versions-$setup
gh_report "$out/versions-$setup.txt"
report=$gh_report_file
mkdir -p "$work/logs"
finish() { tar -C "$work" -czf "$out/versions-$setup-logs.tar.gz" logs; say "done: exit $rc"; exit $rc; }

say "set-up $setup: UCX at $prefix, source $ucx_src; $(nvidia-smi -L | wc -l) GPUs"

gtest_dir="$work/gtest"
gh_googletest "$gtest_dir" "$work/logs/gtest-build.log" || { failed "googletest build"; finish; }
config_args=
[ "$setup" = system ] && config_args=--with-ucx-build-config=detect
say "configure --with-ucx=$prefix $config_args"
build="$work/build"
plugin_src=$(gh_plugin "$work" "$build" "$prefix" "$ucx_src" "$work/logs" $config_args) ||
    { tail -n 5 "$work/logs/plugin-configure.log" >>"$report"; failed "plugin build (logs/plugin-*.log)"; finish; }
grep -E 'installed UCX version|ucx_info of|build defines|detected|assumed' "$work/logs/plugin-configure.log" >>"$report"
cd "$build" || finish
say "the module links against:"
ldd .libs/libuct_cuda.so.0 | grep -E 'libuc[mpst]' >>"$report"

gtest_suite() {
    [ "${CUX_TEST_VERSIONS_GTEST:-1}" = 1 ] || { say "gtest suites skipped (CUX_TEST_VERSIONS_GTEST=0)"; return; }
    say "gtest suites on the GPUs (run-tests.sh, mock suites left to CI)"
    CUX_TEST_NO_MOCK=1 CUX_TEST_REQUIRE_GPU=1 "$plugin_src/test/run-tests.sh" >"$work/logs/run-tests.log" 2>&1 ||
        failed "gtest suites"
    grep -E 'passed|FAILED' "$work/logs/run-tests.log" >>"$report"
    cp test/logs/system-driver.log "$work/logs/gtest-gpu.log"
}

# bench/cux_opcost against this UCX: its cuda_ipc lines (registration, key packing and unpacking, the proofs of
# a peer's address and key, a first transfer of an allocation and a cached one) into the report.
opcost() {
    [ "${CUX_TEST_VERSIONS_OPCOST:-1}" = 1 ] || return
    say "bench/cux_opcost, cuda_ipc lines (all of it in logs/opcost.txt):"
    # it links the build's module itself: UCX's module directory (ours installed, or UCX's own) stays out
    UCX_MODULES=^cuda timeout 300 "$build/bench/cux_opcost" 2000 >"$work/logs/opcost.txt" 2>&1 || failed "cux_opcost"
    grep -E 'cux_opcost|cuda_ipc|exporter' "$work/logs/opcost.txt" >>"$report"
}

# N runs of the data check (GPU0 and GPU1 in the two processes); CHECK_CMD prefixes it (launcher or nothing).
data_check() {
    local label=$1 n=$2 passed=0 i r; shift 2
    for i in $(seq 1 "$n"); do
        r=$(timeout 300 $CHECK_CMD "$build/test/cux_ucp_datacheck" "$@" 2>&1)
        echo "### $label run $i" >>"$work/logs/data-check.log"
        echo "$r" >>"$work/logs/data-check.log"
        if echo "$r" | tail -n 1 | grep -q ' 0 failed'; then
            passed=$((passed + 1))
        else
            echo "$label run $i: $(echo "$r" | grep -E 'FAIL|stale|expected' | head -n 3 | tr '\n' ' ')" >>"$report"
        fi
    done
    say "data check, $label: $passed of $n runs passed ($(echo "$r" | tail -n 1))"
    [ "$passed" -eq "$n" ] || rc=1
}

# Two-process ucx_perftest (GPU0 and GPU1, or both on GPU0 on a one-GPU host); prints the client's last line.
perftest() {
    local port=$((20000 + RANDOM % 20000)) peer_gpu=1 mode=
    [ "$(nvidia-smi -L | wc -l)" -gt 1 ] || peer_gpu=0
    # a ucx_perftest built with MPI (Debian 13's) starts in MPI mode unless told -P 0
    "$prefix/bin/ucx_perftest" -h 2>&1 | grep -q -- '-P <0|1>' && mode="-P 0"
    CUDA_VISIBLE_DEVICES=0 timeout 120 $PERF_CMD "$prefix/bin/ucx_perftest" $mode -p $port \
        >"$work/logs/perftest-server.log" 2>&1 &
    sleep 1
    CUDA_VISIBLE_DEVICES=$peer_gpu timeout 120 $PERF_CMD "$prefix/bin/ucx_perftest" $mode localhost -p $port "$@" \
        >"$work/logs/perftest-client.log" 2>&1
    local prc=$?
    wait
    echo "ucx_perftest $*: exit $prc: $(grep -E 'Final' "$work/logs/perftest-client.log" | tail -n 1)" |
        tee -a "$report"
    cat "$work/logs/perftest-client.log" >>"$work/logs/perftest.log"
    [ $prc -eq 0 ] || rc=1
}

# ucx-cuda-run --check from the build tree, its lines into the report (issue 13: the GPU host's output); the
# module it names is the build's, or $2 (the installed copy, as an installed launcher names it).
launcher_check() {
    local out
    say "ucx-cuda-run --check ($1):"
    out=$(env CUX_MODULE="${2:-$build/.libs/libuct_cuda.so.0}" CUX_PERFTEST_LIB="$build/.libs/libcux_perftest.so" \
        CUX_MEMTYPE_LIB="$build/.libs/libcux_memtype.so" CUX_CHECK_PROG="$build/ucx-cuda-check" \
        "$build/ucx-cuda-run" --check 2>&1) || failed "ucx-cuda-run --check ($1)"
    echo "$out" | tee -a "$work/logs/check.log" >>"$report"
}

cuda_info() { "$prefix/bin/ucx_info" -d 2>&1 | grep -E 'Component: cuda|Transport: cuda' | sort -u | tr '\n' ' '; }

export UCX_WARN_UNUSED_ENV_VARS=n
case "$setup" in
system)
    say "installed: $(dpkg-query -W -f '${Package} ${Version}\n' 'libucx0*' 2>/dev/null | tr '\n' ' ')"
    gtest_suite
    launcher_check "Ubuntu's UCX, the module preloaded"
    launcher="env CUX_MODULE=$build/.libs/libuct_cuda.so.0 CUX_PERFTEST_LIB=$build/.libs/libcux_perftest.so"
    launcher="$launcher CUX_MEMTYPE_LIB=$build/.libs/libcux_memtype.so $build/ucx-cuda-run"
    CHECK_CMD="$launcher"
    opcost
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "self,sm,cuda_copy,cuda_ipc" "$runs"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "every size across the thresholds (--sweep)" 1 --sweep
    UCX_TLS=self,sm,cuda_copy data_check "self,sm,cuda_copy (no cuda_ipc)" 1
    CUX_MEMTYPE=hooks UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "CUX_MEMTYPE=hooks" 1
    ;;
plugin)
    moddir="$prefix/lib/ucx"
    say "make install into $moddir"
    make install >"$work/logs/install.log" 2>&1 || failed "make install"
    ls -l "$moddir" >>"$report"
    say "ucx_info -d, nothing preloaded, no UCX_PLUGIN_PATH: $(cuda_info)"
    cuda_info | grep -q 'Transport: cuda_ipc' || failed "ucx_info -d does not list cuda_ipc from the module directory"
    PERF_CMD="$build/ucx-cuda-run"
    say "ucx_perftest -m cuda through ucx-cuda-run (the perftest allocator only: $($PERF_CMD --env | tr '\n' ' '))"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc perftest -t tag_bw -m cuda -s 1048576 -n 1000 -w 100
    UCX_TLS=self,sm,cuda_copy,cuda_ipc perftest -t tag_lat -m cuda -s 8 -n 10000 -w 1000
    UCX_TLS=self,sm,cuda_copy perftest -t tag_bw -m host,cuda -s 16777216 -n 100 -w 10
    plugdir="$work/plugin-path"
    mkdir -p "$plugdir"
    mv "$moddir/libuct_cuda.so"* "$plugdir/"
    say "module moved to $plugdir; ucx_info -d without UCX_PLUGIN_PATH: $(cuda_info)"
    cuda_info | grep -q cuda_ipc && failed "the module is still found without UCX_PLUGIN_PATH"
    say "ucx_info -d with UCX_PLUGIN_PATH=$plugdir: $(UCX_PLUGIN_PATH=$plugdir cuda_info)"
    UCX_PLUGIN_PATH=$plugdir cuda_info | grep -q 'Transport: cuda_ipc' || failed "not found through UCX_PLUGIN_PATH"
    PERF_CMD="env CUX_MODULE=$plugdir/libuct_cuda.so.0 $build/ucx-cuda-run"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc perftest -t tag_bw -m cuda -s 1048576 -n 1000 -w 100
    CHECK_CMD="$PERF_CMD"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "module in UCX_PLUGIN_PATH" "$runs"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "every size across the thresholds (--sweep)" 1 --sweep
    mv "$plugdir"/libuct_cuda.so* "$moddir/"
    gtest_suite
    ;;
inplace)
    moddir="$prefix/lib/ucx"
    [ -f "$prefix/reference-module/libuct_cuda.so.0" ] || { failed "no $prefix/reference-module"; finish; }
    say "UCX's own module: $(cuda_info)"
    gtest_suite
    make install >"$work/logs/install.log" 2>&1 || failed "make install"
    cmp -s "$moddir/libuct_cuda.so.0" "$prefix/reference-module/libuct_cuda.so.0" && failed "still UCX's own module"
    say "our module in place of UCX's own: $(cuda_info)"
    launcher_check "our module in place of UCX's own" "$moddir/libuct_cuda.so.0"
    CHECK_CMD=
    opcost
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "ours, in place" "$runs"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "ours, every size across the thresholds (--sweep)" 1 --sweep
    UCX_TLS=self,tcp,cuda_copy,cuda_ipc data_check "ours, peer error handling" 1 --peer-errors --only 0,1 8 1048576
    grep -m 2 'ep_cfg\|tag(' "$work/logs/data-check.log" | tail -n 1 >>"$report"
    cp "$moddir/libuct_cuda.so.0" "$work/ours.so"
    cp "$prefix/reference-module/libuct_cuda.so.0" "$moddir/libuct_cuda.so.0"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "UCX's own module" 2
    cp "$work/ours.so" "$moddir/libuct_cuda.so.0"
    ;;
unpacked)
    say "unpacked: $(ls "$prefix/lib"/*-linux-gnu/libucs.so.0* | head -n 1); $("$prefix/bin/ucx_info" -v | head -n 2 |
        tr '\n' ' ')"
    "$prefix/bin/ucx_info" -b | grep -E '_MODULES' >>"$report"
    gtest_suite
    launcher_check "the distribution's UCX, the module preloaded"
    launcher="env CUX_MODULE=$build/.libs/libuct_cuda.so.0 CUX_PERFTEST_LIB=$build/.libs/libcux_perftest.so"
    launcher="$launcher CUX_MEMTYPE_LIB=$build/.libs/libcux_memtype.so $build/ucx-cuda-run"
    CHECK_CMD="$launcher"
    opcost
    say "ucx_info -d through ucx-cuda-run, and what loading UCX's other modules says (UCX_LOG_LEVEL=debug):"
    UCX_LOG_LEVEL=debug $launcher "$prefix/bin/ucx_info" -d >"$work/logs/ucx_info-d.log" 2>&1 ||
        failed "ucx_info -d"
    grep -E 'Transport: |Component: ' "$work/logs/ucx_info-d.log" | sort -u | tr '\n' ' ' >>"$report"
    echo >>"$report"
    grep -iE 'rocm|hsa' "$work/logs/ucx_info-d.log" | sed 's/^\[[0-9.]*\] \[[^]]*\] *//' | sort -u | head -n 5 >>"$report"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "self,sm,cuda_copy,cuda_ipc" "$runs"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc data_check "every size across the thresholds (--sweep)" 1 --sweep
    UCX_TLS=self,sm,cuda_copy data_check "self,sm,cuda_copy (no cuda_ipc)" 1
    PERF_CMD="$launcher"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc perftest -t tag_bw -m cuda -s 1048576 -n 1000 -w 100
    UCX_TLS=self,sm,cuda_copy,cuda_ipc perftest -t tag_lat -m cuda -s 8 -n 10000 -w 1000
    if [ -n "${CUX_TEST_OTHER_MODULE:-}" ]; then
        say "a module built for another UCX ($CUX_TEST_OTHER_MODULE), preloaded:"
        other=$(UCX_MODULES=^cuda LD_PRELOAD="$CUX_TEST_OTHER_MODULE" "$prefix/bin/ucx_info" -d 2>&1 | head -n 40)
        echo "$other" | grep -E 'built for|Transport: cuda|rror' | head -n 3 >>"$report"
        echo "$other" | grep -q 'but this process runs' || failed "the other release's module was not refused"
        echo "$other" | grep -q 'Transport: cuda' && failed "the other release's module registered transports"
    fi
    ;;
*)
    failed "unknown set-up $setup"
    ;;
esac
finish
