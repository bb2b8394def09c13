#!/usr/bin/env bash
# Open MPI's remote launch agent for run.sh --mpi, used in place of ssh
# (--mca plm_rsh_agent): mpirun calls it as `mpi-agent.sh HOST WORD...` and
# expects WORD... to run on HOST. Our "hosts" are network namespaces of one
# machine, so HOST (an address 10.213.0.<i+1> from run.sh's hostfile) names the
# namespace <prefix>-h<i>, and the command runs there via `ip netns exec`.
# The prefix comes from CHORUS_NETNS_PREFIX, which run.sh exports to mpirun and
# which every process it starts inherits, so tree-spawned daemons find it too.
set -euo pipefail

prefix=${CHORUS_NETNS_PREFIX:?mpi-agent.sh: CHORUS_NETNS_PREFIX is not set (run it through run.sh --mpi)}
subnet=${CHORUS_NETNS_SUBNET:-10.213.0}
# ssh takes options before the host; Open MPI adds none for an agent of another
# name, but skip any so a user's plm_rsh_args cannot be taken for the host.
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do shift; done
[ $# -ge 2 ] || { echo "mpi-agent.sh: usage: mpi-agent.sh HOST COMMAND..." >&2; exit 255; }
host=${1#*@}  # ssh's user@host form
shift
case "$host" in
  "$subnet".*) last=${host##*.} ;;
  *) echo "mpi-agent.sh: host '$host' is not in ${subnet}.0/24" >&2; exit 255 ;;
esac
if ! [[ "$last" =~ ^[0-9]+$ ]] || [ "$last" -lt 1 ]; then
  echo "mpi-agent.sh: bad host address '$host'" >&2; exit 255
fi
ns="${prefix}-h$((last - 1))"
if [ ! -e "/run/netns/$ns" ]; then
  echo "mpi-agent.sh: no namespace $ns for host $host" >&2; exit 255
fi
# Like ssh: the words are joined by spaces and handed to the user's login shell,
# because Open MPI quoted them for that shell (e.g. -mca ess "env").
shell=$(getent passwd "$(id -u)" | cut -d: -f7)
# run.sh --pin: the host's cores (CHORUS_NETNS_PIN lists them host by host).
pin=()
if [ -n "${CHORUS_NETNS_PIN:-}" ]; then
  read -r -a cores <<< "$CHORUS_NETNS_PIN"
  pin=(taskset -c "${cores[$((last - 1))]}")
fi
exec ip netns exec "$ns" "${pin[@]}" "${shell:-/bin/sh}" -c "$*"
