#!/usr/bin/env bash
# chorus-bench --device cuda --check as 2 and 4 processes sharing the GPU,
# over CUDA IPC (device plans, device kernels), shared memory and TCP (both
# staged through host memory), every collective. Skipped (77) without a
# device. Usage: run_bench_ranks.sh TEST_CUDA_DEVICE CHORUS_RUN CHORUS_BENCH
set -euo pipefail
probe=$1 run=$2 bench=$3
"$probe" --probe || exit $?
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for transport in cuda_ipc shm tcp; do
  for ranks in 2 4; do
    for op in allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall; do
      echo "== $ranks ranks, $transport, $op"
      CHORUS_TRANSPORT=$transport "$run" -n "$ranks" -- "$bench" --device cuda --check --op "$op" \
        -b 8 -e 4M -f 8 --time-budget-ms 20 --rounds 1 > "$log" 2>&1 || { cat "$log"; exit 1; }
      head -n 1 "$log"
      # The header names what served the peers: the transport must be the one asked for.
      grep -q "rank 0: $transport to" "$log" || { echo "rank 0's peers were not served by $transport" >&2; exit 1; }
      tail -n 1 "$log"
    done
  done
done
