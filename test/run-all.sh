#!/usr/bin/env bash
# The one command that runs every test from a fresh checkout: installs the dependencies (Debian/Ubuntu
# packages and the matching UCX source), generates and configures the build in ./build, builds, and runs all
# suites. Ends with the line "N passed, N failed, N skipped"; exits non-zero on any failure.
#
#   test/run-all.sh                      # system UCX (/usr)
#   UCX_PREFIX=/opt/ucx UCX_SRC=/src/ucx-1.13.1 test/run-all.sh
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

prefix=${UCX_PREFIX:-/usr}
if [ -z "${UCX_SRC:-}" ]; then
    if [ "$prefix" = /usr ] && command -v apt-get >/dev/null 2>&1; then
        src_line=$(contrib/install-deps.sh deps | tail -n 1)
        UCX_SRC=${src_line##*source tree: }
    else
        echo "run-all: set UCX_SRC to the source tree of the UCX in $prefix" >&2
        exit 1
    fi
fi

[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build
cd build
if [ ! -f Makefile ] || [ ../configure -nt Makefile ] || [ "$(sed -n 's/^UCX_SRC = //p' Makefile)" != "$UCX_SRC" ]; then
    ../configure --with-ucx="$prefix" --with-ucx-src="$UCX_SRC" >configure.log 2>&1 ||
        { tail -n 30 configure.log; exit 1; }
fi
make -j"$(nproc)" >make.log 2>&1 || { tail -n 40 make.log; exit 1; }
make -j"$(nproc)" check TESTS= >make-check.log 2>&1 || { tail -n 40 make-check.log; exit 1; }
exec ../test/run-tests.sh
