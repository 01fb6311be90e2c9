#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What the CUDA transports tell UCP per pair of memory types, and what UCP picks, each module.
#
# What the CUDA transports tell UCP per pair of memory types, and what UCP chooses from it (issue 20, item 4),
# with UCX's module and with ours, on a GPU host:
#
#   OUT=DIR gpu-host/run estimates PREFIX OUR_MODULE
#
# PREFIX is a UCX (1.16 or later) built with CUDA with its module in PREFIX/reference-module; each module gets
# its own copy of PREFIX/lib (UCX loads modules next to the libucs in use). For each module, two
# ucx_perftest processes run tag_bw for GPU->GPU, host->GPU, GPU->host and host->host messages of 4 KB, 64 KB
# and 4 MB with UCX_PROTO_INFO=y; ours also logs the link figures it measured (debug lines "cuda link"). Then
# host->host messages of 4 and 64 MB with ours and UCX_CUDA_COPY_HOST_STAGING=y ("ours-staging"), which lets
# UCP send them through GPU fragments.
# Writes $OUT/estimates-MODULE.log (the protocol tables) and $OUT/estimates.txt (the link figures, and for each
# case the protocols chosen and the bandwidth).
set -u
prefix=${1:?usage: gpu-host/run estimates PREFIX OUR_MODULE}
ours=${2:?usage: gpu-host/run estimates PREFIX OUR_MODULE}
prefix=$(cd "$prefix" && pwd)
out=${OUT:-/tmp/cux-out}
work=$(mktemp -d /tmp/cux-est.XXXXXX)
report="$out/estimates.txt"
mkdir -p "$out"
. "$(dirname "$0")/../lib.sh"
module_copies "$prefix" "$ours" "$work"
: >"$report"

tls=self,sm,cma,cuda_copy,cuda_ipc
cases() { # module: "mem size" pairs
    if [ "$1" = ours-staging ]; then
        echo "host 4194304" "host 67108864"
    else
        for mem in cuda host,cuda cuda,host host; do
            echo "$mem 4096" "$mem 65536" "$mem 4194304"
        done
        echo "host 67108864"
    fi
}
for module in ucx ours ours-staging; do
    log="$out/estimates-$module.log"
    lib="$work/${module%-staging}"
    staging=n
    [ "$module" = ours-staging ] && staging=y
    : >"$log"
    for case in $(cases $module | tr ' ' '\n' | paste -d: - -); do
        mem=${case%:*}
        size=${case#*:}
        port=$((20000 + RANDOM % 20000))
        echo "=== $module: -m $mem -s $size" >>"$log"
        export UCX_CUDA_COPY_HOST_STAGING=$staging
        LD_LIBRARY_PATH="$lib" UCX_TLS=$tls UCX_PROTO_INFO=y UCX_LOG_LEVEL=debug \
            timeout 60 "$prefix/bin/ucx_perftest" -p $port >"$work/server.log" 2>&1 &
        sleep 1
        LD_LIBRARY_PATH="$lib" UCX_TLS=$tls UCX_PROTO_INFO=y timeout 60 "$prefix/bin/ucx_perftest" \
            localhost -p $port -t tag_bw -m $mem -s $size -n 2000 -w 200 >"$work/client.log" 2>&1
        rc=$?
        wait
        grep -E '^\[|\|' "$work/client.log" | grep -v -i 'warn' >>"$log"
        grep 'cuda link' "$work/server.log" | sed 's/^\[[0-9.]*\] \[[^]]*\] *//' | sort -u >>"$work/links-$module"
        final=$(grep -E '^Final:' "$work/client.log" | tr -s ' ' | cut -c1-90)
        # the protocol UCP chose for a message of this size: the row of the tag send table covering it
        chosen=$(grep -E 'tag_send|tagged message' -A12 "$work/client.log" | grep -E '^\[?.*\|' |
                 grep -iE 'rndv|eager|zcopy|bcopy|short|copy' | head -n 3 | tr -s ' ' | tr '\n' ';')
        printf '%-12s %-10s %9s  exit %s  %s\n        %s\n' "$module" "$mem" "$size" "$rc" "${final:-no Final line}" \
            "$chosen" >>"$report"
    done
done
echo "links measured by ours:" >>"$report"
sort -u "$work/links-ours" 2>/dev/null | sed 's/^/    /' >>"$report"
cat "$report"
rm -rf "$work"
