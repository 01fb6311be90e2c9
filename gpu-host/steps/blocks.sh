#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Many-block transfers through UCP (bench/cux_blocks), ours against UCX's module on one UCX core.
#
# The many-block benchmark (bench/cux_blocks) on a GPU host, ours against UCX's own module on the same core
# (issue 22, item 1):
#
#   OUT=DIR gpu-host/run blocks PREFIX OUR_MODULE CUX_BLOCKS [DRVCOUNT_LIB]
#
# PREFIX is a UCX (1.22) built with CUDA, its module in PREFIX/reference-module (contrib/build-reference-ucx.sh,
# carried with gpu-host/prepare/carry-ucx-prefix.sh); OUR_MODULE and CUX_BLOCKS are built against it. Runs
# bench/blocks_compare.py: two processes (on two GPUs when there are two, else both on the one), every block
# size and count of the issue in one allocation and in many, put and get, 3 interleaved repeats; with
# DRVCOUNT_LIB (bench/cux_drvcount) also the driver calls per block. CUX_TEST_BLOCKS_ARGS,
# CUX_TEST_BLOCKS_DRV_ARGS, CUX_TEST_BLOCKS_REPEATS and CUX_TEST_BLOCKS_TIMEOUT (seconds per run) override the
# defaults. Writes $OUT/blocks/.
set -u
prefix=${1:?usage: gpu-host/run blocks PREFIX OUR_MODULE CUX_BLOCKS [DRVCOUNT_LIB]}
ours=${2:?usage: gpu-host/run blocks PREFIX OUR_MODULE CUX_BLOCKS [DRVCOUNT_LIB]}
blocks=${3:?usage: gpu-host/run blocks PREFIX OUR_MODULE CUX_BLOCKS [DRVCOUNT_LIB]}
drvcount=${4:-}
out=${OUT:-/tmp/cux-out}/blocks
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
mkdir -p "$out"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
args=${CUX_TEST_BLOCKS_ARGS:--s 16k,64k,256k,1m -k 1,10,100,1000,10000 -r 5 -f 2 -M 1g}
drv_args=${CUX_TEST_BLOCKS_DRV_ARGS:--s 16k,64k,1m -k 1000 -r 3 -f 0}
nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader >"$out/gpus.txt" 2>&1
python3 "$top/bench/blocks_compare.py" --prefix "$prefix" --module "ucx=$prefix/reference-module/libuct_cuda.so.0" \
    --module "ours=$ours" --blocks "$blocks" --args "$args" --repeats "${CUX_TEST_BLOCKS_REPEATS:-3}" \
    --timeout "${CUX_TEST_BLOCKS_TIMEOUT:-120}" --out "$out" \
    ${drvcount:+--drvcount "$drvcount" --drvcount-args "$drv_args"} >"$out/compare.log" 2>&1
echo "blocks_compare: exit $?" | tee -a "$out/compare.log"
