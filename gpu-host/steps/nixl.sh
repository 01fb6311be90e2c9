#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NIXL over each module on UCX 1.22 with CUDA: its gtest, nixlbench, cux_nixl_kv, namespaces, faults.
#
# NIXL, the transfer library of vLLM, Dynamo and SGLang, over our module and over UCX's own on a GPU host
# (issue 46), every module on the same UCX 1.22 core (built here with CUDA) and the same NIXL:
#
#   OUT=DIR gpu-host/run nixl CARRY [STAGES]
#
# CARRY holds ucx-1.22.0-src.tar.gz (gpu-host/prepare/prepare-ucx-src.sh), the plugin's dist tarball, and nixl/ (NIXL
# with its UCX plugin and nixlbench, and its tests in nixl/debug: contrib/build-nixl.sh against UCX 1.22); a dist
# tarball in CARRY/before/ adds ours of that commit to every comparison as ours-before, between UCX's and ours, and
# one in each CARRY/at-NAME/ ours of another commit as ours-at-NAME (prepare-nixl-carry.sh's AT commits).
# gpu-host/prepare/prepare-nixl-carry.sh makes such a carry from a fresh checkout.
# CUX_NIXL_UCX=NAME takes CARRY/NAME-src.tar.gz (its tree NAME) instead, into /opt/NAME-cuda: UCX master for
# NIXL's scatter-gather path (issue 62: NIXL master built against it); CUX_NIXL_SGL=1 adds each module once more
# with NIXL_UCX_SGL_ENABLE=1 (ucx-sgl, ours-sgl) to every comparison. CUX_NIXL_PREFIX and CUX_NIXL_UCX_SRC name a
# UCX already built with CUDA there and its source tree (gpu-host/run sgl-post's, on the same warm machine).
# STAGES (default "build gtest sweep kv pidns faults"); a stage finds what "build" made when the machine still holds it:
#   build   UCX 1.22 with CUDA into /opt/ucx-1.22-cuda (UCX's module kept in reference-module/), our module from
#           the dist tarball against it, bench/cux_nixl_kv against NIXL;
#   gtest   NIXL's own tests of its UCX backend (nixl-gtest, the UCX cases) with each module in place;
#   sweep   nixlbench VRAM to VRAM, WRITE and READ: 4 KB-1 MB with 1-1,024 descriptors per transfer, and
#           2-64 MB with 1-64 (nixlbench's check copies every descriptor to the host: 64 MB x 1,024 would be
#           64 GB per configuration); the KV-cache shape (45 KB blocks, 1,024-4,096 per transfer);
#   kv      bench/cux_nixl_kv: 45 KB blocks, 1,024 and 16,384 per transfer, one allocation per block and one for
#           all, WRITE and READ, each block checked with a pattern of its own;
#   pidns   the target in a PID namespace of its own (unshare --pid --fork --kill-child --mount-proc) with
#           UCX_CUDA_IPC_SOCKET_DIR: nixlbench and cux_nixl_kv, and UCX_PROTO_INFO's word on the transport;
#   faults  cux_nixl_kv -f kill and -f release with each module;
#   plugin-path  ours through UCX_PLUGIN_PATH with UCX's own module left in place (the README's 1.22 route);
#   ucp-blocks   the kv stage's shape through UCP alone (bench/cux_blocks, no NIXL): the posting cost per block
#           with 1,024 and 16,384 allocations, each module, to tell NIXL's share of the cost from UCP's and ours.
# CUX_NIXL_REPEATS (default 3) sets the repeats, CUX_NIXL_SWEEP_REPEATS those of the two long sweeps,
# CUX_NIXL_CPUS=I:T pins the initiator and target of each nixlbench run (nixl_compare.py --cpus: a run on a slower
# core moved NIXL's own CPU work 0.6-1.9x as much as a module did), CUX_NIXL_WITHOUT_UCX=1 leaves UCX's module out
# where CARRY/before/ is there (ours against ours-before alone),
# CUX_NIXL_SWEEPS which nixlbench sweeps run (default "small large kv-shape"; "lone": 64 KB-4 MB with one or two
# descriptors, 1,000 iterations; "batched": 4-64 KB with 64-1,024 descriptors, a quarter of small's cells, so that
# five or more repeats fit one call where two repeats of small cannot tell builds apart), CUX_NIXL_OPS their
# operations (nixl_compare.py --ops: default WRITE and READ),
# CUX_NIXL_KV_BLOCKS the blocks per transfer of the kv stage (default "1024 16384") and CUX_NIXL_KV_OPS its
# operations (default "write read"), CUX_NIXL_FAULT_SHAPES the faults' sizes ("-s 4m -k 512;...")
# and CUX_NIXL_FAULT_REPEATS their repeats (default 1). Writes $OUT/nixl.txt and $OUT/nixl-logs.tar.gz.
set -u
. "$(dirname "$0")/../lib.sh" # top, say, failed, the shared set-up
carry=$(cd "${1:?usage: gpu-host/run nixl CARRY [STAGES]}" && pwd)
stages=${2:-build gtest sweep kv pidns faults}
out=${OUT:-/tmp/cux-out}
ucx_name=${CUX_NIXL_UCX:-ucx-1.22.0}
prefix=${CUX_NIXL_PREFIX:-/opt/$ucx_name-cuda}
work=/tmp/cux-nixl
nixl="$carry/nixl"
repeats=${CUX_NIXL_REPEATS:-3}
logs="$work/logs"
gh_report "$out/nixl.txt"
mkdir -p "$logs"
finish() { tar -C "$work" -czf "$out/nixl-logs.tar.gz" logs; say "done: exit $rc"; exit $rc; }
has() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
ours="$work/build/.libs/libuct_cuda.so.0"
# before/, then at-NAME/: earlier commits' dists, each built into build-DIR and compared as ours-DIR
earlier=$(cd "$carry" && { [ ! -d before ] || echo before; ls -d at-* 2>/dev/null; } | paste -sd' ')
kv="$work/cux_nixl_kv"
ucx_module="$prefix/reference-module/libuct_cuda.so.0"
export LD_LIBRARY_PATH="$prefix/lib:$nixl/lib:/usr/local/cuda/lib64" NIXL_PLUGIN_DIR="$nixl/lib/plugins" \
    UCX_WARN_UNUSED_ENV_VARS=n
