#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make distcheck of the configured tree BUILDDIR: the release tarball configures and builds out of a read-only
# source tree, passes the suites against the system driver (the mock, fuzz and sanitizer suites run in the main
# build), installs, uninstalls and cleans without leaving files. One test: prints one line; exits 0 or 1.
#
#   test/run-distcheck.sh [BUILDDIR]
set -u
builddir=$(cd "${1:-${CUX_TEST_BUILDDIR:-$PWD}}" && pwd)
logs="$builddir/test/logs"
log="$logs/distcheck.log"
mkdir -p "$logs"

# the inner check must not recurse, install the package, or look for the sanitizer builds
if env -u CUX_TEST_DISTCHECK -u CUX_TEST_DEB -u CUX_TEST_ASAN_BUILDDIR -u CUX_TEST_TSAN_BUILDDIR -u CUX_TEST_BUILDDIR \
       CUX_TEST_NO_MOCK=1 make -C "$builddir" distcheck >"$log" 2>&1; then
    echo "distcheck: $(grep -m1 -o 'uct-cuda-plugin-[0-9.]* archives ready for distribution' "$log" || echo passed)"
    exit 0
fi
echo "distcheck: FAILED (log: $log)"
tail -n 20 "$log"
exit 1
