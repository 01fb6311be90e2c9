#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two containers whose programs are both pid 1 (issue 57): the driver alone, data checks and perftest (root).
#
#   OUT=DIR gpu-host/run siblings CARRY [REPEATS]
#
# CARRY is gpu-host/run containers' (Debian 12's UCX 1.13.1 packages, our module and programs built against
# them, gpu-host/prepare/prepare-gpu-carry.sh) with bench/cux_pidns_probe beside them. Each "container" is
# unshare --pid --fork --mount-proc --ipc --uts: its program is pid 1 of PID, mount, IPC and UTS namespaces of its
# own, as `docker run` twice or two pods give (the network namespace is shared: UCX's tcp between them needs one).
# 1. cux_pidns_probe: the driver alone, legacy handles (as exported and with their pid bytes changed) and VMM
#    descriptors, in one namespace, a child namespace either way round, and sibling namespaces with equal and
#    with different pids.
# 2. cux_ucp_datacheck, UCX_TLS=self,tcp,cuda_copy,cuda_ipc, UCX_CUDA_IPC_SOCKET_DIR shared: legacy, VMM, VMM
#    across two allocations and shareable pools on one GPU, both sides pid 1 of sibling namespaces
#    (--sibling-namespaces), against the sender alone in a namespace (--pid-namespace) and one namespace; and as
#    the Kubernetes recipe of docs/containers.md makes them ("recipe"): each side pid 1 of its own namespaces as
#    uid 1000 with no capabilities, making its own 0700 socket directory in a shared 0777 one (an emptyDir).
# 3. ucx_perftest tag_bw -m cuda (legacy memory), 1 MB and 64 MB, server and client each pid 1 of its own
#    namespaces, against both in one namespace, interleaved REPEATS times (default 3); UCX_LOG_LEVEL=info's
#    endpoint lines say which transport carried the data, and the warnings are kept.
# 4. Where $carry (lib.sh: ./gpu-carry) holds a UCX source tarball and our dist tarball: UCX built with CUDA there,
#    ours built against it, and 2-3 again with ours in place of UCX's module and with UCX's own (its own memory
#    hooks, no launcher).
# Writes $OUT/siblings.txt and $OUT/siblings-logs.tgz.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, say, failed, the shared set-up
stock=$(cd "${1:?usage: gpu-host/run siblings CARRY [REPEATS]}" && pwd)
repeats=${2:-3}
out=${OUT:-/tmp/cux-out}
root=/tmp/cux-siblings-root
logs=$out/logs
report="$out/siblings.txt"
mkdir -p "$logs" "$root"
gh_report "$report"

