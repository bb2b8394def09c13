#!/bin/bash
# Keeps docs/architecture.md's promise: the library reads the process
# environment in base/config.cc alone, and the Python package in
# python/chorus/_environment.py alone. Fails naming every other source file
# of the library that calls getenv or touches environ, and every file but
# api/connect.cc that takes a configuration snapshot of its own.
# Usage: environment_readers.sh SOURCE_ROOT
set -euo pipefail
root=${1:?usage: environment_readers.sh SOURCE_ROOT}
cd "$root"

readers=$(grep -rlE --include='*.cc' --include='*.h' --include='*.c' --include='*.py' \
    '\b(secure_)?getenv\b|\benviron\b' base chorus api algorithms transport rendezvous adapters python |
  grep -vxE 'base/config\.cc|python/chorus/_environment\.py' || true)
if [[ -n "$readers" ]]; then
  echo "these files read the environment; read it through base/config.h (C++) or chorus._environment (Python):"
  echo "$readers"
  exit 1
fi
# One snapshot per connect: the library's other code is handed it.
snapshots=$(grep -rlE --include='*.cc' --include='*.h' 'Config::from_environment\(\)' base chorus api algorithms transport \
    rendezvous adapters python | grep -vxE 'base/config\.(cc|h)|api/connect\.cc' || true)
if [[ -n "$snapshots" ]]; then
  echo "these files take a configuration snapshot of their own; take the one api/connect.cc reads:"
  echo "$snapshots"
  exit 1
fi
echo "only base/config.cc and python/chorus/_environment.py read the environment"
