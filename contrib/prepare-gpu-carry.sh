#!/usr/bin/env bash
# Prepares ./gpu-carry for contrib/gpu-host-verify.sh on a GPU host that has no libtoolize and no package
# registry: the plugin's dist tarball, the UCX source of the installed version with configure generated, and
# googletest's sources (built there). Run from a configured build directory's source tree after
# test/run-all.sh (which leaves a configured ./build).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
carry=gpu-carry
mkdir -p "$carry"

ucx_src=$(sed -n 's/^UCX_SRC = //p' build/Makefile)
ucx_name=$(basename "$ucx_src")
[ -f "$carry/$ucx_name-src.tar.gz" ] || contrib/prepare-ucx-src.sh "$ucx_src" "$carry/$ucx_name-src.tar.gz"

rm -f "$carry"/uct-cuda-plugin-*.tar.gz
make -C build dist >/dev/null
mv build/uct-cuda-plugin-*.tar.gz "$carry/"

rm -rf "$carry/googletest"
cp -a /usr/src/googletest/googletest "$carry/googletest"
du -sh "$carry"
