#!/usr/bin/env bash
# chorus-bench --device cuda --check as 2 and 4 processes sharing the GPU,
# over shared memory and over TCP, every collective. Skipped (77) without a
# device. Usage: run_bench_ranks.sh TEST_CUDA_DEVICE CHORUS_RUN CHORUS_BENCH
set -euo pipefail
probe=$1 run=$2 bench=$3
"$probe" --probe || exit $?
for transport in shm tcp; do
  for ranks in 2 4; do
    for op in allreduce broadcast reduce allgather reduce_scatter gather scatter alltoall; do
      echo "== $ranks ranks, $transport, $op"
      CHORUS_TRANSPORT=$transport "$run" -n "$ranks" -- "$bench" --device cuda --check --op "$op" \
        -b 8 -e 4M -f 8 --time-budget-ms 20 --rounds 1 | tail -n 1
    done
  done
done
