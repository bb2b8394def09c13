#!/usr/bin/env bash
# Multi-host harness on one machine: N network namespaces ("hosts"), each with
# one veth into a bridge that lives in its own namespace, each host's egress
# shaped with tc tbf to --rate. Runs one rank per host of the command after
# `--` under chorus's env contract, prints rank 0's output, and deletes every
# namespace and link it made, also on Ctrl-C, on a kill and when a rank fails.
#
#   benchmarks/netns/run.sh --ranks 4 --rate 1gbit -- build/benchmarks/chorus-bench --op allreduce --check
#
# Addresses are 10.213.0.<rank+1>/24, which exist only inside these
# namespaces: nothing the ranks send can leave them. Must run as root.
# In the rank's command, the words {RANK}, {SIZE}, {ADDR}, {RANK0_ADDR},
# {IFNAME}, {NETNS} and {PREFIX} are replaced, for peers that take flags
# rather than environment variables.
set -euo pipefail

ranks=4
rate=1gbit
port=29500
burst=""
subnet=10.213.0
usage() {
  cat <<EOF
usage: $0 [--ranks N] [--rate RATE] [--burst BYTES] [--port PORT] -- COMMAND [ARGS...]
  --ranks N      hosts (network namespaces), one rank each (default 4)
  --rate RATE    egress rate of each host, tc syntax: 1gbit, 500mbit, 10gbit (default 1gbit)
                 'none' leaves the links unshaped
  --burst BYTES  tbf bucket size (default: 1 ms at RATE, at least 64 KiB)
  --port PORT    port of rank 0's embedded TcpStore (default 29500)
EOF
}
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --burst) burst="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then echo "run.sh: no command after --" >&2; usage >&2; exit 2; fi
if [ "$(id -u)" -ne 0 ]; then echo "run.sh: must run as root (ip netns, tc)" >&2; exit 2; fi
if ! [[ "$ranks" =~ ^[0-9]+$ ]] || [ "$ranks" -lt 1 ] || [ "$ranks" -gt 200 ]; then
  echo "run.sh: --ranks must be 1..200, got '$ranks'" >&2; exit 2
fi

