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

# The README's install into a torch 2.x environment, as a user does it: a
# fresh venv that sees the torch 2.x environment's packages (a .pth line,
# not gigabytes copied), chorus configured for it and installed into it,
# then an allreduce through the installed chorus.torch and chorus-run from
# a clean shell.
user_venv=$PWD/build-torch2-user/venv
rm -rf build-torch2-user
/usr/bin/python3 -m venv "$user_venv"
"$python" -c 'import site; print(site.getsitepackages()[0])' > "$("$user_venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')/torch2-environment.pth"
meson setup build-torch2-user/build -Dpython_interpreter="$user_venv/bin/python" -Dpython.install_env=venv \
  -Dtorch=enabled -Dtests=false -Dcuda=disabled -Dnccl=disabled --prefix "$user_venv" > build-torch2-user/setup.log
ninja -C build-torch2-user/build install > build-torch2-user/install.log
cat > build-torch2-user/allreduce.py <<'PYTHON'
import torch, torch.distributed as dist
import chorus.torch
dist.init_process_group("chorus")
tensor = torch.full((4,), float(dist.get_rank() + 1))
dist.all_reduce(tensor)
n = dist.get_world_size()
assert tensor.tolist() == [n * (n + 1) / 2] * 4, tensor
assert chorus.torch.__file__.startswith(__import__("sys").prefix), chorus.torch.__file__
dist.destroy_process_group()
PYTHON
env -i PATH=/usr/bin:/bin HOME="$HOME" "$user_venv/bin/chorus-run" -n 2 -- "$user_venv/bin/python" \
  build-torch2-user/allreduce.py
echo "torch2-test.sh: chorus installed into a torch 2.x virtual environment as the README says: passed"
