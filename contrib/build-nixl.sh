#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds NIXL as its users build it from source (issue 46): meson and ninja, its UCX backend against an
# installed UCX, its tests, and nixlbench with the ASIO runtime (two processes, no etcd):
#
#   contrib/build-nixl.sh NIXL_TREE UCX_PREFIX DEST
#
# NIXL_TREE is NIXL's source tree at a release tag; its subprojects (Abseil, asio, taskflow) are downloaded by
# meson, or are already in NIXL_TREE/subprojects on a machine without network (gpu-host/prepare/nixl-sources-from-git.sh).
# UCX_PREFIX is the UCX NIXL links to: the UCP API is the same with or without CUDA, so a UCX of the same
# release built without CUDA serves for the build, and the CUDA-built one of that release runs it
# (LD_LIBRARY_PATH). Installs NIXL (a release build), its UCX plugin and nixlbench into DEST, copies
# the shared libraries nixlbench needs that an Ubuntu 24.04 GPU host lacks (gflags) to DEST/lib, and builds
# NIXL's tests as NIXL's CI does (a debug build) into DEST/debug (CUX_NIXL_TESTS=0 leaves them out). Needs
# meson >= 0.64, ninja, a CUDA toolkit with libcudart (CUDA_HOME, default /usr/local/cuda), googletest and
# gmock, gflags, pybind11 (Debian 12: meson libgtest-dev libgmock-dev libgflags-dev pybind11-dev).
# CUX_NIXL_CUDA_ARCH (default 90) picks the GPU code NIXL compiles; CUX_NIXL_JOBS the
# build's parallelism. Only the UCX plugin is built: the others need what this project does not test.
set -euo pipefail
usage="usage: build-nixl.sh NIXL_TREE UCX_PREFIX DEST"
tree=$(cd "${1:?$usage}" && pwd)
ucx=${2:?$usage}
dest=${3:?$usage}
cuda=${CUDA_HOME:-/usr/local/cuda}
jobs=${CUX_NIXL_JOBS:-$(nproc)}
arch=${CUX_NIXL_CUDA_ARCH:-90}
build="$tree/build-cux"
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

# gcc 12 (Debian 12) warns where NIXL's CI compilers do not: warnings stay warnings.
common=(-Dwerror=false --libdir=lib)
# Subprojects already in the tree (a machine without network): meson must not try to download the optional
# others (liburing, prometheus-cpp), which NIXL then builds without.
ls -d "$tree"/subprojects/abseil-cpp-*/ >/dev/null 2>&1 && common+=(--wrap-mode=nodownload)
# Debian 12's toml++ 3.3.0 has no toml++/toml.hpp, which NIXL includes: NIXL's own wrap (3.4.0) is used.
common+=(--force-fallback-for=tomlplusplus)
# nixlbench finds the NIXL just installed
common+=(-Dpkg_config_path="$dest/lib/pkgconfig")
# A build directory is set up once; one set up earlier is pointed at this call's options instead (its prefix and
# paths: another DEST would otherwise get nothing, the install going to the first one's).
meson_dir() { # BUILD SOURCE OPTIONS...
    local build=$1 src=$2
    shift 2
    if [ -f "$build/build.ninja" ]; then
        meson configure "$build" "$@" >/dev/null
    else
        meson setup "$build" "$src" "$@"
    fi
}
meson_dir "$build" "$tree" "${common[@]}" --buildtype=release --prefix="$dest" -Ducx_path="$ucx" \
    -Denable_plugins=UCX -Dcudapath_inc="$cuda/include" -Dcudapath_lib="$cuda/lib64" -Dnixl_cuda_arch_list="$arch" \
    -Dbuild_examples=false -Dbuild_docs=false -Dinstall_headers=true
ninja -C "$build" -j"$jobs"
ninja -C "$build" install >/dev/null

bench="$tree/benchmark/nixlbench/build-cux"
meson_dir "$bench" "$tree/benchmark/nixlbench" "${common[@]}" --buildtype=release --prefix="$dest" \
    -Dnixl_path="$dest" -Dcudapath_inc="$cuda/include" -Dcudapath_lib="$cuda/lib64"
ninja -C "$bench" -j"$jobs"
ninja -C "$bench" install >/dev/null
cp -L "$(ldconfig -p | sed -n 's/.*libgflags\.so\.[0-9.]* .*=> //p' | head -n 1)" "$dest/lib/" 2>/dev/null || true

# NIXL's tests build only in a build that is not a release one; NIXL's CI builds them with --buildtype=debug
# and runs the installed bin/gtest. The same here, installed into DEST/debug; the mock plugins the tests load
# (--tests_plugin_dirs) go to DEST/debug/lib/gtest-plugins. NIXL 1.4.0 gives HAVE_CUDA to its tests' C++ sources
# only, so its device-API tests (.cu) would always find "no CUDA-capable GPU" and skip: cuda_args gives it to them.
if [ "${CUX_NIXL_TESTS:-1}" = 1 ]; then
    tests="$tree/build-cux-debug"
    meson_dir "$tests" "$tree" "${common[@]}" --buildtype=debug --prefix="$dest/debug" \
        -Ducx_path="$ucx" -Denable_plugins=UCX -Dcudapath_inc="$cuda/include" -Dcudapath_lib="$cuda/lib64" \
        -Dnixl_cuda_arch_list="$arch" -Dbuild_examples=false -Dbuild_docs=false -Dcuda_args=-DHAVE_CUDA
    ninja -C "$tests" -j"$jobs"
    ninja -C "$tests" install >/dev/null
    mkdir -p "$dest/debug/lib/gtest-plugins"
    find "$tests/test/gtest/mocks" -name '*.so' -exec cp {} "$dest/debug/lib/gtest-plugins/" \;
fi
echo "NIXL $(sed -n "s/^project('nixl', 'CPP', version: '\([^']*\)'.*/\1/p" "$tree/meson.build") in $dest:"
ls "$dest/bin" "$dest/lib/plugins" "$dest/debug/bin" 2>/dev/null || true # no debug/ with CUX_NIXL_TESTS=0
