#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds UCX's own gtest with CUDA so that it can run against UCX's CUDA module and against ours (issue 20,
# item 3). UCX's source comes from its release tag (a tarball or a checked-out tree, kept in an ignored path;
# nothing of it enters this repository). In that copy, the four gtest files that include UCX's CUDA-module
# internals and the gtest link to libuct_cuda.la are taken out, so the test binary reaches the CUDA module only
# through UCT, as applications do; the .cu device tests are left out too (no nvcc).
# CUX_UCX_GTEST_DEVICE=1 keeps them (UCX 1.21+, issue 33): UCX and its tests are built with nvcc for
# CUX_NVCC_GENCODE (default sm_90 alone, which keeps the build short), and the two helpers the device tests call
# from UCX's module come from gpu-host/prepare/ucx-gtest-cuda-shim.c instead; only the device tests are built.
#
#   gpu-host/prepare/build-ucx-gtest.sh UCX_SRC_DIR_OR_TARBALL PREFIX [CUDA_DIR]
#
# Result: UCX with CUDA and assertions installed in PREFIX, UCX's module copied to PREFIX/reference-module,
# and the test binary in PREFIX/gtest/gtest. Any machine with the CUDA toolkit builds it (the dev machine's
# stub libcuda is enough); gpu-host/run ucx-gtest runs it. UCX 1.22 also needs NVML's header and a
# library to link: where the toolkit has none (the dev machine), give them in CUX_UCX_CONFIGURE_EXTRA, e.g.
# "CPPFLAGS=-I/dir/with/nvml.h LDFLAGS=-L/dir/with/libnvidia-ml.so" (Debian's libnvidia-ml-dev has the header;
# a link stub will do, the GPU host's driver library is the one that runs).
set -euo pipefail
src=$1
prefix=$2
cuda=${3:-/usr/local/cuda}
jobs=$(nproc)

. "$(dirname "$0")/../../contrib/ucx-src-dir.sh"
src=$(ucx_src_dir "$src")
am=$src/test/gtest/Makefile.am
[ -f "$am" ] || { echo "build-ucx-gtest: $src has no test/gtest" >&2; exit 1; }

# Take out what reaches into UCX's CUDA module from the test binary.
for f in uct/cuda/test_cuda_ipc_md.cc uct/cuda/test_cuda_nvml.cc uct/cuda/test_switch_cuda_device.cc \
         uct/cuda/test_cuda_ctx_cleanup.cc; do
    sed -i "\|^[[:space:]]*${f}|d" "$am"
done
sed -i 's|[[:space:]]*\$(top_builddir)/src/uct/cuda/libuct_cuda.la||' "$am"
# A line continued into a removed line would swallow the next statement: close such lists.
perl -0pi -e 's/\\\n([ \t]*\n)/\n$1/g' "$am"
if grep -qE 'test_cuda_(ipc_md|nvml|ctx_cleanup)|test_switch_cuda_device|libuct_cuda\.la' "$am"; then
    echo "build-ucx-gtest: could not take the CUDA-module internals out of $am" >&2; exit 1
fi
nvcc_args=(ac_cv_path_NVCC=)
if [ "${CUX_UCX_GTEST_DEVICE:-0}" = 1 ]; then
    grep -q 'test_cuda_ipc_device.cc' "$am" ||
        { echo "build-ucx-gtest: $src has no device tests (UCX 1.21+)" >&2; exit 1; }
    cp "$(dirname "$0")/ucx-gtest-cuda-shim.c" "$src/test/gtest/uct/cuda/cux_cuda_shim.c"
    sed -i 's|^\([[:space:]]*\)uct/cuda/test_cuda_ipc_device.cc \\|&\n\1uct/cuda/cux_cuda_shim.c \\|' "$am"
    grep -q 'cux_cuda_shim.c' "$am" || { echo "build-ucx-gtest: could not add the shim to $am" >&2; exit 1; }
    nvcc_args=(NVCC="$cuda/bin/nvcc" --with-nvcc-gencode="${CUX_NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}")
    # UCX's device headers include its GPU-initiated InfiniBand code wherever rdma-core's mlx5dv.h is installed, and
    # that code needs DOCA's headers: where DOCA is missing (the dev machine), CUX_UCX_GTEST_HIDE_MLX5DV=1 moves the
    # header aside for the build and back at the end
    mlx5dv=/usr/include/infiniband/mlx5dv.h
    if [ "${CUX_UCX_GTEST_HIDE_MLX5DV:-0}" = 1 ] && [ -f "$mlx5dv" ]; then
        mv "$mlx5dv" "$mlx5dv.cux-hidden"
        trap 'mv "$mlx5dv.cux-hidden" "$mlx5dv"' EXIT
    fi
