#!/usr/bin/env bash
# The test suite under sanitizers (docs/sanitizers.md says what runs, what is
# left out and why):
#   build-asan/  AddressSanitizer (with LeakSanitizer) + UndefinedBehaviorSanitizer:
#                every Meson test but the reruns of a suite over another
#                transport, connection mode or host layout, the algorithms
#                test without its [exhaustive] and [sweep] cases
#   build-tsan/  ThreadSanitizer: the transport suite, the collectives suite
#                as `collectives` and `collectives-2hosts` (no [large]
#                message, streams with 2 streams only) and the executor test
# Both are unity builds (several files per translation unit); the normal
# build is not.
# Both keep the project's flags (warning_level=2, werror=true), at -O1 with
# line tables (-g1) for symbolized reports and with assertions on. A report
# from any process fails the run: ASan, LSan and TSan write theirs to files
# under build-*/sanitizer-reports/, checked after the tests, since a rank that
# a test expects to fail could otherwise hide one; UBSan (which in a combined
# ASan build ignores log_path) halts the process at its first report, and the
# test logs are searched for reports too. Each phase prints its wall and CPU
# seconds.
#   scripts/sanitizers.sh [asan|tsan|all] [--build-only]     (default: all)
# --build-only configures and builds what the tests need, runs nothing:
# .ci/run builds the trees this way, at the lowest priority, while the main
# suite runs (its tests leave a core idle much of the time), and the later
# full run finds them built.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
which=${1:-all}
build_only=false
case "${2:-}" in --build-only) build_only=true ;; "") ;; *) which=usage ;; esac
case "$which" in asan|tsan|all) ;; *) echo "usage: $0 [asan|tsan|all] [--build-only]" >&2; exit 2 ;; esac
supp="$root/test/sanitizers"
failures=0

# configure DIR SANITIZERS
# -Dtorch=disabled: the PyTorch backend (adapters/torch) is a thin layer over
# the API these builds check; under ASan its tests would need the runtime
# preloaded into torch's interpreter and its intercepted libtorch, for
# minutes of CI. docs/sanitizers.md lists it among what is left out.
# -Dunity=on: each target compiles UNITY_SIZE of its files as one translation
# unit, so the sanitizers' costly headers (Catch2, <regex>, the standard
# library) are compiled once per batch, not once per file (docs/sanitizers.md
# has the measurements). The normal build stays one file per unit.
unity_size=16
configure() {
  local options=(-Db_sanitize="$2" -Doptimization=1 -Ddebug=false -Db_ndebug=false -Dcpp_args=-g1 -Dtorch=disabled
    -Dunity=on -Dunity_size="${UNITY_SIZE:-$unity_size}")
  if [ -f "$1/build.ninja" ]; then
    meson configure "$1" "${options[@]}"
    # Regenerates now (an existing directory may predate tests), so that
    # introspection below sees every target and test.
    scripts/meson-locked.sh ninja -C "$1" build.ninja
  else
    scripts/meson-locked.sh meson setup "$1" "${options[@]}"
  fi
}

# build DIR [--no-suite SUITE]... TEST...: builds what the named Meson tests
# run (all tests without names, less the suites left out), not the
# benchmarks and tools no test uses.
build() {
  local dir=$1
  shift
  local targets
  targets=$(python3 scripts/test-targets.py "$dir" "$@")
  # shellcheck disable=SC2086
  ninja -C "$dir" -j2 $targets
}

# check_reports DIR NAME: fails when a sanitizer wrote a report under
# DIR/sanitizer-reports or into a test log.
check_reports() {
  local reports=() file
  while IFS= read -r file; do reports+=("$file"); done < <(find "$1/sanitizer-reports" -type f | sort)
  if [ "${#reports[@]}" -ne 0 ]; then
    echo "$2: ${#reports[@]} sanitizer reports:" >&2
    for file in "${reports[@]}"; do echo "=== $file" >&2; cat "$file" >&2; done
    failures=$((failures + 1))
  fi
  if grep -l -E 'runtime error: |ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer' \
      "$1"/meson-logs/sanitizers-*.txt; then
    echo "$2: the test logs above hold sanitizer reports" >&2
    failures=$((failures + 1))
  fi
}

# run_tests DIR MESON-TEST-ARGUMENTS...
run_tests() {
  local dir=$1
  shift
  if ! meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 "$@"; then
    failures=$((failures + 1))
  fi
}

# Wall and CPU seconds (this shell's children: the compilers, the tests and
# every process they waited for) of each phase; CPU time is what another
# machine's load does not inflate.
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
mark() {
  times > "$times_file"
  mark_wall=$(date +%s)
  mark_cpu=$(awk 'NR == 2 { for (i = 1; i <= 2; ++i) { split($i, t, /[ms]/); c += t[1] * 60 + t[2] } print int(c) }' "$times_file")
}
# since WALL CPU PHASE
since() {
  local wall=$1 cpu=$2
  mark
  echo "sanitizers.sh: $3: $((mark_wall - wall)) s (cpu $((mark_cpu - cpu)) s)"
}
mark
script_wall=$mark_wall script_cpu=$mark_cpu

