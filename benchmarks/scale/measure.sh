#!/usr/bin/env bash
# Measures the runs docs/scale.md checks the simulator against: allreduce and
# broadcast, every algorithm, 2-16 ranks in shaped network namespaces (1 Gbit/s
# per host uplink), plus the 2-rank runs the model's link numbers are fitted
# from. One chorus-bench text output per run lands in OUT_DIR (default
# /tmp/chorus-scale); benchmarks/scale/compare.py joins them with
# chorus-project's projections. Must run as root (the netns harness); takes
# about 10-15 minutes on 2 cores.
#
#   flock .bench-lock benchmarks/scale/measure.sh /tmp/chorus-scale
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/chorus-scale}
bench=${CHORUS_BENCH:-$here/build/benchmarks/chorus-bench}
mkdir -p "$out"
common=(-b 8 -f 4 --rounds 3 --warmup 1 --time-budget-ms 100)

# Link numbers: a 2-rank ring allgather is one message each way per call.
"$here/benchmarks/netns/run.sh" --ranks 2 --rate 1gbit -- "$bench" --op allgather --algo ring -e 8M "${common[@]}" \
  > "$out/fit_remote.txt" 2>/dev/null
"$bench" --ranks 2 --op allgather --algo ring -e 8M "${common[@]}" > "$out/fit_local.txt" 2>/dev/null

# name  harness layout  largest size
runs=(
  "r2    --ranks 2       8M"
  "h22   --hosts 2,2     8M"
  "h44   --hosts 4,4     8M"
  "h4444 --hosts 4,4,4,4 2M"
)
for op in allreduce broadcast; do
  for run in "${runs[@]}"; do
    read -r name flag layout max <<< "$run"
    echo "measuring $op $name ($flag $layout)" >&2
    "$here/benchmarks/netns/run.sh" "$flag" "$layout" --rate 1gbit -- \
      "$bench" --op "$op" --algo all -e "$max" "${common[@]}" > "$out/${op}_${name}.txt" 2>/dev/null
  done
done
echo "done: $out" >&2
