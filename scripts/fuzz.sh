#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/, docs/fuzzing.md) into build-fuzz/
# with clang-14, AddressSanitizer and UndefinedBehaviorSanitizer, then runs
# each one for SECONDS (default 60; one per core at a time), starting from its seed corpus in
# fuzz/corpus/<harness>/. Exits nonzero when any harness finds something: a
# crash, a sanitizer report, a failed check, a leak, an input slower than
# the timeout or one that takes more memory than the limit. The input that
# did it is left in build-fuzz/fuzz-runs/<harness>/ (crash-*, leak-*,
# timeout-*, oom-*), with the log; rerun it with
#   build-fuzz/fuzz/fuzz_<harness> build-fuzz/fuzz-runs/<harness>/crash-...
#
#   scripts/fuzz.sh [seconds-per-harness] [harness...]
#   scripts/fuzz.sh --build-only [harness...]     builds, runs nothing (.ci/run
#                                                 builds ahead while other tests run)
#
# New inputs a run finds go to build-fuzz/fuzz-runs/<harness>/corpus, not
# into the repository's seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if [ $# -gt 0 ]; then shift; fi
build_only=false
if [ "$seconds" = --build-only ]; then build_only=true; fi

all_harnesses=(tcp_frames shm_channel shm_side_messages published_address abort_report
  tcp_store_request tcp_store_server tcp_store_client redis_reply store_url launch_env handshake ipc_descriptor)
harnesses=("${@:-${all_harnesses[@]}}")

if [ ! -f build-fuzz/build.ninja ]; then
  CXX=${FUZZ_CXX:-clang++-14} scripts/meson-locked.sh meson setup build-fuzz \
    -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Db_ndebug=false \
    -Dmpi=disabled -Dcuda=disabled -Dnccl=disabled -Dibverbs=disabled -Drdmacm=disabled
fi
targets=()
for harness in "${harnesses[@]}"; do targets+=("fuzz/fuzz_$harness"); done
ninja -C build-fuzz -j"${FUZZ_JOBS:-2}" "${targets[@]}"
if $build_only; then
  echo "fuzz.sh: built ${#harnesses[@]} harnesses; none run (--build-only)"
  exit 0
fi

symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
if [ -x "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH="$symbolizer" UBSAN_SYMBOLIZER_PATH="$symbolizer"; fi

# run_harness NAME: one harness for SECONDS in its own folder; its exit
# status goes to that folder's status file.
run_harness() {
  local harness=$1 work="build-fuzz/fuzz-runs/$1" seeds="$PWD/fuzz/corpus/$1" status=0
  rm -rf "$work"
  mkdir -p "$work/corpus"
  local options=(-max_total_time="$seconds" -max_len=4096 -timeout=25 -rss_limit_mb=2048 -print_final_stats=1)
  case "$harness" in
    # hiredis callocs a multi-bulk's element array from its count, before
    # the elements arrive (fuzz/redis_reply.cc): let those sizes through.
    redis_reply) options+=(-malloc_limit_mb=65536) ;;
  esac
  (cd "$work" && "../../fuzz/fuzz_$harness" "${options[@]}" corpus "$seeds" > log.txt 2>&1) || status=$?
  echo "$status" > "$work/status"
}

# A libFuzzer process uses one core: the harnesses run FUZZ_PARALLEL at a
# time (default: one per core), each still for its whole SECONDS.
parallel=${FUZZ_PARALLEL:-$(nproc)}
for harness in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  run_harness "$harness" &
done
wait

failed=()
printf '%-20s %12s %10s %8s  %s\n' harness executions exec/s corpus result
for harness in "${harnesses[@]}"; do
  work="build-fuzz/fuzz-runs/$harness"
  seeds="$PWD/fuzz/corpus/$harness"
  status=$(cat "$work/status" 2>/dev/null || echo "no status")
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log.txt" | tail -1)
  corpus=$(find "$work/corpus" "$seeds" -type f | wc -l)
  if [ "$status" = 0 ]; then
    result=ok
  else
    result="FAILED (exit $status; see $work/log.txt)"
    failed+=("$harness")
  fi
  printf '%-20s %12s %10s %8s  %s\n' "$harness" "${executions:-?}" "${rate:-?}" "$corpus" "$result"
  if [ "$status" != 0 ]; then
    grep -E '^==fuzz check failed|ERROR: |runtime error|SUMMARY' "$work/log.txt" | head -5 | sed 's/^/    /'
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} found something (inputs and logs in build-fuzz/fuzz-runs/)" >&2
  exit 1
fi
echo "fuzz.sh: ${#harnesses[@]} harnesses, ${seconds} s each, nothing found"
