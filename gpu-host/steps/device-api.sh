#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's device API over our cuda_ipc: UCX 1.22 built here, the device check, gtests, timings.
#
# UCX's device API (GPU-initiated puts, signals and reads) over our cuda_ipc on a GPU host (issue 33), in one go:
#
#   OUT=DIR gpu-host/run device-api
#
# 1. UCX 1.22 built with CUDA (PREFIX /opt/ucx122, contrib/build-reference-ucx.sh; kept if already there) and
#    the plugin built against it; test/device/cux_device_api_check.cu compiled twice: with UCX's own cuda_ipc.cuh
#    and with ours (include/ first). Each runs with our module in place of UCX's and with UCX's own module.
# 2. A UCX 1.22 built without CUDA (./gpu-carry/ucx-1.22.0-nocuda-install.tar.gz, unpacked where it was built):
#    the plugin's `make install` puts the module in its module directory and our device header in its include
#    directory; the check compiled against that UCX alone, run through ucx-cuda-run (the plugin path).
# 3. The device-API gtests on the GPU (host side through UCT and UCP), and --bench timings of the check,
#    interleaved: ours and UCX's module, each device header.
# CUX_DEVAPI_DEVICE_CODE_ONLY=1 leaves out 1 and the gtests: the device code alone, ours against UCX's (its
# cuda_ipc.cuh taken from the source tree), both over our module on the UCX without CUDA: the check, then the
# timings (the device code is the whole difference: the host side's elements are the same offsets).
# Inputs in ./gpu-carry: ucx-1.22.0-src.tar.gz (configure generated), the plugin's dist tarball, googletest/,
# ucx-1.22.0-nocuda-install.tar.gz. Writes $OUT/device-api.txt and $OUT/device-api-logs.tar.gz.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
out=${OUT:-/tmp/cux-out}
work=/tmp/cux-devapi
prefix=/opt/ucx122
report="$out/device-api.txt"
mkdir -p "$out" "$work/logs"
gh_report "$report"
finish() { tar -C "$work" -czf "$out/device-api-logs.tar.gz" logs; say "done: exit $rc"; exit $rc; }

say "$(nvidia-smi -L | wc -l) GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)"
tar -C "$work" -xzf "$carry/ucx-1.22.0-src.tar.gz"
ucx_src="$work/ucx-1.22.0"
only_device_code=${CUX_DEVAPI_DEVICE_CODE_ONLY:-0}
if [ "$only_device_code" != 1 ] && [ ! -x "$prefix/bin/ucx_info" ]; then
    say "building UCX 1.22 with CUDA into $prefix"
    CUX_UCX_CONFIGURE_EXTRA='--without-verbs --without-rdmacm ac_cv_path_NVCC=' \
        gh_reference_ucx "$ucx_src" "$prefix" "$work/logs/ucx-build.log" ||
        { failed "UCX build"; finish; }
fi
tar -C / -xzf "$carry/ucx-1.22.0-nocuda-install.tar.gz"
nocuda=/work/u122/install # where the tarball was made: libtool and pkg-config files name it

gt="$work/gtest"
gh_googletest "$gt" "$work/logs/gtest-build.log" || { failed "googletest"; finish; }

