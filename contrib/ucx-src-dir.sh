# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the contrib scripts that build a UCX release: ucx_src_dir SRC prints the absolute path of the UCX
# source tree SRC names, unpacking SRC first into a temporary directory when it is a tarball.
ucx_src_dir() {
    local src=$1 dir
    if [ -f "$src" ]; then
        dir=$(mktemp -d)
        tar -C "$dir" -xzf "$src"
        src=$(ls -d "$dir"/ucx-*)
    fi
    (cd "$src" && pwd)
}
