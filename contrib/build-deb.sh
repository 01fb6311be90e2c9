#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the Debian package of this tree for the UCX installed here (libucx-dev): installs the build
# dependencies and fetches the source of exactly that UCX (contrib/install-deps.sh), then runs
# dpkg-buildpackage. The package depends on exactly the libucx0 version it was built against; build it on a
# machine with the UCX version the package is for (Debian 12: 1.13.1, Ubuntu 24.04: 1.16.0).
#
#   contrib/build-deb.sh [OUTDIR]        (default ./build-deb; prints the package's path last)
#
# No CUDA toolkit is needed (the module declares the driver's API itself).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$top/build-deb}" && cd "${1:-$top/build-deb}" && pwd)
cd "$top"

src_line=$(contrib/install-deps.sh --tests deps | tail -n 1)
export UCX_SRC=${src_line##*source tree: }

# dpkg-buildpackage writes its results beside the source tree: a scratch copy keeps them (and the in-tree
# autogen.sh output) out of this tree
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src-tree"
if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z | tar --null -T - -cf - | tar -C "$work/src-tree" -xf -
else
    tar --exclude='./build*' --exclude=./deps -cf - . | tar -C "$work/src-tree" -xf -
fi
(cd "$work/src-tree" && dpkg-buildpackage -us -uc -b >"$out/dpkg-buildpackage.log" 2>&1) ||
    { tail -n 30 "$out/dpkg-buildpackage.log"; exit 1; }
# every file dpkg-buildpackage wrote, the -dbgsym package too (the .changes lists it: debsign and dput need it)
rm -f "$out"/uct-cuda-plugin_* "$out"/uct-cuda-plugin-dbgsym_*
mv "$work"/uct-cuda-plugin_* "$work"/uct-cuda-plugin-dbgsym_* "$out/"
ls "$out"/uct-cuda-plugin_*.deb
