#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Scatter-gather posting through UCX master: our module before and after a change, against master's own, profiled.
#
# What a scatter-gather put costs per block through UCP master (issue 62, items 1 and 5), on one UCX core:
#
#   OUT=DIR [CUX_SGL_GROUPS="..."] gpu-host/run sgl-post [build|GROUP...]
#
# From the carry ($carry): one ucx-*-src.tar.gz (UCX master with configure generated:
# gpu-host/prepare/prepare-ucx-src.sh), and before/ and after/, each holding a dist tarball of our module. Builds
# into $top/build-gpu (kept while the machine stays warm; "build" alone only builds): UCX with CUDA (its module kept
# as the reference), ours of before/ and of after/ against it, after/ once more with --enable-posting-profile
# (src/base/cux_profile.h: CUXPROF lines per stage at exit), and bench/cux_blocks. Then, for each GROUP (default:
# all of them, in this order), bench/blocks_compare.py with the four modules interleaved (master's, before, after,
# after profiled), CUX_SGL_REPEATS repeats (default 2), every block data-checked:
#   lists    one scatter-gather put per transfer (-G), 16 and 64 KB blocks, 1,000 and 10,000 per transfer, in one
#            allocation and in one per block;
#   large    the same with 100,000 blocks, one allocation;
#   large-many  100,000 blocks, one allocation per block;
#   single   one ucp_put_nbx / ucp_get_nbx per block (no list), 1,000 and 10,000 blocks: the path a list does not
#            take, which the change also touches;
#   lone     lists of one or two blocks of 64 KB-4 MB, 200 transfers each (a lone large descriptor: the profile
#            says how much of its posting is ours); lone-single: the same blocks put one by one;
#   launch-cost  no UCX: bench/cux_launch_cost.cu (built with nvcc) posts 1,000 and 10,000 copies of 16 and 64 KB
#            as kernel launches, the table by value (128-1,360 copies a launch), in mapped host memory or staged
#            to the GPU: what a launch costs the host by the way its copies' table reaches the kernel.
# CUX_SGL_VARIANTS="NAME:VAR=VALUE ..." adds after/'s plain module once more per entry, under NAME with that setting
# (ours-1024:UCX_CUDA_IPC_LIST_BATCH=1024: a list's launches in the large form, the same build).
# Writes $OUT/sgl-post/GROUP/ (blocks_compare's files, and profile.txt: the profiled module's CUXPROF lines).
set -u
out=${OUT:-/tmp/cux-out}/sgl-post
. "$(dirname "$0")/../lib.sh" # top, carry, the shared set-up
gh_report "$out/report.txt"
work=$top/build-gpu
prefix=$work/ucx
repeats=${CUX_SGL_REPEATS:-2}
mkdir -p "$out/logs"

build() {
    local ucx_tar src v
    if [ -x "$work/blocks/cux_blocks" ]; then
        say "builds from an earlier call of this machine"
        return 0
    fi
    ucx_tar=$(ls "$carry"/ucx-*-src.tar.gz | head -n 1)
    mkdir -p "$work" && tar -C "$work" -xzf "$ucx_tar" || { failed "unpacking $ucx_tar"; return 1; }
    ucx_src=$(ls -d "$work"/ucx-*/ | head -n 1)
    (export LD_LIBRARY_PATH= CUX_UCX_CONFIGURE_EXTRA="--without-verbs --without-rdmacm ac_cv_path_NVCC=" &&
        gh_reference_ucx "$ucx_src" "$prefix" "$out/logs/ucx-build.log") || { failed "UCX build"; return 1; }
    say "UCX $("$prefix/bin/ucx_info" -v | sed -n 's/^# Library version: //p') built with CUDA"
    for v in before after; do
        mkdir -p "$work/$v"
        tar -C "$work/$v" -xzf "$(ls "$carry/$v"/uct-cuda-plugin-*.tar.gz | head -n 1)" || { failed "unpacking $v"; return 1; }
    done
    src=$(ls -d "$work"/after/uct-cuda-plugin-*/ | head -n 1)
    gh_plugin_build "$(ls -d "$work"/before/uct-cuda-plugin-*/ | head -n 1)" "$work/before/build" "$prefix" \
        "$ucx_src" "$out/logs/before" &
    gh_plugin_build "$src" "$work/after/build" "$prefix" "$ucx_src" "$out/logs/after" &
    gh_plugin_build "$src" "$work/after/build-profile" "$prefix" "$ucx_src" "$out/logs/profile" \
        --enable-posting-profile &
    wait
    for v in before/build after/build after/build-profile; do
        [ -e "$work/$v/.libs/libuct_cuda.so" ] || { failed "our module ($v), see logs/"; return 1; }
    done
    make -C "$work/after/build" bench/cux_blocks >"$out/logs/blocks-build.log" 2>&1 || { failed "cux_blocks"; return 1; }
    mkdir -p "$work/blocks"
    cp "$work/after/build/bench/cux_blocks" "$work/blocks/cux_blocks"
    say "modules and cux_blocks built"
}