# CI's budget: a test that runs a suite already run under ASan again over
# another transport or connection mode is left out (the transport
# conformance suites run every transport there; docs/sanitizers.md).
asan_variants=(threads-tcp threads-on-demand roots-tcp roots-on-demand processes-tcp processes-on-demand
  split-on-demand collectives-tcp collectives-on-demand collectives-3hosts-interleaved soak-tcp soak-2hosts huge-buffer-tcp)
# Also CI's budget: tests of the launcher's orchestration, whose time goes
# to timeouts, killed ranks and starting processes (first-failure 57 s,
# tool-flags 25 s, setup-mistakes 15 s under ASan), and the soak run over
# shm (52 s), whose collectives `threads`, `processes` and `collectives`
# run there already. chorus-run's own test stays.
asan_variants+=(first-failure tool-flags setup-mistakes soak-shm)
# asan_tests_of SUITE-OPTIONS...: the names of the tests the ASan run runs
# (less the GPU suite, which skips without a GPU, and the Soft-RoCE suite,
# a VM of its own, scripts/rdma-tests.sh), less the variants above.
asan_tests_of() {
  meson test -C build-asan --no-rebuild --list --no-suite rdma --no-suite cuda "$@" 2>/dev/null | sed 's#.* / ##' |
    grep -vxF -f <(printf '%s\n' "${asan_variants[@]}")
}

if [ "$which" != tsan ]; then
  mark
  configure build-asan address,undefined
  # Only what those tests run: the tests left out above, and the tools and
  # benchmarks only they start (chorus-store, chorus-connect-bench,
  # chorus-reduce-bench), are about a tenth of the tree's compiling.
  # shellcheck disable=SC2046
  build build-asan $(asan_tests_of)
  since "$mark_wall" "$mark_cpu" "asan build"
fi

if [ "$which" != tsan ] && ! $build_only; then
  mark
  rm -rf build-asan/sanitizer-reports build-asan/meson-logs/sanitizers-*
  mkdir -p build-asan/sanitizer-reports
  asan="log_path=$root/build-asan/sanitizer-reports/asan:detect_leaks=1:detect_stack_use_after_return=1"
  asan+=":check_initialization_order=1:strict_init_order=1:strict_string_checks=1"
  export ASAN_OPTIONS="$asan"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
  # algorithms, mpi and python run apart, below; the variants above not at all.
  # The message over 4 GiB ([large]) runs over shm (single copy) and
  # cuda_ipc on host memory here, 3 s each. Over tcp, tcp with TLS and shm's
  # rings it takes about 30 s a run, nearly all of it the kernel's (system
  # time): the normal suite runs it there, checking every byte and the
  # guard past the buffer's end (docs/sanitizers.md).
  asan_without_large=(transport-conformance-tcp transport-conformance-tcp-tls transport-conformance-shm-ring)
  asan_tests=$(asan_tests_of --no-suite mpi --no-suite algorithms --no-suite python |
    grep -vxF -f <(printf '%s\n' "${asan_without_large[@]}"))
  # ~[exhaustive]~[sweep]: the simulator's longest sweeps are left out; every
  # algorithm keeps a case that runs here (test/algorithms/meson.build). It
  # runs beside the list below, most of whose tests run alone (is_parallel:
  # false) and leave a core to it: one process, about 110 s under ASan, that
  # otherwise ran after them with the other core idle. Its output is shown
  # once it is done.
  algorithms_log=$(mktemp)
  meson test -C build-asan --no-rebuild --print-errorlogs --timeout-multiplier 3 \
    --logbase sanitizers-asan-algorithms --suite algorithms --test-args '~[exhaustive]~[sweep]' > "$algorithms_log" 2>&1 &
  algorithms_run=$!
  # shellcheck disable=SC2086
  run_tests build-asan --timeout-multiplier 3 --logbase sanitizers-asan $asan_tests
  run_tests build-asan --timeout-multiplier 3 --logbase sanitizers-asan-without-large --test-args '~[large]' \
    "${asan_without_large[@]}"
  if ! wait "$algorithms_run"; then failures=$((failures + 1)); fi
  cat "$algorithms_log"
  rm -f "$algorithms_log"
  # Open MPI's leaks: stacks through its plugins, unloaded before LeakSanitizer
  # looks, symbolize only with the slow unwinder (lsan-mpi.supp).
  ASAN_OPTIONS="$asan:fast_unwind_on_malloc=0" LSAN_OPTIONS="suppressions=$supp/lsan-mpi.supp:print_suppressions=0" \
    run_tests build-asan --timeout-multiplier 3 --suite mpi --logbase sanitizers-asan-mpi
  # The Python module's extension is built with ASan; the interpreter is
  # not, so the runtime is preloaded into it (and into every rank it
  # starts), with libstdc++: ASan looks up the real __cxa_throw as it
  # starts, and python3 does not link libstdc++, so without it the first
  # C++ exception stops the process ("CHECK failed ... real___cxa_throw"). Leak checking is off there: CPython does not free its own
  # allocations at exit, and those reports would bury ours. Our code in
  # those processes is still checked for every other error.
  if meson test -C build-asan --no-rebuild --list --suite python > /dev/null 2>&1; then
    ASAN_OPTIONS="$asan:detect_leaks=0" run_tests build-asan --timeout-multiplier 3 --suite python \
      --logbase sanitizers-asan-python --wrapper "env LD_PRELOAD=$(gcc -print-file-name=libasan.so):libstdc++.so.6"
  fi
  unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
  check_reports build-asan asan
  since "$mark_wall" "$mark_cpu" "asan tests"
