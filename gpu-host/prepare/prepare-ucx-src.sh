#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Packs a UCX source tree with its build system generated (autogen.sh needs libtoolize, which the GPU host
# lacks), for contrib/build-reference-ucx.sh on another machine.
#
#   gpu-host/prepare/prepare-ucx-src.sh UCX_SRC OUT.tar.gz
set -euo pipefail
src=$(cd "$1" && pwd)
out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

name=$(basename "$src")
cp -a "$src" "$work/$name"
(cd "$work/$name" && ./autogen.sh >/dev/null 2>&1)
[ -x "$work/$name/configure" ] || { echo "prepare-ucx-src: autogen.sh failed in $src" >&2; exit 1; }
rm -rf "$work/$name/.git" "$work/$name/autom4te.cache"
tar -C "$work" -czf "$out" "$name"
echo "$out: $(du -h "$out" | cut -f1), $name with configure"
