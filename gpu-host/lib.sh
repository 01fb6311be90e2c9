# SPDX-License-Identifier: BSD-3-Clause
# What the steps of gpu-host/run share (every step sources it first):
#
#   top                       the repository's root; the carry is $CUX_GPU_CARRY or $top/gpu-carry ($carry)
#   gh_report FILE            say TEXT (a line "== +SECONDS TEXT" on the terminal and in FILE) and failed TEXT
#                             (the same with FAILED, and rc=1) for the step's report
#   gh_googletest DIR LOG     googletest from $carry/googletest into DIR/lib/libgtest.a (no registry there)
#   gh_plugin WORK BUILD UCX UCX_SRC LOGS [CONFIGURE_ARGS...]
#                             our module from the dist tarball in $carry: unpacked into WORK (its source tree's
#                             path on stdout), configured against the UCX at UCX (source tree UCX_SRC) in BUILD,
#                             built with its tests when $gtest_dir is set (gh_googletest's DIR); logs in LOGS.
#                             The two halves, for builds against several UCX: gh_plugin_src WORK (unpack, print
#                             the path) and gh_plugin_build SRC BUILD UCX UCX_SRC LOGS [CONFIGURE_ARGS...]
#   gh_reference_ucx SRC PREFIX LOG
#                             UCX with CUDA into PREFIX from SRC (a tree with configure, or its tarball), UCX's
#                             module kept in PREFIX/reference-module; nothing when PREFIX already has ucx_info
#   gh_ucx_and_ours PREFIX WORK LOGS
#                             UCX built with CUDA from the UCX source tarball in $carry into PREFIX (no verbs, no
#                             rdmacm, no GPU-initiated InfiniBand: no NICs nor DOCA there), googletest, and ours
#                             against it in WORK/plugin-build; sets ucx_src and ucx_name
#   module_copies PREFIX OUR_MODULE WORK
#                             WORK/ucx and WORK/ours, each a copy of PREFIX/lib with UCX's module or ours in its
#                             module directory: LD_LIBRARY_PATH=WORK/ucx or WORK/ours picks one (UCX finds its
#                             modules next to the libucs in use)
#   gh_stock_ucx CARRY ROOT   Debian's UCX packages in CARRY (.deb) unpacked into ROOT, with LD_LIBRARY_PATH and
#                             PATH pointing there (nothing of the host's UCX is used)
#   module_in_place PREFIX MODULE
#                             MODULE becomes PREFIX's CUDA module (one UCX core, either module)
#   module_use PREFIX ours|ucx OUR_MODULE
#                             OUR_MODULE (ours) or PREFIX/reference-module's (ucx) becomes PREFIX's
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
carry=${CUX_GPU_CARRY:-$top/gpu-carry}

gh_report() {
    gh_report_file=$1
    gh_t0=$(date +%s)
    rc=0
    mkdir -p "$(dirname "$gh_report_file")"
}
say() { echo "== +$(( $(date +%s) - ${gh_t0:-$(date +%s)} ))s $*" | tee -a "${gh_report_file:-/dev/null}"; }
failed() { say "FAILED: $*"; rc=1; }

gh_stock_ucx() {
    local deb
    mkdir -p "$2"
    for deb in "$1"/*.deb; do
        [ -e "$deb" ] || continue
        dpkg-deb -x "$deb" "$2" || { failed "unpacking $(basename "$deb")"; return 1; }
    done
    export LD_LIBRARY_PATH="$2/usr/lib/x86_64-linux-gnu" PATH="$2/usr/bin:$PATH"
}

gh_googletest() {
    local dir=$1 log=$2
    mkdir -p "$dir/lib"
    g++ -O2 -std=c++17 -pthread -isystem "$carry/googletest/include" -I"$carry/googletest" \
        -c "$carry/googletest/src/gtest-all.cc" -o "$dir/gtest-all.o" >"$log" 2>&1 &&
        ar rcs "$dir/lib/libgtest.a" "$dir/gtest-all.o"
}

gh_plugin_src() {
    tar -C "$1" -xzf "$(ls "$carry"/uct-cuda-plugin-*.tar.gz | head -n 1)" && ls -d "$1"/uct-cuda-plugin-*/ | head -n 1
}

gh_plugin_build() {
    local src=$1 build=$2 ucx=$3 ucx_src=$4 logs=$5 gtest=()
    shift 5
    [ -z "${gtest_dir:-}" ] || gtest=(CPPFLAGS="-isystem $carry/googletest/include" LDFLAGS="-L$gtest_dir/lib")
    mkdir -p "$build" "$logs"
    (cd "$build" &&
        "$src/configure" --with-ucx="$ucx" --with-ucx-src="$ucx_src" "$@" "${gtest[@]}" >"$logs/plugin-configure.log" 2>&1 &&
        make -j"$(nproc)" >"$logs/plugin-make.log" 2>&1 &&
        { [ -z "${gtest_dir:-}" ] || make -j"$(nproc)" check TESTS= >"$logs/plugin-check-build.log" 2>&1; })
}

gh_plugin() {
    local src
    src=$(gh_plugin_src "$1") || return 1
    echo "$src"
    gh_plugin_build "$src" "$2" "$3" "$4" "$5" "${@:6}"
}

gh_reference_ucx() {
    local src=$1 prefix=$2 log=$3
    [ -x "$prefix/bin/ucx_info" ] && return 0
    "$top/contrib/build-reference-ucx.sh" "$src" "$prefix" >"$log" 2>&1
}

gh_ucx_and_ours() {
    local prefix=$1 work=$2 logs=$3 ucx_tar
    ucx_tar=$(ls "$carry"/ucx-*-src.tar.gz 2>/dev/null | head -1)
    [ -n "$ucx_tar" ] && mkdir -p "$work" && tar -C "$work" -xzf "$ucx_tar" || return 1
    ucx_src=$(ls -d "$work"/ucx-*/ | head -1)
    ucx_name=$(basename "$ucx_src")
    (export LD_LIBRARY_PATH= CUX_UCX_CONFIGURE_EXTRA=${CUX_UCX_CONFIGURE_EXTRA:---without-verbs --without-rdmacm ac_cv_path_NVCC=} &&
        gh_reference_ucx "$ucx_src" "$prefix" "$logs/ucx-build.log" && gtest_dir="$work/gtest" &&
        gh_googletest "$gtest_dir" "$logs/gtest-build.log" &&
        gh_plugin "$work" "$work/plugin-build" "$prefix" "$ucx_src" "$logs" >/dev/null)
}

module_copies() {
    local prefix=$1 ours=$2 work=$3 module
    for module in ucx ours; do
        cp -a "$prefix/lib" "$work/$module"
    done
    cp "$prefix/reference-module/libuct_cuda.so.0" "$work/ucx/ucx/libuct_cuda.so.0"
    cp "$ours" "$work/ours/ucx/libuct_cuda.so.0"
}

module_use() { # PREFIX ours|ucx OUR_MODULE: ours (OUR_MODULE) or UCX's own (PREFIX/reference-module) in place
    case $2 in
    ours) module_in_place "$1" "$3" ;;
    ucx) module_in_place "$1" "$1/reference-module/libuct_cuda.so.0" ;;
    *) echo "module_use: ours or ucx, not '$2'" >&2; return 2 ;;
    esac
}

module_in_place() { # a new file renamed over the old: a process still mapping the old one keeps it intact
    cp "$2" "$1/lib/ucx/libuct_cuda.so.0.tmp" && mv "$1/lib/ucx/libuct_cuda.so.0.tmp" "$1/lib/ucx/libuct_cuda.so.0"
}