group_args() {
    case $1 in
    lists) echo "-G -s 16k,64k -k 1000,10000 -l one,many -o put -r 5 -f 0 -M 4g" ;;
    large) echo "-G -s 16k,64k -k 100000 -l one -o put -r 3 -f 0 -M 8g" ;;
    large-many) echo "-G -s 16k,64k -k 100000 -l many -o put -r 3 -f 0 -M 8g" ;;
    single) echo "-s 16k,64k -k 1000,10000 -l one,many -o put,get -r 5 -f 0 -M 4g" ;;
    lone) echo "-G -s 64k,256k,1m,4m -k 1,2 -l one -o put -r 200 -f 0 -M 1g" ;;
    lone-single) echo "-s 64k,256k,1m,4m -k 1,2 -l one -o put -r 200 -f 0 -M 1g" ;;
    *) return 1 ;;
    esac
}

compare() {
    local group=$1 args dir v variants=()
    args=$(group_args "$group") || { failed "no group '$group'"; return 1; }
    for v in ${CUX_SGL_VARIANTS:-}; do
        variants+=(--module "${v%%:*}=$work/after/build/.libs/libuct_cuda.so,${v#*:}")
    done
    dir=$out/$group
    mkdir -p "$dir"
    nvidia-smi --query-gpu=index,name,memory.used --format=csv,noheader >"$dir/gpus.txt" 2>&1
    LD_LIBRARY_PATH="$prefix/lib" python3 "$top/bench/blocks_compare.py" --prefix "$prefix" \
        --module "ucx-master=$prefix/reference-module/libuct_cuda.so.0" \
        --module "ours-before=$work/before/build/.libs/libuct_cuda.so" \
        --module "ours=$work/after/build/.libs/libuct_cuda.so" \
        --module "ours-profiled=$work/after/build-profile/.libs/libuct_cuda.so" "${variants[@]}" \
        --blocks "$work/blocks/cux_blocks" --args "$args" --repeats "$repeats" \
        --timeout "${CUX_SGL_TIMEOUT:-150}" --out "$dir" >"$dir/compare.log" 2>&1
    say "$group: blocks_compare exit $?"
    zcat -f "$dir"/raw/*ours-profiled* 2>/dev/null | grep '^CUXPROF' >"$dir/profile.txt"
}

launch_cost() {
    local dir=$out/launch-cost n b
    mkdir -p "$dir"
    /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -o "$work/cux_launch_cost" "$top/bench/cux_launch_cost.cu" \
        >"$dir/build.log" 2>&1 || { failed "cux_launch_cost build, see launch-cost/build.log"; return 1; }
    for n in 1000 10000; do
        for b in 16384 65536; do
            timeout -k 5 120 "$work/cux_launch_cost" "$n" "$b" 7 >>"$dir/launch-cost.txt" 2>&1 ||
                failed "cux_launch_cost $n $b"
        done
    done
    say "launch-cost: $(grep -c 'data check: passed' "$dir/launch-cost.txt") of 4 cases checked"
}

build || { tar -C "$out" -czf "$out/logs.tar.gz" logs; exit 1; }
[ "${1:-}" = build ] && exit 0
for group in ${@:-${CUX_SGL_GROUPS:-lists large single large-many}}; do
    case $group in
    launch-cost) launch_cost ;;
    *) compare "$group" ;;
    esac
done
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$out/logs"
exit "$rc"
