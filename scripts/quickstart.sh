#!/usr/bin/env bash
# The main job: install dependencies, build, and run a checked 4-rank
# allreduce benchmark from 8 B to 64 MiB on this machine (no external service).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/benchmarks/chorus-bench --ranks 4 --op allreduce --check --min-bytes 8 --max-bytes 64M
