#!/usr/bin/env bash
# chorus beside three MPIs on one host: Open MPI (Debian), MPICH (Debian) and
# Intel MPI (PyPI), interleaved so that a shared machine's noise hits all
# alike. For each rank count, collective and size (--interleave size, the
# default) or each rank count and collective (--interleave op), it runs
# chorus-bench, mpi-bench-openmpi, mpi-bench-mpich and mpi-bench-impi one
# after the other, --repeats times, the first library rotating each time.
# Every run is --check'ed; each reports chorus-bench's statistic: the median
# of --rounds rounds of the slowest rank's mean time per call. The table
# (vs_mpi_table.py) keeps each library's best run per size and prints
# chorus / best MPI (< 1: chorus faster).
#
#   benchmarks/peers/vs_mpi.sh [--ranks "2 4"] [--ops "allreduce allreduce_in_place ..."]
#       [-b 8] [-e 64M] [-f 4] [--repeats 2] [--rounds 3] [--time-budget-ms 200]
#       [--barrier] [--rewrite-input] [--interleave size|op] [--out DIR] [--chorus-bench PATH]
#
# --ops: allreduce, allreduce_in_place (chorus-bench --in-place, MPI_IN_PLACE),
#   broadcast, allgather, reduce_scatter, alltoall, barrier (default: all).
# --barrier: time each call alone after a barrier (both sides), not back to back.
# --rewrite-input: both sides write the call's input afresh before each call
#   (timed), as a training step hands over a new gradient. Without it every
#   call reads an input unchanged since the last, which an MPI's single copy
#   out of its peer's buffer finds in a cache (benchmarks/README.md, stop 66).
# Needs build/benchmarks/chorus-bench (scripts/build.sh) and the drivers of
# benchmarks/peers/build.sh in build-peers/ (built here when none is there);
# an MPI whose driver is missing is left out, with a message. Each MPI runs
# at its defaults on one host, as root where we are root:
#   Open MPI   mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
#   MPICH      mpiexec.mpich (Hydra runs as root unasked)
#   Intel MPI  I_MPI_FABRICS=shm I_MPI_PIN=0 I_MPI_HYDRA_BOOTSTRAP=fork
#              build-peers/impi-venv/bin/mpiexec.hydra (shared memory only,
#              no libfabric; no pinning, as the others; no ssh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rank_counts="2 4" ops="allreduce allreduce_in_place broadcast allgather reduce_scatter alltoall barrier"
min=8 max=64M step=4 repeats=2 rounds=3 budget_ms=200 barrier=0 rewrite_input=0 interleave=size out=""
chorus_bench=${CHORUS_BENCH:-$root/build/benchmarks/chorus-bench}
peers=${PEERS_DIR:-$root/build-peers}
die() { echo "vs_mpi.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || [ "$1" = --barrier ] || [ "$1" = --rewrite-input ] || die "$1 needs a value"
  case "$1" in
    --ranks) rank_counts=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -f) step=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --time-budget-ms) budget_ms=$2; shift 2 ;;
    --barrier) barrier=1; shift ;;
    --rewrite-input) rewrite_input=1; shift ;;
    --interleave) interleave=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --chorus-bench) chorus_bench=$2; shift 2 ;;
    *) die "unknown option $1 (see the header of $0)" ;;
  esac
done
case "$interleave" in size|op) ;; *) die "--interleave is size or op, not $interleave" ;; esac
for n in $rank_counts; do
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ]; then die "--ranks takes counts of 2 or more, not '$n'"; fi
done
for value in "$repeats" "$rounds"; do [[ "$value" =~ ^[1-9][0-9]*$ ]] || die "--repeats and --rounds take a count, not '$value'"; done
for op in $ops; do
  case "$op" in allreduce|allreduce_in_place|broadcast|allgather|reduce_scatter|alltoall|barrier) ;;
    *) die "--ops: unknown collective $op" ;; esac
done
to_bytes() {  # 64M -> 67108864, as chorus-bench reads its sizes (K, M, G = 2^10, 2^20, 2^30)
  [[ "$1" =~ ^[0-9]+(\.[0-9]+)?[KkMmGg]?$ ]] || die "not a size: $1 (a number, then K, M or G or nothing)"
  awk -v s="$1" 'BEGIN { n = s + 0; u = toupper(substr(s, length(s)));
    if (u == "K") n *= 1024; else if (u == "M") n *= 1048576; else if (u == "G") n *= 1073741824;
    printf "%d\n", n }'
}
min_bytes=$(to_bytes "$min")
max_bytes=$(to_bytes "$max")
if [ "$min_bytes" -lt 1 ] || [ "$max_bytes" -lt "$min_bytes" ]; then die "sizes: -b $min -e $max is no range"; fi
awk -v f="$step" 'BEGIN { exit !(f > 1) }' || die "-f must be more than 1, not $step"
# The sizes chorus-bench's own sweep would visit.
mapfile -t sizes < <(awk -v b="$min_bytes" -v e="$max_bytes" -v f="$step" 'BEGIN { for (x = b; x <= e; x *= f) printf "%d\n", x }')

if [ ! -x "$chorus_bench" ] && [ "$chorus_bench" = "$root/build/benchmarks/chorus-bench" ]; then
  "$root/scripts/build.sh" >&2
