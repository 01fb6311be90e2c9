#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
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
# Each step says what it does and what it usually takes on CI's machine (2 cores); the suites say it too.
step() { echo "run-all: $1 (about $2 min on 2 cores)"; }
step "dependencies and the UCX source (contrib/install-deps.sh)" 1
if [ -z "${UCX_SRC:-}" ]; then
    if [ "$prefix" = /usr ] && command -v apt-get >/dev/null 2>&1; then
        src_line=$(contrib/install-deps.sh --tests deps | tail -n 1)
        UCX_SRC=${src_line##*source tree: }
    else
        echo "run-all: set UCX_SRC to the source tree of the UCX in $prefix" >&2
        exit 1
    fi
fi

# Whether the build in the current directory is configured for this tree, this UCX source and the packages there
# are: install-deps's list of what it added changes only when it adds some (a quick start's build, configured
# before the tests' packages came, would leave the MPI tests out: configure looks for mpicc).
configured() {
    [ -f Makefile ] && ! [ ../configure -nt Makefile ] && [ "$(sed -n 's/^UCX_SRC = //p' Makefile)" = "$UCX_SRC" ] &&
        ! [ "$(dirname "$UCX_SRC")/installed-packages.txt" -nt Makefile ]
}

step "configure and build in ./build" 3
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build
cd build
if ! configured; then
    ../configure --with-ucx="$prefix" --with-ucx-src="$UCX_SRC" >configure.log 2>&1 ||
        { tail -n 30 configure.log; exit 1; }
fi
make -j"$(nproc)" >make.log 2>&1 || { tail -n 40 make.log; exit 1; }
make -j"$(nproc)" check TESTS= >make-check.log 2>&1 || { tail -n 40 make-check.log; exit 1; }

# The same tree with AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer, and again with
# ThreadSanitizer, for run-tests.sh's sanitizer suites (CUX_TEST_NO_SANITIZERS=1 leaves them out).
sanitizer_build() { # directory, compiler and linker flags
    local dir=$top/$1 flags=$2 ldflags=$3
    mkdir -p "$dir"
    (cd "$dir" &&
        { configured ||
          ../configure --with-ucx="$prefix" --with-ucx-src="$UCX_SRC" CFLAGS="$flags" CXXFLAGS="$flags" \
              LDFLAGS="$ldflags" >configure.log 2>&1; } &&
        make -j"$(nproc)" >make.log 2>&1 && make -j"$(nproc)" check TESTS= >make-check.log 2>&1) ||
        { echo "run-all: the sanitizer build in $1 failed (see $1/*.log)"; exit 1; }
}
if [ "${CUX_TEST_NO_SANITIZERS:-0}" != 1 ]; then
    step "the same tree with ASan and UBSan (build-asan), then with TSan (build-tsan)" 4
    sanitizer_build build-asan "-g -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
        "-fsanitize=address,undefined"
    sanitizer_build build-tsan "-g -O1 -fsanitize=thread" "-fsanitize=thread"
    export CUX_TEST_ASAN_BUILDDIR="$top/build-asan" CUX_TEST_TSAN_BUILDDIR="$top/build-tsan"
fi
# CI builds, installs, checks and removes the Debian package (test/run-deb.sh); CUX_TEST_DEB=0 leaves it out
export CUX_TEST_DEB=${CUX_TEST_DEB:-1}
# and runs make distcheck (test/run-distcheck.sh); CUX_TEST_DISTCHECK=0 leaves it out
export CUX_TEST_DISTCHECK=${CUX_TEST_DISTCHECK:-1}
# and builds the module with no CUDA toolkit in sight (test/run-no-toolkit.sh); CUX_TEST_NO_TOOLKIT=0 leaves it out
export CUX_TEST_NO_TOOLKIT=${CUX_TEST_NO_TOOLKIT:-1}
step "the suites, one line each as it starts" 20
exec ../test/run-tests.sh
