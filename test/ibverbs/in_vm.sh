#!/bin/sh
# Runs inside rxe-run's VM (scripts/rdma-tests.sh starts it): two Soft-RoCE
# devices, rxe0 on 10.77.0.1 and rxe1 on 10.77.0.2, joined by a veth pair.
# $1: the build directory (the host's file system is mounted read-only).
set -eu
build=$1
ulimit -l unlimited   # registered memory is locked memory
conformance=$build/test/transport/test_transport_conformance
# Each section says when it began (the VM's clock), so a slow run shows where its time went.
section() { echo; echo "== rdma [$(date +%T)]: $*"; }

section "the transport conformance suite over ibverbs (rxe0)"
export CHORUS_TEST_TRANSPORT=ibverbs CHORUS_TEST_ADDRESS=$RXE_IP0
# The abort tests' message: 32 MiB takes Soft-RoCE here over a second, so an
# abort still lands mid-transfer; filling and counting 256 MiB in the
# emulated CPUs took most of this section.
export CHORUS_TEST_ABORT_BYTES=33554432
"$conformance" "~[registry]~[fork]~[large]"
# A process that used RDMA cannot use it in a child it forks (librdmacm keeps
# the parent's device contexts): each [fork] case runs in a fresh process.
"$conformance" --list-test-names-only "[fork]" | grep -v '^$' | while read -r name; do
  "$conformance" "$(printf '%s' "$name" | sed 's/,/\\,/g')"
done

section "receives from any peer over ibverbs (recv_any)"
CHORUS_TEST_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 "$build/test/integration/test_recv_any" "~[kill]"

section "strangers at the rdma_cm listener; a peer with another job secret"
"$build/test/ibverbs/test_ibverbs_strangers"

section "which memory is pinned once (chorus's scratch, a registered buffer) and which per message (any other buffer)"
"$build/test/ibverbs/test_ibverbs_registration"

section "a 2.3 GB message (past 2 GiB: 31-bit lengths) over ibverbs"
CHORUS_TEST_LARGE_BYTES=2300000000 "$conformance" "[large]"
unset CHORUS_TEST_TRANSPORT CHORUS_TEST_ADDRESS CHORUS_TEST_ABORT_BYTES

# Ranks across the veth pair: even ranks on rxe0, odd ranks on rxe1.
cat > /tmp/alternate.sh <<'SCRIPT'
#!/bin/sh
if [ $((CHORUS_RANK % 2)) -eq 0 ]; then export CHORUS_SOCKET_IFNAME=veth0; else export CHORUS_SOCKET_IFNAME=veth1; fi
exec "$@"
SCRIPT
chmod +x /tmp/alternate.sh

section "one-sided windows over RDMA: the parameter server, 2 and 3 ranks, checked bit-exactly"
for ranks in 2 3; do
  CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 "$build/tools/chorus-run" -n $ranks -- \
    /tmp/alternate.sh "$build/benchmarks/chorus-parameter-server" --params 1000003 --steps 3 > /tmp/ps.log 2>&1 ||
    { cat /tmp/ps.log; exit 1; }
  cat /tmp/ps.log
  # Every peer reached with RDMA write and read, none emulated.
  [ "$(grep -c "native_peers=$((ranks - 1)) " /tmp/ps.log)" -eq $ranks ] || { echo "not every peer was native"; exit 1; }
done

# 2 to 4 ranks and the error cases at 6: the VM has 2 vCPUs, and 5 and 8
# ranks (two minutes of CI there) run over shm and tcp in the main suite.
section "every collective, 2 to 4 ranks, checked bit-exactly, and the error cases at 6 ranks, over ibverbs"
for ranks in 2 3 4; do
  CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 CHORUS_RANK_PROGRAM=$build/test/collectives/collective_rank \
    "$build/test/collectives/test_collectives" "every collective*" -c "$ranks processes"
done
CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 CHORUS_RANK_PROGRAM=$build/test/collectives/collective_rank \
  "$build/test/collectives/test_collectives" "selection and argument errors*"

section "real processes over verbs: a rank killed (SIGKILL) or stopped (SIGSTOP) is named by every survivor; the survivors shrink and carry on"
# Less the test of hostile bytes on TCP listening ports (these ranks listen
# on rdma_cm only) and its bit-exact matrix at 2 to 8 ranks with two stores
# (three of this run's minutes, in a VM of 2 emulated CPUs): the section
# above checks every collective over verbs at 2 to 4 ranks, and the main
# suite runs that matrix over shm and TCP.
CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 CHORUS_RANK_PROGRAM=$build/test/integration/rank_program \
  "$build/test/integration/test_processes" "~hostile bytes*" "~collectives give bit-exact results*"

section "chorus-bench --check across the veth pair (even ranks on rxe0, odd on rxe1)"
for ranks in 2 3; do
  CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 CHORUS_LOG=info "$build/tools/chorus-run" -n $ranks -- \
    /tmp/alternate.sh "$build/benchmarks/chorus-bench" --check -b 8 -e 16M -f 16 --iters 2 --warmup 1 --rounds 1 \
    > /tmp/bench.log 2>&1 || { cat /tmp/bench.log; exit 1; }
  grep -q "ibverbs serves" /tmp/bench.log || { cat /tmp/bench.log; echo "ibverbs did not serve the ranks"; exit 1; }
  cat /tmp/bench.log | grep -v "INFO"
done
# The caller's buffers registered (chorus::register_buffer) and reduced in
# place: pinned once, still right call after call.
CHORUS_TRANSPORT=ibverbs CHORUS_SOCKET_IFNAME=veth0 "$build/tools/chorus-run" -n 2 -- \
  /tmp/alternate.sh "$build/benchmarks/chorus-bench" --check --register --in-place -b 8 -e 16M -f 16 --iters 2 \
  --warmup 1 --rounds 1 > /tmp/bench.log 2>&1 || { cat /tmp/bench.log; exit 1; }
grep -q ", registered" /tmp/bench.log || { cat /tmp/bench.log; echo "chorus-bench did not register"; exit 1; }
grep -v "INFO" /tmp/bench.log
echo; echo "rdma tests: passed"
