#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Ours across PID namespaces with Debian's UCX 1.13.1 packages: gtests, data check, perftest (root).
#
# Issue 36, items 2-3, on a GPU host (root): cuda_ipc between a process in its own PID and mount namespaces
# (unshare --pid --fork --mount-proc, as a container without hostPID) and a process on the host, through
# UCX_CUDA_IPC_SOCKET_DIR. Debian 12's own UCX 1.13.1 packages unpacked, our module preloaded (ucx-cuda-run), as
# gpu-host/run stock-ucx runs them: nothing of UCX rebuilt.
#
#   OUT=DIR gpu-host/run containers CARRY [REPEATS]
#
# CARRY holds the .deb files, libuct_cuda.so.0, libcux_perftest.so, libcux_memtype.so, ucx-cuda-run,
# cux_ucp_datacheck and cux_gtest, built on Debian 12 against those packages.
# 1. gtest on the GPU: ipc_containers.* (a peer as pid 1 of its own namespace: every kind of buffer both ways,
#    forged keys, refusals, exit; issue 45's impostors and the kernel's word on a listener), ipc_channel* (the
#    channel itself) and the namespace tests beside them.
# 2. cux_ucp_datacheck --pid-namespace: every kind of GPU memory from a sender in its own namespace, checked.
# 3. ucx_perftest tag_bw -m cuda, the server in its own namespace, UCX_TLS=self,tcp,cuda_copy,cuda_ipc: with the
#    setting, interleaved REPEATS times with both on the host; without it; and a client of another uid that
#    cannot enter the directory. UCX_LOG_LEVEL=info's endpoint lines say which transport carried the data.
#    CUX_CONTAINERS_SIZES: the message sizes (64 KB, 1 MB, 16 MB); CUX_CONTAINERS_GTEST_ALL=1 also runs every
#    cuda_ipc and parity gtest on the GPU; CUX_CONTAINERS_PERFTEST_ONLY=1 runs 3 alone (a baseline module's
#    carry beside this one's, in one call).
# Writes $OUT/containers.txt and logs.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, say, failed, the shared set-up
carry=$(cd "${1:?usage: gpu-host/run containers CARRY [REPEATS]}" && pwd)
repeats=${2:-3}
out=${OUT:-/tmp/cux-out}
root=/tmp/cux-containers-root
report="$out/containers.txt"
mkdir -p "$out" "$root"
gh_report "$report"