chmod +x "$nixl"/bin/* "$nixl"/debug/bin/* 2>/dev/null # a carried tree may arrive without its modes

# DIST BUILD LOGS: one of our dist tarballs built against this UCX into BUILD, unless BUILD holds that build
# already: a warm machine keeps the builds of earlier calls, known by the UCX prefix and the tarball's checksum (a
# build for another UCX does not load here, and another carry's tarball is another build).
build_ours() {
    local dist=$1 build=$2 logs=$3 built src
    built="$prefix $(md5sum <"$dist")"
    [ -f "$build/.libs/libuct_cuda.so.0" ] && [ "$(cat "$build/.cux-built" 2>/dev/null)" = "$built" ] && return 0
    rm -rf "$build" "$build-src" && mkdir -p "$build-src" && tar -C "$build-src" -xzf "$dist" &&
        src=$(ls -d "$build-src"/uct-cuda-plugin-*/ | head -n 1) &&
        gh_plugin_build "$src" "$build" "$prefix" "${CUX_NIXL_UCX_SRC:-$work/$ucx_name}" "$logs" &&
        echo "$built" >"$build/.cux-built"
}

say "stages: $stages; $(nvidia-smi -L | wc -l) GPU(s):" \
    "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
if has build; then
    if [ ! -x "$prefix/bin/ucx_info" ]; then
        tar -C "$work" -xzf "$carry/$ucx_name-src.tar.gz"
        CUX_UCX_CONFIGURE_EXTRA='--without-verbs --without-rdmacm ac_cv_path_NVCC=' \
            gh_reference_ucx "$work/$ucx_name" "$prefix" "$logs/ucx-build.log" || { failed "$ucx_name build"; finish; }
    fi
    say "$(grep -h '^reference UCX' "$logs/ucx-build.log" 2>/dev/null || echo "UCX in $prefix (built earlier)")"
    # ours (the carry's dist tarball), then each earlier commit's (CARRY/before/, CARRY/at-NAME/), into build-DIR
    build_ours "$(ls "$carry"/uct-cuda-plugin-*.tar.gz | head -n 1)" "$work/build" "$logs" ||
        { failed "plugin build"; finish; }
    for dir in $earlier; do
        build_ours "$(ls "$carry/$dir"/uct-cuda-plugin-*.tar.gz | head -n 1)" "$work/build-$dir" "$logs/$dir" ||
            { failed "plugin build ($dir/)"; finish; }
    done
    g++ -O2 -std=c++17 -o "$kv" "$top/bench/cux_nixl_kv.cpp" -I"$nixl/include" -I/usr/local/cuda/include \
        -L"$nixl/lib" -lnixl -lnixl_build -lserdes -L/usr/local/cuda/lib64/stubs -lcuda \
        -Wl,-rpath,"$nixl/lib" >"$logs/kv-build.log" 2>&1 || { failed "cux_nixl_kv build"; finish; }
    for m in "$ucx_module" "$ours" $(for dir in $earlier; do echo "$work/build-$dir/.libs/libuct_cuda.so.0"; done); do
        module_in_place "$prefix" "$m"
        tls=$("$prefix/bin/ucx_info" -d | grep -E 'Transport: cuda' | tr -s ' ' | paste -sd' ')
        say "$(basename "$(dirname "$(dirname "$m")")")/$(basename "$m"): $tls"
        [ -n "$tls" ] || { failed "$m offers no transport in $prefix (built for another UCX?)"; finish; }
    done
