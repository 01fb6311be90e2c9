#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The standard steps in one call: verify (ucx_perftest ours against UCX's module), integrity, containers.
#
#   OUT=DIR gpu-host/run standard [CASES] [REPEATS] [RUNS]
#
# verify CASES REPEATS (default "copy,reads" and 2: what one H200 runs; "v122" with two GPUs) with its gtest
# suites left out (CUX_TEST_VERIFY_SKIP_TESTS=0 keeps them), then integrity repeat RUNS (default 2; about 30 s a
# run on UCX 1.22, then its runs of UCX's module and the sweep), then containers over the carry's stock/
# (Debian's UCX packages and our build against them, gpu-host/prepare/prepare-gpu-carry.sh) when it is there.
# The carry and the reference UCX are verify's (CUX_GPU_CARRY, UCX_REF_PREFIX). Each step has its own bound
# (CUX_STANDARD_LIMITS, seconds for verify, integrity and containers, default "290 170 110": together within one
# device call), so that one that hangs leaves the others their time. Writes DIR/standard.txt (each step's exit)
# and DIR/standard.tgz (everything the steps wrote, UCX's install tarball left out).
set -u
. "$(dirname "$0")/../lib.sh" # top, carry, say, failed, the shared set-up
cases=${1:-copy,reads}
repeats=${2:-2}
runs=${3:-2}
out=${OUT:-/tmp/cux-out}
read -r limit_verify limit_integrity limit_containers <<<"${CUX_STANDARD_LIMITS:-290 170 110}"
gh_report "$out/standard.txt"
step() { # NAME LIMIT ARGS...: one step with its own output directory and bound
    local name=$1 limit=$2
    shift 2
    mkdir -p "$out/$name"
    OUT="$out/$name" timeout -k 5 "$limit" bash "$top/gpu-host/steps/$name.sh" "$@"
    local st=$?
    say "$name $*: exit $st$([ $st -eq 124 ] && echo " (stopped at its bound of $limit s)")"
    [ $st -eq 0 ] || rc=1
}

CUX_TEST_VERIFY_SKIP_TESTS=${CUX_TEST_VERIFY_SKIP_TESTS:-1} step verify "$limit_verify" "$cases" "$repeats"
step integrity "$limit_integrity" repeat "$runs"
if [ -d "$carry/stock" ]; then
    step containers "$limit_containers" "$carry/stock" 1
else
    say "containers: no $carry/stock (gpu-host/prepare/prepare-gpu-carry.sh makes it)"
fi
rm -f "$out/verify/ucx-ref-install.tar.gz"
tar -C "$out" -czf "$out/standard.tgz" verify integrity $([ -d "$out/containers" ] && echo containers)
rm -rf "$out/verify" "$out/containers" "$out/integrity"
say "done: exit $rc"
exit $rc
