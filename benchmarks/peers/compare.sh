#!/usr/bin/env bash
# Runs chorus-bench, gloo-bench (Gloo's ring, ring_chunked, halving_doubling and
# bcube allreduce; gloo::broadcast; gloo::allgather) and mpi-bench (Open MPI over
# --mca btl tcp,self and over its default shared memory) one after the other in
# the same session, on the same sizes, then prints chorus's busbw and 8-byte
# latency as ratios to each peer (ratios.py).
#   benchmarks/peers/compare.sh [--ranks 4] [--netns [--hosts 2,2] [--rate 1gbit] [--mtu 1500]] [-b 8] [-e 64M] [-f 2] [--ops "allreduce broadcast allgather"]
# --netns runs every library through benchmarks/netns/run.sh, one rank per
# namespace or --hosts ranks per namespace (Open MPI through run.sh --mpi,
# over TCP only: its shared memory would cross the hosts' shaped links).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ranks=4 netns=0 hosts="" rate=1gbit mtu=1500 min=8 max=64M step=2 ops="allreduce broadcast allgather"
chorus_bench=${CHORUS_BENCH:-$root/build/benchmarks/chorus-bench}
peers=${PEERS_DIR:-$root/build-peers}
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -f) step=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --chorus-bench) chorus_bench=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# From a clean clone the default binary is built first (scripts/build.sh, release).
if [ ! -x "$chorus_bench" ] && [ "$chorus_bench" = "$root/build/benchmarks/chorus-bench" ]; then
  "$root/scripts/build.sh" >&2
fi
[ -x "$chorus_bench" ] || { echo "compare.sh: no chorus-bench at $chorus_bench (set CHORUS_BENCH or --chorus-bench)" >&2; exit 2; }
# Build once; delete the binaries (or run build.sh) to rebuild.
[ -x "$peers/gloo-bench" ] && [ -x "$peers/mpi-bench" ] || "$here/build.sh" "$peers" >&2
out=${out:-$(mktemp -d /tmp/chorus-compare.XXXXXX)}
mkdir -p "$out"
store=$(mktemp -d /tmp/gloo-store.XXXXXX)
trap 'rm -rf "$store"' EXIT
export GLOO_BENCH_STORE_DIR=$store
sizes=(-b "$min" -e "$max" -f "$step")
if [ -n "$hosts" ]; then
  netns_args=(--hosts "$hosts" --rate "$rate" --mtu "$mtu")
  ranks=$(( $(echo "$hosts" | tr ',' '+') ))
else
  netns_args=(--ranks "$ranks" --rate "$rate" --mtu "$mtu")
fi

run_gloo_loopback() {  # one process per rank, chorus's env contract, Gloo's FileStore
  local pids=() job="gloo-$$-$RANDOM" status=0
  for ((r = 0; r < ranks; r++)); do
    if [ "$r" -eq 0 ]; then
      CHORUS_RANK=$r CHORUS_SIZE=$ranks CHORUS_JOB_ID=$job CHORUS_SOCKET_IFNAME=lo "$peers/gloo-bench" "$@" &
    else
      CHORUS_RANK=$r CHORUS_SIZE=$ranks CHORUS_JOB_ID=$job CHORUS_SOCKET_IFNAME=lo "$peers/gloo-bench" "$@" >/dev/null &
    fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  return $status
}
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$ranks" --bind-to none)

for op in $ops; do
  echo "=== $op, $ranks ranks, $([ $netns = 1 ] && echo "netns, egress $rate per host, MTU $mtu" || echo loopback)" >&2
  if [ "$netns" = 1 ]; then
    "$root/benchmarks/netns/run.sh" "${netns_args[@]}" -- \
      "$chorus_bench" --op "$op" --check "${sizes[@]}" | tee "$out/chorus.$op.txt"
    "$root/benchmarks/netns/run.sh" "${netns_args[@]}" -- \
      "$peers/gloo-bench" --op "$op" --check "${sizes[@]}" | tee "$out/gloo.$op.txt" || echo "# gloo-bench $op failed in the netns harness" | tee -a "$out/gloo.$op.txt"
    "$root/benchmarks/netns/run.sh" --mpi "${netns_args[@]}" -- \
      "$peers/mpi-bench" --op "$op" --check "${sizes[@]}" | tee "$out/mpi-tcp.$op.txt" || echo "# mpi-bench tcp $op failed in the netns harness" | tee -a "$out/mpi-tcp.$op.txt"
  else
    "$chorus_bench" --ranks "$ranks" --op "$op" --check "${sizes[@]}" | tee "$out/chorus.$op.txt"
    run_gloo_loopback --op "$op" --check "${sizes[@]}" | tee "$out/gloo.$op.txt" || echo "# gloo-bench $op failed" >&2
    "${mpi[@]}" --mca btl tcp,self "$peers/mpi-bench" --op "$op" --check "${sizes[@]}" | tee "$out/mpi-tcp.$op.txt" || echo "# mpi-bench tcp $op failed" >&2
    "${mpi[@]}" "$peers/mpi-bench" --op "$op" --check "${sizes[@]}" | tee "$out/mpi-shm.$op.txt" || echo "# mpi-bench shm $op failed" >&2
  fi
done
echo "# tables saved in $out" >&2
/usr/bin/python3 "$here/ratios.py" "$out"
