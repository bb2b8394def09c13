#!/usr/bin/env bash
# Runs a program only where there is a CUDA device; exits 77 (Meson: skipped)
# elsewhere. Usage: if_gpu.sh TEST_CUDA_DEVICE PROGRAM [ARGUMENTS...]
set -euo pipefail
probe=$1
shift
"$probe" --probe || exit $?
exec "$@"
