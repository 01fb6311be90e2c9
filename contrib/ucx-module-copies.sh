# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the GPU-host scripts that run one UCX with either CUDA module: module_copies PREFIX OUR_MODULE WORK
# makes WORK/ucx and WORK/ours, each a copy of PREFIX/lib with UCX's own module (PREFIX/reference-module) or ours
# in its module directory. LD_LIBRARY_PATH=WORK/ucx or WORK/ours picks one: UCX finds its modules next to the
# libucs in use.
module_copies() {
    local prefix=$1 ours=$2 work=$3 module
    for module in ucx ours; do
        cp -a "$prefix/lib" "$work/$module"
    done
    cp "$prefix/reference-module/libuct_cuda.so.0" "$work/ucx/ucx/libuct_cuda.so.0"
    cp "$ours" "$work/ours/ucx/libuct_cuda.so.0"
}
