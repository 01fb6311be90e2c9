#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Prepares ./gpu-carry for gpu-host/run verify (and standard) on a GPU host that has no libtoolize and no package
# registry: the plugin's dist tarball, the UCX source of the installed version with configure generated, and
# googletest's sources (built there). Run from a configured build directory's source tree after
# test/run-all.sh (which leaves a configured ./build).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
carry=gpu-carry
mkdir -p "$carry"

ucx_src=$(sed -n 's/^UCX_SRC = //p' build/Makefile)
ucx_name=$(basename "$ucx_src")
[ -f "$carry/$ucx_name-src.tar.gz" ] || gpu-host/prepare/prepare-ucx-src.sh "$ucx_src" "$carry/$ucx_name-src.tar.gz"

rm -f "$carry"/uct-cuda-plugin-*.tar.gz
make -C build dist >/dev/null
mv build/uct-cuda-plugin-*.tar.gz "$carry/"

rm -rf "$carry/googletest"
cp -a /usr/src/googletest/googletest "$carry/googletest"

# Issue 4 (gpu-host/run stock-ucx): Debian's own UCX packages and what we built here against them.
stock="$carry/stock"
rm -rf "$stock"
mkdir -p "$stock"
(cd "$stock" && apt-get download -o APT::Sandbox::User=root libucx0 ucx-utils libibverbs1 librdmacm1 ibverbs-providers libnuma1 \
    >/dev/null 2>&1) || { echo "apt-get download of Debian's UCX packages failed" >&2; exit 1; }
make -C build -j"$(nproc)" all >/dev/null
make -C build -j"$(nproc)" check TESTS= >/dev/null
cp build/.libs/libuct_cuda.so.0 build/.libs/libcux_perftest.so build/.libs/libcux_memtype.so \
    build/ucx-cuda-run build/test/cux_ucp_datacheck "$stock/"
[ -x build/test/cux_ucp_datacheck_static_cudart ] && cp build/test/cux_ucp_datacheck_static_cudart "$stock/"
# gpu-host/run containers takes the same directory: the check program and the test binary, stripped (2 MB)
cp build/ucx-cuda-check "$stock/"
strip -o "$stock/cux_gtest" build/test/cux_gtest
du -sh "$carry"