fi
[ -f "$ours" ] && [ -x "$kv" ] || { failed "nothing built (run the build stage)"; finish; }
# UCX's module as deployments run it: gets over cuda_ipc turned on (without NVLink it offers none by default,
# and NIXL's reads then crawl: 0.4-0.5 GB/s at 64 KB on one H200, a sweep that did not end in 150 s).
modules=(--module "ucx=$ucx_module,UCX_CUDA_IPC_ENABLE_GET_ZCOPY=on")
# CUX_NIXL_WITHOUT_UCX=1 with CARRY/before/: ours against ours-before alone (a no-regression run, a third shorter)
[ "${CUX_NIXL_WITHOUT_UCX:-0}" = 1 ] && [ -d "$carry/before" ] && modules=()
# CARRY/before/: ours of an earlier commit beside ours, interleaved (a no-regression check); CARRY/at-NAME/: more
# commits between the two, as ours-at-NAME (a bisection in one call)
for dir in $earlier; do
    modules+=(--module "ours-$dir=$work/build-$dir/.libs/libuct_cuda.so.0")
done
modules+=(--module "ours=$ours")
# CUX_NIXL_SGL=1: each module once more with NIXL's scatter-gather writes (NIXL master on UCX master), interleaved
if [ "${CUX_NIXL_SGL:-0}" = 1 ]; then
    modules+=(--module "ucx-sgl=$ucx_module,UCX_CUDA_IPC_ENABLE_GET_ZCOPY=on,NIXL_UCX_SGL_ENABLE=1"
        --module "ours-sgl=$ours,NIXL_UCX_SGL_ENABLE=1")
fi

