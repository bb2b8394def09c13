#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run every Meson test
# (the PyTorch backend against Debian's torch 1.13, then against torch 2.x:
# scripts/torch2-test.sh), then install the library and build a consumer program against the installed
# copy through pkg-config.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
SECONDS=0
scripts/build.sh
echo "test.sh: build: ${SECONDS} s"

# CI has CUDA's compiler but no GPU: the CUDA module must build there
# (its GPU suite then skips; scripts/gpu-test.sh runs it on a GPU).
if [ -x /usr/local/cuda/bin/nvcc ] && [ ! -f build/memory/cuda/libchorus_cuda.so ]; then
  echo "the CUDA toolkit is at /usr/local/cuda but build/ has no libchorus_cuda.so" >&2
  exit 1
fi

SECONDS=0
# (chorus.torch.hvd's suites run once, under torch 2.x below: test/torch/meson.build.)
# A failure here does not stop the steps below (one CI run shows them all):
# as test.sh exits, the failed tests' tails end its output
# (scripts/failed-tests.py), where CI's tail shows them, and it fails.
main_suite=0
meson test -C build --print-errorlogs --num-processes 2 --no-suite torch-1.13-hvd || main_suite=$?
echo "test.sh: meson test: ${SECONDS} s"
report_main_suite() {
  if [ "$main_suite" != 0 ]; then
    python3 scripts/failed-tests.py build/meson-logs/testlog.json
    echo "test.sh: the main suite failed (meson test exit $main_suite)" >&2
    exit 1
  fi
}
trap report_main_suite EXIT

# The Python module and PyTorch backend again against torch 2.x from PyPI
# (build-torch2/, a virtual environment reused across runs): build/ above
# tested them against Debian's torch 1.13.
SECONDS=0
if ! scripts/torch2-test.sh; then
  python3 scripts/failed-tests.py build-torch2/meson-logs/testlog.json
  exit 1
fi
echo "test.sh: torch 2.x: ${SECONDS} s"

# chorus as a pip-installed wheel in a fresh virtual environment, against
# the same torch 2.x (docs/packaging.md).
SECONDS=0
scripts/wheel-test.sh
echo "test.sh: wheel: ${SECONDS} s"

# PyTorch loads the real Gloo into the same process: no symbol of ours may live in gloo::.
if nm -DC build/libchorus.so | grep -q 'gloo::'; then
  echo "libchorus exports symbols in namespace gloo" >&2
  exit 1
fi

meson install -C build --quiet
prefix="$PWD/build/prefix"
# Every installed header compiles on its own with only pkg-config's flags:
# none may include a header that is not installed.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
for header in $(cd "$prefix/include/chorus" && find . -name '*.h' | sed 's#^\./##' | sort); do
  package=chorus
  case "$header" in *mpi*) package=chorus-mpi ;; esac
  echo "#include <$header>" | g++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only -x c++ - \
    $(pkg-config --cflags "$package")
done
# The C API's header is C as well: C99, pedantic, nothing but stddef.h/stdint.h.
echo '#include <chorus/chorus_c.h>' | gcc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -x c - \
  $(pkg-config --cflags chorus)
echo "installed headers: each compiles on its own (chorus_c.h as C99 too)"
consumer="$PWD/build/consumer"
g++ -std=c++20 -Wall -Wextra -Werror test/consumer/main.cc -o "$consumer" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs chorus)
LD_LIBRARY_PATH="$prefix/lib" "$consumer"
echo "installed-library consumer: passed"
# The same program through CMake's find_package(chorus) and chorus::chorus.
rm -rf build/cmake-consumer
cmake -S test/consumer -B build/cmake-consumer -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build/cmake-consumer > /dev/null
LD_LIBRARY_PATH="$prefix/lib" build/cmake-consumer/cmake_consumer
echo "installed-library consumer through CMake (find_package(chorus)): passed"

# The installed tree from a clean shell, as a user runs it after the
# README's install steps: the tools and the Python module find libchorus by
# their RUNPATH, relative to the prefix, with nothing in LD_LIBRARY_PATH.
clean_shell() { env -i PATH=/usr/bin:/bin HOME="$HOME" "$@"; }
clean_shell "$prefix/bin/chorus-run" -n 2 -- "$prefix/bin/chorus-bench" -b 8 -e 4K --check > /dev/null
version=$(sed -n "s/^project('chorus'.*//;s/^  version: '\(.*\)',$/\1/p" meson.build)
for tool in chorus-run chorus-bench chorus-store chorus-soak chorus-connect-bench chorus-reduce-bench \
    chorus-trace-merge; do
  answer=$(clean_shell "$prefix/bin/$tool" --version)
  [ "$answer" = "$tool $version" ] || { echo "$tool --version said '$answer', not '$tool $version'" >&2; exit 1; }
  clean_shell "$prefix/bin/$tool" --help > /dev/null
