#!/usr/bin/env bash
# chorus's Python module and PyTorch backend built and tested against torch
# 2.x from PyPI (scripts/torch2-env.sh), beside build/'s Debian torch 1.13:
# a second tree, build-torch2/, configured for a fresh virtual environment
# on top of it. It builds only what the python, torch and tensorflow suites
# run and what is installed, runs those suites (PyTorch's own distributed
# suite among them; chorus.tensorflow's ops, as the environment has
# TensorFlow too), then installs into that environment and runs from there.
#   scripts/torch2-test.sh [MESON-TEST-ARGUMENTS...]    (scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(bash scripts/torch2-env.sh)
# One tree serves the suites and the README's install into a torch 2.x
# virtual environment, as a user does it: a fresh venv that sees the torch
# 2.x environment's packages (a .pth line, not gigabytes copied), chorus
# configured for it (its Python, its prefix) and, once the suites passed,
# installed into it; then an allreduce through the installed chorus.torch
# and chorus-run from a clean shell. (Two trees cost CI a second library build.)
dir=build-torch2
user_venv=$PWD/$dir/venv
rm -rf "$user_venv"
/usr/bin/python3 -m venv "$user_venv"
"$python" -c 'import site; print(site.getsitepackages()[0])' > "$("$user_venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/torch2-environment.pth"
# CUDA stays out: this tree tests the CPU path (build/ covers the CUDA module).
options=(-Dprefix="$user_venv" -Dpython_interpreter="$user_venv/bin/python" -Dpython.install_env=venv
  -Dtorch=enabled -Dcuda=disabled -Dnccl=disabled)
if [ -f "$dir/build.ninja" ]; then
  # A tree from before (another prefix or interpreter) is brought in line.
  meson configure "$dir" "${options[@]}" > /dev/null
  # Regenerates now, so that the introspection below sees today's targets.
  scripts/meson-locked.sh ninja -C "$dir" build.ninja > /dev/null
else
  scripts/meson-locked.sh meson setup "$dir" "${options[@]}" > /dev/null
fi
# shellcheck disable=SC2046
ninja -C "$dir" $(python3 scripts/test-targets.py "$dir" --installed --suite python --suite torch --suite tensorflow)
"$user_venv/bin/python" -c 'import torch; print("torch2-test.sh: torch", torch.__version__, "at", torch.__file__)'
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --suite python --suite torch --suite tensorflow "$@"

meson install -C "$dir" --no-rebuild --quiet > "$dir/install.log"
env -i PATH=/usr/bin:/bin HOME="$HOME" "$user_venv/bin/chorus-run" -n 2 -- "$user_venv/bin/python" \
  test/torch/allreduce_smoke.py --under "$user_venv"
# The installed op library finds libchorus and TensorFlow's framework library by its RUNPATH.
cat > "$dir/allreduce_tf.py" <<'PYTHON'
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
import chorus.tensorflow as hvd
hvd.init()
n = hvd.size()
reduced = hvd.allreduce(tf.fill([4], float(hvd.rank() + 1)), op=hvd.Sum)
assert reduced.numpy().tolist() == [n * (n + 1) / 2] * 4, reduced
assert hvd.__file__.startswith(sys.prefix), hvd.__file__
PYTHON
env -i PATH=/usr/bin:/bin HOME="$HOME" "$user_venv/bin/chorus-run" -n 2 -- "$user_venv/bin/python" "$dir/allreduce_tf.py"
echo "torch2-test.sh: chorus installed into a torch 2.x virtual environment as the README says: passed"
