#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian's UCX 1.13.1 packages unpacked, ours preloaded by ucx-cuda-run: checks and perftest.
#
# Issue 4 on a GPU host: Debian 12's own UCX binary packages (1.13.1, built without CUDA), unpacked beside the
# host's system, with our module and perftest allocator preloaded through ucx-cuda-run. Nothing of UCX is
# rebuilt: the module was built on Debian against the same packages (gpu-host/prepare/prepare-gpu-carry.sh).
#
#   OUT=/some/dir gpu-host/run stock-ucx [REPEATS]
#
# Inputs in ./gpu-carry/stock: the .deb files, libuct_cuda.so.0, libcux_perftest.so, ucx-cuda-run and the
# test programs. Writes $OUT/stock-ucx.txt (commands, ucx_info, protocol lines, data checks, the perftest
# table); the perftest CSV goes to $CUX_TEST_STOCK_LOGS (default $OUT).
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
carry="$top/gpu-carry/stock"
out=${OUT:-/tmp/cux-out}
logs=${CUX_TEST_STOCK_LOGS:-$out}
repeats=${1:-3}
root=/tmp/cux-stock-root
report="$out/stock-ucx.txt"
mkdir -p "$out" "$logs" "$root"

gh_report "$report"

for deb in "$carry"/*.deb; do
    dpkg-deb -x "$deb" "$root" || { say "FAILED: unpacking $(basename "$deb")"; exit 1; }
done
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
export PATH="$root/usr/bin:$PATH"
export CUX_MODULE="$carry/libuct_cuda.so.0" CUX_PERFTEST_LIB="$carry/libcux_perftest.so" \
    CUX_MEMTYPE_LIB="$carry/libcux_memtype.so"
run="$carry/ucx-cuda-run"
chmod +x "$run" "$carry"/cux_* 2>/dev/null

say "Debian's UCX: $(ucx_info -v | head -1), $(ucx_info -b | grep -o 'uct_MODULES.*')"
say "ucx-cuda-run --env"
"$run" --env >>"$report" 2>&1
say "ucx-cuda-run ucx_info -d (cuda part)"
"$run" ucx_info -d 2>&1 | grep -E 'Component|Transport|Device|bandwidth|latency' | grep -B1 -A3 cuda >>"$report"

say "which transports UCP picks (UCX_LOG_LEVEL=info), tag_bw 16MB -m cuda GPU0->GPU1"
UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info CUDA_VISIBLE_DEVICES=0 timeout 60 "$run" ucx_perftest \
    -p 19996 >"$logs/stock-info-server.log" 2>&1 &
sleep 1
UCX_TLS=self,sm,cuda_copy,cuda_ipc UCX_LOG_LEVEL=info CUDA_VISIBLE_DEVICES=1 timeout 60 "$run" ucx_perftest \
    localhost -p 19996 -t tag_bw -m cuda -s 16777216 -n 20 -w 2 2>&1 | grep -E 'ep_cfg|Final' | head -8 >>"$report"
wait

# The statically linked runtime is out of the hooks' sight: that case documents the limit, it must fail.
for prog in "$carry"/cux_ucp_datacheck*; do
    [ -x "$prog" ] || continue
    for mode in query hooks; do
        name=$(basename "$prog")
        expect=0
        [ "$name" = cux_ucp_datacheck_static_cudart ] && [ $mode = hooks ] && expect=1
        say "data check: $name, GPU memory detected by '$mode'$([ $expect = 1 ] && echo ' (expected to fail)')"
        CUX_MEMTYPE=$mode UCX_TLS=self,sm,cuda_copy,cuda_ipc timeout 600 "$run" "$prog" >"$logs/check-$name-$mode.log" 2>&1
        status=$?
        grep -E '^(PASS|FAIL|SKIP|[0-9]+ passed)|cache says' "$logs/check-$name-$mode.log" | awk '!seen[$0]++' >>"$report"
        echo "exit status $status" >>"$report"
        if [ $expect = 0 ] && [ $status -ne 0 ]; then rc=1; fi
        if [ $expect = 1 ] && [ $status -eq 0 ]; then echo "(unexpected pass)" >>"$report"; fi
    done
done

say "ucx_perftest through ucx-cuda-run, memory-type detection by query vs hooks, $repeats repeats"
modules=()
for mode in query hooks; do
    envline=$(CUX_MEMTYPE=$mode "$run" --env | sed -n 's/^export //p' | paste -sd, -)
    [ -n "$envline" ] && modules+=(--module "$mode=-,$envline")
done
python3 "$top/bench/perftest_compare.py" --prefix "$root/usr" "${modules[@]}" --cases stock ${CUX_BENCH_CPUS:+--cpus "$CUX_BENCH_CPUS"} \
    --repeats "$repeats" --out "$logs/stock-perftest" >"$logs/stock-perftest.log" 2>&1
status=$?
echo "perftest_compare exit status $status" >>"$report"
[ $status -eq 0 ] || rc=1
cat "$logs/stock-perftest/perftest.md" >>"$report" 2>/dev/null || tail -n 30 "$logs/stock-perftest.log" >>"$report"
exit $rc
