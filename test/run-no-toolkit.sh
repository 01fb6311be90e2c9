#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 49: a machine with no CUDA toolkit builds the module. In a mount namespace of its own, with /usr/local/cuda
# hidden (an empty tmpfs over it) and no cuda.h anywhere the compiler looks, this tree is configured (configure must
# say it found no toolkit), built with its tests, installed into a staging root, and the installed module must load
# into UCX (ucx_info -c lists its settings) and pass the mock driver's copy, cuda_ipc and parity suites of that
# build. Prints one line; exits 0, 1 on a failure, or 77 (skipped) when this process may not make a mount namespace
# (root) or the compiler finds a cuda.h outside /usr/local/cuda.
#
#   test/run-no-toolkit.sh [BUILDDIR]     (BUILDDIR: a configured tree, for the UCX it was configured with)
set -u
builddir=$(cd "${1:-${CUX_TEST_BUILDDIR:-$PWD}}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
logs="$builddir/test/logs"
log="$logs/no-toolkit.log"
work="$builddir/no-toolkit"
mkdir -p "$logs"
: >"$log"

if [ "$(id -u)" -ne 0 ] || ! unshare --mount true 2>/dev/null; then
    echo "no-toolkit: skipped: makes a mount namespace (unshare: root)"
    exit 77
fi
mk() { sed -n "s/^$1 = //p" "$builddir/Makefile"; }
prefix=$(mk UCX_PREFIX)
src=$(mk UCX_SRC)

# in the namespace: the steps, each ending the script with its own code on failure
unshare --mount --propagation private bash -c '
    set -u
    top=$1 work=$2 prefix=$3 src=$4
    [ ! -d /usr/local/cuda ] || mount -t tmpfs none /usr/local/cuda || exit 2
    echo "#include <cuda.h>" | ${CC:-cc} -E - >/dev/null 2>&1 && exit 3
    rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 4
    "$top/configure" --with-ucx="$prefix" --with-ucx-src="$src" >configure.log 2>&1 || exit 5
    grep -q "no CUDA 13 toolkit" configure.log || exit 6
    make -j"$(nproc)" >make.log 2>&1 || exit 7
    make -j"$(nproc)" check TESTS= >make-check.log 2>&1 || exit 8
    make install DESTDIR="$work/root" >install.log 2>&1 || exit 9
    module=$(find "$work/root" -name libuct_cuda.so.0 | head -n 1)
    [ -n "$module" ] && LD_PRELOAD=$module UCX_MODULES=^cuda "$prefix/bin/ucx_info" -c >ucx-info.log 2>&1 &&
        grep -q UCX_CUDA_IPC_SOCKET_DIR ucx-info.log || exit 10
    CUX_DRIVER_PATH="$work/test/.libs/libmockcuda.so" MOCK_CUDA_ASYNC=1 CUX_TEST_SUITE=mock CUX_TEST_REQUIRE_GPU=1 \
        UCX_MODULES=^cuda GTEST_FILTER="copy*:ipc_transport.*:parity*:cuda_abi*" \
        timeout -k 10 900 test/cux_gtest >gtest.log 2>&1 || exit 11
    exit 0
' no-toolkit "$top" "$work" "$prefix" "$src" >>"$log" 2>&1
rc=$?
case $rc in
0)
    echo "no-toolkit: with /usr/local/cuda hidden and no cuda.h anywhere, configured ($(grep -o 'no CUDA 13 toolkit' \
"$work/configure.log")), built with the tests, installed, the module loads (ucx_info -c), and the mock suites of that" \
         "build pass ($(grep -E '^\[  PASSED  \]' "$work/gtest.log" | grep -oE '[0-9]+') passed, none failed)"
    rm -rf "$work"
    ;;
3)
    echo "no-toolkit: skipped: the compiler finds a cuda.h outside /usr/local/cuda, which this test does not hide"
    exit 77
    ;;
*)
    what=(- - "hiding /usr/local/cuda" - "the build directory" configure "configure's word that there is no toolkit"
          make "make check's build" "make install" "loading the installed module" "the mock suites")
    echo "no-toolkit: FAILED at ${what[$rc]:-step $rc} (logs: $work/*.log, $log)"
    exit 1
    ;;
esac