gpu_put_transports() { # LOG...: the transports in UCP_PROTO_INFO's tables of puts from GPU to GPU memory
    grep -h -A6 'ucp_put.* from cuda.* to cuda' "$@" | grep -oE 'cuda_ipc|cuda_copy|tcp|sysv|posix|cma' |
        sort | uniq -c | paste -sd' '
}
nixlbench_pair() { # LOG TIMEOUT "ARGS" [TARGET WRAPPER...]: one initiator and one target nixlbench, ASIO
    # runtime on a port of their own, UCX_PROTO_INFO on; LOG-initiator.log ends with both exit statuses
    local log=$1 limit=$2 args="--runtime_type ASIO --asio_port $((20000 + RANDOM % 20000)) --backend UCX $3" i t
    shift 3
    UCX_PROTO_INFO=y timeout -k 5 "$limit" "$nixl/bin/nixlbench" $args >"$log-initiator.log" 2>&1 &
    sleep 1
    UCX_PROTO_INFO=y timeout -k 5 "$limit" "$@" "$nixl/bin/nixlbench" $args >"$log-target.log" 2>&1
    t=$?
    wait $!
    i=$?
    echo "exit: initiator $i, target $t" >>"$log-initiator.log"
}
nixl_gtest() { # FILTER LOG [VAR=VALUE...]: NIXL's debug gtest binary from $work
    local filter=$1 log=$2
    shift 2
    (cd "$work" && env LD_LIBRARY_PATH="$prefix/lib:$nixl/debug/lib:$nixl/debug/lib/plugins:/usr/local/cuda/lib64" \
        NIXL_PLUGIN_DIR="$nixl/debug/lib/plugins" "$@" timeout -k 5 240 "$nixl/debug/bin/gtest" \
        --tests_plugin_dirs="$nixl/debug/lib/gtest-plugins" --gtest_filter="$filter" >"$log" 2>&1)
}
if has gtest; then
    # One process, two agents: NIXL's transfer, notification, error-handling and metadata tests of its UCX
    # backend, DRAM and (with a GPU) VRAM, and its device-API tests (GPU-initiated puts through UCP).
    for name in ucx ours; do
        module_use "$prefix" "$name" "$ours"
        nixl_gtest "${CUX_NIXL_GTEST_FILTER:-*ucx*:*Ucx*:*UCX*}" "$logs/gtest-$name.log"
        say "NIXL's gtest, UCX cases, $name's module: exit $?;" \
            "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) \] [0-9]' "$logs/gtest-$name.log" | paste -sd' ')"
        grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/gtest-$name.log" | sort -u >"$work/gtest-failed-$name.txt"
        # Which transports carried the test whose buffers are in GPU memory when the binary sees a GPU.
        nixl_gtest 'ucx/TestTransfer.remoteMDFromSocket/*' "$logs/gtest-proto-$name.log" UCX_PROTO_INFO=y
        say "  remoteMDFromSocket (VRAM with a GPU), $name's module: exit $?; UCP's protocols name" \
            "$(gpu_put_transports "$logs/gtest-proto-$name.log")"
    done
    failed_ucx="$work/gtest-failed-ucx.txt" failed_ours="$work/gtest-failed-ours.txt"
    say "failed with UCX's module only: $(comm -23 "$failed_ucx" "$failed_ours" | paste -sd' ')"
    say "failed with ours only: $(comm -13 "$failed_ucx" "$failed_ours" | paste -sd' ')"
fi

vram="--initiator_seg_type VRAM --target_seg_type VRAM"
compare() { # NAME ARGS [nixl_compare options...]
    local name=$1 args=$2
    shift 2
    python3 "$top/bench/nixl_compare.py" --prefix "$prefix" --nixl "$nixl" "${modules[@]}" --args "$args" \
        --repeats "$repeats" --timeout 150 --out "$work/logs/$name" ${CUX_NIXL_OPS:+--ops "$CUX_NIXL_OPS"} \
        ${CUX_NIXL_CPUS:+--cpus "$CUX_NIXL_CPUS"} "$@" \
        >"$logs/$name.log" 2>&1
    say "nixlbench $name: exit $?"
    sed -n '/^| op/,$p' "$work/logs/$name/report.md" | grep -E '^Runs|^Cells' | sed 's/^/   /' | tee -a "$gh_report_file"
}
sweeps=${CUX_NIXL_SWEEPS:-small large kv-shape}
sweep_has() { case " $sweeps " in *" $1 "*) return 0 ;; esac; return 1; }
if has sweep && sweep_has small; then
    compare sweep-small "$vram --start_block_size 4096 --max_block_size 1048576 --start_batch_size 1 \
        --max_batch_size 1024 --num_iter 200 --warmup_iter 20" --repeats "${CUX_NIXL_SWEEP_REPEATS:-$repeats}"
