#!/usr/bin/env bash
# Builds the peer drivers into OUT (default: the repository's build-peers/):
#   gloo-bench         Debian's libgloo-dev, when it is installed
#   mpi-bench-openmpi  Open MPI (Debian's mpicxx.openmpi); mpi-bench, today's
#                      name, is a link to it
#   mpi-bench-mpich    MPICH (Debian's mpich + libmpich-dev: mpicxx.mpich,
#                      run with mpiexec.mpich)
#   mpi-bench-impi     Intel MPI from PyPI: impi-rt and impi-devel, pinned
#                      below, installed --no-deps into OUT/impi-venv (run with
#                      OUT/impi-venv/bin/mpiexec.hydra; see vs_mpi.sh)
#
#   benchmarks/peers/build.sh [OUT]
#
# Not run by CI: run it by hand, as root on a Debian 12 machine to let it
# install what is missing (apt-get install mpich libmpich-dev, python3-venv;
# pip into the venv). Whatever cannot be had (not root, no network, no
# apt-get) is skipped with a message saying why, and the rest is built; the
# exit status is 0 unless a compiler that is there fails. Installing MPICH
# must leave Open MPI the `mpi` and `mpirun` alternatives (compare.sh,
# time_vs_mpi.py and netns/run.sh --mpi call plain mpirun): the script puts
# them back if the install moved them, and checks them every run.
# CHORUS_PEERS_NO_INSTALL=1: install nothing, build what is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../build-peers}
mkdir -p "$out"
out=$(cd "$out" && pwd)
flags=(-std=c++20 -O2 -Wall -Wextra -Werror -I"$here")
# Intel MPI from PyPI, pinned: both wheels the same release.
impi_version=2021.19.0
impi_venv=$out/impi-venv

