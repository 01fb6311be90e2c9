#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package, as a user meets it: contrib/build-deb.sh builds it, lintian judges it (where installed: no
# error and no warning), apt installs it, the installed
# ucx-cuda-run runs ucx_info -d and --check (on the mock driver of BUILDDIR, so that CUDA transports show), then
# apt removes it and UCX's own files must be as they were (dpkg --verify libucx0, the module directory's
# listing). A module installed by hand in UCX's module directory (contrib/quickstart.sh, the README's first
# command) must be set aside while the package is installed and be back, the same file and working, after its
# removal; where there is none, the build's module is put there for the test and taken away after it.
# Beside the installed package (issue 60), make install must refuse (it would overwrite the package's module) and
# make uninstall must leave the package whole and remove the hand install's module set aside, so that the
# package's removal puts nothing back; the user's own hand install is restored afterwards, file for file.
# Prints one line; exits 0, 1 on a failure, or 77 (skipped) when not root or not on Debian/Ubuntu.
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
# as dpkg names it: /usr/lib, where ldconfig may say /lib (merged /usr)
moddir=$(readlink -f "$(dirname "$(ldconfig -p | sed -n 's/.*libuct.so.0 .*=> //p' | head -n 1)")/ucx")
hand="$moddir/libuct_cuda.so.0"
placed=0
fail() {
    echo "deb: FAILED: $* (log: $log)"
    apt-get remove -y -qq uct-cuda-plugin >>"$log" 2>&1
    [ $placed = 0 ] || rm -f "$hand"
    exit 1
}

before=$(ls -l "$moddir" 2>&1)
dpkg --verify libucx0 >>"$log" 2>&1 || fail "libucx0 does not verify before the test"
if [ -e "$hand" ] && dpkg-query -S "$hand" >/dev/null 2>&1; then
    fail "$hand belongs to a package ($(dpkg-query -S "$hand" | tail -n 1)): remove it first"
elif [ ! -e "$hand" ]; then
    cp "$builddir/.libs/libuct_cuda.so.0" "$hand" && placed=1 || fail "could not place a module by hand"
    before=$(ls -l "$moddir" 2>&1)
fi
cp -L "$hand" "$logs/deb-hand-module.so"
echo "a module installed by hand: $(ls -l "$hand") ($([ $placed = 1 ] && echo "placed by the test" ||
    echo "the user's"))" >>"$log"

deb=$("$top/contrib/build-deb.sh" "$builddir/deb" 2>>"$log" | tail -n 1)
[ -f "$deb" ] || fail "the package did not build"
echo "built $deb: $(dpkg-deb -f "$deb" Depends)" >>"$log"
# every file the .changes lists is beside it (debsign and dput need them all), and the man page ships once
for f in $(awk '/^Files:/ {on = 1; next} /^[^ ]/ {on = 0} on {print $5}' "$(dirname "$deb")"/uct-cuda-plugin_*.changes); do
    [ -f "$(dirname "$deb")/$f" ] || fail "the .changes lists $f, which contrib/build-deb.sh did not copy out"
done
[ "$(dpkg-deb -c "$deb" | grep -c 'ucx-cuda-run\.1')" = 1 ] || fail "the man page ships more than once"
dpkg-deb -f "$deb" Depends | grep -q "libucx0 (= $(dpkg-query -W -f='${Version}' libucx0))" ||
    fail "the package does not depend on exactly the installed libucx0"
# the package as Debian judges it, where lintian is installed (contrib/install-deps.sh installs it)
judged="lintian not installed"
if command -v lintian >/dev/null 2>&1; then
    lintian --fail-on error,warning "$deb" >"$logs/deb-lintian.log" 2>&1 ||
        { cat "$logs/deb-lintian.log" >>"$log"; fail "lintian finds errors or warnings: $(head -n 3 "$logs/deb-lintian.log" | tr '\n' ' ')"; }
    judged="lintian clean"
fi

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$logs/deb-install.log" 2>&1 ||
    { cat "$logs/deb-install.log" >>"$log"; fail "apt-get install"; }
cat "$logs/deb-install.log" >>"$log"
for f in "$moddir/libuct_cuda.so.0" /usr/bin/ucx-cuda-run; do
    [ -e "$f" ] || fail "$f is not installed"
done
grep -q "was installed by hand: kept as $hand.by-hand" "$logs/deb-install.log" ||
    fail "the package did not say it set the module installed by hand aside"
