#!/usr/bin/env bash
# chorus's Python package with chorus.torch, built without Meson for a
# machine that has a torch of its own but none of our build's dependencies:
# the GPU machine (torch with CUDA, a newer g++ and Python, no network),
# where scripts/gpu-test.sh's part "torch" runs it against gpu-bundle/'s
# libchorus. Here it runs against build/'s libchorus and torch 2.x's virtual
# environment, which is how it is checked before it goes there.
#
#   scripts/gpu-torch.sh build [--python PY] [--libchorus LIB] [--out DIR] [--jobs N]
#       compiles chorus._chorus (adapters/python_module/*.cc) and chorus.torch._backend
#       (adapters/torch/*.cc) with plain g++ commands against LIB (default
#       gpu-bundle/lib/libchorus.so.0), the repository's headers and the
#       torch of PY (default python3), and lays out the package `chorus` in
#       DIR (default gpu-torch/): PYTHONPATH=DIR imports it. CXX overrides
#       the compiler (CXX="ccache g++" here).
#   scripts/gpu-torch.sh smoke [--python PY] [--out DIR] [--chorus-run RUN]
#       a 2-rank all_reduce of CPU tensors through the package in DIR,
#       launched by RUN (default gpu-bundle/bin/chorus-run).
#
# The sources are the ones Meson builds (python_sources and torch_sources
# of adapters/python_module/meson.build and adapters/torch/meson.build), so the two builds
# cannot drift apart. The modules find libchorus (and the libraries it
# needs beside it, as in gpu-bundle/lib/) through an RPATH: a RUNPATH would
# serve the module's own dependencies only, and LD_LIBRARY_PATH would put
# gpu-bundle's libcudart in front of torch's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[ $# -gt 0 ] && shift
python=python3
# The distribution's compiler where there is one. On the GPU machine the g++
# first on PATH (/opt/gcc, 13) put its own libstdc++ into the modules and
# exported it: torch's stringstreams then freed their locale through ours
# ("free(): invalid pointer" at import, seen on the H100).
if [ -z "${CXX:-}" ] && [ -x /usr/bin/g++ ]; then CXX=/usr/bin/g++; fi
libchorus=gpu-bundle/lib/libchorus.so.0
out=gpu-torch
jobs=$(nproc)
chorus_run=gpu-bundle/bin/chorus-run
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=$2; shift 2 ;;
    --libchorus) libchorus=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --chorus-run) chorus_run=$2; shift 2 ;;
    *) echo "gpu-torch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

# The sources Meson lists in `variable = files(...)` of a meson.build.
meson_sources() {
  "$python" - "$1" "$2" <<'PYTHON'
import re, sys
text = open(sys.argv[1]).read()
listed = re.search(sys.argv[2] + r"\s*=\s*files\(([^)]*)\)", text)
if not listed:
    sys.exit(f"gpu-torch.sh: no '{sys.argv[2]} = files(...)' in {sys.argv[1]}")
print(" ".join(re.findall(r"'([^']+)'", listed.group(1))))
PYTHON
}