for deb in "$carry"/*.deb; do
    dpkg-deb -x "$deb" "$root" || { say "FAILED: unpacking $(basename "$deb")"; exit 1; }
done
chmod +x "$carry"/cux_* "$carry/ucx-cuda-run"
chmod 755 "$carry" "$root"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
export PATH="$root/usr/bin:$PATH"
export CUX_MODULE="$carry/libuct_cuda.so.0" CUX_PERFTEST_LIB="$carry/libcux_perftest.so" \
    CUX_MEMTYPE_LIB="$carry/libcux_memtype.so" UCX_WARN_UNUSED_ENV_VARS=n
run="$carry/ucx-cuda-run"
say "Debian's UCX $(ucx_info -v | head -1 | tr -s ' '), $(nvidia-smi -L | head -2 | tr '\n' ' ')"

if [ "${CUX_CONTAINERS_PERFTEST_ONLY:-0}" != 1 ]; then
say "1. gtest (system driver): the container tests"
CUX_TEST_SUITE=system CUX_TEST_REQUIRE_GPU=1 timeout -k 5 300 "$carry/cux_gtest" \
    --gtest_filter='ipc_containers.*:ipc_channel*:ipc_transport.a_peer_in_a*:ipc_pidns_probe.*' >"$out/gtest.log" 2>&1
echo "exit $?" >>"$out/gtest.log"
grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|^exit' "$out/gtest.log" | sort -u >>"$report"
if [ "${CUX_CONTAINERS_GTEST_ALL:-0}" = 1 ]; then
    say "1b. gtest (system driver): every cuda_ipc and parity test on the GPU"
    CUX_TEST_SUITE=system CUX_TEST_REQUIRE_GPU=1 timeout -k 5 400 "$carry/cux_gtest" --gtest_filter='ipc*:parity*' \
        >"$out/gtest-ipc.log" 2>&1
    echo "exit $?" >>"$out/gtest-ipc.log"
    grep -E '^\[ +(FAILED|PASSED) +\]|tests? ran|^exit' "$out/gtest-ipc.log" | sort -u >>"$report"
fi

fi

dir=/tmp/cux-sockets
rm -rf "$dir"
mkdir -m 700 "$dir"
if [ "${CUX_CONTAINERS_PERFTEST_ONLY:-0}" != 1 ]; then
say "2. cux_ucp_datacheck --pid-namespace (sender pid 1 of its own namespace), UCX_CUDA_IPC_SOCKET_DIR=$dir"
for args in "--peer-errors 8 65539 1048576 16777216" "--sweep --only 1"; do
    UCX_CUDA_IPC_SOCKET_DIR=$dir UCX_TLS=self,tcp,cuda_copy,cuda_ipc CUX_MEMTYPE=query timeout -k 5 400 \
        "$run" "$carry/cux_ucp_datacheck" --pid-namespace $args >"$out/datacheck-${args%% *}.log" 2>&1
    echo "exit $?" >>"$out/datacheck-${args%% *}.log"
    echo "-- $args" >>"$report"
    grep -E '^(PASS|FAIL|SKIP)|passed|^exit|cuda_ipc/cuda' "$out/datacheck-${args%% *}.log" | awk '!seen[$0]++' |
        cut -c1-200 >>"$report"
done

fi

say "3. ucx_perftest tag_bw -m cuda, UCX_TLS=self,tcp,cuda_copy,cuda_ipc, server in its own PID namespace"
port=23000
perftest() { # LABEL SIZE NAMESPACE(0/1) SOCKET_DIR(or "") CLIENT_UID(or "")
    local label=$1 size=$2 ns=$3 sdir=$4 uid=$5 log="$out/perftest-$1-$2.log" n=1000 r rs client=()
    [ "$size" -gt 4194304 ] && n=200
    local env=(env UCX_TLS=self,tcp,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info ${sdir:+UCX_CUDA_IPC_SOCKET_DIR=$sdir})
    local args=(-t tag_bw -m cuda -s "$size" -n "$n" -w 20 -p $((++port)))
    local server=()
    [ "$ns" = 1 ] && server=(unshare --pid --fork --mount-proc)
    [ -n "$uid" ] && client=(setpriv --reuid="$uid" --regid="$uid" --clear-groups)
    timeout -k 5 60 "${server[@]}" "${env[@]}" "$run" ucx_perftest "${args[@]}" >"$log.server" 2>&1 &
    sleep 1.5
    timeout -k 5 60 "${client[@]}" "${env[@]}" "$run" ucx_perftest localhost "${args[@]}" >"$log" 2>&1
    r=$?
    wait $!
    rs=$?
    local final carrier
    final=$(grep -E '^Final' "$log" | awk '{print $7}')
    carrier=$(grep -hoE '(cuda_ipc|tcp)/[a-z0-9.]+' "$log" | sort -u | tr '\n' ' ')
    echo "$label size $size: client exit $r, server exit $rs, ${final:-no result} MB/s; lanes: ${carrier:-?}" \
        >>"$report"
    grep -hE 'ep_cfg|ERROR|WARN' "$log" "$log.server" | head -n 4 | cut -c1-260 >>"$out/perftest-lanes.txt"
}
for size in ${CUX_CONTAINERS_SIZES:-65536 1048576 16777216}; do
    for i in $(seq 1 "$repeats"); do
        perftest host "$size" 0 "$dir" ""
        perftest namespaced "$size" 1 "$dir" ""
    done
done
perftest namespaced-no-setting 1048576 1 "" ""
perftest namespaced-client-uid65534 1048576 1 "$dir" 65534
cat "$report"
