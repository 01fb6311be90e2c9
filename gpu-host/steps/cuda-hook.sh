#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's own test_cuda_hook on Debian's UCX with our hooks, static and shared CUDA runtime (issue 61).
#
#   OUT=DIR gpu-host/run cuda-hook CARRY [CARRY...]
#
# Each CARRY as gpu-host/run containers takes it (Debian's UCX packages with libucx-dev among them, our module,
# libcux_memtype.so, ucx-cuda-run, cux_ucp_datacheck_static_cudart); the first one's UCX is used for all.
# test/apps/test_cuda_hook.c comes from the UCX source tarball in $carry (lib.sh) and is built there with nvcc
# against that UCX's headers twice: with the static runtime (nvcc's default) and the shared one. Each is run
# with the runtime API and with the driver API (-d), on the stock UCX alone and through each carry's
# ucx-cuda-run with CUX_MEMTYPE=hooks and =query; the table gives UCX's "got N/2 memory events". Then
# cux_ucp_datacheck_static_cudart (a program linked with the static runtime moving GPU buffers over UCP) in
# both modes, every case checked. Writes $OUT/cuda-hook.txt and $OUT/cuda-hook-logs.tgz.
set -u
. "$(dirname "$0")/../lib.sh"
[ $# -ge 1 ] || { echo "usage: gpu-host/run cuda-hook CARRY [CARRY...]" >&2; exit 2; }
carries=()
for c in "$@"; do carries+=("$(cd "$c" && pwd)"); done
out=${OUT:-/tmp/cux-out}
logs=$out/cuda-hook-logs
report=$out/cuda-hook.txt
root=/tmp/cux-cuda-hook-root
work=/tmp/cux-cuda-hook-work
mkdir -p "$logs" "$work"
gh_report "$report"
gh_stock_ucx "${carries[0]}" "$root" || exit 1
[ -f "$root/usr/include/ucp/api/ucp.h" ] || { failed "no libucx-dev in ${carries[0]}"; exit 1; }
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -1), $(nvcc --version | tail -1)"

ucx_tar=$(ls "$carry"/ucx-*-src.tar.gz | head -1)
src=$(tar -tzf "$ucx_tar" | grep 'test/apps/test_cuda_hook.c$' | head -1)
tar -C "$work" -xzf "$ucx_tar" "$src" || { failed "no test_cuda_hook.c in $(basename "$ucx_tar")"; exit 1; }
say "building $src from $(basename "$ucx_tar") against Debian's headers"
lib=$root/usr/lib/x86_64-linux-gnu
for runtime in static shared; do
    nvcc --cudart "$runtime" -I"$root/usr/include" -o "$work/test_cuda_hook_$runtime" "$work/$src" \
        -L"$lib" -lucp -lucs -lucm -lcuda >"$logs/build-$runtime.log" 2>&1 ||
        failed "building test_cuda_hook_$runtime (build-$runtime.log)"
done

export UCX_WARN_UNUSED_ENV_VARS=n
# One run: the program's verdict, "N/2".
events() { # LOG COMMAND...
    timeout -k 5 60 "${@:2}" >"$1" 2>&1
    sed -n 's/^got \([0-9]*\/[0-9]*\) memory events$/\1/p' "$1" | tail -1 | grep . || echo "none (exit $(tail -c 300 "$1" | tr '\n' ' '))"
}
say "memory events per cell (runtime API, driver API -d), UCX's test_cuda_hook"
printf '| UCX and hooks | static, runtime API | static, driver API | shared, runtime API | shared, driver API |\n' >>"$report"
printf '|---|---|---|---|---|\n' >>"$report"
row() { # LABEL PREFIX-COMMAND...
    local label=$1 cells=() runtime api
    shift
    for runtime in static shared; do
        for api in "" -d; do
            cells+=("$(events "$logs/$label-$runtime$api.log" "$@" "$work/test_cuda_hook_$runtime" $api)")
        done
    done
    printf '| %s | %s | %s | %s | %s |\n' "$label" "${cells[@]}" >>"$report"
}
row "stock UCX alone" env
for c in "${carries[@]}"; do
    chmod +x "$c"/ucx-cuda-run "$c"/cux_* 2>/dev/null
    for mode in hooks query; do
        row "$(basename "$c"), $mode" env CUX_MODULE="$c/libuct_cuda.so.0" CUX_PERFTEST_LIB="$c/libcux_perftest.so" \
            CUX_MEMTYPE_LIB="$c/libcux_memtype.so" CUX_MEMTYPE=$mode "$c/ucx-cuda-run"
    done
done
cat "$report" | tail -n $((2 + 1 + 2 * ${#carries[@]}))

say "cux_ucp_datacheck_static_cudart (the static runtime moving GPU buffers over UCP), every case checked"
for c in "${carries[@]}"; do
    [ -x "$c/cux_ucp_datacheck_static_cudart" ] || continue
    for mode in hooks query; do
        log="$logs/datacheck-$(basename "$c")-$mode.log"
        CUX_MODULE="$c/libuct_cuda.so.0" CUX_PERFTEST_LIB="$c/libcux_perftest.so" CUX_MEMTYPE_LIB="$c/libcux_memtype.so" \
            CUX_MEMTYPE=$mode UCX_TLS=self,tcp,cuda_copy,cuda_ipc timeout -k 5 240 "$c/ucx-cuda-run" \
            "$c/cux_ucp_datacheck_static_cudart" >"$log" 2>&1
        echo "exit $?" >>"$log"
        echo "-- $(basename "$c"), $mode: $(grep -E '^[0-9]+ passed|^exit' "$log" | paste -sd' ')" | tee -a "$report"
        grep -E '^FAIL' "$log" | head -5 >>"$report"
    done
done
tar -C "$out" -czf "$out/cuda-hook-logs.tgz" cuda-hook-logs && rm -rf "$logs"
exit "${rc:-0}"
