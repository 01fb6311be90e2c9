#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package for Debian 13 (trixie), built and checked in a trixie chroot from any Debian-family
# machine (issue 21, item 4). Debian 13's binary packages need glibc 2.38, and its registry here serves trixie's
# binaries but not their sources, so UCX's internal headers come from UCX's release tag of the same version.
#
#   contrib/debian13-deb.sh CHROOT_DIR UCX_GIT_DIR [OUTDIR]
#
# Creates CHROOT_DIR with debootstrap (mirror taken from this machine's own apt sources) unless it holds a
# system already, copies this tree and the UCX tag matching trixie's libucx-dev into it (no CUDA toolkit: the
# module declares the driver's API itself), then inside: installs the build dependencies, builds the tree (for the
# mock driver) and runs test/run-deb.sh, which builds the package, installs it, checks it (ucx_info -d and
# ucx-cuda-run --check on the mock driver), removes it and verifies libucx0. The package and logs land in
# OUTDIR (default ./build-deb-trixie). Needs root.
set -euo pipefail
root=${1:?usage: debian13-deb.sh CHROOT_DIR UCX_GIT_DIR [OUTDIR]}
ucx_git=${2:?usage: debian13-deb.sh CHROOT_DIR UCX_GIT_DIR [OUTDIR]}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${3:-$top/build-deb-trixie}" && cd "${3:-$top/build-deb-trixie}" && pwd)

if [ ! -x "$root/usr/bin/apt-get" ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list)
    debootstrap --variant=buildd trixie "$root" "$mirror" >"$out/debootstrap.log" 2>&1
fi
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true' EXIT

chroot "$root" apt-get update -qq
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libucx-dev >/dev/null
ver=$(chroot "$root" dpkg-query -W -f='${Version}' libucx-dev)
upstream=${ver%%+*}; upstream=${upstream%%-*}

rm -rf "$root/build" && mkdir -p "$root/build/src" "$root/build/ucx-$upstream"
git -C "$top" ls-files -z | tar -C "$top" --null -T - -cf - | tar -C "$root/build/src" -xf -
git -C "$ucx_git" archive "v$upstream" src configure.ac | tar -C "$root/build/ucx-$upstream" -xf -

cat >"$root/build/run.sh" <<EOF
#!/bin/bash
set -e
export DEBIAN_FRONTEND=noninteractive CUX_UCX_SRC=/build/ucx-$upstream
cd /build/src && contrib/install-deps.sh --tests >/dev/null && ./autogen.sh >/dev/null 2>&1
mkdir -p /build/b && cd /build/b
/build/src/configure --with-ucx=/usr --with-ucx-src=\$CUX_UCX_SRC >configure.log 2>&1
make -j"\$(nproc)" >make.log 2>&1 && make -j"\$(nproc)" check TESTS= >>make.log 2>&1
cd /build/src && test/run-deb.sh /build/b
EOF
chmod +x "$root/build/run.sh"
rc=0
chroot "$root" /build/run.sh | tee "$out/run-deb.txt" || rc=$?
cp "$root"/build/b/test/logs/deb*.log "$out/" 2>/dev/null || true
cp "$root"/build/b/deb/uct-cuda-plugin_*.deb "$out/" 2>/dev/null || true
echo "trixie libucx-dev $ver; results in $out"
exit $rc
