#!/usr/bin/env bash
# one-off diagnosis of the NIXL kill case with our module (not part of the product)
set -u
o=${OUT:-/tmp/o}; mkdir -p "$o"
bash contrib/gpu-host-nixl.sh gpu-carry/nixl-run "build" >"$o/build.txt" 2>&1
prefix=/opt/ucx-1.22-cuda; nixl=$PWD/gpu-carry/nixl-run/nixl; w=/tmp/cux-nixl
export LD_LIBRARY_PATH=$prefix/lib:$nixl/lib:/usr/local/cuda/lib64 NIXL_PLUGIN_DIR=$nixl/lib/plugins UCX_WARN_UNUSED_ENV_VARS=n
for mod in ours ucx; do
  if [ $mod = ours ]; then cp "$w/build/.libs/libuct_cuda.so.0" "$prefix/lib/ucx/libuct_cuda.so.0"; modenv=
  else cp "$prefix/reference-module/libuct_cuda.so.0" "$prefix/lib/ucx/libuct_cuda.so.0"; modenv=UCX_CUDA_IPC_ENABLE_GET_ZCOPY=on; fi
  for ka in default 1s; do
    n=$mod-$ka; d=$(mktemp -d)
    extra=; [ "$ka" != default ] && extra="UCX_KEEPALIVE_INTERVAL=$ka"
    env $extra $modenv UCX_LOG_LEVEL=debug timeout -k 5 90 "$w/cux_nixl_kv" initiator "$d" -f kill -s 16m -k 1024 -l one -o write \
        >"$o/kill-$n.full" 2>&1
    echo "rc=$?" >>"$o/kill-$n.full"
    grep -E "cux_nixl_kv|RESULT|cuda_ipc|keepalive|ep_check|fail|rror|purge|discard|flush|rc=|lane" "$o/kill-$n.full" |
        tail -400 >"$o/kill-$n.txt"
    gzip -f "$o/kill-$n.full"
  done
done
# why NIXL's gtest saw no GPU: its CUDA libraries as the loader finds them
LD_LIBRARY_PATH=$prefix/lib:$nixl/debug/lib:$nixl/debug/lib/plugins:/usr/local/cuda/lib64 ldd "$nixl/debug/bin/gtest" |
    grep -iE "cud|not found" >"$o/gtest-ldd.txt" 2>&1
ls -la /usr/local/cuda/lib64/libcudart* >>"$o/gtest-ldd.txt" 2>&1
readelf -d "$nixl/debug/bin/gtest" | grep -iE "rpath|runpath|NEEDED" >>"$o/gtest-ldd.txt" 2>&1
printf '#include <cstdio>\n#include <cuda_runtime.h>\nint main(){int n=0;cudaError_t e=cudaGetDeviceCount(&n);printf("cudaGetDeviceCount: %%s, %%d\\n",cudaGetErrorString(e),n);return 0;}\n' >/tmp/cnt.cu
/usr/local/cuda/bin/nvcc -o /tmp/cnt /tmp/cnt.cu -cudart shared >>"$o/gtest-ldd.txt" 2>&1
LD_LIBRARY_PATH=$prefix/lib:$nixl/debug/lib:$nixl/debug/lib/plugins:/usr/local/cuda/lib64 /tmp/cnt >>"$o/gtest-ldd.txt" 2>&1
(cd /tmp/cux-nixl && LD_LIBRARY_PATH=$prefix/lib:$nixl/debug/lib:$nixl/debug/lib/plugins:/usr/local/cuda/lib64 \
    NIXL_PLUGIN_DIR=$nixl/debug/lib/plugins timeout -k 5 60 "$nixl/debug/bin/gtest" \
    --gtest_filter='*SingleWorkerPut/UCX_BLOCK*:ucx/TestTransfer.RandomSizes*' >"$o/gtest-gpu-probe.txt" 2>&1)
# the same pattern through UCP alone (test/cux_ucp_put_kill.c): puts of GPU memory, the peer killed, the flush
gcc -O1 -I$prefix/include test/cux_ucp_put_kill.c -L$prefix/lib -lucp -lucs -o /tmp/put_kill -Wl,-rpath,$prefix/lib \
    >"$o/putkill.txt" 2>&1
for mod in ours ucx; do
  if [ $mod = ours ]; then cp "$w/build/.libs/libuct_cuda.so.0" "$prefix/lib/ucx/libuct_cuda.so.0"
  else cp "$prefix/reference-module/libuct_cuda.so.0" "$prefix/lib/ucx/libuct_cuda.so.0"; fi
  for tls in self,tcp,cuda_copy,cuda_ipc all; do
    echo "== $mod, UCX_TLS=$tls" >>"$o/putkill.txt"
    env UCX_TLS=$tls timeout -k 5 40 /tmp/put_kill -n 1024 -s 16777216 -t 25 >>"$o/putkill.txt" 2>&1
    echo "rc=$?" >>"$o/putkill.txt"
  done
done
