#!/usr/bin/env bash
# Builds the peer drivers into ${1:-build-peers}: gloo-bench when Debian's
# libgloo-dev is installed, mpi-bench when mpicxx is. Skips (exit 0) what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../build-peers}
mkdir -p "$out"
flags=(-std=c++20 -O2 -Wall -Wextra -Werror -I"$here")
if [ -f /usr/include/gloo/allreduce_ring.h ] && [ -e /usr/lib/libgloo.so ]; then

  g++ "${flags[@]}" "$here/gloo_bench.cc" -o "$out/gloo-bench" -L/usr/lib -lgloo -pthread
  echo "built $out/gloo-bench"
else
  echo "build.sh: libgloo-dev not installed, skipping gloo-bench" >&2
fi
if command -v mpicxx >/dev/null; then
  mpicxx "${flags[@]}" "$here/mpi_bench.cc" -o "$out/mpi-bench"
  echo "built $out/mpi-bench"
else
  echo "build.sh: mpicxx not found, skipping mpi-bench" >&2
fi
