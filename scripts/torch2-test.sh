#!/usr/bin/env bash
# chorus's Python module and PyTorch backend built and tested against torch
# 2.x from PyPI (scripts/torch2-env.sh), beside build/'s Debian torch 1.13:
# a second tree, build-torch2/, configured for the environment's Python. It
# builds only what the python and torch suites run (ccache makes the
# library's sources, compiled with build/'s flags, nearly free) and runs
# those suites, PyTorch's own distributed suite among them.
#   scripts/torch2-test.sh [MESON-TEST-ARGUMENTS...]    (scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(bash scripts/torch2-env.sh)
dir=build-torch2
if [ ! -f "$dir/build.ninja" ]; then
  # CUDA stays out: this tree tests the CPU path (build/ covers the CUDA module).
  meson setup "$dir" --prefix "$PWD/$dir/prefix" --libdir lib -Dpython_interpreter="$python" -Dtorch=enabled \
    -Dcuda=disabled -Dnccl=disabled
fi
# shellcheck disable=SC2046
ninja -C "$dir" $(python3 scripts/test-targets.py "$dir" --suite python --suite torch)
"$python" -c 'import torch; print("torch2-test.sh: torch", torch.__version__, "at", torch.__file__)'
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --suite python --suite torch "$@"
