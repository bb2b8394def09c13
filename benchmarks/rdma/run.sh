#!/usr/bin/env bash
# chorus over ibverbs beside perftest (ib_write_bw, ib_send_bw, ib_send_lat)
# and beside chorus over TCP, all inside one rxe-run VM (Soft-RoCE on a veth
# pair; benchmarks/README.md records the results).
#   benchmarks/rdma/run.sh [BUILD-DIR [GLOO-BENCH]]   (gloo-bench: benchmarks/peers/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rxe_run=${RXE_RUN:-$root/../shared/tools/rxe-run}
work=$(mktemp -d /tmp/chorus-rdma-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
gloo=""
if [ -n "${2:-}" ]; then gloo="$work/gloo-bench" && cp "$2" "$gloo"; fi   # the guest's /tmp is its own
"$rxe_run" -t 1500 -m 4G -c 2 "$work" sh "$root/benchmarks/rdma/in_vm.sh" "$build" "$gloo"
