#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The device API with everything built on the dev machine: gtest, perftest, devcode.
#
# Issue 33 on a GPU host with everything built on the dev machine, so that a call's time goes to runs:
#
#   OUT=DIR gpu-host/run device-prebuilt STEP...      (steps: gtest perftest devcode)
#
# Inputs (./gpu-carry, ignored):
#   ucx-1.22.0-cuda-gtest-install.tar.gz  UCX 1.22 built with CUDA and nvcc by gpu-host/prepare/build-ucx-gtest.sh with
#                                         CUX_UCX_GTEST_DEVICE=1 into /work/u122cuda/install (unpacked there:
#                                         libtool and pkg-config files name it); its module in reference-module/
#   devcheck/check-{ucxhdr,ourhdr,...}    test/device/cux_device_api_check.cu compiled against that UCX with
#                                         UCX's cuda_ipc.cuh and with ours (include/ first), and any variant
# CUX_OUR_MODULE: our libuct_cuda.so.0 built against that UCX (default build-122cuda/.libs/).
# Steps:
#   gtest     UCX's own device gtests (test_cuda_ipc_rma*, test_device on cuda_ipc, test_ucp_device) with
#             UCX's module and with ours (gpu-host/run ucx-gtest);
#   perftest  ucx_perftest -a cuda, both modules interleaved (gpu-host/run device-perftest);
#   devcode   each check binary's data check, ours in place (CUX_DEVCODE_CHECK=0: none), then
#             CUX_DEVCODE_ROUNDS (default 3) rounds of --bench [CUX_DEVCODE_BENCH_MAX] over every binary in turn
#             (the device code is the difference: the host side is ours).
# Writes $OUT/prebuilt.txt and the steps' files.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
carry="$top/gpu-carry"
out=${OUT:-/tmp/cux-out}
prefix=/work/u122cuda/install
ours=${CUX_OUR_MODULE:-$top/build-122cuda/.libs/libuct_cuda.so.0}
report="$out/prebuilt.txt"
mkdir -p "$out/devcode"
gh_report "$report"

[ -x "$prefix/bin/ucx_info" ] || tar -C / -xzf "$carry/ucx-1.22.0-cuda-gtest-install.tar.gz"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_WARN_UNUSED_ENV_VARS=n
say "$(nvidia-smi -L | head -n 1); UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p')"

for step in "$@"; do
    case $step in
    gtest)
        say "UCX's device gtests, UCX's module and ours"
        OUT="$out/gtest" CUX_TEST_GTEST_TIMEOUT=${CUX_TEST_GTEST_TIMEOUT:-240} \
            CUX_UCX_GTEST_FILTERS="device=*test_cuda_ipc_rma*:*test_device*:*test_ucp_device*" \
            "$top/gpu-host/steps/ucx-gtest.sh" "$prefix" "$ours" 2 >/dev/null 2>&1 || { say "FAILED: gtest"; rc=1; }
        cat "$out/gtest/ucx-gtest.txt" >>"$report"
        ;;
    perftest)
        say "ucx_perftest -a cuda, UCX's module and ours"
        OUT="$out/perftest" "$top/gpu-host/steps/device-perftest.sh" "$prefix" "$ours" \
            "${CUX_PERFTEST_ROUNDS:-3}" >/dev/null 2>&1 || { say "FAILED: perftest"; rc=1; }
        cat "$out/perftest/device-perftest.txt" >>"$report"
        ;;
    devcode)
        module_in_place "$prefix" "$ours"
        checks=$(ls "$carry"/devcheck/check-*)
        for check in $checks; do
            [ "${CUX_DEVCODE_CHECK:-1}" = 1 ] || break
            log="$out/devcode/$(basename "$check").log"
            UCX_TLS=self,sm,cuda_copy,cuda_ipc timeout -k 5 240 "$check" >"$log" 2>&1 || rc=1
            say "data check $(basename "$check"), ours in place: $(tail -n 1 "$log")"
        done
        for ((round = 1; round <= ${CUX_DEVCODE_ROUNDS:-3}; ++round)); do
            for check in $checks; do
                log="$out/devcode/bench-$round-$(basename "$check").log"
                UCX_TLS=self,sm,cuda_copy,cuda_ipc timeout -k 5 240 "$check" --bench ${CUX_DEVCODE_BENCH_MAX:-} >"$log" 2>&1 || rc=1
                say "bench round $round $(basename "$check"): $(tail -n 1 "$log")"
            done
        done
        module_in_place "$prefix" "$prefix/reference-module/libuct_cuda.so.0"
        ;;
    *)
        say "unknown step $step"; rc=1
        ;;
    esac
done
say "done: exit $rc"
exit $rc
