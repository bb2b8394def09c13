#!/usr/bin/env bash
# Runs a command that configures a Meson tree (meson setup, or ninja
# regenerating build.ninja) while no other does in this checkout.
#
# Why: Meson asks CMake for its system information (looking for the CMake
# packages among the dependencies) in __cmake_systeminformation/ at the top
# of the source tree, one directory for every build tree. .ci/run sets the
# sanitizer trees up beside the main build, and two set-ups at once wrote
# and deleted that directory under each other: "Unable to find cmake" ended
# a CI run after 6 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec flock "$root/.meson-lock" "$@"
