#!/usr/bin/env bash
# Configures (once) and builds chorus into ./build, installing into ./build/prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  scripts/meson-locked.sh meson setup build --prefix "$PWD/build/prefix" --libdir lib
fi
ninja -C build