build() {
  [ -f "$libchorus" ] || { echo "gpu-torch.sh: no $libchorus (scripts/gpu-test.sh bundle makes gpu-bundle/)" >&2; exit 1; }
  local started=$SECONDS
  # What the Python and its torch say about themselves, one per line.
  local probe
  probe=$("$python" - <<'PYTHON'
import os, sysconfig
import torch
try:
    import torch.utils.cpp_extension as extension
    includes, libraries = extension.include_paths(), extension.library_paths()
except ImportError:  # cpp_extension imports setuptools; the paths are torch's own directories
    root = os.path.dirname(torch.__file__)
    includes = [root + "/include", root + "/include/torch/csrc/api/include"]
    libraries = [root + "/lib"]
includes = [path for path in includes if os.path.isdir(path)]
pybind11 = next((path for path in includes if os.path.isfile(path + "/pybind11/pybind11.h")), "")
if not pybind11:
    import pybind11 as module
    pybind11 = module.get_include()
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(sysconfig.get_paths()["include"])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)
print(pybind11)
print(";".join(includes))
print(";".join(path for path in libraries if os.path.isdir(path)))
PYTHON
  )
  local suffix python_include abi version pybind11 includes libraries
  { read -r suffix; read -r python_include; read -r abi; read -r version; read -r pybind11; read -r includes
    read -r libraries; } <<< "$probe"
  [ -f "$python_include/Python.h" ] || {
    echo "gpu-torch.sh: $python has no Python.h in $python_include (install its -dev package)" >&2; exit 1; }
  # libchorus takes std::string arguments in the new libstdc++ ABI.
  [ "$abi" = 1 ] || { echo "gpu-torch.sh: torch $version has the old libstdc++ string ABI; libchorus the new" >&2; exit 1; }
  local library_dir torch_lib
  library_dir=$(cd "$(dirname "$libchorus")" && pwd)
  torch_lib=${libraries%%;*}
  echo "gpu-torch.sh: torch $version, $($python --version 2>&1), ${CXX:-g++} $(${CXX:-g++} -dumpversion), libchorus $libchorus"

  local objects=$out.objects
  rm -rf "$out" "$objects"
  mkdir -p "$out/chorus/torch/hvd" "$out/chorus/tensorflow" "$objects"
  local flags=(-std=c++20 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -DNDEBUG -D_FILE_OFFSET_BITS=64
    -Wall -Wextra -pthread -D_GLIBCXX_USE_CXX11_ABI="$abi" -I. -isystem "$python_include" -isystem "$pybind11")
  local path
  IFS=';' read -r -a include_list <<< "$includes"
  for path in "${include_list[@]}"; do flags+=(-isystem "$path"); done

  # One line per translation unit: module, source. The biggest first, so
  # the longest compiles start at once.
  local python_sources torch_sources list=$objects/units
  python_sources=$(meson_sources adapters/python_module/meson.build python_sources)
  torch_sources=$(meson_sources adapters/torch/meson.build torch_sources)
  { for path in $torch_sources; do echo "_backend adapters/torch/$path"; done
    for path in $python_sources; do echo "_chorus adapters/python_module/$path"; done; } > "$list"
  echo "gpu-torch.sh: compiling $(wc -l < "$list") files, $jobs at a time"
  printf '%s\n' "${flags[@]}" > "$objects/flags"
  export GPU_TORCH_CXX=${CXX:-g++} GPU_TORCH_OBJECTS=$objects
  # shellcheck disable=SC2016
  if ! xargs -P "$jobs" -L 1 bash -c 'mapfile -t flags < "$GPU_TORCH_OBJECTS/flags"
      $GPU_TORCH_CXX "${flags[@]}" -c "$1" -o "$GPU_TORCH_OBJECTS/$0.$(basename "$1" .cc).o" ||
        { echo "gpu-torch.sh: FAILED to compile $1" >&2; exit 255; }' < "$list"; then
    echo "gpu-torch.sh: compiling failed" >&2
    exit 1
  fi
  local compiled=$SECONDS
  # Python's own symbols come from the interpreter that loads the module:
  # no --no-undefined.
  local compiler link
  read -r -a compiler <<< "${CXX:-g++}"
  # Nothing of a static library the toolchain adds is exported.
  link=("${compiler[@]}" -shared -pthread "-Wl,--as-needed" "-Wl,--exclude-libs,ALL")
  "${link[@]}" -o "$out/chorus/_chorus$suffix" "$objects"/_chorus.*.o "$libchorus" \
    -Wl,--disable-new-dtags -Wl,-rpath,"$library_dir"
  "${link[@]}" -o "$out/chorus/torch/_backend$suffix" "$objects"/_backend.*.o "$libchorus" \
    -L"$torch_lib" -lc10 -ltorch -ltorch_cpu -ltorch_python \
    -Wl,--disable-new-dtags -Wl,-rpath,"$library_dir" -Wl,-rpath,"$torch_lib"
  rm -rf "$objects"
  local module
  for module in "$out/chorus/_chorus$suffix" "$out/chorus/torch/_backend$suffix"; do
    if nm -D --defined-only "$module" | grep -q '_ZNSt6locale'; then
      echo "gpu-torch.sh: $module defines the C++ runtime's std::locale itself: ${CXX:-g++} linked its" \
        "libstdc++ statically, and torch would free through it (set CXX to the distribution's g++)" >&2
      exit 1
    fi
  done

  # The package as Meson lays it out in build/python/: every Python file,
  # and chorus.tensorflow's stub (no TensorFlow there).
  cp python/chorus/*.py "$out/chorus/"
  cp python/chorus/torch/__init__.py "$out/chorus/torch/"
  cp python/chorus/torch/hvd/*.py "$out/chorus/torch/hvd/"
  cp python/chorus/tensorflow/not_built.py "$out/chorus/tensorflow/__init__.py"
  env -u LD_LIBRARY_PATH PYTHONPATH="$out" "$python" -c 'import chorus.torch' ||
    { echo "gpu-torch.sh: the package in $out does not import" >&2; exit 1; }
  echo "gpu-torch.sh: built $out/chorus in $((SECONDS - started)) s (compiling $((compiled - started)) s)"
}

smoke() {
  # chorus-run may need LD_LIBRARY_PATH for its libchorus; the ranks must not
  # have it (torch finds its own CUDA libraries, the modules theirs).
  "$chorus_run" -n 2 -- env -u LD_LIBRARY_PATH PYTHONPATH="$out" "$python" test/torch/allreduce_smoke.py --under "$out"
}

case "$mode" in
  build) build ;;
  smoke) smoke ;;
  *) echo "usage: $0 build [--python PY] [--libchorus LIB] [--out DIR] [--jobs N] |" \
    "smoke [--python PY] [--out DIR] [--chorus-run RUN]" >&2; exit 2 ;;
esac
