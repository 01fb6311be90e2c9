#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copies what runs of a UCX installation (shared libraries, modules, ucx_info, ucx_perftest, the reference
# module) into DEST, without debug information, so that a UCX built here fits a GPU-host call's carry:
#
#   gpu-host/prepare/carry-ucx-prefix.sh PREFIX DEST
#
# On the GPU host run it with LD_LIBRARY_PATH=DEST/lib (UCX finds its modules next to the libucs in use).
set -euo pipefail
prefix=${1:?usage: carry-ucx-prefix.sh PREFIX DEST}
dest=${2:?usage: carry-ucx-prefix.sh PREFIX DEST}
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib/ucx"
cp -a "$prefix"/lib/*.so* "$dest/lib/"
cp -a "$prefix"/lib/ucx/*.so* "$dest/lib/ucx/"
cp "$prefix/bin/ucx_info" "$prefix/bin/ucx_perftest" "$dest/bin/"
[ -d "$prefix/reference-module" ] && cp -a "$prefix/reference-module" "$dest/"
find "$dest" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec strip --strip-debug {} +
du -sh "$dest"
