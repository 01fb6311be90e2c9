#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The module the README's first command installed (contrib/quickstart.sh: make install into UCX's module
# directory, ucx-cuda-run into the PATH) still loads after the tests: run last by test/run-tests.sh, after the
# package test has set it aside and put it back. The installed ucx-cuda-run must list cuda_copy and cuda_ipc on
# the mock driver of BUILDDIR; the first command must have ended saying where its logs are and what to run next,
# and left its apt sources entry readable by everyone. Prints one line; exits 0, 1 on a failure, or 77 (skipped)
# when no module was installed by hand (none there, or the file is a package's).
#
#   test/run-installed.sh [BUILDDIR]
set -u
builddir=$(cd "${1:-${CUX_TEST_BUILDDIR:-$PWD}}" && pwd)
log="$builddir/test/logs/installed.log"
mkdir -p "$(dirname "$log")"

libuct=$(ldconfig -p 2>/dev/null | sed -n 's/.*libuct.so.0 .*=> //p' | head -n 1)
module=$(readlink -f "$(dirname "${libuct:-/nonexistent/x}")/ucx")/libuct_cuda.so.0
if [ ! -e "$module" ]; then
    echo "installed: skipped: no module installed by hand in UCX's module directory" \
         "(contrib/quickstart.sh installs one)"
    exit 77
elif command -v dpkg-query >/dev/null && dpkg-query -S "$module" 2>/dev/null | grep -q '^[a-z0-9.+-]*: '; then
    echo "installed: skipped: $module belongs to a package"
    exit 77
fi
launcher=$(command -v ucx-cuda-run) || { echo "installed: FAILED: $module is there but ucx-cuda-run is not in PATH"; exit 1; }
# what the first command said last (contrib/quickstart.sh keeps it in build/quickstart.log): where its logs are
# and what to run next; and the apt sources entry contrib/install-deps.sh wrote, readable by everyone
said="$builddir/quickstart.log"
if [ -f "$said" ] && ! { grep -q 'build/make.log' "$said" && grep -q 'Next:' "$said" && grep -q 'test/run-all.sh' "$said"; }; then
    echo "installed: FAILED: contrib/quickstart.sh did not end with its logs and the next steps ($said)"
    exit 1
fi
# and how to undo it: the packages contrib/install-deps.sh installed are listed, each still installed
added="$(dirname "$builddir")/deps/installed-packages.txt"
if [ -f "$said" ] && ! { grep -q 'To undo it' "$said" && [ -f "$added" ]; }; then
    echo "installed: FAILED: contrib/quickstart.sh did not say how to undo it, or $added is missing"
    exit 1
fi
for p in $(cat "$added" 2>/dev/null); do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' ||
        { echo "installed: FAILED: $added lists $p, which is not installed"; exit 1; }
done
sources=/etc/apt/sources.list.d/uct-cuda-deb-src.sources
if [ -e "$sources" ] && [ "$(stat -c %a "$sources")" != 644 ]; then
    echo "installed: FAILED: $sources is mode $(stat -c %a "$sources"), not 644"
    exit 1
fi
CUX_DRIVER_PATH="$builddir/test/.libs/libmockcuda.so" UCX_MODULES= "$launcher" ucx_info -d >"$log" 2>&1
if grep -q 'Transport: cuda_copy' "$log" && grep -q 'Transport: cuda_ipc' "$log"; then
    echo "installed: $module still loads: $launcher ucx_info -d lists cuda_copy and cuda_ipc (mock driver)"
else
    echo "installed: FAILED: $launcher ucx_info -d lists no cuda_copy or cuda_ipc with $module (log: $log)"
    exit 1
fi
