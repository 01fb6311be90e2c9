#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what the plugin needs to build (and, with --tests, what its tests and its package need too) on
# Debian/Ubuntu, from the distribution's own packages, and fetches the source of exactly the installed libucx-dev
# version (for UCT's internal headers).
#
#   contrib/install-deps.sh [--tests] [SRC_PARENT_DIR]     (default: ./deps)
#
# Build: build-essential autoconf automake libtool pkg-config dpkg-dev libucx-dev ucx-utils. --tests adds
# googletest, clang and its sanitizer runtime, Open MPI, python3, debhelper, fakeroot and lintian (and on amd64
# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user, for the aarch64 half of test/run-cross-dlsym.sh).
# What it changes, so that it can be undone: a deb-src entry (/etc/apt/sources.list.d/uct-cuda-deb-src.sources),
# derived from the machine's own apt sources (deb822 or one-line format; no host name is written here), where
# none exists; the packages it installed, listed in SRC_PARENT_DIR/installed-packages.txt. apt checks the UCX
# source's files against the archive's signed index; dpkg-source checks the upload's signature where a keyring
# is installed (debian-keyring, ubuntu-keyring), and says so where none is. CUX_UCX_SRC=TREE skips the source
# fetch and names the tree instead.
set -euo pipefail

tests=0
[ "${1:-}" != --tests ] || { tests=1; shift; }
dest=${1:-deps}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

add_deb_src() {
    local d=/etc/apt/sources.list.d f out=/etc/apt/sources.list.d/uct-cuda-deb-src.sources
    if [ -e "$out" ]; then
        $sudo chmod 644 "$out" # an older run of this script made it 0600
        return 0
    fi
    if grep -rqsE '^\s*Types:.*deb-src|^\s*deb-src\s' /etc/apt/sources.list $d 2>/dev/null; then
        return 0
    fi
    local tmp; tmp=$(mktemp)
    for f in "$d"/*.sources; do
        [ -e "$f" ] || continue
        # deb822: copy every stanza whose Types has "deb", with Types set to deb-src
        awk '/^Types:/ { if ($0 ~ /(^|[ \t])deb([ \t]|$)/) { print "Types: deb-src"; next } }
             { print }' "$f" >>"$tmp"
        echo >>"$tmp"
    done
    for f in /etc/apt/sources.list "$d"/*.list; do
        [ -e "$f" ] || continue
        sed -n 's/^\s*deb\s/deb-src /p' "$f" >>"$tmp.list"
    done 2>/dev/null || true
    # readable by everyone, as apt's other sources are (mktemp made them 0600)
    if [ -s "$tmp" ]; then
        $sudo install -m 644 "$tmp" "$out"
    elif [ -s "$tmp.list" ]; then
        $sudo install -m 644 "$tmp.list" "${out%.sources}.list"
    else
        echo "install-deps: no apt source found to derive a deb-src entry from" >&2
        exit 1
    fi
    rm -f "$tmp" "$tmp.list"
}

# CUX_UCX_SRC: a source tree of exactly the installed UCX, for a distribution whose registry serves its binary
# packages but not their sources here (Debian 13: UCX's release tag of the same version)
[ -n "${CUX_UCX_SRC:-}" ] || add_deb_src
packages=(build-essential autoconf automake libtool pkg-config dpkg-dev libucx-dev ucx-utils libucx0)
[ "$tests" = 0 ] || packages+=(googletest libgtest-dev clang libclang-rt-dev openmpi-bin libopenmpi-dev python3
                               debhelper fakeroot lintian)
# the hooks' dlsym entry is also written for aarch64: built there by a cross compiler and run under qemu-user
[ "$tests" = 0 ] || [ "$(dpkg --print-architecture)" != amd64 ] || packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
installed() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1 == "ii" {print $2}' | sort; }
before=$(installed)
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# what this run added (dependencies included), for apt-get remove; earlier runs' additions kept. The file changes
# only when packages were added, so that test/run-all.sh configures its build again then (configure finds mpicc)
mkdir -p "$dest"
[ -f "$dest/installed-packages.txt" ] || : >"$dest/installed-packages.txt"
comm -13 <(echo "$before") <(installed) | cat - "$dest/installed-packages.txt" | sed '/^$/d' | sort -u \
    >"$dest/installed-packages.txt.new"
if cmp -s "$dest/installed-packages.txt.new" "$dest/installed-packages.txt"; then
    rm -f "$dest/installed-packages.txt.new"
else
    mv "$dest/installed-packages.txt.new" "$dest/installed-packages.txt"
fi

ver=$(dpkg-query -W -f='${Version}' libucx-dev)
upstream=${ver%%-*}; upstream=${upstream#*:}; upstream=${upstream%%+*}
if [ -n "${CUX_UCX_SRC:-}" ]; then
    echo "UCX $ver installed; source tree: $(cd "$CUX_UCX_SRC" && pwd)"
    exit 0
fi
mkdir -p "$dest"
if ! ls -d "$dest"/ucx-"$upstream"* >/dev/null 2>&1; then
    (cd "$dest" && apt-get source -qq -o APT::Sandbox::User=root --download-only "ucx=$ver" >/dev/null &&
        dpkg-source -x ucx_*.dsc >dpkg-source.log 2>&1) || { cat "$dest/dpkg-source.log" >&2; exit 1; }
    grep -i 'signature\|keyring' "$dest/dpkg-source.log" >&2 || true
fi
src=$(ls -d "$dest"/ucx-"$upstream"* | head -1)
echo "UCX $ver installed; source tree: $(cd "$src" && pwd)"
