#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The route into NIXL's pip wheel (contrib/nixl-pip-module.sh, docs/install.md "NIXL from pip"), without PyPI: the
# wheel's layout is made from a UCX installed at UCX_PREFIX (1.22 or later, as NIXL's wheels bundle) the way
# auditwheel and NIXL's wheel_add_ucx_plugins.py make it (libucs-HASH.so.0.0.0 and the rest, each naming the
# others by those names and finding them by $ORIGIN; UCX's modules in ucx/ under the same names), and our module,
# built against that UCX and its source, is put in with the script. Then, on the mock driver: --check with
# UCX_PLUGIN_PATH set must list cuda_cpy and cuda_ipc from our file (and the libraries of the layout only: no
# second UCX), without it not; a module built for another release is refused. Prints one line; exits 0, 1 on a
# failure, 77 (skipped) without patchelf or a UCX of 1.22 or later.
#
#   test/run-nixl-pip.sh UCX_PREFIX UCX_SRC [BUILDDIR]     (BUILDDIR: the build of this tree, for the mock driver
#                                                           and a module of another release; default ./build)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(cd "${1:?usage: test/run-nixl-pip.sh UCX_PREFIX UCX_SRC [BUILDDIR]}" && pwd)
ucx_src=$(cd "${2:?usage: test/run-nixl-pip.sh UCX_PREFIX UCX_SRC [BUILDDIR]}" && pwd)
builddir=$(cd "${3:-build}" && pwd)
work=$(mktemp -d)
mkdir -p "$builddir/test/logs"
log="$builddir/test/logs/nixl-pip.log"
: >"$log"
fail() { echo "nixl-pip: FAILED: $* (log: $log)"; exit 1; }
command -v patchelf >/dev/null 2>&1 || { echo "nixl-pip: skipped: needs patchelf"; exit 77; }
libdir=$(dirname "$(find "$prefix" -name 'libucs.so.0' | head -n 1)")
[ -f "$libdir/libucp.so.0" ] || { echo "nixl-pip: skipped: no UCX at $prefix"; exit 77; }

# our module against that UCX
mkdir -p "$work/build"
(cd "$work/build" && "$top/configure" --with-ucx="$prefix" --with-ucx-src="$ucx_src" --without-cuda >>"$log" 2>&1 &&
    make -j"$(nproc)" libuct_cuda.la >>"$log" 2>&1) || fail "building the module against $prefix"

# the wheel's layout: site/nixl_cu13.libs, every library renamed LIB-HASH.so.0.0.0
libs="$work/site/nixl_cu13.libs"
mkdir -p "$libs/ucx"
declare -A renamed
for name in libucm libucs libuct libucp; do
    renamed[$name]="$name-$(echo "$name" | md5sum | cut -c1-8).so.0.0.0"
    cp -L "$libdir/$name.so.0" "$libs/${renamed[$name]}"
    patchelf --set-soname "${renamed[$name]}" "$libs/${renamed[$name]}"
done
relink() { # FILE RPATH: the file names the layout's libraries, found there
    local name
    for name in libucm libucs libuct libucp; do
        patchelf --replace-needed "$name.so.0" "${renamed[$name]}" "$1"
    done
    patchelf --set-rpath "$2" "$1"
}
for name in libucm libucs libuct libucp; do
    relink "$libs/${renamed[$name]}" '$ORIGIN'
done
for m in "$libdir"/ucx/lib*.so.0; do
    cp -L "$m" "$libs/ucx/$(basename "$m" .so.0).so.0.0.0"
    relink "$libs/ucx/$(basename "$m" .so.0).so.0.0.0" '$ORIGIN/..'
done
echo "layout: $(ls "$libs" "$libs/ucx" | tr '\n' ' ')" >>"$log"

route=("$top/contrib/nixl-pip-module.sh" --libs "$libs")
mock="CUX_DRIVER_PATH=$builddir/test/.libs/libmockcuda.so"
env $mock "${route[@]}" --check >>"$log" 2>&1 &&
    fail "--check found CUDA components before the module was put in"
"${route[@]}" "$builddir/.libs/libuct_cuda.so.0" >>"$log" 2>&1 && fail "a module built for another release was put in"
grep -q 'is built for UCX' "$log" || fail "the refusal of another release's module did not say why"
"${route[@]}" "$work/build/.libs/libuct_cuda.so.0" >"$work/put.log" 2>&1 ||
    { cat "$work/put.log" >>"$log"; fail "putting the module in"; }
cat "$work/put.log" >>"$log"
plugin=$(sed -n 's/^export UCX_PLUGIN_PATH=//p' "$work/put.log")
[ -f "$plugin/libuct_cuda.so.0.0.0" ] || fail "no libuct_cuda.so.0.0.0 in the plugin directory it named ($plugin)"
readelf -d "$plugin/libuct_cuda.so.0.0.0" | grep -q 'NEEDED.*libucs\.so' && fail "the module still names libucs.so.0"
env $mock UCX_PLUGIN_PATH="$plugin" "${route[@]}" --check >"$work/check.log" 2>&1 ||
    { cat "$work/check.log" >>"$log"; fail "--check with UCX_PLUGIN_PATH"; }
cat "$work/check.log" >>"$log"
grep -q "libuct_cuda loaded: $plugin/libuct_cuda.so.0.0.0\$" "$work/check.log" || fail "UCX did not load our module"
grep '^UCX libraries loaded:' "$work/check.log" | grep -q 'libuc[mpst]\.so' &&
    fail "a second UCX was loaded beside the wheel's"
echo "nixl-pip: UCX $(sed -n 's/^NIXL.s UCX \([^:]*\):.*/\1/p' "$work/check.log") in the wheel's layout loads ours from" \
    "UCX_PLUGIN_PATH ($(sed -n 's/^components: //p' "$work/check.log")), none without it;" \
    "another release's module refused"
rm -rf "$work"
