#!/usr/bin/env bash
# Network faults between real hosts: network namespaces as hosts
# (benchmarks/netns/run.sh --hosts 2,2: shared memory within a host, TCP over
# veth links between them; and --hosts 1,1, TCP only), each rank running
# rank_program's loop of checked 4 MiB allreduces. Once every rank printed
# READY, one host's link is broken in the middle of the loop:
#   link-down  `ip link set <veth> down` inside that host
#   trickle    its egress shaped by tc tbf to 8 kbit/s
# Every rank must then leave the job on its own, within its timeout plus a
# bound, with an expected error (IoError, TimeoutError or Aborted) whose text
# names a rank on the other host, and exit as rank_program does for an
# expected error (status 0): no hang, no crash. Prints what every rank
# reported, with the time from the fault to its error. Needs root (ip netns,
# tc); as another user it is skipped (exit 77).
#   test/integration/netns_faults.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: netns_faults.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
program=$(cd "$build" && pwd)/test/integration/rank_program
if [ "$(id -u)" -ne 0 ]; then
  echo "netns_faults.sh: not root, cannot make network namespaces: skipped"
  exit 77
fi
if [ ! -x "$program" ]; then echo "netns_faults.sh: no $program (build it first)"; exit 1; fi

timeout_ms=5000      # every collective's timeout (rank_program --timeout-ms)
slack_ms=3000        # on top of it: the 1 s liveness probe, then the abort reaching the others
exit_ms=2000         # from its error to its exit (closing its connections)
hang_ms=15000        # past timeout + this after the fault, a rank still running counts as hung

# The ranks inherit it through run.sh: jobs spanning hosts should have one (README, Security).
CHORUS_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export CHORUS_SECRET
work=$(mktemp -d /tmp/chorus-netfaults.XXXXXX)
launcher=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  # run.sh deletes its namespaces and stops its ranks itself, also on TERM.
  if [ -n "$launcher" ] && kill -0 "$launcher" 2>/dev/null; then
    kill -TERM "$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

monotonic_ms() { python3 -c 'import time; print(time.monotonic_ns() // 1000000)'; }
# Runs a command and prints the ms at which it started on CLOCK_MONOTONIC (the
# clock of rank_program's error_at_ms) and on the wall clock (the one the rank
# wrappers can read when they exit), so the fault time is not late by an
# interpreter's start-up.
timed() {
  python3 -c 'import subprocess, sys, time
t, wall = time.monotonic_ns() // 1000000, time.time_ns() // 1000000
subprocess.run(sys.argv[1:], check=True)
print(t, wall)' "$@"
}

