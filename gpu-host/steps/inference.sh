#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# 100,000 blocks of 45 KB a transfer: per block against UCX's module, scatter-gather against master's.
#
# KV-cache transfers at inference scale on a GPU host (issue 34, item 3): a transfer is 100,000 blocks of 45 KB
# (about 4.6 GB), as vLLM moves them between prefill and decode, in one allocation and in one allocation per
# block, with bench/cux_blocks through bench/blocks_compare.py (interleaved repeats, median and spread, every
# block data-checked):
#
#   OUT=DIR gpu-host/run inference PREFIX OUR_MODULE CUX_BLOCKS [MASTER_PREFIX MASTER_MODULE MASTER_BLOCKS]
#
# 1. one ucp_put_nbx or ucp_get_nbx per block, UCX's own module (PREFIX/reference-module, UCX 1.22) against ours
#    on PREFIX's core;
# 2. with the second three: the same blocks as one scatter-gather put per transfer (cux_blocks -G), the module of
#    UCX master (whose cuda_ipc takes such a list as one cuMemcpyBatchAsync) against ours on master's core.
# Each layout is its own run, so that a module that does not finish one in the time-out (CUX_INF_TIMEOUT seconds,
# default 120) still has the other's figures; a module that timed out is not run again. CUX_INF_ARGS (default
# "-s 45k -k 100000 -r 3 -f 0 -M 12g"), CUX_INF_REPEATS (default 2) and CUX_INF_LAYOUTS (default "one many")
# override. Writes $OUT/inference/.
set -u
usage="usage: gpu-host/run inference PREFIX OUR_MODULE CUX_BLOCKS [MASTER_PREFIX MASTER_MODULE MASTER_BLOCKS]"
prefix=${1:?$usage}
ours=${2:?$usage}
blocks=${3:?$usage}
mprefix=${4:-}
mours=${5:-}
mblocks=${6:-}
out=${OUT:-/tmp/cux-out}/inference
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
args=${CUX_INF_ARGS:--s 45k -k 100000 -r 3 -f 0 -M 12g}
repeats=${CUX_INF_REPEATS:-2}
timeout=${CUX_INF_TIMEOUT:-120}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader >"$out/gpus.txt" 2>&1

compare() { # DIR PREFIX ARGS MODULE...
    local dir=$1 pfx=$2 cargs=$3 bin=$4
    shift 4
    local mods=()
    for m in "$@"; do mods+=(--module "$m"); done
    mkdir -p "$out/$dir"
    cp "$out/gpus.txt" "$out/$dir/"
    LD_LIBRARY_PATH="$pfx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" python3 "$top/bench/blocks_compare.py" \
        --prefix "$pfx" "${mods[@]}" --blocks "$bin" --args "$cargs" --repeats "$repeats" --timeout "$timeout" \
        --out "$out/$dir" >"$out/$dir/compare.log" 2>&1
    echo "$dir: exit $?" | tee -a "$out/summary.txt"
}

for layout in ${CUX_INF_LAYOUTS:-one many}; do
    compare "per-block-$layout" "$prefix" "$args -l $layout -o put,get" "$blocks" \
        "ucx=$prefix/reference-module/libuct_cuda.so.0" "ours=$ours"
    if [ -n "$mprefix" ]; then
        compare "sgl-$layout" "$mprefix" "$args -G -l $layout -o put" "$mblocks" \
            "ucx-master=$mprefix/reference-module/libuct_cuda.so.0" "ours=$mours"
    fi
done
