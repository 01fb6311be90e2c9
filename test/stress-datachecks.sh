#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every data-checking program, again and again, on a loaded machine (issue 31): a wrong byte that shows once in
# a hundred runs shows here.
#
#   test/stress-datachecks.sh BUILDDIR RUNS
#
# Run i takes case i of a fixed rotation (from CUX_TEST_STRESS_FIRST, default 0), so that a number of runs covers
# the same cases everywhere:
#   5 in 8  bench/cux_blocks, put or get, one allocation or one per block, 2 ranks one way or 3 or 4 all to all,
#           blocks of 7 B to 2 MiB + 3 on both sides of 8 KB (UCP's shared-memory fragments), 64 KB and 256 KB
#           (the copy kernel's limit), 1, 7 or 20 blocks per transfer, 2 timed and 1 first transfer;
#   2 in 8  test/cux_ucp_datacheck, one of its cases (--only), with its default sizes, every size across UCP's
#           thresholds (--sweep) or two threads sharing a worker;
#   1 in 8  test/cux_mpi_datacheck, two Open MPI ranks (where mpirun and the program exist).
# Each run has its own time limit and fails on a non-zero exit, a data error or that limit.
#
# Environment:
#   CUX_TEST_STRESS_LOAD      hog (default): one busy loop per core runs beside the programs; none: nothing
#   CUX_TEST_STRESS_RUN       the command that brings the module in (default: BUILDDIR's ucx-cuda-run with the
#                             build's module, as the mock suite runs it); empty: UCX loads it by itself (ours in
#                             place of UCX's module, on a GPU host)
#   CUX_TEST_STRESS_PROGRAMS  blocks,ucp,mpi (default), or some of them
#   CUX_TEST_STRESS_FIRST     the first case of the rotation (default 0)
#   CUX_TEST_STRESS_LOG       every failed run's output (default BUILDDIR/test/stress-datachecks.log)
#   UCX_TLS                   default self,sm,cuda_copy,cuda_ipc
# The driver is the one the programs find (CUX_DRIVER_PATH for the mock). Prints a line per failed run, then
# "N runs, N failed, N seconds"; exits 1 on any failure.
set -u
b=$(cd "${1:?usage: stress-datachecks.sh BUILDDIR RUNS}" && pwd)
runs=${2:?usage: stress-datachecks.sh BUILDDIR RUNS}
first=${CUX_TEST_STRESS_FIRST:-0}
programs=${CUX_TEST_STRESS_PROGRAMS:-blocks,ucp,mpi}
log=${CUX_TEST_STRESS_LOG:-$b/test/stress-datachecks.log}
export UCX_TLS=${UCX_TLS:-self,sm,cuda_copy,cuda_ipc} UCX_WARN_UNUSED_ENV_VARS=n
if [ -z "${CUX_TEST_STRESS_RUN+set}" ]; then
    run="env CUX_MODULE=$b/.libs/libuct_cuda.so.0 CUX_PERFTEST_LIB=$b/.libs/libcux_perftest.so"
    run+=" CUX_MEMTYPE_LIB=$b/.libs/libcux_memtype.so CUX_CHECK_PROG=$b/ucx-cuda-check $b/ucx-cuda-run"
else
    run=$CUX_TEST_STRESS_RUN
fi
: >"$log"

hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null; wait 2>/dev/null; }
trap stop_hogs EXIT
if [ "${CUX_TEST_STRESS_LOAD:-hog}" = hog ]; then
    for _ in $(seq "$(nproc)"); do
        (while :; do :; done) &
        hogs+=($!)
    done
fi

has() { case ",$programs," in *",$1,"*) return 0 ;; esac; return 1; }
mpi_ok=0
if has mpi && [ -x "$b/test/cux_mpi_datacheck" ] && command -v mpirun >/dev/null; then
    mpi_ok=1
fi

sizes=(7 4095 8193 16384 65535 65536 65539 262143 262145 1048579 2097155)
shapes=("-n 2 -p one" "-n 3 -p all" "-n 4 -p all")
counts=(1 7 20)
ucp_modes=("" "--sweep" "--threads 2")

# The command of case i; empty when its program is left out. Each program's runs are numbered on their own (j),
# and its choices cycle with co-prime periods, so that every combination comes: 396 for the blocks (op and
# layout 4, shape 3, size 11, then count), 51 for the UCP check (case 17, mode 3).
case_of() {
    local i=$1 kind=$(($1 % 8)) j
    if [ $kind -lt 5 ]; then
        has blocks || return 0
        local ops=(put get) layouts=(one many)
        j=$((5 * (i / 8) + kind))
        echo "$run $b/bench/cux_blocks ${shapes[j % 3]} -o ${ops[j % 2]} -l ${layouts[(j / 2) % 2]}" \
             "-s ${sizes[j % 11]} -k ${counts[(j / 132) % 3]} -r 2 -f 1"
    elif [ $kind -lt 7 ]; then
        has ucp || return 0
        j=$((2 * (i / 8) + kind - 5))
        echo "$run $b/test/cux_ucp_datacheck --only $((j % 17)) ${ucp_modes[j % 3]}"
    elif [ $mpi_ok = 1 ]; then
        echo "eval \"\$($run --env)\"; OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun" \
             "--oversubscribe -np 2 --mca pml ucx --mca osc ^ucx -x LD_PRELOAD -x UCX_MEMTYPE_CACHE" \
             "-x CUX_DRIVER_PATH -x MOCK_CUDA_ASYNC -x UCX_TLS $b/test/cux_mpi_datacheck"
    fi
}

start=$(date +%s)
done_runs=0
failed=0
for ((n = 0; n < runs; ++n)); do
    i=$((first + n))
    cmd=$(case_of $i)
    if [ -z "$cmd" ]; then
        runs=$((runs + 1)) # a left-out program's slot does not count
        continue
    fi
    out=$(timeout -k 10 300 bash -c "$cmd" 2>&1)
    rc=$?
    done_runs=$((done_runs + 1))
    if [ $rc -ne 0 ] || echo "$out" | grep -qE 'BAD|wrong data|stale|^FAIL'; then
        failed=$((failed + 1))
        echo "run $i FAILED (exit $rc): $cmd"
        echo "$out" | grep -E 'BAD|wrong|stale|FAIL|cux_blocks: |signal' | head -n 3 | sed 's/^/    /'
        { echo "=== run $i (exit $rc): $cmd"; echo "$out"; } >>"$log"
    fi
done
echo "$done_runs runs, $failed failed, $(($(date +%s) - start)) seconds"
[ $failed -eq 0 ]
