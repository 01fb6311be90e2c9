#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# libcux_memtype's dlsym entry (written in assembly for x86_64 and aarch64, src/memtype/cux_memtype_dlsym.c) and
# its wrapping of cuGetProcAddress, run on each architecture there is a way to run here: this machine's own,
# and aarch64 through a cross compiler and qemu-user where those are installed (test/run-all.sh's dependencies
# on amd64: gcc-aarch64-linux-gnu, qemu-user). The report to UCX is a stand-in (test/cross/), so no UCX is
# built for the other architecture.
#
#   test/run-cross-dlsym.sh [BUILDDIR]        exit 0 passed, 1 failed, 77 when nothing could run
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ran=0 failed=0

# ARCH CC [RUNNER...]: build the three pieces with CC and run the program with the hooks preloaded
one_arch() {
    local arch=$1 cc=$2 dir="$work/$1"
    shift 2
    mkdir -p "$dir"
    if ! { "$cc" -shared -fPIC -O2 -std=gnu11 -o "$dir/libdriver.so" "$top/test/cross/dlsym_entry_driver.c" &&
        "$cc" -shared -fPIC -O2 -std=gnu11 -Wall -Werror -Wno-unused-parameter -I"$top/src" -o "$dir/libmt.so" \
            "$top/src/memtype/cux_memtype_dlsym.c" "$top/src/memtype/cux_memtype_driver.c" \
            "$top/test/cross/dlsym_entry_report.c" -ldl &&
        "$cc" -O1 -std=gnu11 -o "$dir/prog" "$top/test/cross/dlsym_entry_prog.c" -ldl; } >"$dir/build.log" 2>&1; then
        echo "$arch: FAIL building (the compiler's words follow)"
        cat "$dir/build.log"
        failed=1
        return
    fi
    ran=1
    if (cd "$dir" && "$@" ./prog ./libdriver.so) >"$dir/run.log" 2>&1; then
        echo "$arch: PASS ($(grep -c '^ok' "$dir/run.log") checks)"
    else
        echo "$arch: FAIL"
        cat "$dir/run.log"
        failed=1
    fi
}

case "$(uname -m)" in
x86_64 | aarch64) one_arch "$(uname -m)" "${CC:-cc}" env LD_PRELOAD=./libmt.so ;;
*) echo "$(uname -m): the dlsym entry is not built here (the hooks turn UCP's cache off instead)" ;;
esac
if [ "$(uname -m)" != aarch64 ]; then
    if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null &&
        [ -d /usr/aarch64-linux-gnu ]; then
        one_arch aarch64 aarch64-linux-gnu-gcc env QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 \
            -E LD_PRELOAD=./libmt.so
    else
        echo "aarch64: skipped (no aarch64-linux-gnu-gcc or qemu-aarch64)"
    fi
fi
[ "$failed" = 0 ] || exit 1
[ "$ran" = 1 ] || exit 77
exit 0
