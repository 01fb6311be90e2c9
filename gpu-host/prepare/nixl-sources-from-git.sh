#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NIXL's sources for a machine that cannot download (issue 46): NIXL at a release tag, and the meson subprojects
# its wraps would download (Abseil with absl_log, asio, taskflow, toml++; Debian 12's are missing, too old, or
# lack toml++'s toml.hpp), each
# exported from a git clone at the version NIXL's wrap names, with the meson.build that the wrap's patch brings
# (Meson's wrapdb; taskflow's comes with NIXL). With network, none of this is needed: meson downloads them.
#
#   gpu-host/prepare/nixl-sources-from-git.sh OUT NIXL_GIT TAG ABSEIL_GIT ASIO_GIT TASKFLOW_GIT TOMLPP_GIT WRAPDB_GIT
#
# Leaves OUT/nixl-TAG (NIXL's tree, its subprojects/ filled in). Nothing of theirs is committed here: OUT is
# outside the repository or ignored.
set -euo pipefail
usage="usage: nixl-sources-from-git.sh OUT NIXL_GIT TAG ABSEIL_GIT ASIO_GIT TASKFLOW_GIT TOMLPP_GIT WRAPDB_GIT"
[ $# -eq 8 ] || { echo "$usage" >&2; exit 2; }
out=$1 nixl_git=$2 tag=$3 abseil_git=$4 asio_git=$5 taskflow_git=$6 tomlpp_git=$7 wrapdb_git=$8

tree="$out/nixl-${tag#v}"
rm -rf "$tree"
mkdir -p "$tree"
git -C "$nixl_git" archive "$tag" | tar -x -C "$tree"
sub="$tree/subprojects"

wrap_value() { # WRAP KEY: a key of a wrap file's first section
    sed -n "s/^$2 *= *//p" "$sub/$1.wrap" | head -n 1
}

# Abseil: the wrap names its release (directory abseil-cpp-VERSION); wrapdb's packagefiles hold its meson.build.
dir=$(wrap_value abseil-cpp directory)
version=${dir#abseil-cpp-}
mkdir -p "$sub/$dir"
git -C "$abseil_git" archive "$version" | tar -x -C "$sub/$dir"
wrapdb_version=$(wrap_value abseil-cpp wrapdb_version)
# wrapdb keeps one packagefile per project at a time: take the commit that released the wrap's version.
commit=$(git -C "$wrapdb_git" log --format=%H -1 -S"\"$wrapdb_version\"" -- releases.json)
git -C "$wrapdb_git" archive "$commit" subprojects/packagefiles/abseil-cpp |
    tar -x -C "$sub/$dir" --strip-components=3

# asio: header-only; the release tarball is the git tree's asio/ folder, of which the headers are needed.
dir=$(wrap_value asio directory)
version=${dir#asio-}
mkdir -p "$sub/$dir"
git -C "$asio_git" archive "asio-${version//./-}" asio/include asio/asio.pc.in asio/LICENSE_1_0.txt |
    tar -x -C "$sub/$dir" --strip-components=1
wrapdb_version=$(wrap_value asio wrapdb_version)
commit=$(git -C "$wrapdb_git" log --format=%H -1 -S"\"$wrapdb_version\"" -- releases.json)
git -C "$wrapdb_git" archive "$commit" subprojects/packagefiles/asio | tar -x -C "$sub/$dir" --strip-components=3

# taskflow: NIXL carries its meson.build (patch_directory).
dir=$(wrap_value taskflow directory)
version=${dir#taskflow-}
mkdir -p "$sub/$dir"
git -C "$taskflow_git" archive "v$version" | tar -x -C "$sub/$dir"
cp -r "$sub/packagefiles/$(wrap_value taskflow patch_directory)/." "$sub/$dir/"

# toml++: its own meson.build; the sources and headers are what builds.
dir=$(wrap_value tomlplusplus directory)
version=${dir#tomlplusplus-}
mkdir -p "$sub/$dir"
git -C "$tomlpp_git" archive "v$version" meson.build meson_options.txt include src toml.hpp LICENSE |
    tar -x -C "$sub/$dir"

# nixlbench is a project of its own with its own asio and toml++ wraps: the same trees serve it.
bench_sub="$tree/benchmark/nixlbench/subprojects"
for wrap in asio tomlplusplus; do
    dir=$(sed -n 's/^directory *= *//p' "$bench_sub/$wrap.wrap" | head -n 1)
    [ -d "$sub/$dir" ] && cp -r "$sub/$dir" "$bench_sub/"
done
echo "$tree"