fi
if has sweep && sweep_has large; then
    compare sweep-large "$vram --start_block_size 2097152 --max_block_size 67108864 --start_batch_size 1 \
        --max_batch_size 64 --num_iter 64 --warmup_iter 8 --large_blk_iter_ftr 4" \
        --repeats "${CUX_NIXL_SWEEP_REPEATS:-$repeats}"
fi
if has sweep && sweep_has lone; then
    # one or two descriptors of 64 KB-4 MB per transfer, many iterations: the cells a lone large descriptor decides
    compare sweep-lone "$vram --start_block_size 65536 --max_block_size 4194304 --start_batch_size 1 \
        --max_batch_size 2 --num_iter 1000 --warmup_iter 100" --repeats "${CUX_NIXL_SWEEP_REPEATS:-$repeats}"
fi
if has sweep && sweep_has batched; then
    # the cells where posting decides (issue 62, item 3): run-to-run spread there is 10-15% at two repeats
    compare sweep-batched "$vram --start_block_size 4096 --max_block_size 65536 --start_batch_size 64 \
        --max_batch_size 1024 --num_iter 200 --warmup_iter 20" --repeats "${CUX_NIXL_SWEEP_REPEATS:-$repeats}"
fi
if has sweep && sweep_has kv-shape; then
    compare kv-shape "$vram --start_block_size 46080 --max_block_size 46080 --start_batch_size 1024 \
        --max_batch_size 4096 --num_iter 100 --warmup_iter 10"
fi

kv_compare() { # NAME [nixl_kv_compare options...]
    local name=$1
    shift
    python3 "$top/bench/nixl_kv_compare.py" --prefix "$prefix" --nixl "$nixl" --kv "$kv" "${modules[@]}" \
        --timeout "${CUX_NIXL_KV_TIMEOUT:-180}" --repeats "$repeats" --out "$work/logs/$name" "$@" >"$logs/$name.log" 2>&1
    say "cux_nixl_kv $name: exit $?"
    grep -E '^\| `|^Runs|^- ' "$work/logs/$name/report.md" | sed 's/^/   /' | tee -a "$gh_report_file"
}
if has kv; then
    cases=()
    for k in ${CUX_NIXL_KV_BLOCKS:-1024 16384}; do
        for layout in many one; do
            for op in ${CUX_NIXL_KV_OPS:-write read}; do cases+=(--case "-s 45k -k $k -l $layout -o $op -i 20 -w 3"); done
        done
    done
    kv_compare kv "${cases[@]}"
fi

if has pidns; then
    sock=/tmp/cux-nixl-sock
    mkdir -p "$sock"
    export UCX_CUDA_IPC_SOCKET_DIR=$sock
    wrap="unshare --pid --fork --kill-child --mount-proc"
    # Which transport moved the data: UCP's protocol table for a 1 MB VRAM put, target in its namespace.
    module_in_place "$prefix" "$ours"
    for where in host pidns; do
        w=; [ "$where" = pidns ] && w=$wrap
        log="$logs/proto-$where"
        nixlbench_pair "$log" 60 "$vram --start_block_size 1048576 --max_block_size 1048576 --num_iter 20 \
            --warmup_iter 2 --check_consistency" $w
        say "ours, target on the $where: $(gpu_put_transports "$log"-*.log) (UCP's puts from GPU to GPU memory)"
    done
    across="$vram --start_block_size 65536 --max_block_size 16777216 --start_batch_size 1 --max_batch_size 16 \
        --num_iter 100 --warmup_iter 10"
    compare pidns-nixlbench "$across" --ops WRITE --target-wrap "$wrap"
    compare host-nixlbench "$across" --ops WRITE
    kv_compare pidns-kv --case "-s 45k -k 1024 -l many -o write -i 20 -w 3" \
        --case "-s 45k -k 1024 -l many -o read -i 20 -w 3" --target-wrap "$wrap"
    unset UCX_CUDA_IPC_SOCKET_DIR
