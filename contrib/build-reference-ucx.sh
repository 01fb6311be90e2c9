#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the reference UCX for GPU work: UCX from Debian's source package (configure already generated, see
# gpu-host/prepare/prepare-ucx-src.sh), with CUDA, into PREFIX. Only the libraries, ucx_info and ucx_perftest are
# built (the test applications do not build with gcc 13), with -Wno-error for gcc 13. UCX's own CUDA module
# is then copied to PREFIX/reference-module/libuct_cuda.so.0 so that it can be compared with ours.
#
#   contrib/build-reference-ucx.sh UCX_SRC_DIR_OR_TARBALL PREFIX [CUDA_DIR]
#
# CUDA_DIR "none" builds the same UCX without CUDA (no reference module): what NIXL links on a machine without
# the CUDA build's nvml.h, to run on a GPU host's CUDA build of the same release
# (gpu-host/prepare/prepare-nixl-carry.sh).
#
# CUX_UCX_CONFIGURE_EXTRA adds configure arguments (e.g. --without-verbs on a host without NICs).
set -euo pipefail
src=$1
prefix=$2
cuda=${3:-/usr/local/cuda}
jobs=$(nproc)

. "$(dirname "$0")/ucx-src-dir.sh"
src=$(ucx_src_dir "$src")
[ -x "$src/configure" ] || { echo "build-reference-ucx: $src has no configure (run gpu-host/prepare/prepare-ucx-src.sh)" >&2; exit 1; }

if [ "$cuda" = none ]; then
    cuda_arg=--without-cuda
    build="$src/build-nocuda"
else
    cuda_arg=--with-cuda="$cuda"
    build="$src/build-cuda"
fi
mkdir -p "$build"
cd "$build"
"$src/configure" --prefix="$prefix" "$cuda_arg" --without-java --without-go --disable-doxygen-doc \
    --enable-mt --disable-logging --disable-debug --disable-assertions ${CUX_UCX_CONFIGURE_EXTRA:-} \
    CFLAGS="-O3 -g -Wno-error" CXXFLAGS="-O3 -g -Wno-error" >configure.log 2>&1 ||
    { tail -n 30 configure.log; exit 1; }
[ "$cuda" = none ] || grep -q '^#define HAVE_CUDA 1' config.h ||
    { echo "build-reference-ucx: configure found no CUDA" >&2; exit 1; }

dirs="src/ucm src/ucs src/uct src/ucp src/tools/info src/tools/perf"
for d in $dirs; do
    make -C "$d" -j"$jobs" >>make.log 2>&1 || { tail -n 40 make.log; exit 1; }
done
for d in $dirs; do
    make -C "$d" install >>make.log 2>&1 || { tail -n 40 make.log; exit 1; }
done
# The headers UCX installs (public API); the configured source tree is what the plugin builds against.
make -C src/ucs install-data >/dev/null 2>&1 || true

version() { "$prefix/bin/ucx_info" -v | sed -n 's/^# \(Library version:\|Version\) //p' | head -n 1; }
if [ "$cuda" = none ]; then
    echo "UCX $(version) without CUDA in $prefix"
    exit 0
fi
moddir="$prefix/lib/ucx"
[ -e "$moddir/libuct_cuda.so.0" ] || { echo "build-reference-ucx: no libuct_cuda.so.0 in $moddir" >&2; exit 1; }
mkdir -p "$prefix/reference-module"
cp -L "$moddir/libuct_cuda.so.0" "$prefix/reference-module/libuct_cuda.so.0"
echo "reference UCX $(version) in $prefix"
"$prefix/bin/ucx_info" -b | grep -E '_MODULES'