done
clean_shell PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs chorus chorus-mpi > /dev/null
python_package=$(find "$prefix" -path '*/chorus/__init__.py' | head -n 1)
clean_shell PYTHONPATH="$(dirname "$(dirname "$python_package")")" "$(cat build/python/interpreter)" -c "import chorus"
# A program of the user's, built with pkg-config and the rpath the README gives.
rpath_consumer="$PWD/build/rpath_consumer"
g++ -std=c++20 test/consumer/main.cc -o "$rpath_consumer" $(pkg-config --cflags --libs chorus) \
  -Wl,-rpath,"$(pkg-config --variable=libdir chorus)"
clean_shell "$rpath_consumer"
echo "installed tree from a clean shell (tools, pkg-config, Python, a consumer with the README's rpath): passed"

# The C API from plain C, built with gcc against the installed library and
# run as 4 ranks by the installed chorus-run (test/capi/c_program.c).
c_program="$PWD/build/c_program"
gcc -std=c99 -Wall -Wextra -Werror -pedantic test/capi/c_program.c -o "$c_program" \
  $(pkg-config --cflags --libs chorus)
LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/chorus-run" -n 4 -- "$c_program"
echo "installed-library C program: passed"
# Again with TLS over tcp (chorus-run's store too): the installed libchorus
# finds its TLS module, libchorus_tls.so, beside itself (base/tls.h).
tls_dir=$PWD/build/test/tls
CHORUS_TLS_CERT="$tls_dir/rank.pem" CHORUS_TLS_KEY="$tls_dir/rank.key" CHORUS_TLS_CA="$tls_dir/ca.pem" \
  CHORUS_TRANSPORT=tcp LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/chorus-run" -n 3 -- "$c_program"
echo "installed-library C program with TLS: passed"

# The README's example, exactly as printed, built against the installed copy
# and run as 3 ranks by the installed chorus-run.
example="$PWD/build/readme_example"
sed -n '/^```cpp$/,/^```$/p' README.md | sed '1d;$d' > "$example.cc"
g++ -std=c++20 -Wall -Wextra -Werror "$example.cc" -o "$example" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs chorus)
LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/chorus-run" -n 3 -- "$example"
echo "README example: passed"

# The Python package as installed, without the build tree: import it, and
# run the README's Python example as 3 ranks under the installed chorus-run.
python_dir=$(dirname "$(dirname "$(find "$prefix" -path '*/chorus/__init__.py' | head -n 1)")")
python_example="$PWD/build/readme_example.py"
# readme_block N: the README's Nth python block.
readme_block() { awk -v want="$1" '/^```python$/ { n++; inside = (n == want); next } /^```$/ { inside = 0 } inside' README.md; }
readme_block 1 > "$python_example"
# The Python Meson built the module for (Debian's /usr/bin/python3), not
# whichever python3 comes first on PATH.
python=$(cat build/python/interpreter)
(cd / && LD_LIBRARY_PATH="$prefix/lib" PYTHONPATH="$python_dir" "$python" -c "import chorus")
LD_LIBRARY_PATH="$prefix/lib" PYTHONPATH="$python_dir" "$prefix/bin/chorus-run" -n 3 -- "$python" "$python_example"
echo "README Python example (installed package): passed"

# The README's PyTorch example, where the backend was built (torch found).
if [ -n "$(find "$python_dir/chorus" -path '*/torch/_backend*.so' | head -n 1)" ]; then
  torch_example="$PWD/build/readme_torch_example.py"
  readme_block 2 > "$torch_example"
  LD_LIBRARY_PATH="$prefix/lib" PYTHONPATH="$python_dir" "$prefix/bin/chorus-run" -n 3 -- "$python" "$torch_example"
  echo "README PyTorch example (installed package): passed"
  hvd_example="$PWD/build/readme_hvd_example.py"
  readme_block 3 > "$hvd_example"
  LD_LIBRARY_PATH="$prefix/lib" PYTHONPATH="$python_dir" "$prefix/bin/chorus-run" -n 2 -- "$python" "$hvd_example"
  echo "README Horovod-style example (installed package): passed"
else
  echo "README PyTorch example: skipped, the backend was not built (no torch)"
fi