[ "$(dpkg-divert --listpackage "$hand")" = uct-cuda-plugin ] || fail "no diversion of $hand"
dpkg-query -S "$hand" 2>/dev/null | grep -q '^uct-cuda-plugin: ' || fail "$hand is not the package's"
mock="CUX_DRIVER_PATH=$builddir/test/.libs/libmockcuda.so"
env $mock ucx-cuda-run ucx_info -d >"$logs/deb-ucx-info.log" 2>&1 || fail "ucx-cuda-run ucx_info -d"
grep -q 'Transport: cuda_copy' "$logs/deb-ucx-info.log" || fail "ucx_info -d shows no cuda_copy"
grep -q 'Transport: cuda_ipc' "$logs/deb-ucx-info.log" || fail "ucx_info -d shows no cuda_ipc"
env $mock ucx-cuda-run --check >"$logs/deb-check.log" 2>&1 || { cat "$logs/deb-check.log" >>"$log"; fail "ucx-cuda-run --check"; }
ucx-cuda-run --check >>"$logs/deb-check.log" 2>&1 # the system driver: no GPU here, FAIL lines expected

DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq uct-cuda-plugin >>"$log" 2>&1 || fail "apt-get remove"
[ ! -e /usr/bin/ucx-cuda-run ] || fail "ucx-cuda-run is still there after removal"
[ "$(ls -l "$moddir" 2>&1)" = "$before" ] || fail "UCX's module directory changed: $(ls -l "$moddir")"
cmp -s "$hand" "$logs/deb-hand-module.so" || fail "the module installed by hand did not come back as it was"
[ -z "$(dpkg-divert --listpackage "$hand")" ] || fail "a diversion of $hand is left"
env $mock CUX_MODULE="$hand" CUX_PERFTEST_LIB="$builddir/.libs/libcux_perftest.so" \
    CUX_MEMTYPE_LIB="$builddir/.libs/libcux_memtype.so" "$builddir/ucx-cuda-run" ucx_info -d \
    >"$logs/deb-hand-ucx-info.log" 2>&1 &&
    grep -q 'Transport: cuda_ipc' "$logs/deb-hand-ucx-info.log" || fail "the module installed by hand does not load"
dpkg --verify libucx0 >>"$log" 2>&1 || fail "libucx0 does not verify after removal"

# Beside the package: make install refused, make uninstall leaves it whole. The hand install's module files are
# kept in a scratch directory for the end (make uninstall removes them); its other files go to a scratch prefix.
scratch=$(mktemp -d)
hand_files=$(cd "$moddir" && ls -d libuct_cuda.* 2>/dev/null)
(cd "$moddir" && cp -a $hand_files "$scratch/") || fail "could not keep the module installed by hand"
restore_hand() {
    (cd "$scratch" && cp -a $hand_files "$moddir/") && rm -rf "$scratch"
}
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >>"$log" 2>&1 || { restore_hand; fail "apt-get install, again"; }
if make -C "$builddir" install prefix="$scratch/prefix" >"$logs/deb-make-install.log" 2>&1; then
    restore_hand; fail "make install beside the package did not refuse"
fi
cat "$logs/deb-make-install.log" >>"$log"
grep -q "is the package uct-cuda-plugin's module: make install would overwrite it" "$logs/deb-make-install.log" ||
    { restore_hand; fail "make install beside the package did not say why it refused"; }
[ ! -e "$scratch/prefix" ] || { restore_hand; fail "make install beside the package installed something"; }
# automake's uninstall enters each directory it removes from
mkdir -p "$scratch"/prefix/{bin,lib/uct-cuda-plugin,libexec/uct-cuda-plugin,share/man/man1,include/uct/cuda/cuda_ipc}
make -C "$builddir" uninstall prefix="$scratch/prefix" >"$logs/deb-make-uninstall.log" 2>&1 ||
    { cat "$logs/deb-make-uninstall.log" >>"$log"; restore_hand; fail "make uninstall beside the package"; }
cat "$logs/deb-make-uninstall.log" >>"$log"
dpkg --verify uct-cuda-plugin >>"$log" 2>&1 || { restore_hand; fail "make uninstall changed the package's files"; }
[ ! -e "$hand.by-hand" ] || { restore_hand; fail "make uninstall left the module the package set aside"; }
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq uct-cuda-plugin >>"$log" 2>&1 || { restore_hand; fail "apt-get remove, again"; }
left=$(cd "$moddir" && ls -d libuct_cuda.* 2>/dev/null)
[ -z "$left" ] || { restore_hand; fail "after make uninstall and the package's removal, left: $left"; }
[ -z "$(dpkg-divert --listpackage "$hand")" ] || { restore_hand; fail "a diversion of $hand is left, again"; }
restore_hand
[ "$(ls -l "$moddir" 2>&1)" = "$before" ] || fail "the module installed by hand was not restored: $(ls -l "$moddir")"
[ $placed = 0 ] || rm -f "$hand"
echo "deb: $(basename "$deb") built ($judged), installed (the module installed by hand set aside), checked (ucx_info -d lists" \
     "cuda_copy and cuda_ipc; --check all OK on the mock), removed (the module installed by hand back and loading);" \
     "beside it make install refused and make uninstall left it whole; UCX as it was"