fi

if [ "$which" != asan ]; then
  mark
  configure build-tsan thread
  # CI's budget: of the collectives runs only `collectives-2hosts` stays:
  # it runs every collective and algorithm with shm within a host and TCP
  # between, so both transports' threads meet the collectives; the runs
  # over one host, one transport or connection mode (tcp, on-demand) and the
  # interleaved 3-host layout are left out. The conformance suites run every
  # transport here (docs/sanitizers.md).
  tsan_variants=(collectives collectives-tcp collectives-on-demand collectives-3hosts-interleaved)
  tsan_tests=$(meson test -C build-tsan --no-rebuild --list --suite transport --suite collectives 2>/dev/null |
    sed 's#.* / ##' | grep -vx streams | grep -vxF -f <(printf '%s\n' "${tsan_variants[@]}"))
  # The device-memory transports' worker threads (host staging, cuda_ipc's
  # protocol), where the build has CUDA.
  if meson test -C build-tsan --no-rebuild --list device-transports > /dev/null 2>&1; then
    tsan_tests+=$'\n'device-transports
  fi
  # The board's lock-free exchange (every allreduce of one host runs on it),
  # ranks as threads: 98 s on 2026-11-30 (12 s before the ring broadcasts'
  # and the block calls' cases joined it), and its failures (another call
  # or root, late, absent and failing ranks; test_board_failures.cc).
  tsan_tests+=$'\n'board$'\n'board_failures
  # The Negotiator that matches TensorFlow's calls (adapters/negotiation):
  # the hand-off of its cycles between a submitting thread and its own, on
  # real Contexts: about 2 s.
  tsan_tests+=$'\n'negotiation
  # shellcheck disable=SC2086
  build build-tsan $tsan_tests streams executor
  since "$mark_wall" "$mark_cpu" "tsan build"
fi

if [ "$which" != asan ] && ! $build_only; then
  mark
  rm -rf build-tsan/sanitizer-reports build-tsan/meson-logs/sanitizers-*
  mkdir -p build-tsan/sanitizer-reports
  export TSAN_OPTIONS="log_path=$root/build-tsan/sanitizer-reports/tsan:halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
  # ~[large]: the message over 4 GiB is left out (docs/sanitizers.md). The
  # window tests run chorus-run, not a Catch2 program: no test arguments.
  catch_tests=$(grep -v '^window-' <<< "$tsan_tests" || true)
  window_tests=$(grep '^window-' <<< "$tsan_tests" || true)
  # shellcheck disable=SC2086
  run_tests build-tsan --timeout-multiplier 4 --logbase sanitizers-tsan --test-args '~[large]' $catch_tests executor
  if [ -n "$window_tests" ]; then
    # shellcheck disable=SC2086
    run_tests build-tsan --timeout-multiplier 4 --logbase sanitizers-tsan-windows $window_tests
  fi
  # streams: its 3-stream, 4-process job is left out; under ThreadSanitizer
  # it outlasts the test's 60 s bound on a job (docs/sanitizers.md).
  run_tests build-tsan --timeout-multiplier 4 --logbase sanitizers-tsan-streams streams --test-args '-c "2 streams, 3 processes"'
  unset TSAN_OPTIONS
  check_reports build-tsan tsan
  since "$mark_wall" "$mark_cpu" "tsan tests"
fi

since "$script_wall" "$script_cpu" "total"
if $build_only; then
  echo "sanitizers.sh: built ($which); no test run (--build-only)"
  exit 0
fi
if [ "$failures" -ne 0 ]; then
  # The failed tests again, by name, at the end where CI's tail shows them.
  shopt -s nullglob
  python3 scripts/failed-tests.py build-asan/meson-logs/sanitizers-*.json build-tsan/meson-logs/sanitizers-*.json
  echo "sanitizers.sh: $failures steps failed" >&2
  exit 1
fi
echo "sanitizers.sh: all passed"
