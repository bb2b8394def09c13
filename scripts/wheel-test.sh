#!/usr/bin/env bash
# chorus as a pip user gets it (docs/packaging.md): the wheel built with
# meson-python against the torch 2.x environment (scripts/torch2-env.sh) as
# `pip install --no-build-isolation` does it, installed into a fresh virtual
# environment that sees that torch (a .pth line, as scripts/torch2-test.sh
# does: no gigabytes copied or downloaded), then run from outside the
# checkout through the installed chorus-run: the README's Python example
# (over TLS too: the bundled libchorus_tls.so), and a 2-rank
# torch.distributed all_reduce through chorus.torch, and a 2-rank
# TensorFlow allreduce through chorus.tensorflow (that environment has
# tensorflow-cpu as well).
#   scripts/wheel-test.sh        (scripts/test.sh runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
torch_python=$(bash scripts/torch2-env.sh)
torch_site=$("$torch_python" -c 'import site; print(site.getsitepackages()[0])')
# The build directory, one level down like build/ and build-torch2/ (whose
# objects ccache then gives it), and beside it the environments and the wheel.
meson_dir=$PWD/build-wheel
dir=$PWD/build-wheel-venvs
mkdir -p "$dir"

# venv_seeing_torch VENV: a fresh virtual environment of Debian's Python
# that imports the torch 2.x environment's packages.
venv_seeing_torch() {
  rm -rf "$1"
  /usr/bin/python3 -m venv "$1"
  echo "$torch_site" > "$("$1/bin/python" -c 'import site; print(site.getsitepackages()[0])')/torch2-environment.pth"
}

# The builder: the torch environment plus the pinned build requirements,
# kept while scripts/wheel-build-requirements.txt is unchanged.
builder=$dir/builder
requirements=$PWD/scripts/wheel-build-requirements.txt
if ! cmp -s "$requirements" "$builder/chorus-requirements.txt"; then
  venv_seeing_torch "$builder"
  "$builder/bin/pip" install --quiet --disable-pip-version-check --progress-bar off -r "$requirements"
  cp "$requirements" "$builder/chorus-requirements.txt"
fi
# A fixed build directory, so that ninja reuses the last build. CUDA stays out as in build-torch2/: build/ covers the CUDA module.
rm -rf "$dir/dist"
# meson-python sets its tree up inside: no other set-up at the same time (scripts/meson-locked.sh).
PATH="$builder/bin:$PATH" scripts/meson-locked.sh "$builder/bin/pip" wheel --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps --wheel-dir "$dir/dist" --config-settings=build-dir="$meson_dir" \
  --config-settings=setup-args=-Dcuda=disabled --config-settings=compile-args=-j2 . > "$dir/build.log"
wheel=$(echo "$dir"/dist/chorus-*.whl)
echo "wheel-test.sh: built $(basename "$wheel") in ${SECONDS} s"

# What the wheel holds: the package (with chorus.torch's extension and
# chorus-run), libchorus and its TLS module, metadata; nothing else
# (no headers, pkg-config or CMake files, tests, benchmarks or other tools),
# and chorus.tensorflow's op library (the environment has TensorFlow).
"$torch_python" - "$wheel" <<'PYTHON'
import fnmatch, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
required = ["chorus/__init__.py", "chorus/_run.py", "chorus/chorus-run", "chorus/_chorus.*.so",
            "chorus/torch/__init__.py", "chorus/torch/_backend.*.so", "chorus/torch/hvd/__init__.py",
            "chorus/tensorflow/__init__.py", "chorus/tensorflow/_chorus_ops.so", "chorus/tensorflow/keras/__init__.py",
            ".chorus.mesonpy.libs/libchorus.so", ".chorus.mesonpy.libs/libchorus_tls.so",
            "chorus-*.dist-info/entry_points.txt"]
allowed = ["chorus/*", ".chorus.mesonpy.libs/libchorus*.so", "chorus-*.dist-info/*"]
missing = [pattern for pattern in required if not fnmatch.filter(names, pattern)]
stray = [name for name in names if not any(fnmatch.fnmatch(name, pattern) for pattern in allowed)]
assert not missing and not stray, f"the wheel lacks {missing} and has what it should not: {stray}"
print(f"wheel-test.sh: the wheel holds {len(names)} files, as it should")
PYTHON

SECONDS=0
venv=$dir/venv
venv_seeing_torch "$venv"
# --no-index: nothing downloaded; numpy and torch are the environment's.
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
# Outside the checkout, with nothing set but PATH and HOME: what runs is the wheel.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^```python$/ { n++; inside = (n == 1); next } /^```$/ { inside = 0 } inside' README.md > "$work/readme_example.py"
run() { (cd "$work" && env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$HOME" "$@"); }
run python -c 'import chorus, sys; assert chorus.__file__.startswith(sys.prefix), chorus.__file__'
run chorus-run -n 2 -- python readme_example.py
install_seconds=$SECONDS
echo "wheel-test.sh: pip install of the wheel into a fresh venv + the README's Python example at 2 ranks: ${install_seconds} s"

bash test/tls/make_certificates.sh "$work/tls"
run CHORUS_TRANSPORT=tcp CHORUS_TLS_CERT="$work/tls/rank.pem" CHORUS_TLS_KEY="$work/tls/rank.key" \
  CHORUS_TLS_CA="$work/tls/ca.pem" chorus-run -n 2 -- python readme_example.py
echo "wheel-test.sh: the README's Python example over TLS (the wheel's libchorus_tls.so): passed"

cat > "$work/torch_allreduce.py" <<'PYTHON'
import sys
import torch, torch.distributed as dist
import chorus.torch
assert chorus.torch.__file__.startswith(sys.prefix), chorus.torch.__file__
dist.init_process_group("chorus")
rank, size = dist.get_rank(), dist.get_world_size()
tensor = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(tensor)
expected = torch.arange(1000, dtype=torch.float32) * (size * (size + 1) // 2)
assert torch.equal(tensor, expected), f"rank {rank}: {tensor[:8]} != {expected[:8]}"
dist.destroy_process_group()
PYTHON
run chorus-run -n 2 -- python torch_allreduce.py
echo "wheel-test.sh: a 2-rank torch.distributed all_reduce through the installed chorus.torch: passed"

cat > "$work/tf_allreduce.py" <<'PYTHON'
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
import chorus.tensorflow as hvd
assert hvd.__file__.startswith(sys.prefix), hvd.__file__
hvd.init()
total = hvd.allreduce(tf.range(1000, dtype=tf.float32) * (hvd.rank() + 1), op=hvd.Sum)
expected = tf.range(1000, dtype=tf.float32) * (hvd.size() * (hvd.size() + 1) // 2)
assert bool(tf.reduce_all(total == expected)), f"rank {hvd.rank()}: {total[:8]} != {expected[:8]}"
hvd.shutdown()
PYTHON
run chorus-run -n 2 -- python tf_allreduce.py
echo "wheel-test.sh: a 2-rank TensorFlow allreduce through the installed chorus.tensorflow: passed"
