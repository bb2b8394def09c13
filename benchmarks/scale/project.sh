#!/usr/bin/env bash
# The projections docs/scale.md records: allreduce and allgather at 1k, 4k,
# 16k and 64k ranks (8 ranks per host), shared-memory-like links within a
# host and 100 Gbit/s-class uplinks, with a full-bisection core and a 1:4
# oversubscribed one. One chorus-project output per case lands in OUT_DIR
# (default /tmp/chorus-projections).
#
#   benchmarks/scale/project.sh /tmp/chorus-projections
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/chorus-projections}
tool=${CHORUS_PROJECT:-$here/build/tools/chorus-project}
mkdir -p "$out"
links=(--ranks-per-host 8 --local alpha_us=1,gbps=20 --remote alpha_us=5,gbps=12.5 --gamma-gbps 10)
for op in allreduce allgather; do
  for hosts in 128 512 2048 8192; do
    for oversubscription in 1 4; do
      name="${op}_$((hosts * 8))_os${oversubscription}"
      echo "projecting $name" >&2
      "$tool" --hosts "$hosts" "${links[@]}" --oversubscription "$oversubscription" --op "$op" \
        --sizes 8,64K,1M,16M,256M > "$out/$name.txt"
    done
  done
done
echo "done: $out" >&2