gtest_dir=$gt
plugin_src=$(gh_plugin_src "$work")
build_plugin() { gh_plugin_build "$plugin_src" "$2" "$1" "$ucx_src" "$2"; } # UCX, build directory (its logs too)
p1=
[ "$only_device_code" = 1 ] || { build_plugin "$prefix" "$work/build-cuda" & p1=$!; }
build_plugin "$nocuda" "$work/build-nocuda" & p2=$!
[ -z "$p1" ] || wait $p1 ||
    { cp "$work"/build-cuda/*.log "$work/logs/" 2>/dev/null; failed "plugin build (UCX with CUDA)"; }
wait $p2 || { cp "$work"/build-nocuda/*.log "$work/logs/" 2>/dev/null; failed "plugin build (UCX without CUDA)"; }
grep -h 'device header' "$work"/build-*/plugin-configure.log | tee -a "$report"

run_check() { # label, command...
    local label=$1; shift
    local log="$work/logs/check-$(echo "$label" | tr ' /,()' '_____').log"
    UCX_TLS=${CUX_TLS:-self,sm,cuda_copy,cuda_ipc} timeout -k 5 240 "$@" >"$log" 2>&1
    local r=$?
    say "$label: exit $r: $(tail -n 1 "$log")"
    grep -E '^FAIL' "$log" | head -n 5 >>"$report"
    [ $r -eq 0 ] || rc=1
}
bench_lines() {
    for f in "$work"/logs/check-bench_*.log; do
        echo "### $(basename "$f")" >>"$report"
        grep '^bench' "$f" >>"$report"
    done
}

# the check, against a UCX's headers (extra include directories first)
check_src="$plugin_src/test/device/cux_device_api_check.cu"
compile() {
    local name=$1 ucx=$2; shift 2
    /usr/local/cuda/bin/nvcc -std=c++17 -O2 -arch=sm_90 "$@" -I"$ucx/include" "$check_src" -o "$work/$name" \
        -L"$ucx/lib" -lucp -lucs -Xlinker -rpath -Xlinker "$ucx/lib" >"$work/logs/nvcc-$name.log" 2>&1 ||
        failed "nvcc $name"
}
(cd "$work/build-nocuda" && make install >install.log 2>&1) || failed "make install (UCX without CUDA)"
ls -l "$nocuda/include/uct/cuda/cuda_ipc/" >>"$report" 2>&1
if [ "$only_device_code" = 1 ]; then
    mkdir -p "$work/ucx-device/uct/cuda/cuda_ipc"
    cp "$ucx_src/src/uct/cuda/cuda_ipc/cuda_ipc.cuh" "$work/ucx-device/uct/cuda/cuda_ipc/"
    compile check-ucxcode "$nocuda" -I"$work/ucx-device" &
    compile check-plugin "$nocuda" &
    wait
    plugin_run="$work/build-nocuda/ucx-cuda-run"
    run_check "UCX's device code, our module (plugin path)" "$plugin_run" "$work/check-ucxcode"
    run_check "our device code, our module (plugin path)" "$plugin_run" "$work/check-plugin"
    say "timings (--bench), interleaved, 2 rounds"
    for round in 1 2; do
        run_check "bench $round: UCX's device code" "$plugin_run" "$work/check-ucxcode" --bench
        run_check "bench $round: our device code" "$plugin_run" "$work/check-plugin" --bench
    done
    bench_lines
    finish
fi
compile check-ucxhdr "$prefix" &
compile check-ourhdr "$prefix" -I"$plugin_src/include" &
compile check-plugin "$nocuda" &
wait

ours_in_place() { module_in_place "$prefix" "$work/build-cuda/.libs/libuct_cuda.so.0"; }
ucx_in_place() { module_in_place "$prefix" "$prefix/reference-module/libuct_cuda.so.0"; }

ours_in_place
say "ucx_info -d, ours in place: $("$prefix/bin/ucx_info" -d | grep -E 'Transport: cuda' | tr -s ' ' | tr '\n' ' ')"
run_check "ours in place, UCX's device header" "$work/check-ucxhdr"
run_check "ours in place, our device header" "$work/check-ourhdr"
ucx_in_place
run_check "UCX's module, UCX's device header" "$work/check-ucxhdr"
run_check "UCX's module, our device header" "$work/check-ourhdr"
run_check "plugin path: UCX without CUDA, ours installed, through ucx-cuda-run" \
    "$work/build-nocuda/ucx-cuda-run" "$work/check-plugin"

say "device-API gtests on the GPU (UCX 1.22 with CUDA, our module linked in)"
ours_in_place
device_tests='ipc_transport.*device*:ipc_transport.a_memory_element*:ipc_transport.ucp_builds*:ipc_transport.rkey_ptr*'
(cd "$work/build-cuda" && CUX_TEST_SUITE=system CUX_TEST_REQUIRE_GPU=1 UCX_MODULES=^cuda GTEST_FILTER=$device_tests \
    timeout -k 5 180 test/cux_gtest >"$work/logs/gtest-device.log" 2>&1) || failed "device gtests"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]' "$work/logs/gtest-device.log" | tail -n 12 >>"$report"

say "timings (--bench), interleaved, 2 rounds"
for round in 1 2; do
    ours_in_place
    run_check "bench $round: ours, UCX's header" "$work/check-ucxhdr" --bench
    ucx_in_place
    run_check "bench $round: UCX's module, UCX's header" "$work/check-ucxhdr" --bench
    ours_in_place
    run_check "bench $round: ours, our header" "$work/check-ourhdr" --bench
done
bench_lines
ucx_in_place
finish
