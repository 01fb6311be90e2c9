#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Prepares a carry for gpu-host/run nixl from a fresh checkout (about 25 minutes on 2 cores): the UCX source with
# configure generated, a UCX of that source built here without CUDA (NIXL links it; the GPU host runs NIXL on its
# CUDA build of the same release), NIXL built against it, our dist tarball of HEAD and, with BEFORE, of that commit;
# each AT commit's goes into CARRY/at-N-SHORTSHA/ (N its place in the list), for a bisection in one call.
#
#   gpu-host/prepare/prepare-nixl-carry.sh CARRY UCX_TREE NIXL_TREE [BEFORE [AT...]]
#
# UCX_TREE: a UCX release's source tree (exported from a fetched clone; its name, ucx-VERSION, names the tarball);
# NIXL_TREE: NIXL's tree with its subprojects (gpu-host/prepare/nixl-sources-from-git.sh). The UCX is installed
# into /opt/UCX_NAME-nocuda; NIXL's own tests are left out (CUX_NIXL_TESTS=1 builds them too). Needs a configured
# ./build (the quick start's), and meson and the packages contrib/build-nixl.sh names.
set -euo pipefail
usage="usage: prepare-nixl-carry.sh CARRY UCX_TREE NIXL_TREE [BEFORE [AT...]]"
top=$(cd "$(dirname "$0")/../.." && pwd)
carry=${1:?$usage}
ucx_tree=$(cd "${2:?$usage}" && pwd)
nixl_tree=$(cd "${3:?$usage}" && pwd)
before=${4:-}
shift $(($# < 4 ? $# : 4))
ucx_name=$(basename "$ucx_tree")
prefix=/opt/$ucx_name-nocuda
mkdir -p "$carry"
carry=$(cd "$carry" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"; git -C "$top" worktree prune' EXIT

[ -f "$carry/$ucx_name-src.tar.gz" ] ||
    "$top/gpu-host/prepare/prepare-ucx-src.sh" "$ucx_tree" "$carry/$ucx_name-src.tar.gz"

[ -x "$prefix/bin/ucx_info" ] ||
    CUX_UCX_CONFIGURE_EXTRA="--without-verbs --without-rdmacm" \
        "$top/contrib/build-reference-ucx.sh" "$carry/$ucx_name-src.tar.gz" "$prefix" none

[ -x "$carry/nixl/bin/nixlbench" ] ||
    CUX_NIXL_TESTS=${CUX_NIXL_TESTS:-0} "$top/contrib/build-nixl.sh" "$nixl_tree" "$prefix" "$carry/nixl"

dist() { # TREE DEST: the dist tarball of a source tree, configured like ./build
    local src
    src=$(sed -n 's/^UCX_SRC = //p' "$top/build/Makefile")
    mkdir -p "$2"
    (cd "$1" && { [ -x configure ] || ./autogen.sh >/dev/null 2>&1; } && mkdir -p build-dist && cd build-dist &&
        ../configure --with-ucx="$(sed -n 's/^UCX_PREFIX = //p' "$top/build/Makefile")" --with-ucx-src="$src" \
            >/dev/null 2>&1 && make dist >/dev/null 2>&1 && mv uct-cuda-plugin-*.tar.gz "$2/")
}
rm -f "$carry"/uct-cuda-plugin-*.tar.gz
make -C "$top/build" dist >/dev/null && mv "$top"/build/uct-cuda-plugin-*.tar.gz "$carry/"
rm -rf "$carry/before" "$carry"/at-*
n=0
for commit in $before "$@"; do
    dir=before
    [ $n -gt 0 ] && dir=at-$n-$(git -C "$top" rev-parse --short "$commit")
    git -C "$top" worktree add -q "$work/$dir" "$commit"
    dist "$work/$dir" "$carry/$dir"
    n=$((n + 1))
done
du -sh "$carry"
