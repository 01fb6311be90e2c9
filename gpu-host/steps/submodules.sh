#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX's gdr_copy submodule with UCX's module and with ours in place.
#
# UCX's gdr_copy submodule with our module in place of UCX's own (issue 20), on a GPU host:
#
#   OUT=DIR gpu-host/run submodules PREFIX OUR_MODULE
#
# PREFIX is a UCX built with CUDA and gdrcopy's user library (contrib/build-reference-ucx.sh with
# CUX_UCX_CONFIGURE_EXTRA=--with-gdrcopy=DIR), with UCX's own module in PREFIX/reference-module; OUR_MODULE is
# our libuct_cuda.so.0 built against that UCX. For UCX's module, then ours, in PREFIX's module directory: what
# `ucx_info -d` says of gdr_copy (with UCX's debug lines of loading it), the GDR_COPY variables of
# `ucx_info -c`, the names `ldd -r` finds undefined in the gdr_copy module, and whether UCP programs
# (`ucx_info -e`, two `ucx_perftest` processes) end normally. Without /dev/gdrdrv, gdr_copy offers no device:
# the same for both modules is the expected result. Writes $OUT/submodules.txt; leaves ours installed.
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, say, failed, the shared set-up
prefix=${1:?usage: gpu-host/run submodules PREFIX OUR_MODULE}
ours=${2:?usage: gpu-host/run submodules PREFIX OUR_MODULE}
out=${OUT:-/tmp/cux-out}
report="$out/submodules.txt"
moddir="$prefix/lib/ucx"
mkdir -p "$out"

gh_report "$report"

[ -e "$moddir/libuct_cuda_gdrcopy.so.0" ] || { say "FAILED: no gdr_copy module in $moddir"; exit 1; }
say "UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# \(Library version:\|Version\) //p' | head -n 1), $(ls /dev/gdrdrv 2>/dev/null || echo 'no /dev/gdrdrv')"
"$prefix/bin/ucx_info" -b | grep -E 'uct_MODULES|uct_cuda_MODULES' >>"$report"

for which in "UCX's own module" "our module"; do
    if [ "$which" = "our module" ]; then
        cp "$ours" "$moddir/libuct_cuda.so.0"
    else
        cp "$prefix/reference-module/libuct_cuda.so.0" "$moddir/libuct_cuda.so.0"
    fi
    say "$which in $moddir"
    UCX_LOG_LEVEL=debug "$prefix/bin/ucx_info" -d >/tmp/cux-sub-info.log 2>&1
    echo "ucx_info -d: exit $?" >>"$report"
    grep -iE 'gdr|Component: cuda|Transport: cuda' /tmp/cux-sub-info.log | sed 's/^\[[0-9.]*\] \[[^]]*\] *//' |
        sort -u >>"$report"
    echo "GDR_COPY variables in ucx_info -c: $("$prefix/bin/ucx_info" -c 2>/dev/null | grep -c GDR_COPY)" >>"$report"
    # the module directory on the path: a UCX carried from elsewhere keeps its build's run paths
    echo "undefined in libuct_cuda_gdrcopy.so.0 (ldd -r): $(LD_LIBRARY_PATH="$moddir:${LD_LIBRARY_PATH:-}" ldd -r "$moddir/libuct_cuda_gdrcopy.so.0" 2>&1 |
        grep -c 'undefined symbol')" >>"$report"
    LD_LIBRARY_PATH="$moddir:${LD_LIBRARY_PATH:-}" ldd -r "$moddir/libuct_cuda_gdrcopy.so.0" 2>&1 | grep 'undefined symbol' | grep -o 'uct_cuda[a-z_]*' |
        sort -u >>"$report"
    "$prefix/bin/ucx_info" -e -u t >/dev/null 2>&1
    echo "ucx_info -e: exit $?" >>"$report"
    port=$((20000 + RANDOM % 20000))
    UCX_TLS=self,sm,cuda_copy,cuda_ipc,gdr_copy timeout 60 "$prefix/bin/ucx_perftest" -p $port >/dev/null 2>&1 &
    sleep 1
    UCX_TLS=self,sm,cuda_copy,cuda_ipc,gdr_copy timeout 60 "$prefix/bin/ucx_perftest" localhost -p $port \
        -t tag_bw -m cuda -s 1048576 -n 100 -w 10 >/tmp/cux-sub-perf.log 2>&1
    prc=$?
    wait
    echo "ucx_perftest -m cuda tag_bw 1 MB, two processes: exit $prc $(grep Final /tmp/cux-sub-perf.log | tail -n 1)" \
        >>"$report"
    [ $prc -eq 0 ] || rc=1
done
say "done: exit $rc"
exit $rc