# The rank's field KEY from its RESULT line (what= is last and may hold spaces).
result_field() {
  local line=$1 key=$2
  if [ "$key" = what ]; then
    sed -n 's/.* what=//p' <<< "$line"
  else
    sed -n "s/.* $key=\([^ ]*\).*/\1/p" <<< "${line%% what=*}"
  fi
}

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# run_fault FAULT HOSTS HOST: a job on HOSTS (run.sh --hosts: ranks per host)
# whose host HOST gets FAULT (link-down, trickle) on its link once every rank is READY.
run=0
run_fault() {
  local fault=$1 hosts_spec=$2 faulty=$3
  local name="$fault($hosts_spec, host $faulty)"
  local dir="$work/$((run += 1))"
  mkdir -p "$dir"
  # run.sh numbers ranks host by host.
  local -a host_of=() per_host=()
  local h k first_of_faulty=-1
  IFS=, read -r -a per_host <<< "$hosts_spec"
  for ((h = 0; h < ${#per_host[@]}; h++)); do
    for ((k = 0; k < per_host[h]; k++)); do
      [ "$h" = "$faulty" ] && [ "$first_of_faulty" -lt 0 ] && first_of_faulty=${#host_of[@]}
      host_of+=("$h")
    done
  done
  local ranks=${#host_of[@]}
  echo "=== $name: collective timeout $timeout_ms ms"
  # Each rank notes its host's namespace and link, runs the loop with its
  # output in $dir and leaves its exit status and the wall-clock time it
  # exited (us) there (none: the launcher killed it).
  local wrapper
  wrapper="echo {NETNS} {IFNAME} > $dir/host{RANK}; $(printf %q "$program") loop --timeout-ms $timeout_ms"
  wrapper+=" --max-seconds 60 > $dir/rank{RANK}.out 2> $dir/rank{RANK}.err; s=\$?"
  wrapper+="; echo \$s \${EPOCHREALTIME//[.,]/} > $dir/rank{RANK}.exit; exit \$s"
  "$root/benchmarks/netns/run.sh" --hosts "$hosts_spec" --rate none --port $((29500 + RANDOM % 1000)) -- \
    bash -c "$wrapper" > "$dir/launcher.log" 2>&1 &
  launcher=$!

  local rank ready=0 waited
  for waited in $(seq 600); do
    ready=0
    for ((rank = 0; rank < ranks; rank++)); do grep -q '^READY' "$dir/rank$rank.out" 2>/dev/null && ready=$((ready + 1)); done
    [ "$ready" = "$ranks" ] && break
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$ready" != "$ranks" ]; then
    fail "$name: only $ready of $ranks ranks got READY"; cat "$dir/launcher.log" "$dir"/rank*.out "$dir"/rank*.err 2>/dev/null
    kill -TERM "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true; launcher=""
    return
  fi
  # Well inside the loop, at a moment that differs from run to run: a 4 MiB
  # allreduce (or the small one between two of them) is in flight at any moment.
  sleep "0.$((100 + RANDOM % 500))"

  local ns="" ifname="" fault_at="" fault_wall=""
  read -r ns ifname < "$dir/host$first_of_faulty"
  case "$fault" in
    link-down) read -r fault_at fault_wall < <(timed ip -n "$ns" link set "$ifname" down) || true ;;
    # 8 kbit/s, a bucket of one frame, a queue of two: a link that still
    # passes a packet now and then, far too slowly for a 4 MiB allreduce.
    trickle) read -r fault_at fault_wall < <(timed tc -n "$ns" qdisc add dev "$ifname" root tbf rate 8kbit burst 1600 \
      limit 3200) || true ;;
  esac
  if [ -z "$fault_wall" ]; then
    fail "$name: could not break the link $ifname of namespace $ns"
    kill -TERM "$launcher" 2>/dev/null || true; wait "$launcher" 2>/dev/null || true; launcher=""
    return
  fi

  # run.sh returns once every rank exited (or stops the others when one fails).
  local give_up=$((fault_at + timeout_ms + hang_ms))
  while kill -0 "$launcher" 2>/dev/null && [ "$(monotonic_ms)" -lt "$give_up" ]; do sleep 0.1; done
  local hung=0
  if kill -0 "$launcher" 2>/dev/null; then
    hung=1
    for ((rank = 0; rank < ranks; rank++)); do
      [ -e "$dir/rank$rank.exit" ] || fail "$name: rank $rank still runs $((timeout_ms + hang_ms)) ms after the fault (hung)"
    done
    kill -TERM "$launcher" 2>/dev/null || true
  fi
  wait "$launcher" 2>/dev/null || true
  launcher=""
  echo "$name: run.sh done (namespaces deleted) $(( $(monotonic_ms) - fault_at )) ms after the fault"
  # Other jobs may have namespaces of their own: only this job's (chnsNNNNN-h0, -h1, -br) count.
  if ip netns list | grep -q "^${ns%-h*}-"; then fail "$name: namespaces ${ns%-h*}-* left behind"; fi
  if [ "$hung" = 1 ]; then cat "$dir/launcher.log"; fi

  local line status error_at exit_status exited_us exited what after other others culprits named
  for ((rank = 0; rank < ranks; rank++)); do
    line=$(grep '^RESULT' "$dir/rank$rank.out" 2>/dev/null | tail -n 1 || true)
    exit_status="none (killed)"; exited_us=""
    if [ -s "$dir/rank$rank.exit" ]; then read -r exit_status exited_us < "$dir/rank$rank.exit"; fi
    exited=$([ -n "$exited_us" ] && echo $((exited_us / 1000 - fault_wall)) || echo "?")
    status=$(result_field "$line" status)
    error_at=$(result_field "$line" error_at_ms)
    what=$(result_field "$line" what)
    after=$([ -n "$error_at" ] && echo $((error_at - fault_at)) || echo "?")
    echo "$name: rank $rank (host ${host_of[$rank]}) status=${status:-none} after_fault_ms=$after" \
      "exit=$exit_status exited_after_fault_ms=$exited: ${what:-(no RESULT line)}"
    others=""
    for ((other = 0; other < ranks; other++)); do
      [ "${host_of[$other]}" != "${host_of[$rank]}" ] && others+="${others:+|}$other"
    done
    if [ -z "$line" ]; then
      fail "$name: rank $rank printed no RESULT line"; cat "$dir/rank$rank.out" "$dir/rank$rank.err" 2>/dev/null; continue
    fi
    case "$status" in
      IoError|TimeoutError|Aborted) ;;
      *) fail "$name: rank $rank: status '$status', wanted IoError, TimeoutError or Aborted" ;;
    esac
    [ "$exit_status" = 0 ] || fail "$name: rank $rank exited with '$exit_status', not 0 (an expected error)"
    # A trickle still lets small messages through: a collective in flight at
    # the fault may finish late (before its own timeout), and the next one
    # then times out, up to two timeouts after the fault.
    bound=$((timeout_ms + slack_ms))
    [ "$fault" = trickle ] && bound=$((2 * timeout_ms + slack_ms))
    if [ "$after" = "?" ] || [ "$after" -lt 0 ] || [ "$after" -gt "$bound" ]; then
      fail "$name: rank $rank: error ${after} ms after the fault, wanted 0..$bound"
    elif [ "$exited" != "?" ] && [ "$exited" -gt $((after + exit_ms)) ]; then
      fail "$name: rank $rank exited $((exited - after)) ms after its error, wanted at most $exit_ms"
    fi
    # The culprit must be a rank of the other host: one that does not answer a
    # liveness probe, the peer of a broken connection (IoError's peer), or the
    # peer whose abort this rank adopted. "waiting for ... from rank N" does not count.
    culprits=$( (grep -oE "ranks? [0-9]+(, [0-9]+)* do(es)? not answer|peer rank [0-9]+" <<< "$what" || true) |
      grep -oE "[0-9]+" || true)
    [ "$status" = IoError ] && culprits+=" $(result_field "$line" peer)"
    named=0
    for other in $culprits; do [[ "|$others|" == *"|$other|"* ]] && named=1; done
    [ "$named" = 1 ] || fail "$name: rank $rank: the error blames no rank of the other host (${others//|/, })"
    if [ -s "$dir/rank$rank.err" ]; then echo "--- rank $rank stderr:"; cat "$dir/rank$rank.err"; fi
  done
}

# CHORUS_TEST_TRIALS repeats every fault (default 1), each time at another moment.
trials=${CHORUS_TEST_TRIALS:-1}
started=$(monotonic_ms)
for ((trial = 0; trial < trials; trial++)); do
  run_fault link-down 2,2 1
  run_fault trickle 2,2 0
  run_fault link-down 1,1 0   # TCP only: no shared-memory neighbour to relay an abort
done

if pgrep -f "$work" > /dev/null; then fail "processes of this test still run: $(pgrep -af "$work")"; fi
echo "netns_faults.sh: $(( ($(monotonic_ms) - started) / 1000 )) s"
if [ "$failures" -ne 0 ]; then echo "netns_faults.sh: $failures failures"; exit 1; fi
echo "netns_faults.sh: all passed"