for deb in "$stock"/*.deb; do
    dpkg-deb -x "$deb" "$root" || { say "FAILED: unpacking $(basename "$deb")"; exit 1; }
done
chmod +x "$stock"/cux_* "$stock/ucx-cuda-run"
chmod 755 "$stock" "$root"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
export PATH="$root/usr/bin:$PATH"
export CUX_MODULE="$stock/libuct_cuda.so.0" CUX_PERFTEST_LIB="$stock/libcux_perftest.so" \
    CUX_MEMTYPE_LIB="$stock/libcux_memtype.so" UCX_WARN_UNUSED_ENV_VARS=n
run="$stock/ucx-cuda-run"
container=(unshare --pid --fork --mount-proc --ipc --uts)
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -2 | tr '\n' ' '), kernel $(uname -r)"

say "1. the driver alone (cux_pidns_probe)"
timeout -k 5 120 "$stock/cux_pidns_probe" >"$logs/probe.log" 2>&1
echo "exit $?" >>"$logs/probe.log"
cat "$logs/probe.log" >>"$report"

dir=/tmp/cux-sockets
rm -rf "$dir"
mkdir -m 700 "$dir"
say "2. cux_ucp_datacheck, UCX_CUDA_IPC_SOCKET_DIR=$dir (cases: legacy, VMM, VMM split, shareable pools; one GPU)"
emptydir=/tmp/cux-emptydir
rm -rf "$emptydir"
mkdir -m 777 "$emptydir"
for mode in --sibling-namespaces --pid-namespace none recipe; do
    log="$logs/datacheck${mode#-}.log"
    args=() sockets=$dir
    case $mode in
    none) ;;
    recipe) args=(--sibling-namespaces --as-user 1000:1000) sockets=$emptydir/s ;;
    *) args=("$mode") ;;
    esac
    UCX_CUDA_IPC_SOCKET_DIR=$sockets UCX_TLS=self,tcp,cuda_copy,cuda_ipc CUX_MEMTYPE=query timeout -k 5 280 \
        "$run" "$stock/cux_ucp_datacheck" "${args[@]}" --only 1,10,12,14,16 \
        8 65539 1048576 16777216 >"$log" 2>&1
    echo "exit $?" >>"$log"
    echo "-- datacheck $mode" >>"$report"
    grep -E '^(PASS|FAIL|SKIP)|passed|^exit|WARN|ERROR' "$log" | awk '!seen[$0]++' | cut -c1-240 >>"$report"
done

say "3. ucx_perftest tag_bw -m cuda, UCX_TLS=self,tcp,cuda_copy,cuda_ipc"
port=24000
perftest() { # LABEL SIZE CONTAINERS(0/1) REPEAT PROGRAM...: one server and client pair
    local label=$1 size=$2 ns=$3 log="$logs/perftest-$1-$2-$4.log" n=1000 r rs wrap=()
    shift 4
    [ "$size" -gt 4194304 ] && n=100
    [ "$ns" = 1 ] && wrap=("${container[@]}")
    local env=(env UCX_TLS=self,tcp,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info UCX_CUDA_IPC_SOCKET_DIR=$dir)
    local args=(-t tag_bw -m cuda -s "$size" -n "$n" -w 10 -p $((++port)))
    timeout -k 5 60 "${wrap[@]}" "${env[@]}" "$@" "${args[@]}" >"$log.server" 2>&1 &
    sleep 1.5
    timeout -k 5 60 "${wrap[@]}" "${env[@]}" "$@" localhost "${args[@]}" >"$log" 2>&1
    r=$?
    wait $!
    rs=$?
    local final carrier
    final=$(grep -E '^Final' "$log" | awk '{print $7}')
    carrier=$(grep -hoE '(cuda_ipc|tcp)/[a-z0-9.]+' "$log" | sort -u | tr '\n' ' ')
    echo "$label size $size: client exit $r, server exit $rs, ${final:-no result} MB/s; lanes: ${carrier:-?};" \
        "$(grep -hE 'WARN|ERROR' "$log" "$log.server" | grep -v affinity | head -n 2 | cut -c1-200 | tr '\n' ' ')" \
        >>"$report"
}
for size in 1048576 67108864; do
    for i in $(seq 1 "$repeats"); do
        perftest siblings-pid1 "$size" 1 "$i" "$run" ucx_perftest
        perftest one-namespace "$size" 0 "$i" "$run" ucx_perftest
    done
done

# 4. The same on UCX 1.22 built with CUDA, ours in place of UCX's module and UCX's own, where the carry has UCX's
#    source and our dist tarball (gpu-host/prepare/prepare-gpu-carry.sh): no launcher, UCX's own memory hooks.
ucx_tar=$(ls "$carry"/ucx-*-src.tar.gz 2>/dev/null | head -1)
if [ -n "$ucx_tar" ] && ls "$carry"/uct-cuda-plugin-*.tar.gz >/dev/null 2>&1; then
    prefix=${UCX_REF_PREFIX:-/opt/ucx-ref}
    export LD_LIBRARY_PATH= PATH=${PATH#"$root/usr/bin:"} # Debian's UCX 1.13 no more
    work=/tmp/cux-siblings-work
    say "4. $(basename "$ucx_tar") with CUDA: building UCX, googletest and ours against it"
    if gh_ucx_and_ours "$prefix" "$work" "$logs"; then
        check122="$work/plugin-build/test/cux_ucp_datacheck"
        for module in ours ucx; do
            module_use "$prefix" "$module" "$work/plugin-build/.libs/libuct_cuda.so.0"
            for mode in --sibling-namespaces none; do
                log="$logs/datacheck-122-$module${mode#-}.log"
                LD_LIBRARY_PATH="$prefix/lib" UCX_CUDA_IPC_SOCKET_DIR=$dir UCX_TLS=self,tcp,cuda_copy,cuda_ipc \
                    timeout -k 5 200 "$check122" $([ "$mode" = none ] || echo "$mode") --only 1,10,12,14,16 \
                    8 65539 1048576 16777216 >"$log" 2>&1
                echo "exit $?" >>"$log"
                echo "-- UCX 1.22, $module's module: datacheck $mode" >>"$report"
                grep -E '^(PASS|FAIL|SKIP)|passed|^exit|WARN|ERROR' "$log" | awk '!seen[$0]++' | cut -c1-240 \
                    >>"$report"
            done
            for size in 1048576 67108864; do
                for i in $(seq 1 "$repeats"); do
                    perftest "122-$module-siblings-pid1" "$size" 1 "$i" env LD_LIBRARY_PATH="$prefix/lib" \
                        "$prefix/bin/ucx_perftest"
                    perftest "122-$module-one-namespace" "$size" 0 "$i" env LD_LIBRARY_PATH="$prefix/lib" \
                        "$prefix/bin/ucx_perftest"
                done
            done
        done
    else
        failed "building UCX 1.22 or ours against it (logs/ucx-build.log, logs/plugin-*.log)"
    fi
fi
tar -C "$out" -czf "$out/siblings-logs.tgz" logs && rm -rf "$logs"
cat "$report"
