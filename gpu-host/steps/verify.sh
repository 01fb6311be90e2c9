#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The reference UCX with CUDA, ours built and tested on the GPUs, ucx_perftest against UCX's module.
#
# End-to-end verification on a GPU host, in one go: reference UCX with CUDA (built, or unpacked from an
# earlier run), googletest, the plugin built from its dist tarball against that UCX, the gtest suites on the
# real GPUs, ucx_info with our module installed, and the ucx_perftest comparison with UCX's own module.
#
#   OUT=/some/dir gpu-host/run verify [CASES] [REPEATS]
#
# CASES: comma-separated case sets of bench/perftest_compare.py (default copy), or "none" to skip perftest.
# CUX_TEST_VERIFY_SKIP_TESTS=1 skips the gtest suites (for a benchmark-only call). CUX_BENCH_EXTRA_MODULES adds
# "--module NAME=PATH[,VAR=VALUE...]" arguments for the comparison (e.g. ours with other settings).
#
# Inputs in ./gpu-carry, or $CUX_GPU_CARRY (gpu-host/prepare/prepare-gpu-carry.sh): ucx-*-src.tar.gz, uct-cuda-plugin-*.tar.gz,
# googletest/, and optionally ucx-ref-install.tar.gz (an earlier run's reference UCX, saves its build).
# Writes to $OUT (the device tool brings back at most 8 files): summary.txt (with bench/cux_opcost's
# per-operation costs), gtest-gpu.log, ucx_info.txt, perftest.md, perftest.csv, bandwidth.png,
# build-logs.tar.gz and, after building UCX, ucx-ref-install.tar.gz; gtest-mock.log if the mock suites run;
# stock-ucx.txt when ./gpu-carry/stock exists (CUX_TEST_VERIFY_STOCK=0 skips it).
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
out=${OUT:-/tmp/cux-out}
prefix=${UCX_REF_PREFIX:-/opt/ucx-ref} # one built with CUDA earlier on this machine is taken as it is
cases=${1:-copy}
repeats=${2:-3}
work=/tmp/cux-work
mkdir -p "$out" "$work/logs"
summary="$out/summary.txt"
gh_report "$summary"
step() { say "$@"; }
fail() { failed "$@"; tar -C "$work" -czf "$out/build-logs.tar.gz" logs 2>/dev/null; exit 1; }

step "host: $(hostname), $(nproc) cores"
nvidia-smi -L >>"$summary" 2>&1
nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1 | sed 's/^/driver: /' >>"$summary"
nvidia-smi topo -m >>"$summary" 2>&1

ucx_tar=$(ls "$carry"/ucx-*-src.tar.gz | head -1)
tar -C "$work" -xzf "$ucx_tar"
ucx_src=$(ls -d "$work"/ucx-*/ | head -1)

if [ ! -x "$prefix/bin/ucx_info" ]; then
    if [ -f "$carry/ucx-ref-install.tar.gz" ]; then
        step "unpacking the reference UCX from an earlier run"
        tar -C / -xzf "$carry/ucx-ref-install.tar.gz" || fail "unpacking ucx-ref-install.tar.gz"
    else
        step "building the reference UCX (with CUDA) from $(basename "$ucx_tar")"
        gh_reference_ucx "$ucx_src" "$prefix" "$work/logs/ucx-build.log" ||
            { cp "$ucx_src/build-cuda/"*.log "$work/logs/" 2>/dev/null; fail "reference UCX build"; }
        tail -n 3 "$work/logs/ucx-build.log" >>"$summary"
        tar -C / --exclude='*.a' --exclude='*.la' -czf "$out/ucx-ref-install.tar.gz" "${prefix#/}"
    fi
fi
"$prefix/bin/ucx_info" -v | head -1 >>"$summary"

step "building googletest"
gtest_dir="$work/gtest"
gh_googletest "$gtest_dir" "$work/logs/gtest-build.log" || fail "googletest build"

step "building the plugin against $prefix"
plugin="$work/plugin-build"
plugin_src=$(gh_plugin "$work" "$plugin" "$prefix" "$ucx_src" "$work/logs") || fail "plugin build"
cd "$plugin" || fail "plugin build directory"

tests_rc=0
if [ "${CUX_TEST_VERIFY_SKIP_TESTS:-0}" != 1 ]; then
step "gtest suites (real GPUs, then the mock driver)"
# The mock suites repeat what CI runs; on the GPU host only the real devices are worth the time.
CUX_TEST_NO_MOCK=${CUX_TEST_NO_MOCK:-1} CUX_TEST_REQUIRE_GPU=1 "$plugin_src/test/run-tests.sh" >"$work/logs/run-tests.log" 2>&1
tests_rc=$?
cat "$work/logs/run-tests.log" >>"$summary"
cp test/logs/system-driver.log "$out/gtest-gpu.log"
cp test/logs/mock-driver.log "$out/gtest-mock.log" 2>/dev/null || true
fi

