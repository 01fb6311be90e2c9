#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Set up, build, install, and show the CUDA transports (README, quick start step 1).
#
#   contrib/quickstart.sh                # system UCX (/usr), dependencies from the distribution's packages
#   UCX_PREFIX=/opt/ucx UCX_SRC=/src/ucx-1.13.1 contrib/quickstart.sh
#
# Runs a short host-to-GPU transfer demo through libuct when a GPU is present.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
prefix=${UCX_PREFIX:-/usr}
# what this script says is kept in build/quickstart.log too (the README's test command checks its last lines)
mkdir -p build
exec > >(tee build/quickstart.log) 2>&1

if [ -z "${UCX_SRC:-}" ]; then
    src_line=$(contrib/install-deps.sh deps | tail -n 1)
    UCX_SRC=${src_line##*source tree: }
fi
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build
cd build
../configure --with-ucx="$prefix" --with-ucx-src="$UCX_SRC" >configure.log 2>&1 ||
    { tail -n 20 configure.log; echo "quickstart: configure failed: build/configure.log"; exit 1; }
make -j"$(nproc)" >make.log 2>&1 || { tail -n 30 make.log; echo "quickstart: the build failed: build/make.log"; exit 1; }
moduledir=$(sed -n 's/^moduledir = //p' Makefile)
# make install writes into UCX's module directory, which is root's (and a launcher into /usr/local/bin)
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "quickstart: built in build/; installing writes $moduledir, which needs root: run this as root, or" \
             "'sudo make -C build install'" >&2
        exit 1
    fi
    sudo="sudo"
    echo "quickstart: installing into $moduledir with sudo"
fi
$sudo make install >install.log 2>&1 || { tail -n 20 install.log; echo "quickstart: make install failed: build/install.log"; exit 1; }
module="$moduledir/libuct_cuda.so.0"
echo "installed $module"

# A UCX whose module list has no 'cuda' (stock distribution packages before 1.22) needs the preload.
preload=""
if ! UCX_MODULES=^cuda "$prefix/bin/ucx_info" -b | grep -q 'uct_MODULES.*:cuda'; then
    preload=$module
    # bindir as make expands it (the Makefile holds "${exec_prefix}/bin")
    bindir=$(printf 'cux-print-bindir:\n\t@echo $(bindir)\n' | make -s --no-print-directory -f Makefile -f - cux-print-bindir | tail -n 1)
    echo "this UCX does not load a cuda module by itself: run programs with $bindir/ucx-cuda-run"
    echo "(or set LD_PRELOAD=$module and UCX_MEMTYPE_CACHE=n)"
fi

echo "--- ucx_info -d (CUDA transports)"
LD_PRELOAD=$preload "$prefix/bin/ucx_info" -d | grep -B1 -A12 -E 'Component: cuda_(cpy|ipc)' ||
    echo "(no CUDA transport resources: no GPU or no driver on this host)"
echo "--- ucx_info -c (CUDA_COPY and CUDA_IPC variables)"
LD_PRELOAD=$preload "$prefix/bin/ucx_info" -c | grep -E 'CUDA_(COPY|IPC)_'

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ ! -e /usr/include/gtest/gtest.h ]; then
    echo "--- GPU demo: the tests' packages are not installed (contrib/install-deps.sh --tests); the launcher's check:"
    ./ucx-cuda-run --check || true
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "--- GPU demo: host <-> GPU transfers through libuct"
    make -j"$(nproc)" check TESTS= >check-build.log 2>&1 || { tail -n 20 check-build.log; exit 1; }
    UCX_MODULES=^cuda ./test/cux_gtest --gtest_filter='copy.memory_type_detection:copy.put_zcopy_registered_local'
else
    echo "--- no GPU here: skipping the transfer demo"
fi
cat <<EOT
--- done. The build's logs: build/configure.log, build/make.log, build/install.log; this: build/quickstart.log. Next:
    test/run-all.sh                       every test (the mock driver stands in for a GPU where there is none)
    ucx-cuda-run --check                  on a GPU host: whether everything is in place
    UCX_TLS=self,sm,cuda_copy,cuda_ipc ucx-cuda-run ucx_perftest ...   (README, "Running programs")
    make -C build test/libmockcuda.la && CUX_DRIVER_PATH=\$PWD/build/test/.libs/libmockcuda.so ucx-cuda-run ucx_info -d
                                          without a GPU: the tests' mock driver's two GPUs
To undo it (as root): make -C build uninstall; apt-get remove \$(cat deps/installed-packages.txt) (the packages
it installed); rm /etc/apt/sources.list.d/uct-cuda-deb-src.sources (the source entry, where it added one).
EOT