say() { echo "build.sh: $*" >&2; }
may_install() { [ "${CHORUS_PEERS_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
why_not_install() {
  if [ "${CHORUS_PEERS_NO_INSTALL:-0}" = 1 ]; then echo "CHORUS_PEERS_NO_INSTALL=1"
  elif [ "$(id -u)" != 0 ]; then echo "not root"
  else echo "no apt-get"; fi
}
apt_updated=0
# apt-get install, with one apt-get update if the package lists are stale or empty.
apt_install() {
  if DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2; then return 0; fi
  [ "$apt_updated" = 1 ] && return 1
  apt_updated=1
  apt-get update >&2 || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2
}
alternative() { { update-alternatives --query "$1" 2>/dev/null || true; } | sed -n 's/^Value: //p'; }

# --- Gloo ---------------------------------------------------------------------
if [ -f /usr/include/gloo/allreduce_ring.h ] && [ -e /usr/lib/libgloo.so ]; then
  g++ "${flags[@]}" "$here/gloo_bench.cc" -o "$out/gloo-bench" -L/usr/lib -lgloo -pthread
  echo "built $out/gloo-bench"
else
  say "libgloo-dev not installed, skipping gloo-bench"
fi

# --- Open MPI -----------------------------------------------------------------
openmpi_cxx=""
if command -v mpicxx.openmpi >/dev/null; then
  openmpi_cxx=mpicxx.openmpi
elif command -v mpicxx >/dev/null && mpicxx --showme:version >/dev/null 2>&1; then
  openmpi_cxx=mpicxx  # not Debian's layout, but Open MPI's wrapper (only it knows --showme)
fi
if [ -n "$openmpi_cxx" ]; then
  "$openmpi_cxx" "${flags[@]}" "$here/mpi_bench.cc" -o "$out/mpi-bench-openmpi"
  ln -sfn mpi-bench-openmpi "$out/mpi-bench"
  echo "built $out/mpi-bench-openmpi (and mpi-bench, a link to it)"
else
  say "Open MPI's mpicxx.openmpi not found (Debian: libopenmpi-dev openmpi-bin), skipping mpi-bench-openmpi"
fi

# --- MPICH --------------------------------------------------------------------
if ! command -v mpicxx.mpich >/dev/null || ! command -v mpiexec.mpich >/dev/null; then
  if may_install; then
    mpi_before=$(alternative mpi) mpirun_before=$(alternative mpirun)
    say "installing mpich libmpich-dev"
    apt_install mpich libmpich-dev || say "apt-get install mpich libmpich-dev failed (no network?)"
    # Debian ranks Open MPI above MPICH on amd64, but other architectures (or a
    # manual choice) may differ: whatever the install changed goes back.
    for name in mpi mpirun; do
      before=$([ "$name" = mpi ] && echo "$mpi_before" || echo "$mpirun_before")
      now=$(alternative "$name")
      if [ -n "$before" ] && [ "$now" != "$before" ]; then
        say "the install moved the $name alternative to $now; setting it back to $before"
        update-alternatives --set "$name" "$before" >&2
      fi
    done
  else
    say "MPICH not installed and cannot install it ($(why_not_install)): apt-get install mpich libmpich-dev"
  fi
fi
if command -v mpicxx.mpich >/dev/null && command -v mpiexec.mpich >/dev/null; then
  mpicxx.mpich "${flags[@]}" "$here/mpi_bench.cc" -o "$out/mpi-bench-mpich"
  echo "built $out/mpi-bench-mpich"
else
  say "skipping mpi-bench-mpich"
fi

# --- Intel MPI (PyPI wheels) --------------------------------------------------
impi_ready() {
  [ -f "$impi_venv/include/mpi.h" ] && [ -e "$impi_venv/lib/libmpi.so" ] && [ -x "$impi_venv/bin/mpiexec.hydra" ] &&
    [ "$(cat "$impi_venv/.chorus-impi-version" 2>/dev/null)" = "$impi_version" ]
}
if ! impi_ready && [ "${CHORUS_PEERS_NO_INSTALL:-0}" != 1 ]; then
  if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    if may_install; then
      say "installing python3 python3-venv"
      apt_install python3 python3-venv || say "apt-get install python3-venv failed"
    fi
  fi
  if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    [ -x "$impi_venv/bin/pip" ] || python3 -m venv "$impi_venv" >&2
    say "pip install --no-deps impi-rt==$impi_version impi-devel==$impi_version into $impi_venv"
    if "$impi_venv/bin/pip" install --disable-pip-version-check --no-deps --retries 1 --timeout 30 \
        "impi-rt==$impi_version" "impi-devel==$impi_version" >&2; then
      echo "$impi_version" >"$impi_venv/.chorus-impi-version"
    else
      say "pip could not install Intel MPI $impi_version (no network?)"
    fi
  else
    say "no python3 with venv (Debian: python3-venv; $(why_not_install)), cannot install Intel MPI"
  fi
fi
if impi_ready; then
  # The wheel's mpicxx/mpigxx still name their build's install directory
  # (I_MPI_SUBSTITUTE_INSTALLDIR), so g++ is pointed at the venv directly.
  g++ "${flags[@]}" -isystem "$impi_venv/include" "$here/mpi_bench.cc" -o "$out/mpi-bench-impi" \
    -L"$impi_venv/lib" -Wl,-rpath,"$impi_venv/lib" -lmpi
  echo "built $out/mpi-bench-impi (Intel MPI $impi_version)"
else
  say "Intel MPI $impi_version not in $impi_venv, skipping mpi-bench-impi"
fi

# Open MPI must stay the `mpi` and `mpirun` alternatives when both are installed.
if command -v update-alternatives >/dev/null && [ -x /usr/bin/mpirun.openmpi ]; then
  for name in mpi mpirun; do
    now=$(alternative "$name")
    case "$now" in
      *openmpi*|"") ;;
      *) say "the $name alternative is $now, not Open MPI's: compare.sh, time_vs_mpi.py and netns/run.sh --mpi" \
           "would run another MPI; restore it with update-alternatives --auto $name (or --set $name" \
           "/usr/bin/$([ "$name" = mpi ] && echo mpicc || echo mpirun).openmpi)"
         exit 1 ;;  # after everything else was built
    esac
  done
  echo "mpi and mpirun alternatives: Open MPI's ($(readlink -f /usr/bin/mpirun))"
fi
