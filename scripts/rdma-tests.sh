#!/usr/bin/env bash
# The ibverbs transport for real, on Soft-RoCE: boots rxe-run's throw-away VM
# (QEMU, Debian's kernel, two rdma_rxe devices on a veth pair) and runs
# test/ibverbs/in_vm.sh there against this build. Everything in the VM is
# 10-50x slower than native; the run takes a few minutes.
#   scripts/rdma-tests.sh [BUILD-DIR]      (default: build)
# RXE_RUN names rxe-run when it is not at ../shared/tools/rxe-run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rxe_run=${RXE_RUN:-$root/../shared/tools/rxe-run}
if [ ! -x "$rxe_run" ]; then
  echo "rdma tests: rxe-run not found at $rxe_run (set RXE_RUN); they cannot run here" >&2
  exit 1
fi
work=$(mktemp -d /tmp/chorus-rdma.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 7 GiB: the 2.3 GB message sits in both buffers of one process.
"$rxe_run" -t 1500 -m 7G -c 2 "$work" sh "$root/test/ibverbs/in_vm.sh" "$build"
