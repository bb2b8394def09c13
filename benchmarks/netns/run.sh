#!/usr/bin/env bash
# Multi-host harness on one machine: N network namespaces ("hosts"), each with
# one veth into a bridge that lives in its own namespace, each host's egress
# shaped with tc tbf to --rate. Runs the command after `--` under chorus's env
# contract, one rank per host (--ranks) or several (--hosts), prints rank 0's
# output, and deletes every namespace and link it made, also on Ctrl-C, on a
# kill and when a rank fails.
#
#   benchmarks/netns/run.sh --ranks 4 --rate 1gbit -- build/benchmarks/chorus-bench --op allreduce --check
#   benchmarks/netns/run.sh --hosts 2,2 --rate 1gbit -- build/benchmarks/chorus-bench --op allreduce --algo all
#
# Ranks are numbered host by host. Ranks of one host share its namespace and
# get CHORUS_HOST_ID=<its namespace>, so chorus sees the hosts as the harness
# lays them out: shared memory within a host, TCP over the shaped veths
# between hosts. Addresses are 10.213.0.<host+1>/24, which exist only inside
# these namespaces: nothing the ranks send can leave them. Must run as root.
#
#   benchmarks/netns/run.sh --mpi --ranks 4 --rate 1gbit -- build-peers/mpi-bench --op allreduce --check
#
# --mpi starts an Open MPI job instead: mpirun runs in host 0's namespace with a
# hostfile of the hosts' addresses (one slot each) and starts its daemons on
# the other hosts through mpi-agent.sh (ip netns exec in place of ssh), over the
# TCP BTL only: the hosts share one kernel, so shared memory would bypass the
# shaped links.
# In the rank's command, the words {RANK}, {SIZE}, {ADDR}, {RANK0_ADDR},
# {IFNAME}, {NETNS} and {PREFIX} are replaced, for peers that take flags
# rather than environment variables.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ranks=4
hosts_spec=""
rate=1gbit
port=29500
burst=""
mtu=1500
subnet=10.213.0
mpi=0
pin=0
mca=()
usage() {
  cat <<EOF
usage: $0 [--ranks N] [--rate RATE] [--burst BYTES] [--port PORT] -- COMMAND [ARGS...]
       $0 --mpi [--ranks N] [--rate RATE] [--burst BYTES] [--mca KEY VALUE]... -- PROGRAM [ARGS...]
  --ranks N      hosts (network namespaces), one rank each (default 4)
  --hosts LIST   ranks per host, e.g. 2,2 (2 hosts of 2) or 1,2,3 (instead of --ranks)
  --rate RATE    egress rate of each host, tc syntax: 1gbit, 500mbit, 10gbit (default 1gbit)
                 'none' leaves the links unshaped
  --burst BYTES  tbf bucket size (default: 1 ms at RATE, at least 64 KiB)
  --mtu BYTES    MTU of every link (default 1500, Ethernet's; 9000 for jumbo frames)
  --port PORT    port of rank 0's embedded TcpStore (default 29500)
  --mpi          run PROGRAM as one Open MPI job (mpirun -np N), one rank per host,
                 over --mca btl tcp,self restricted to the hosts' subnet
  --mca KEY VAL  extra MCA parameter for mpirun (--mpi only; repeatable)
  --pin          give each host cores of its own: the machine's cores split evenly
                 among the hosts (round robin where there are more hosts than
                 cores), each host's ranks confined to its share (taskset), so that
                 a host of 2 ranks on 1 core is oversubscribed as it would be on a
                 real machine of 1 core, for chorus and Open MPI alike
EOF
}
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --hosts) hosts_spec="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --burst) burst="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --mpi) mpi=1; shift ;;
    --pin) pin=1; shift ;;
    --mca) [ $# -ge 3 ] || { echo "run.sh: --mca needs KEY VALUE" >&2; exit 2; }; mca+=(--mca "$2" "$3"); shift 3 ;;
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
# per_host[h]: ranks on host h; host_of[r]: the host of rank r.
declare -a per_host=() host_of=()
if [ -n "$hosts_spec" ]; then
  IFS=, read -r -a per_host <<< "$hosts_spec"
else
  for ((h = 0; h < ranks; h++)); do per_host+=(1); done
fi
hosts=${#per_host[@]}
for ((h = 0; h < hosts; h++)); do
  if ! [[ "${per_host[$h]}" =~ ^[0-9]+$ ]] || [ "${per_host[$h]}" -lt 1 ]; then
    echo "run.sh: --hosts wants ranks per host like 2,2 or 1,2,3, got '$hosts_spec'" >&2; exit 2
  fi
  for ((k = 0; k < per_host[h]; k++)); do host_of+=("$h"); done
done
ranks=${#host_of[@]}
if [ "$hosts" -gt 200 ] || [ "$ranks" -gt 400 ]; then echo "run.sh: at most 200 hosts and 400 ranks" >&2; exit 2; fi
if ! [[ "$mtu" =~ ^[0-9]+$ ]] || [ "$mtu" -lt 576 ] || [ "$mtu" -gt 65535 ]; then
  echo "run.sh: --mtu must be 576..65535, got '$mtu'" >&2; exit 2
fi
if [ "$mpi" = 1 ]; then
  command -v mpirun > /dev/null || { echo "run.sh: --mpi needs mpirun (Open MPI) on PATH" >&2; exit 2; }
  # mpirun starts one command for all ranks, so there is nothing per rank to put in it.
  for word in "$@"; do
    if [[ "$word" =~ \{(RANK|ADDR|IFNAME|NETNS)\} ]]; then
      echo "run.sh: --mpi runs one command for all ranks: '{${BASH_REMATCH[1]}}' cannot be replaced" >&2; exit 2
    fi
  done
elif [ ${#mca[@]} -gt 0 ]; then
  echo "run.sh: --mca needs --mpi" >&2; exit 2
fi

# Unique per run: interface names must fit in 15 characters, so a short id.
id=$(printf '%05d' $(( $$ % 100000 )))
prefix="chns${id}"
bridge_ns="${prefix}-br"
workdir=$(mktemp -d "/tmp/${prefix}.XXXXXX")
host_ns() { echo "${prefix}-h$1"; }
# The cores of host $1 under --pin, as taskset -c takes them.
host_cpus() {
  local cores hosts_n=$hosts
  cores=$(nproc)
  if [ "$hosts_n" -le "$cores" ]; then
    echo "$(( $1 * cores / hosts_n ))-$(( ($1 + 1) * cores / hosts_n - 1 ))"
  else
    echo "$(( $1 % cores ))"
  fi
}
# The command prefix that confines host $1's processes (nothing without --pin).
pinned() { [ "$pin" = 1 ] && echo "taskset -c $(host_cpus "$1")"; return 0; }
host_if() { echo "ch${id}h$1"; }     # the veth end inside host $1
bridge_if() { echo "ch${id}b$1"; }   # its peer, enslaved to the bridge
declare -a rank_pids=()
created_ns=()

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  local pid ns left
  for pid in "${rank_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  # A moment to exit on their own: mpirun stops its daemons and ranks on TERM.
  for _ in $(seq 20); do
    left=0
    for pid in "${rank_pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  # Anything still running in a namespace we made is one of ours (a rank, an
  # MPI daemon or its launcher). Repeat until none is left: one may have forked
  # while we killed its parent, and a process would keep its namespace (and
  # veth) alive after `ip netns del`. Bash reports each job it reaps killed
  # ("line N: PID Killed mpirun ..."); that is us, not news, so stderr is muted.
  exec 3>&2 2>/dev/null
  for _ in $(seq 50); do
    left=0
    for ns in "${created_ns[@]}"; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do left=1; kill -KILL "$pid" 2>/dev/null || true; done
    done
    [ "$left" = 0 ] && break
    sleep 0.05
  done
  for pid in "${rank_pids[@]}"; do wait "$pid" || true; done
  exec 2>&3 3>&-
  # Deleting a namespace destroys the veth ends inside it and so their peers.
  for ns in "${created_ns[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for ((i = 0; i < hosts; i++)); do ip link del "$(host_if "$i")" 2>/dev/null || true; done
  rm -rf "$workdir"
  exit "$status"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted, cleaning up" >&2; exit 130' INT
trap 'echo "run.sh: terminated, cleaning up" >&2; exit 143' TERM

make_ns() { ip netns add "$1"; created_ns+=("$1"); ip -n "$1" link set lo up; }

make_ns "$bridge_ns"
ip -n "$bridge_ns" link add br0 type bridge
ip -n "$bridge_ns" link set br0 mtu "$mtu" up
for ((i = 0; i < hosts; i++)); do
  ns=$(host_ns "$i")
  make_ns "$ns"
  # Created directly inside the two namespaces: nothing appears in the root one.
  ip link add "$(host_if "$i")" netns "$ns" type veth peer name "$(bridge_if "$i")" netns "$bridge_ns"
  ip -n "$bridge_ns" link set "$(bridge_if "$i")" mtu "$mtu" master br0 up
  ip -n "$ns" link set "$(host_if "$i")" mtu "$mtu"
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
for ((i = 0; i < hosts; i++)); do
  for _ in $(seq 50); do
    grep -q 1 <(ip netns exec "$(host_ns "$i")" cat "/sys/class/net/$(host_if "$i")/carrier" 2>/dev/null) && break
    sleep 0.1
  done
done

job_id="netns-${prefix}-$(date +%s)"
echo "# netns harness: $ranks ranks on $hosts hosts (${per_host[*]}) ${subnet}.1-${subnet}.$hosts, egress $rate per host, MTU $mtu, job $job_id" >&2
if [ "$mpi" = 1 ]; then
  for ((i = 0; i < hosts; i++)); do echo "${subnet}.$((i + 1)) slots=${per_host[$i]}"; done > "$workdir/hostfile"
  # Ranks numbered host by host, as without --mpi.
  map_by=node
  [ "$ranks" -gt "$hosts" ] && map_by=slot
  if [ "$ranks" -gt "$(nproc)" ] && [[ " ${mca[*]} " != *" mpi_yield_when_idle "* ]]; then
    mca+=(--mca mpi_yield_when_idle 1)
  fi
  args=()
  for word in "$@"; do
    word=${word//\{SIZE\}/$ranks}; word=${word//\{RANK0_ADDR\}/${subnet}.1}; word=${word//\{PREFIX\}/$prefix}
    args+=("$word")
  done
  # mpirun sees 10.213.0.1 as its own node and starts rank 0 there itself; it
  # reaches the other addresses through mpi-agent.sh, which finds their namespaces
  # from CHORUS_NETNS_PREFIX. Why each option:
  #  pml ob1 + btl tcp,self: no UCX/OFI and no vader, only TCP sockets over the veths
  #    (the hosts share a kernel and /dev/shm, so shared memory would skip the shaping);
  #  *_if_include: the daemons' and ranks' sockets use our subnet and nothing else;
  #  bind-to none: each daemon thinks it owns every core and would pin all ranks to core 0;
  #  mpi_yield_when_idle: what mpirun picks itself for more ranks than cores on one machine;
  #    it cannot see that here, and ranks spinning without yielding took 16-36 ms per 8-byte
  #    allreduce instead of ~60 us (4 ranks, 2 cores);
  #  orte_tmpdir_base / TMPDIR: session directories land in $workdir, which cleanup removes
  #    even when the daemons are killed.
  # The agent confines each host's daemon (and so its ranks) to the host's cores.
  pins=""
  if [ "$pin" = 1 ]; then for ((i = 0; i < hosts; i++)); do pins+="$(host_cpus "$i") "; done; fi
  # shellcheck disable=SC2046  # pinned's words are a command prefix
  setsid ip netns exec "$(host_ns 0)" $(pinned 0) env CHORUS_NETNS_PREFIX="$prefix" CHORUS_NETNS_SUBNET="$subnet" \
    CHORUS_NETNS_PIN="$pins" TMPDIR="$workdir" \
    mpirun --allow-run-as-root -np "$ranks" --hostfile "$workdir/hostfile" --map-by "$map_by" --bind-to none \
    --mca plm_rsh_agent "$here/mpi-agent.sh" --mca pml ob1 --mca btl tcp,self \
    --mca oob_tcp_if_include "${subnet}.0/24" --mca btl_tcp_if_include "${subnet}.0/24" \
    --mca orte_tmpdir_base "$workdir" "${mca[@]}" "${args[@]}" \
    > >(tee "$workdir/rank0.out") 2> "$workdir/rank0.err" &
  rank_pids+=($!)
fi
# Without --mpi, run.sh itself is the launcher: each rank in its host's namespace.
for ((i = 0; i < ranks && mpi == 0; i++)); do
  h=${host_of[$i]}
  ns=$(host_ns "$h")
  args=()
  for word in "$@"; do
    word=${word//\{RANK\}/$i}; word=${word//\{SIZE\}/$ranks}; word=${word//\{ADDR\}/${subnet}.$((h + 1))}
    word=${word//\{RANK0_ADDR\}/${subnet}.1}; word=${word//\{IFNAME\}/$(host_if "$h")}
    word=${word//\{NETNS\}/$ns}; word=${word//\{PREFIX\}/$prefix}
    args+=("$word")
  done
  # setsid: each rank leads its own process group, so cleanup reaches its children too.
  environment=(CHORUS_RANK="$i" CHORUS_SIZE="$ranks" CHORUS_STORE="tcp://${subnet}.1:${port}" CHORUS_JOB_ID="$job_id"
               CHORUS_SOCKET_IFNAME="$(host_if "$h")" CHORUS_HOST_ID="$ns")
  if [ "$i" -eq 0 ]; then
    # shellcheck disable=SC2046
    setsid ip netns exec "$ns" $(pinned "$h") env "${environment[@]}" "${args[@]}" \
      > >(tee "$workdir/rank0.out") 2> "$workdir/rank0.err" &
  else
    # shellcheck disable=SC2046
    setsid ip netns exec "$ns" $(pinned "$h") env "${environment[@]}" "${args[@]}" > "$workdir/rank$i.out" \
      2> "$workdir/rank$i.err" &
  fi
  rank_pids+=($!)
done

# The first rank to fail ends the job: the others would only wait for it until their timeouts.
# (Under --mpi the one process is mpirun, which does the same for its ranks.)
procs=${#rank_pids[@]}
failed=-1
remaining=$procs
declare -A done_pid=()
while [ "$remaining" -gt 0 ]; do
  pending=()
  for ((i = 0; i < procs; i++)); do [ -z "${done_pid[$i]:-}" ] && pending+=("${rank_pids[$i]}"); done
  set +e
  finished=
  wait -n -p finished "${pending[@]}"
  code=$?
  # bash may return from `wait -n` without naming a process (127: it had
  # reaped the one that ended already): ask each one still pending.
  if [ -z "$finished" ]; then
    for pid in "${pending[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        code=$?
        finished=$pid
        break
      fi
    done
    [ -z "$finished" ] && sleep 0.05
  fi
  set -e
  for ((i = 0; i < procs; i++)); do
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
  if [ "$mpi" = 1 ]; then
    echo "run.sh: mpirun exited with status $failed_code" >&2
  else
    echo "run.sh: rank $failed exited with status $failed_code; stopping the others" >&2
  fi
  for ((i = 0; i < procs; i++)); do
    if [ -s "$workdir/rank$i.err" ]; then
      echo "--- $([ "$mpi" = 1 ] && echo "mpirun" || echo "rank $i") stderr (last 20 lines) ---" >&2
      tail -n 20 "$workdir/rank$i.err" >&2
    fi
  done
  exit 1
fi
[ -s "$workdir/rank0.err" ] && cat "$workdir/rank0.err" >&2
exit 0