fi

if has plugin-path; then
    # The README's other route on 1.22: UCX's own module stays in place and UCX_PLUGIN_PATH names the directory
    # holding ours, in both processes. Which module answered: ours has settings UCX's lacks (SOCKET_DIR).
    plugdir="$work/plugin-path"
    mkdir -p "$plugdir"
    cp "$ours" "$plugdir/libuct_cuda.so.0"
    module_in_place "$prefix" "$ucx_module"
    say "UCX_PLUGIN_PATH=$plugdir: UCX's settings name SOCKET_DIR $(UCX_PLUGIN_PATH=$plugdir "$prefix/bin/ucx_info" \
        -c 2>/dev/null | grep -c CUDA_IPC_SOCKET_DIR) time(s) (1: ours, 0: UCX's own); without it" \
        "$("$prefix/bin/ucx_info" -c 2>/dev/null | grep -c CUDA_IPC_SOCKET_DIR)"
    log="$logs/plugin-path"
    (export UCX_PLUGIN_PATH=$plugdir
     nixlbench_pair "$log" 90 "$vram --start_block_size 65536 --max_block_size 65536 --start_batch_size 1024 \
         --max_batch_size 1024 --num_iter 100 --warmup_iter 10 --check_consistency")
    say "nixlbench WRITE 64 KB x 1,024 through UCX_PLUGIN_PATH: $(tail -n 1 "$log-initiator.log");" \
        "UCP's puts from GPU to GPU memory: $(gpu_put_transports "$log"-*.log);" \
        "$(grep -hE '^\s*65536\s+1024' "$log-initiator.log" | tr -s ' ' | head -1) (block, batch, B/W GB/s, ...)"
fi

if has ucp-blocks; then
    blocks="$work/cux_blocks" # a check program of the plugin's build (it needs gtest): built here alone
    gcc -O2 -std=gnu11 -I"$top/src" -I"$prefix/include" "$top/bench/cux_blocks.c" -L"$prefix/lib" -lucp -lucs -ldl \
        -Wl,-rpath,"$prefix/lib" -o "$blocks" >"$logs/cux-blocks-build.log" 2>&1 || failed "cux_blocks build"
    python3 "$top/bench/blocks_compare.py" --prefix "$prefix" --module "ucx=$ucx_module" --module "ours=$ours" \
        --blocks "$blocks" --args "-s 45k -k 1024,16384 -l one,many -o put,get -r 5 -f 0 -M 2g" \
        --repeats "$repeats" --timeout 120 --out "$logs/ucp-blocks" >"$logs/ucp-blocks.log" 2>&1
    say "cux_blocks 45 KB x 1,024 and 16,384 through UCP: exit $? (table: ucp-blocks/blocks.md)"
fi

if has faults; then
    # 512 x 4 MB, and 1,024 x 16 MB so that UCX's module too still has copies in flight when the target dies.
    n=0
    IFS=';' read -ra shapes <<<"${CUX_NIXL_FAULT_SHAPES:--s 4m -k 512;-s 16m -k 1024}"
    for shape in "${shapes[@]}"; do
        kv_compare "faults-$n" --faults "$shape -l one -o write" --repeats "${CUX_NIXL_FAULT_REPEATS:-1}" --timeout 120
        n=$((n + 1))
    done
fi
finish
