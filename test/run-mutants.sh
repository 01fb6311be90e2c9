#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Mutation check of cuda_ipc's proofs: every check docs/threat-model.md relies on is weakened alone, in a copy of
# the tree, and the mock suites must then fail. A weakened check that passes every test is a check no test guards:
# the script says which and exits 1. Run it before and after changing src/ipc (HACKING.md); not part of the test
# command (about 2-4 minutes a check on 2 cores: a rebuild, then the tests).
#
#   test/run-mutants.sh [BUILD_DIR] [NAME...]     (BUILD_DIR: a configured build of this tree, default ./build;
#                                                  NAME: only those checks)
#
# The copy is configured anew against the UCX that BUILD_DIR was configured with, so that the tests start the
# copy's programs and module, never the tree's. The unweakened copy must first pass the tests the checks are aimed
# at (CUX_MUTANTS_NO_BASELINE=1 skips that). Each check is tried first with the tests aimed at it (fast), and, if
# they pass, with every mock suite of cuda_ipc (--gtest_fail_fast): only that verdict counts
# (CUX_MUTANTS_AIMED_ONLY=1 stops at the first, for a quick look). Writes MUTANTS_LOG (default
# ./build-mutants/mutants.log) and ends with "N caught, N not caught".
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd) || exit 2
shift $(( $# > 0 ? 1 : 0 ))
only=" $* "
work=${CUX_MUTANTS_DIR:-$top/build-mutants}
log=${MUTANTS_LOG:-$work/mutants.log}
prefix=$(sed -n 's/^UCX_PREFIX = //p' "$build/Makefile")
ucx_src=$(sed -n 's/^UCX_SRC = //p' "$build/Makefile")
[ -n "$ucx_src" ] || { echo "run-mutants: $build is not a configured build of this tree" >&2; exit 2; }

# NAME ~~ FILE ~~ WHAT IS WEAKENED (exactly once in FILE; \n: a new line) ~~ INTO ~~ THE TESTS AIMED AT IT
checks=$(cat <<'EOF'
identity-secret ~~ src/ipc/import/cux_ipc_proof.c ~~ (record.secret != addr->secret) ~~ (0) ~~ ipc_transport.*address*
identity-start-time ~~ src/ipc/import/cux_ipc_proof.c ~~ if (start_time != addr->start_time) { ~~ if (0) { ~~ ipc_transport.*address*:ipc_transport.a_peer_whose_memory_cannot_be_read*
key-read-back ~~ src/ipc/import/cux_ipc_proof_keys.c ~~ (memcmp(&held, key, sizeof(held)) != 0) ~~ (0) ~~ ipc_transport.*key*:ipc_rkey*
own-key-host ~~ src/ipc/export/cux_ipc_identity.c ~~ (key->system_id == cux_ipc_host_id()) && ~~  ~~ *audit5*:ipc_hosts*
legacy-handle-pid ~~ src/ipc/import/cux_ipc_proof_keys.c ~~ cux_ipc_handle_pid(&key->handle) != peer->pid ~~ 0 ~~ ipc_transport.*handle*:ipc_transport.a_peer_whose_memory_cannot_be_read*
peer-made-host ~~ src/ipc/import/cux_ipc_proof.h ~~  && (key->system_id == peer->system_id) ~~  ~~ ipc_hosts*:*audit5*
key-table-slot ~~ src/ipc/export/cux_ipc_key_table.c ~~ holds = (slot != NULL) && (slot->magic != 0) && !memcmp(slot, key, sizeof(*key)); ~~ holds = (slot != NULL) && (slot->magic != 0); ~~ ipc_containers.keys*:ipc_transport.*key*
server-peercred ~~ src/ipc/channel/cux_ipc_channel_serve.c ~~ (cred.uid != geteuid()) ~~ (0) ~~ ipc_channel*
client-peercred ~~ src/ipc/channel/cux_ipc_channel_ask.c ~~ (cred.uid != geteuid()) ~~ (0) ~~ ipc_containers.a_peer_out_of_reach*:ipc_channel*
channel-own-namespace ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ if (levels == 1) { ~~ if (0) { ~~ ipc_channel.*:ipc_containers.*
channel-nspid ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ (innermost != addr->pid) ~~ (0) ~~ ipc_containers.*:ipc_channel.*
channel-namespace-start-time ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ (((uint64_t)st.st_ino != addr->pid_ns) || (start_time != addr->start_time)) ~~ (0) ~~ ipc_containers.*:ipc_channel.*
channel-listener-process ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ (cux_ipc_proof_listener_inode(listener) == addr->process) ~~ (1) ~~ ipc_containers.*
channel-hello ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ (reply.proof == cux_ipc_proof_hello_hash(addr, nonce)) ~~ (1) ~~ ipc_containers.*:ipc_channel.*
hello-answer-hides-secret ~~ src/ipc/export/cux_ipc_identity.c ~~     return cux_siphash(key, &in, sizeof(in));\n}\n ~~     return addr->secret ^ nonce ^ (key[0] & 0);\n}\n ~~ ipc_channel.*
span-reply-length ~~ src/ipc/import/cux_ipc_proof_channel.c ~~ !=\n         (ssize_t)(CUX_IPC_CHANNEL_REPLY_HEADER + len)) || ~~ <\n         (ssize_t)CUX_IPC_CHANNEL_REPLY_HEADER) || ~~ ipc_containers.*:ipc_channel.*
reply-extra-descriptors ~~ src/base/cux_fd_passing.h ~~                 close(got); ~~                 (void)got; ~~ ipc_channel.*
channel-connections-bounded ~~ src/ipc/channel/cux_ipc_channel_serve.c ~~ (n - 2 >= cux_ipc_channel_clients_max()) ~~ (n - 2 >= cux_ipc_channel_clients_max() * 0 + CUX_IPC_CHANNEL_CLIENTS_MAX) ~~ ipc_audit5_server.*
remote-domain ~~ src/ipc/import/cux_ipc_proof_remote.c ~~ (addr->clique != ours.clique) ~~ (0) ~~ ipc_hosts*
remote-not-a-local-process ~~ src/ipc/import/cux_ipc_proof_remote.c ~~ (ucs_sys_get_proc_create_time(addr->pid) == addr->start_time) ~~ (0) ~~ ipc_hosts*:*audit5*
remote-fabric-keys-only ~~ src/ipc/common/cux_ipc_rkey.c ~~ (!cux_ipc_rkey_crosses_hosts(rkey) || !other_hosts) ~~ (!other_hosts) ~~ ipc_hosts*
cache-owner ~~ src/ipc/import/cux_ipc_cache.c ~~ (region->key.base == rkey->base) && (region->owner == owner)) { ~~ (region->key.base == rkey->base)) { ~~ ipc_containers.*:ipc_cache*
cache-same-allocation ~~ src/ipc/import/cux_ipc_cache.c ~~ if (cux_ipc_rkey_same_allocation(&region->key, rkey)) { ~~ if (1) { ~~ ipc_cache*:ipc_transport.*
rkey-covers ~~ src/ipc/common/cux_ipc_rkey.h ~~ (address - rkey->base <= rkey->length - length) ~~ (1) ~~ ipc_transport.*:ipc_rkey*
sgl-bounds-before-issue ~~ src/ipc/cux_ipc_sgl.c ~~ !cux_ipc_rkey_covers(key, remote_addrs[i], span) ~~ 0 ~~ ipc_sgl.*
sgl-room-before-issue ~~ src/ipc/cux_ipc_sgl.c ~~ if (completion->num_inflight + pieces > completion->max_inflight) { ~~ if (0) { ~~ ipc_sgl.*
idle-export-of-freed-memory ~~ src/ipc/export/cux_ipc_fd_export.c ~~ (buffer_id == p->probe_buffer_id) ~~ (1) ~~ ipc_transport.registrations_of_one_vmm*
EOF
)

mkdir -p "$work"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
t0=$(date +%s)

say "run-mutants: copying the tree into $work/tree and building it against $prefix ($ucx_src)"
rm -rf "$work/tree"
mkdir -p "$work/tree"
(cd "$top" && tar --exclude=./build --exclude='./build-*' --exclude=./deps --exclude=./gpu-carry --exclude=./.git \
    -cf - .) | tar -C "$work/tree" -xf -
mkdir -p "$work/tree/build"
(cd "$work/tree/build" && ../configure --with-ucx="$prefix" --with-ucx-src="$ucx_src" >configure.log 2>&1 &&
    make -j"$(nproc)" >make.log 2>&1 && make -j"$(nproc)" check TESTS= >make-check.log 2>&1) ||
    { say "run-mutants: the copy does not build (see $work/tree/build/*.log)"; exit 2; }
say "run-mutants: built in $(( $(date +%s) - t0 )) s"

suites='ipc*:ucp_programs.*:parity*:opcost.*'
tests() { # FILTER [GTEST_ARGS...]: 0 when every test passed
    local filter=$1
    shift
    (cd "$work/tree/build" && CUX_DRIVER_PATH="$PWD/test/.libs/libmockcuda.so" MOCK_CUDA_ASYNC=1 CUX_TEST_SUITE=mock \
        CUX_TEST_REQUIRE_GPU=1 timeout -k 10 1800 test/cux_gtest --gtest_filter="$filter" "$@" >>"$log.tests" 2>&1)
}

# The copy unweakened must pass what the checks' verdicts rest on, or a verdict of "caught" means nothing.
: >"$log.tests"
if [ "${CUX_MUTANTS_NO_BASELINE:-0}" != 1 ]; then
    aimed_all=$(awk -F ' ~~ ' 'NF == 5 {print $5}' <<<"$checks" | tr '\n' ':')
    t=$(date +%s)
    echo "=== baseline" >>"$log.tests"
    tests "$aimed_all" || { say "run-mutants: the unweakened copy fails the tests the checks are aimed at"; exit 2; }
    say "run-mutants: the unweakened copy passes the aimed tests ($(( $(date +%s) - t )) s)"
fi

caught=0 missed=0 missed_names=""
while IFS= read -r row; do
    [ -n "$row" ] || continue
    name=$(awk -F ' ~~ ' '{print $1}' <<<"$row")
    file=$(awk -F ' ~~ ' '{print $2}' <<<"$row")
    from=$(awk -F ' ~~ ' '{print $3}' <<<"$row")
    to=$(awk -F ' ~~ ' '{print $4}' <<<"$row")
    aimed=$(awk -F ' ~~ ' '{print $5}' <<<"$row")
    [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || continue
    t=$(date +%s)
    src="$work/tree/$file"
    cp "$src" "$src.orig"
    if ! python3 - "$src" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].replace('\\n', '\n'), sys.argv[3].replace('\\n', '\n')
text = open(path).read()
if text.count(old) != 1:
    sys.exit("%s: %r occurs %d times" % (path, old, text.count(old)))
open(path, 'w').write(text.replace(old, new))
PY
    then
        say "$name: STALE (the check is no longer written as listed: update run-mutants.sh)"
        missed=$((missed + 1)); missed_names="$missed_names $name"
        continue
    fi
    echo "=== $name" >>"$log.tests"
    if ! (cd "$work/tree/build" && make -j"$(nproc)" >>"$log.tests" 2>&1 &&
          make -j"$(nproc)" check TESTS= >>"$log.tests" 2>&1); then
        verdict="BROKEN: the weakened tree does not build (update run-mutants.sh)"
    elif ! tests "$aimed" --gtest_fail_fast; then
        verdict="caught by the tests aimed at it"
    elif [ "${CUX_MUTANTS_AIMED_ONLY:-0}" = 1 ]; then
        verdict="NOT CAUGHT by the tests aimed at it (CUX_MUTANTS_AIMED_ONLY: the mock suites not asked)"
    elif ! tests "$suites" --gtest_fail_fast; then
        verdict="caught by the mock suites"
    else
        verdict="NOT CAUGHT: every test passed"
    fi
    mv "$src.orig" "$src"
    touch "$src"
    say "$name: $verdict ($(( $(date +%s) - t )) s)"
    if [[ "$verdict" == caught* ]]; then
        caught=$((caught + 1))
    else
        missed=$((missed + 1)); missed_names="$missed_names $name"
    fi
done <<<"$checks"
(cd "$work/tree/build" && make -j"$(nproc)" >/dev/null 2>&1)
say "run-mutants: $(( $(date +%s) - t0 )) s${missed_names:+; not caught:$missed_names}"
say "$caught caught, $missed not caught"
[ "$missed" -eq 0 ]