# Unique per run: interface names must fit in 15 characters, so a short id.
id=$(printf '%05d' $(( $$ % 100000 )))
prefix="chns${id}"
bridge_ns="${prefix}-br"
workdir=$(mktemp -d "/tmp/${prefix}.XXXXXX")
host_ns() { echo "${prefix}-h$1"; }
host_if() { echo "ch${id}h$1"; }     # the veth end inside host $1
bridge_if() { echo "ch${id}b$1"; }   # its peer, enslaved to the bridge
declare -a rank_pids=()
created_ns=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${rank_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  for ns in "${created_ns[@]}"; do
    # Anything still running in a namespace we made is one of our ranks.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for pid in "${rank_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # Deleting a namespace destroys the veth ends inside it and so their peers.
  for ns in "${created_ns[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for ((i = 0; i < ranks; i++)); do ip link del "$(host_if "$i")" 2>/dev/null || true; done
  rm -rf "$workdir"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted, cleaning up" >&2; exit 130' INT
trap 'echo "run.sh: terminated, cleaning up" >&2; exit 143' TERM

make_ns() { ip netns add "$1"; created_ns+=("$1"); ip -n "$1" link set lo up; }

make_ns "$bridge_ns"
ip -n "$bridge_ns" link add br0 type bridge
ip -n "$bridge_ns" link set br0 up
for ((i = 0; i < ranks; i++)); do
  ns=$(host_ns "$i")
  make_ns "$ns"
  # Created directly inside the two namespaces: nothing appears in the root one.
  ip link add "$(host_if "$i")" netns "$ns" type veth peer name "$(bridge_if "$i")" netns "$bridge_ns"
  ip -n "$bridge_ns" link set "$(bridge_if "$i")" master br0 up
  ip -n "$ns" addr add "${subnet}.$((i + 1))/24" dev "$(host_if "$i")"
  ip -n "$ns" link set "$(host_if "$i")" up
  if [ "$rate" != none ]; then
    if [ -z "$burst" ]; then
      # tc's rate in bytes/s, from its own parser: 1 ms of traffic, >= 64 KiB so a GSO segment fits.
      bytes_per_s=$(awk -v r="$rate" 'BEGIN {
        if (match(tolower(r), /^[0-9.]+/) == 0) exit 1
        v = substr(r, 1, RLENGTH); u = tolower(substr(r, RLENGTH + 1))
        m = 1; if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9; else if (u ~ /^t/) m = 1e12
        printf "%d", (u ~ /bps$/) ? v * m : v * m / 8 }') || { echo "run.sh: bad --rate '$rate'" >&2; exit 2; }
      b=$(( bytes_per_s / 1000 )); [ "$b" -lt 65536 ] && b=65536
    else
      b="$burst"
    fi
    tc -n "$ns" qdisc add dev "$(host_if "$i")" root tbf rate "$rate" burst "$b" latency 20ms
  fi
done
# A veth passes traffic once both ends are up: wait for each host's carrier.
for ((i = 0; i < ranks; i++)); do
  for _ in $(seq 50); do
    grep -q 1 <(ip netns exec "$(host_ns "$i")" cat "/sys/class/net/$(host_if "$i")/carrier" 2>/dev/null) && break
    sleep 0.1
  done
done

job_id="netns-${prefix}-$(date +%s)"
echo "# netns harness: $ranks hosts ${subnet}.1-${subnet}.$ranks, egress $rate per host, job $job_id" >&2
for ((i = 0; i < ranks; i++)); do
  ns=$(host_ns "$i")
  args=()
  for word in "$@"; do
    word=${word//\{RANK\}/$i}; word=${word//\{SIZE\}/$ranks}; word=${word//\{ADDR\}/${subnet}.$((i + 1))}
    word=${word//\{RANK0_ADDR\}/${subnet}.1}; word=${word//\{IFNAME\}/$(host_if "$i")}
    word=${word//\{NETNS\}/$ns}; word=${word//\{PREFIX\}/$prefix}
    args+=("$word")
  done
  # setsid: each rank leads its own process group, so cleanup reaches its children too.
  if [ "$i" -eq 0 ]; then
    setsid ip netns exec "$ns" env CHORUS_RANK="$i" CHORUS_SIZE="$ranks" \
      CHORUS_STORE="tcp://${subnet}.1:${port}" CHORUS_JOB_ID="$job_id" CHORUS_SOCKET_IFNAME="$(host_if "$i")" \
      "${args[@]}" > >(tee "$workdir/rank0.out") 2> "$workdir/rank0.err" &
  else
    setsid ip netns exec "$ns" env CHORUS_RANK="$i" CHORUS_SIZE="$ranks" \
      CHORUS_STORE="tcp://${subnet}.1:${port}" CHORUS_JOB_ID="$job_id" CHORUS_SOCKET_IFNAME="$(host_if "$i")" \
      "${args[@]}" > "$workdir/rank$i.out" 2> "$workdir/rank$i.err" &
  fi
  rank_pids+=($!)
done

# The first rank to fail ends the job: the others would only wait for it until their timeouts.
failed=-1
remaining=$ranks
declare -A done_pid=()
while [ "$remaining" -gt 0 ]; do
  pending=()
  for ((i = 0; i < ranks; i++)); do [ -z "${done_pid[$i]:-}" ] && pending+=("${rank_pids[$i]}"); done
  set +e
  wait -n -p finished "${pending[@]}"
  code=$?
  set -e
  for ((i = 0; i < ranks; i++)); do
    if [ "${rank_pids[$i]}" = "$finished" ] && [ -z "${done_pid[$i]:-}" ]; then
      done_pid[$i]=1
      remaining=$((remaining - 1))
      if [ "$code" -ne 0 ] && [ "$failed" -lt 0 ]; then failed=$i; failed_code=$code; fi
    fi
  done
  [ "$failed" -ge 0 ] && break
done
sleep 0.2  # lets tee flush rank 0's last lines
if [ "$failed" -ge 0 ]; then
  echo "run.sh: rank $failed exited with status $failed_code; stopping the others" >&2
  for ((i = 0; i < ranks; i++)); do
    if [ -s "$workdir/rank$i.err" ]; then
      echo "--- rank $i stderr (last 20 lines) ---" >&2
      tail -n 20 "$workdir/rank$i.err" >&2
    fi
  done
  exit 1
fi
[ -s "$workdir/rank0.err" ] && cat "$workdir/rank0.err" >&2
exit 0
