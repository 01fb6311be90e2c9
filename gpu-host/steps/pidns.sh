#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Imports from another PID namespace (bench/cux_pidns_probe), perftest across namespaces (root).
#
# Issue 36, item 1, on a GPU host (root): what works today between a process in its own PID and mount
# namespaces (unshare --pid --fork --mount-proc, as a container without hostPID) and a process on the host.
#
#   OUT=DIR gpu-host/run pidns PREFIX OUR_MODULE PROBE
#
# 1. PROBE (bench/cux_pidns_probe): the driver alone; a legacy IPC handle and a VMM descriptor over SCM_RIGHTS,
#    imported across the namespaces, both ways round, every byte checked.
# 2. ucx_perftest -t tag_bw -m cuda -s 1 MB between the two, UCX_TLS=self,tcp,cuda_copy,cuda_ipc (tcp for active
#    messages, so that shared-memory transports play no part), with UCX's module (PREFIX/reference-module) and
#    with ours (OUR_MODULE), each with the server in the namespace and without; UCX_PROTO_INFO=y says which
#    transport carried the data.
# Writes $OUT/pidns.txt and $OUT/pidns-*.log.
set -u
prefix=${1:?usage: gpu-host/run pidns PREFIX OUR_MODULE PROBE}
ours=${2:?usage: gpu-host/run pidns PREFIX OUR_MODULE PROBE}
probe=${3:?usage: gpu-host/run pidns PREFIX OUR_MODULE PROBE}
out=${OUT:-/tmp/cux-out}
work=$(mktemp -d /tmp/cux-pidns.XXXXXX)
report="$out/pidns.txt"
mkdir -p "$out"
. "$(dirname "$0")/../lib.sh"
module_copies "$prefix" "$ours" "$work"

echo "## driver alone ($(basename "$probe"))" >"$report"
timeout -k 5 60 "$probe" >"$out/pidns-probe.log" 2>&1
echo "exit $?" >>"$out/pidns-probe.log"
cat "$out/pidns-probe.log" >>"$report"

echo "## ucx_perftest tag_bw -m cuda 1 MB, UCX_TLS=self,tcp,cuda_copy,cuda_ipc" >>"$report"
port=21000
for module in ucx ours; do
    for where in namespace host; do
        log="$out/pidns-perftest-$module-$where.log"
        ns=()
        [ "$where" = namespace ] && ns=(unshare --pid --fork --mount-proc)
        env=(env LD_LIBRARY_PATH="$work/$module:/usr/local/cuda/lib64" UCX_TLS=self,tcp,cuda_copy,cuda_ipc
             UCX_PROTO_INFO=y UCX_WARN_UNUSED_ENV_VARS=n)
        args=(-t tag_bw -m cuda -s 1048576 -n 1000 -w 100 -p $((++port)))
        start=$(date +%s)
        timeout -k 5 40 "${ns[@]}" "${env[@]}" "$prefix/bin/ucx_perftest" "${args[@]}" >"$log.server" 2>&1 &
        server=$!
        sleep 1
        timeout -k 5 40 "${env[@]}" "$prefix/bin/ucx_perftest" localhost "${args[@]}" >"$log" 2>&1
        r=$?
        wait $server
        rs=$?
        secs=$(( $(date +%s) - start ))
        final=$(grep -E '^Final' "$log" | awk '{print $7 " MB/s"}')
        carrier=$(grep -hoE '(cuda_ipc|tcp|cuda_copy)/[A-Za-z0-9_:.-]+' "$log" | sort -u | tr '\n' ' ')
        echo "$module's module, server in the $where: client exit $r, server exit $rs, $secs s," \
             "${final:-no result}; transports in the client's protocol table: ${carrier:-none};" \
             "$(grep -hE 'ERROR|rror|timed out|unreachable' "$log" "$log.server" | head -n 2 | cut -c1-200 | tr '\n' ' ')" \
             >>"$report"
    done
done
cat "$report"
rm -rf "$work"
