#!/usr/bin/env bash
# Real multi-host jobs on one machine: network namespaces as hosts, several
# ranks per namespace (benchmarks/netns/run.sh --hosts), so shared memory
# serves the ranks of a host and TCP over veth links the hosts. Runs checked
# collectives (every result compared bit for bit) on 2 hosts of 2 ranks and
# on hosts of 1, 2 and 3 ranks, every algorithm of allreduce and the
# data-movement and reduce-scatter collectives, and checks that the transports are the expected
# ones. Needs root (ip netns); as another user it is skipped (exit 77).
#   test/integration/netns_hosts.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: netns_hosts.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bench="$build/benchmarks/chorus-bench"
if [ "$(id -u)" -ne 0 ]; then
  echo "netns_hosts.sh: not root, cannot make network namespaces: skipped"
  exit 77
fi
log=$(mktemp /tmp/chorus-netns-test.XXXXXX)
namespaces_before=$(ip netns list | grep -c '^chns' || true)
trap 'rm -f "$log"' EXIT
failures=0

# run NAME EXPECTED_LINKS HOSTS -- chorus-bench arguments
run() {
  local name=$1 links=$2 hosts=$3
  shift 4
  echo "=== $name: hosts $hosts: chorus-bench $*"
  if ! "$root/benchmarks/netns/run.sh" --hosts "$hosts" --rate 10gbit --port $((29500 + RANDOM % 1000)) -- \
      "$bench" --check --timeout-ms 60000 "$@" > "$log" 2>&1; then
    echo "FAIL $name: the job failed"; cat "$log"; failures=$((failures + 1)); return
  fi
  cat "$log"
  if ! grep -q "# OK: 0 wrong elements in total" "$log"; then
    echo "FAIL $name: wrong elements"; failures=$((failures + 1))
  fi
  if ! grep -q "(rank 0: $links)" "$log"; then
    echo "FAIL $name: rank 0's peers are not served by '$links'"; failures=$((failures + 1))
  fi
}

run "allreduce, every algorithm" "shm to 1 peer, tcp to 2 peers" 2,2 -- \
  --op allreduce --algo all -b 8 -e 4M -f 32 --rounds 1 --time-budget-ms 20
run "allreduce, uneven hosts" "tcp to 5 peers" 1,2,3 -- \
  --op allreduce --algo all -b 4 -e 1M -f 64 --rounds 1 --time-budget-ms 20
for op in broadcast allgather reduce_scatter; do
  run "$op, uneven hosts, every algorithm" "tcp to 5 peers" 1,2,3 -- --op "$op" --algo all -b 64 -e 1M -f 64 \
    --rounds 1 --time-budget-ms 20
done
run "alltoall, 3 hosts of 2" "shm to 1 peer, tcp to 4 peers" 2,2,2 -- \
  --op alltoall -b 64 -e 256K -f 64 --rounds 1 --time-budget-ms 20

leftover=$(( $(ip netns list | grep -c '^chns' || true) - namespaces_before ))
if [ "$leftover" -ne 0 ]; then echo "FAIL: $leftover namespaces left behind"; failures=$((failures + 1)); fi
if [ "$failures" -ne 0 ]; then echo "netns_hosts.sh: $failures failures"; exit 1; fi
echo "netns_hosts.sh: all passed"