fi
(cd "$src" && ./autogen.sh >/dev/null 2>&1) || { echo "build-ucx-gtest: autogen.sh failed in $src" >&2; exit 1; }

build="$src/build-gtest"
mkdir -p "$build"
cd "$build"
"$src/configure" --prefix="$prefix" --with-cuda="$cuda" --without-java --without-go --disable-doxygen-doc \
    --enable-mt --enable-gtest --enable-assertions --disable-debug --without-verbs --without-rdmacm \
    "${nvcc_args[@]}" ${CUX_UCX_CONFIGURE_EXTRA:-} CFLAGS="-O2 -g0 -Wno-error" CXXFLAGS="-O2 -g0 -Wno-error" >configure.log 2>&1 ||
    { tail -n 30 configure.log; exit 1; }
grep -q '^#define HAVE_CUDA 1' config.h || { echo "build-ucx-gtest: configure found no CUDA" >&2; exit 1; }
if [ "${CUX_UCX_GTEST_DEVICE:-0}" = 1 ] && ! grep -q '^NVCC = .' test/gtest/Makefile; then
    echo "build-ucx-gtest: configure rejected nvcc (config.log)" >&2; exit 1
fi

# RUNPATH rather than RPATH, so that LD_LIBRARY_PATH can choose the copy of UCX (and so the module) it runs with
ldflags="$(sed -n 's/^LDFLAGS = //p' test/gtest/Makefile) -Wl,--enable-new-dtags"
fail() { tail -n 40 make.log; exit 1; }
if [ "${CUX_UCX_GTEST_DEVICE:-0}" = 1 ]; then
    # UCX's libraries and tools, then a gtest of the device tests and the framework they need alone (the whole
    # gtest takes most of an hour on two cores)
    for d in src/ucm src/ucs src/uct src/ucp src/tools/vfs src/tools/info src/tools/perf config cmake; do
        make -C "$d" -j"$jobs" install >>make.log 2>&1 || fail
    done
    make install-data-am >>make.log 2>&1 || fail
    make -C test/gtest/common/googletest -j"$jobs" >>make.log 2>&1 || fail
    rules=$(make -C test/gtest -pn gtest 2>/dev/null)
    objs="$(echo "$rules" | sed -n 's/^am_gtest_OBJECTS = //p' | tr ' ' '\n' |
                grep -E '^(common/|uct/gtest-uct_(p2p_)?test\.|ucp/gtest-ucp_(test|datatype)\.)')
          $(echo "$rules" | grep -E '^am__objects_[0-9]+ = .*test_cuda_ipc_device' | sed 's/^[^=]*= //')"
    objs=$(echo $objs | sed 's/\$(OBJEXT)/o/g')
    make -C test/gtest -j"$jobs" gtest am_gtest_OBJECTS="$objs" LDFLAGS="$ldflags" >>make.log 2>&1 || fail
else
    make -j"$jobs" >make.log 2>&1 || fail
    make install >>make.log 2>&1 || fail
    make -C test/gtest -j"$jobs" gtest LDFLAGS="$ldflags" >>make.log 2>&1 || fail
fi

mkdir -p "$prefix/reference-module" "$prefix/gtest"
cp -L "$prefix/lib/ucx/libuct_cuda.so.0" "$prefix/reference-module/libuct_cuda.so.0"
# libtool leaves the program itself in .libs/ when it links UCX's libraries as uninstalled shared ones
if [ -f test/gtest/.libs/gtest ]; then cp test/gtest/.libs/gtest "$prefix/gtest/gtest"; else cp test/gtest/gtest "$prefix/gtest/gtest"; fi
strip "$prefix/gtest/gtest"
echo "UCX gtest $("$prefix/bin/ucx_info" -v | sed -n 's/^# \(Library version:\|Version\) //p' | head -n 1) in $prefix"