fi
[ -x "$chorus_bench" ] || die "no chorus-bench at $chorus_bench (set CHORUS_BENCH or --chorus-bench)"
if [ ! -x "$peers/mpi-bench-openmpi" ] && [ ! -x "$peers/mpi-bench-mpich" ] && [ ! -x "$peers/mpi-bench-impi" ]; then
  "$here/build.sh" "$peers" >&2
fi

# The libraries, in order (run_one knows how to launch each).
libraries=(chorus)
openmpi_run=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -x "$peers/mpi-bench-openmpi" ] && [ -n "$openmpi_run" ]; then
  libraries+=(openmpi)
else
  echo "vs_mpi.sh: no $peers/mpi-bench-openmpi or mpirun.openmpi: Open MPI left out (benchmarks/peers/build.sh)" >&2
fi
if [ -x "$peers/mpi-bench-mpich" ] && command -v mpiexec.mpich >/dev/null; then
  libraries+=(mpich)
else
  echo "vs_mpi.sh: no $peers/mpi-bench-mpich or mpiexec.mpich: MPICH left out (benchmarks/peers/build.sh)" >&2
fi
impi_run=$peers/impi-venv/bin/mpiexec.hydra
if [ -x "$peers/mpi-bench-impi" ] && [ -x "$impi_run" ]; then
  libraries+=(impi)
else
  echo "vs_mpi.sh: no $peers/mpi-bench-impi or $impi_run: Intel MPI left out (benchmarks/peers/build.sh)" >&2
fi
[ ${#libraries[@]} -ge 2 ] || die "no MPI to compare with: run benchmarks/peers/build.sh first"

out=${out:-$(mktemp -d /tmp/chorus-vs-mpi.XXXXXX)}
mkdir -p "$out"
{
  echo "rounds=$rounds"
  echo "repeats=$repeats"
  echo "barrier=$barrier"
  echo "rewrite_input=$rewrite_input"
  echo "interleave=$interleave"
  echo "budget_ms=$budget_ms"
  echo "libraries=${libraries[*]}"
  echo "chorus_version=$("$chorus_bench" --version)"
} >"$out/settings"

failures=0
# One run of one library: appends its table to OUT/RANKS.OP.LIBRARY.txt.
run_one() {
  local library=$1 ranks=$2 op=$3 first=$4 last=$5 status=0
  local bench_op=$op extra=() command=()
  if [ "$op" = allreduce_in_place ]; then bench_op=allreduce extra=(--in-place); fi
  [ "$barrier" = 1 ] && extra+=(--barrier)
  [ "$rewrite_input" = 1 ] && extra+=(--rewrite-input)
  # -f: a whole sweep (--interleave op) visits the sizes of one by size.
  local args=(--op "$bench_op" --check -b "$first" -e "$last" -f "$step" --rounds "$rounds"
              --time-budget-ms "$budget_ms" "${extra[@]}")
  case "$library" in
    chorus) command=("$chorus_bench" --ranks "$ranks" "${args[@]}") ;;
    openmpi) command=("$openmpi_run" --allow-run-as-root --oversubscribe --bind-to none -np "$ranks"
                      "$peers/mpi-bench-openmpi" "${args[@]}") ;;
    mpich) command=(mpiexec.mpich -n "$ranks" "$peers/mpi-bench-mpich" "${args[@]}") ;;
    impi) command=(env I_MPI_FABRICS=shm I_MPI_PIN=0 I_MPI_HYDRA_BOOTSTRAP=fork
                   "$impi_run" -n "$ranks" "$peers/mpi-bench-impi" "${args[@]}") ;;
  esac
  local file="$out/$ranks.$op.$library.txt"
  echo "# \$ ${command[*]}" >>"$file"
  timeout 900 "${command[@]}" >>"$file" 2>>"$out/stderr.txt" || status=$?
  if [ "$status" != 0 ]; then
    echo "# FAILED: exit status $status" >>"$file"
    echo "vs_mpi.sh: $library, $ranks ranks, $op, $first-$last B failed (exit $status; $out/stderr.txt)" >&2
    failures=$((failures + 1))
  fi
}

count=${#libraries[@]}
for ranks in $rank_counts; do
  for op in $ops; do
    echo "=== $op, $ranks ranks: ${libraries[*]}" >&2
    if [ "$interleave" = op ] || [ "$op" = barrier ]; then
      ranges=("$min_bytes:$max_bytes")
    else
      ranges=()
      for size in "${sizes[@]}"; do ranges+=("$size:$size"); done
    fi
    for range in "${ranges[@]}"; do
      for ((repeat = 0; repeat < repeats; repeat++)); do
        for ((k = 0; k < count; k++)); do  # rotate who goes first
          run_one "${libraries[$(((k + repeat) % count))]}" "$ranks" "$op" "${range%%:*}" "${range##*:}"
        done
      done
    done
  done
done
echo "# tables saved in $out" >&2
table_status=0
/usr/bin/python3 "$here/vs_mpi_table.py" "$out" || table_status=$?  # 1: wrong elements or failed runs
if [ "$failures" != 0 ] || [ "$table_status" != 0 ]; then
  echo "vs_mpi.sh: $failures run(s) failed, or a result was wrong; see $out" >&2
  exit 1
fi
