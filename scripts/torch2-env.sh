#!/usr/bin/env bash
# Prints the path of a Python with torch 2.x from PyPI (a virtual
# environment of Debian's /usr/bin/python3, pinned by
# scripts/torch2-requirements.txt), making it first if needed. The
# environment lives outside the checkout (CHORUS_TORCH2_VENV, default
# /var/cache/chorus/venv-torch2) and is reused while its requirements are
# the ones it was made from: torch and CUDA's libraries are gigabytes.
# Of Debian's Python so that python3-dev's headers are the ones its
# extensions need.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CHORUS_TORCH2_VENV:-/var/cache/chorus/venv-torch2}
requirements=$PWD/scripts/torch2-requirements.txt
stamp="$venv/chorus-requirements.txt"
# One maker at a time: .ci/run starts one early, in the background, and
# torch2-test.sh's call then waits for it here (and finds the environment
# made, or makes it again if that one failed).
mkdir -p "$(dirname "$venv")"
exec 9> "$venv.lock"
flock 9
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
{
  echo "torch2-env: making $venv from $requirements"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off -r "$requirements"
  # The stamp only once everything installed: an interrupted install is redone.
  cp "$requirements" "$stamp"
} >&2
echo "$venv/bin/python"