step "per-operation costs (bench/cux_opcost)"
UCX_MODULES=^cuda ./bench/cux_opcost >>"$summary" 2>&1 || step "cux_opcost failed"

{
    echo "### UCX's own module: what it reports (ucx_info -d, cuda part)"
    "$prefix/bin/ucx_info" -d | grep -A30 -E 'Component: cuda_(cpy|ipc)' |
        grep -E 'Component|Transport|bandwidth|latency|overhead'
} >"$out/ucx_info.txt" 2>&1

step "installing our module into $prefix/lib/ucx"
make install >"$work/logs/plugin-install.log" 2>&1 || fail "plugin install"
mkdir -p "$prefix/cux-module"
cp -L "$prefix/lib/ucx/libuct_cuda.so.0" "$prefix/cux-module/libuct_cuda.so.0"
cmp -s "$prefix/cux-module/libuct_cuda.so.0" "$prefix/reference-module/libuct_cuda.so.0" &&
    fail "installed module is UCX's own"
{
    echo "### ucx_info -d (our module installed), cuda part"
    "$prefix/bin/ucx_info" -d | grep -B2 -A30 -E 'Component: cuda_(cpy|ipc)'
    echo "### ucx_info -c | grep CUDA_"
    "$prefix/bin/ucx_info" -c | grep -E 'CUDA_(COPY|IPC)_'
    echo "### module list of this UCX"
    "$prefix/bin/ucx_info" -b | grep uct_MODULES
} >>"$out/ucx_info.txt" 2>&1
ours_info=$(sed -n '/our module installed/,$p' "$out/ucx_info.txt")
echo "$ours_info" | grep -q 'Transport: cuda_copy' || fail "ucx_info -d does not show cuda_copy"
echo "$ours_info" | grep -q 'Transport: cuda_ipc' || fail "ucx_info -d does not show cuda_ipc"

stock_rc=0
if [ -d "$carry/stock" ] && [ "${CUX_TEST_VERIFY_STOCK:-1}" = 1 ]; then
    step "Debian's UCX packages with our module preloaded (gpu-host/run stock-ucx)"
    OUT="$out" CUX_TEST_STOCK_LOGS="$work/logs" "$top/gpu-host/steps/stock-ucx.sh" "$repeats" >>"$summary" 2>&1
    stock_rc=$?
fi

if [ "$cases" = none ]; then
    tar -C "$work" -czf "$out/build-logs.tar.gz" logs
    step "done: tests exit $tests_rc, stock UCX exit $stock_rc (perftest not asked for)"
    [ $tests_rc -eq 0 ] && [ $stock_rc -eq 0 ]
    exit
fi

step "which transports UCP picks with our module (UCX_LOG_LEVEL=info)"
{
    echo "### ucx_perftest tag_bw 16MB -m cuda, GPU0 -> GPU1, UCX_TLS=self,sm,cuda_copy,cuda_ipc, our module"
    UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info timeout 60 "$prefix/bin/ucx_perftest" -p 19997 \
        >"$work/logs/perftest-info-server.log" 2>&1 &
    sleep 1
    UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info timeout 60 "$prefix/bin/ucx_perftest" localhost \
        -p 19997 -t tag_bw -m cuda -s 16777216 -n 20 -w 2 2>&1 | grep -E 'cuda|Final' | head -20
    wait
} >>"$out/ucx_info.txt" 2>&1

step "ucx_perftest: reference vs ours, cases '$cases', $repeats repeats"
python3 "$plugin_src/bench/perftest_compare.py" --prefix "$prefix" \
    --module reference="$prefix/reference-module/libuct_cuda.so.0" \
    --module ours="$prefix/cux-module/libuct_cuda.so.0" ${CUX_BENCH_EXTRA_MODULES:-} \
    --cases "$cases" --repeats "$repeats" --out "$out" >"$work/logs/perftest.log" 2>&1
perf_rc=$?
tail -n 20 "$work/logs/perftest.log" >>"$summary"

tar -C "$work" -czf "$out/build-logs.tar.gz" logs
step "done: tests exit $tests_rc, stock UCX exit $stock_rc, perftest exit $perf_rc"
[ $tests_rc -eq 0 ] && [ $stock_rc -eq 0 ] && [ $perf_rc -eq 0 ]
