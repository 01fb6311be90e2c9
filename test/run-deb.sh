#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package, as a user meets it: contrib/build-deb.sh builds it, apt installs it, the installed
# ucx-cuda-run runs ucx_info -d and --check (on the mock driver of BUILDDIR, so that CUDA transports show), then
# apt removes it and UCX's own files must be as they were (dpkg --verify libucx0, the module directory's
# listing). Prints one line; exits 0, 1 on a failure, or 77 (skipped) when not root or not on Debian/Ubuntu.
#
#   test/run-deb.sh [BUILDDIR]
set -u
builddir=$(cd "${1:-${CUX_TEST_BUILDDIR:-$PWD}}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
logs="$builddir/test/logs"
log="$logs/deb.log"
mkdir -p "$logs"
: >"$log"

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-buildpackage >/dev/null 2>&1; then
    echo "deb: skipped: needs root, apt-get and dpkg-buildpackage (contrib/install-deps.sh)"
    exit 77
fi
fail() { echo "deb: FAILED: $* (log: $log)"; apt-get remove -y -qq uct-cuda-plugin >>"$log" 2>&1; exit 1; }

moddir=$(dirname "$(ldconfig -p | sed -n 's/.*libuct.so.0 .*=> //p' | head -n 1)")/ucx
before=$(ls -l "$moddir" 2>&1)
dpkg --verify libucx0 >>"$log" 2>&1 || fail "libucx0 does not verify before the test"

deb=$("$top/contrib/build-deb.sh" "$builddir/deb" 2>>"$log" | tail -n 1)
[ -f "$deb" ] || fail "the package did not build"
echo "built $deb: $(dpkg-deb -f "$deb" Depends)" >>"$log"
dpkg-deb -f "$deb" Depends | grep -q "libucx0 (= $(dpkg-query -W -f='${Version}' libucx0))" ||
    fail "the package does not depend on exactly the installed libucx0"

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >>"$log" 2>&1 || fail "apt-get install"
for f in "$moddir/libuct_cuda.so.0" /usr/bin/ucx-cuda-run; do
    [ -e "$f" ] || fail "$f is not installed"
done
mock="CUX_DRIVER_PATH=$builddir/test/.libs/libmockcuda.so"
env $mock ucx-cuda-run ucx_info -d >"$logs/deb-ucx-info.log" 2>&1 || fail "ucx-cuda-run ucx_info -d"
grep -q 'Transport: cuda_copy' "$logs/deb-ucx-info.log" || fail "ucx_info -d shows no cuda_copy"
grep -q 'Transport: cuda_ipc' "$logs/deb-ucx-info.log" || fail "ucx_info -d shows no cuda_ipc"
env $mock ucx-cuda-run --check >"$logs/deb-check.log" 2>&1 || { cat "$logs/deb-check.log" >>"$log"; fail "ucx-cuda-run --check"; }
ucx-cuda-run --check >>"$logs/deb-check.log" 2>&1 # the system driver: no GPU here, FAIL lines expected

DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq uct-cuda-plugin >>"$log" 2>&1 || fail "apt-get remove"
[ ! -e /usr/bin/ucx-cuda-run ] || fail "ucx-cuda-run is still there after removal"
[ "$(ls -l "$moddir" 2>&1)" = "$before" ] || fail "UCX's module directory changed: $(ls "$moddir")"
dpkg --verify libucx0 >>"$log" 2>&1 || fail "libucx0 does not verify after removal"
echo "deb: $(basename "$deb") built, installed, checked (ucx_info -d lists cuda_copy and cuda_ipc; --check all OK on the mock), removed; UCX as it was"
