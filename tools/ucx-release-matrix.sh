#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The plugin against UCX releases built from their tags, on a machine without a GPU (issue 21):
#
#   tools/ucx-release-matrix.sh UCX_GIT_DIR WORK_DIR [X.Y.Z ...]
#
# UCX_GIT_DIR is a clone of UCX's repository with its release tags; WORK_DIR is where each release's tree,
# installation and our build go (outside this repository, or an ignored path: UCX's code is never part of
# this tree). Without releases, the newest patch release of every MAJOR.MINOR that src/compat/ has a header for,
# and master for a header whose release is not tagged yet (the coming release). A release may also be given as
# a branch or commit of UCX_GIT_DIR (`master`).
# For each release: UCX configured without CUDA, verbs and rdmacm (its libraries, ucx_info and ucx_perftest),
# then this tree configured and built against it, then the mock suites: run-tests.sh with CUX_TEST_MATRIX_SUITES=full
# (the default), or with `quick` a short list (registration, the copy and cuda_ipc transports, the UCP data
# check through that release's own UCP and ucx_perftest). Writes WORK_DIR/matrix.md, a row per release.
set -u
ucx_git=${1:?usage: ucx-release-matrix.sh UCX_GIT_DIR WORK_DIR [X.Y.Z ...]}
work=${2:?usage: ucx-release-matrix.sh UCX_GIT_DIR WORK_DIR [X.Y.Z ...]}
shift 2
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
mkdir -p "$work"
work=$(cd "$work" && pwd)
table="$work/matrix.md"

releases=("$@")
if [ ${#releases[@]} -eq 0 ]; then
    for h in "$top"/src/compat/cux_ucx_*_*.h; do
        mm=$(basename "$h" .h | sed 's/^cux_ucx_//; s/_/./')
        tag=$(git -C "$ucx_git" tag -l "v$mm.*" | grep -E "^v$mm\.[0-9]+$" | sort -V | tail -n 1)
        if [ -n "$tag" ]; then
            releases+=("${tag#v}")
        else
            releases+=(master)
        fi
    done
fi

echo "| release | UCX build | plugin configure and build | mock suites ($(git -C "$top" log --oneline -1 | cut -c1-7)) |" >"$table"
echo "|---|---|---|---|" >>"$table"

for v in "${releases[@]}"; do
    src="$work/src-$v/ucx-$v" prefix="$work/install-$v" build="$work/build-$v" log="$work/log-$v"
    mkdir -p "$log"
    row="| $v |"
    if [ ! -x "$prefix/bin/ucx_info" ]; then
        ref=$v
        [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && ref=v$v # a release tag; otherwise a branch or commit
        rm -rf "$work/src-$v" && mkdir -p "$src" && git -C "$ucx_git" archive "$ref" | tar -x -C "$src"
        (cd "$src" && ./autogen.sh && ./configure --prefix="$prefix" --without-java --without-go \
             --disable-doxygen-doc --without-cuda --without-rocm --without-verbs --without-rdmacm --enable-mt \
             CFLAGS="-O1 -Wno-error" CXXFLAGS="-O1 -Wno-error") >"$log/ucx-configure.log" 2>&1 &&
            (for d in src/ucm src/ucs src/uct src/ucp src/tools/info src/tools/perf; do
                 make -C "$src/$d" -j"$jobs" && make -C "$src/$d" install || exit 1
             done) >"$log/ucx-make.log" 2>&1
    fi
    if [ ! -x "$prefix/bin/ucx_info" ]; then
        echo "$row failed (log-$v/) | - | - |" >>"$table"
        continue
    fi
    row="$row built |"
    mkdir -p "$build"
    if ! (cd "$build" && "$top/configure" --with-ucx="$prefix" --with-ucx-src="$src" && make -j"$jobs" &&
              make -j"$jobs" check TESTS=) >"$log/plugin.log" 2>&1; then
        echo "$row failed: $(grep -m 1 -E 'error' "$log/plugin.log" | cut -c1-120) |" >>"$table"
        continue
    fi
    row="$row built |"
    if [ "${CUX_TEST_MATRIX_SUITES:-full}" = quick ]; then
        (cd "$build" && UCX_MODULES=^cuda CUX_DRIVER_PATH="$build/test/.libs/libmockcuda.so" MOCK_CUDA_ASYNC=1 \
             CUX_TEST_SUITE=mock CUX_TEST_REQUIRE_GPU=1 \
             GTEST_FILTER='registration.*:driver_loader.*:copy.*_every_direction:copy.md*:ipc_rkey.*:ipc_cache.*:ipc_transport.put_and_get*:ipc_transport.an_address*:ipc_transport.a_third*:ipc_transport.*device*:ipc_transport.a_memory_element*:ipc_device_header.*:ucp_programs.ucp_data_check_with_memory_queries:ucp_programs.ucp_rendezvous_with_spoiled_keys*:ucp_programs.tag_bw_gpu_to_gpu_over_cuda_ipc' \
             timeout 1200 test/cux_gtest) >"$log/tests.log" 2>&1
        result=$(grep -E '^\[  (PASSED|FAILED) ' "$log/tests.log" | head -n 2 | tr '\n' ' ')
    else
        (cd "$build" && CUX_TEST_DEB=0 CUX_TEST_FUZZ_RUNS=100000 timeout 3000 "$top/test/run-tests.sh") \
            >"$log/tests.log" 2>&1
        result=$(tail -n 1 "$log/tests.log")
    fi
    echo "$row ${CUX_TEST_MATRIX_SUITES:-full}: $result |" >>"$table"
done
cat "$table"
