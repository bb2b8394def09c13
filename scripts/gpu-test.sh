#!/usr/bin/env bash
# The GPU checks of docs/cuda.md, in two halves.
#
#   scripts/gpu-test.sh bundle   here: build with CUDA (./build), gather the
#                                programs, libchorus and its modules, and the
#                                Debian libraries they link into gpu-bundle/
#                                (git-ignored)
#   scripts/gpu-test.sh run [PARTS]
#                                on the GPU machine, from the repository root
#                                with gpu-bundle/ carried there. PARTS is
#                                "all" (the default) or a comma-separated list,
#                                run in this order whatever the list's:
#                                  probes  the machine itself: a stream waiting
#                                          on a host flag, small copies with
#                                          processes sharing the GPU
#                                  torch   chorus.torch on CUDA tensors (built
#                                          there by scripts/gpu-torch.sh against
#                                          the machine's torch;
#                                          test/cuda/torch_cuda.py)
#                                  python  chorus.Context on CuPy arrays and
#                                          torch CUDA tensors (the same build;
#                                          test/cuda/python_cuda.py)
#                                  staged  small allreduces through pinned
#                                          memory
#                                  mapped  the mapped allreduce's leader variant
#                                          beside auto, time-sliced, checked
#                                  suite   the suite "cuda" (kernels, memory
#                                          kinds, ranks sharing the GPU, stream
#                                          ordering), every collective checked
#                                  order   device Plans (ring allreduce,
#                                          reduce_scatter, allgather) with a
#                                          wait per local step and
#                                          stream-ordered, alternated, checked
#                                  ipc     the IPC message protocol
#                                          (CHORUS_CUDA_IPC_MESSAGES=1) since
#                                          its stall was fixed: the stall
#                                          probe, then ring allreduces with
#                                          and without it, checked
#                                  bench   the benchmarks beside their peers,
#                                          with and without MPS
#                                  more    (only when named) the earlier
#                                          runs' experiments: staging
#                                          thresholds, one and two shots, MPS,
#                                          tcp, the stalled IPC protocol
#                                  select  what auto picks on one shared GPU,
#                                          time-sliced and under MPS, beside
#                                          mapped_leader under MPS; broadcast,
#                                          allgather and reduce_scatter's
#                                          leaders time-sliced against shm
#                                          alone; and the suite's device tests
#                                          alone, with stacks of a hung one
#                                Results land in $OUT (or gpu-results/).
#
# The device tool's run (DEVELOPERS: ../.library/device/README.md): carry
# ["gpu-bundle"], and pack the results into one file (at most 8 come back):
#   o=$OUT; mkdir -p /tmp/g; OUT=/tmp/g GPU_TEST_BUDGET_S=480 bash scripts/gpu-test.sh run all;
#   tar czf $o/results.tgz -C /tmp/g .
# GPU_TEST_BUDGET_S (default 420) skips the steps that would start after it.
# A whole run took about 3 minutes on the H100 (2026-11-27) and 255 s on the
# H200 (2026-12-04), before parts select, order and torch at 4 ranks were
# added and `more` left out of `all` (about 3 minutes more, estimated):
# give the call a timeout_s of 560.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
bundle=gpu-bundle

gather() {
  [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu-test.sh: no CUDA toolkit at /usr/local/cuda" >&2; exit 1; }
  scripts/build.sh
  [ -f build/memory/cuda/libchorus_cuda.so ] || { echo "gpu-test.sh: build/ has no CUDA module (configure found no CUDA)" >&2; exit 1; }
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  local programs=(build/tools/chorus-run build/benchmarks/chorus-bench build/test/cuda/test_cuda_device
    build/test/cuda/test_cuda_host build/test/transport/test_transport_conformance
    build/benchmarks/chorus-cuda-copy-latency build/benchmarks/chorus-cuda-stream-wait-probe)
  cp "${programs[@]}" test/cuda/run_bench_ranks.sh benchmarks/cuda/torch_gloo_cuda.py "$bundle/bin/"
  cp -L build/libchorus.so.0 build/memory/cuda/libchorus_cuda.so build/libchorus_tls.so "$bundle/lib/"
  [ -f build/api/mpi/libchorus_mpi.so.0 ] && cp -L build/api/mpi/libchorus_mpi.so.0 "$bundle/lib/"
  # Every library they link but the C and C++ runtimes (the GPU machine's
  # are newer, and torch there needs its own libstdc++).
  local library
  for library in $(ldd "${programs[@]}" build/memory/cuda/libchorus_cuda.so build/libchorus.so.0 | awk '/=> \//{ print $3 }' |
      sort -u); do
    case "$(basename "$library")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libz.so*|libudev*|libchorus*) ;;
      *) cp -L "$library" "$bundle/lib/" ;;
    esac
  done
  du -sh "$bundle"
}

run() {
  [ -d "$bundle" ] || { echo "gpu-test.sh: no $bundle/ (run 'scripts/gpu-test.sh bundle' first and carry it)" >&2; exit 1; }
  local parts=${1:-all}
  local out=${OUT:-gpu-results}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CHORUS_CUDA_MODULE="$PWD/$bundle/lib/libchorus_cuda.so"
  local bin=$bundle/bin status=0 started=$SECONDS code
  # chorus.torch as scripts/gpu-torch.sh lays it out (git-ignored).
  local torch_package=gpu-torch
  # The whole run has a deadline (device time is scarce): a step that would
  # start after it is skipped and says so, so a hang early cannot eat the
  # call and leave nothing recorded.
  local deadline=${GPU_TEST_BUDGET_S:-420}
  # Announces a step; false (the run marked failed) for one that would start
  # past the budget.
  may_start() {
    echo "== $1 (at $((SECONDS - started)) s)"
    if [ $((SECONDS - started + 5)) -gt "$deadline" ]; then
      echo "   SKIPPED: past the run's budget of $deadline s"
      status=1
      return 1
    fi
  }
  # What a step ended with: its output's tail, and the run marked failed
  # unless it exited 0.
  report() {
    local name=$1 code=$2
    if [ "$code" -ne 0 ]; then
      status=1
      echo "   FAILED (exit $code; $out/$name.txt):"
    fi
    tail -n 25 "$out/$name.txt"
  }
  # Every step is bounded and recorded; a failing one marks the run failed
  # and the others still run (one pass says it all).
  step() {
    local name=$1 limit=$2 code=0
    shift 2
    may_start "$name" || return 0
    timeout "$limit" "$@" > "$out/$name.txt" 2>&1 || code=$?
    report "$name" "$code"
  }
  # A step whose processes may hang: still running after `stacks_after`
  # seconds, each process of it has every thread's stack taken by cuda-gdb
  # (the machine has no gdb) into $out/NAME-stacks.txt, then the limit ends it.
  step_watched() {
    local name=$1 limit=$2 stacks_after=$3
    shift 3
    may_start "$name" || return 0
    # setsid: the step's processes form one group, found again by its id.
    setsid timeout "$limit" "$@" > "$out/$name.txt" 2>&1 &
    local leader=$! waited=0 code=0 pid gdb=/usr/local/cuda/bin/cuda-gdb
    command -v cuda-gdb > /dev/null && gdb=cuda-gdb
    while kill -0 "$leader" 2> /dev/null && [ "$waited" -lt "$stacks_after" ]; do
      sleep 1
      waited=$((waited + 1))
    done
    if kill -0 "$leader" 2> /dev/null; then
      for pid in $(pgrep -g "$leader"); do
        [ "$pid" = "$leader" ] && continue
        echo "=== stacks of pid $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | cut -c1-160)" \
          >> "$out/$name-stacks.txt"
        timeout 25 "$gdb" -p "$pid" -batch -ex "thread apply all bt" >> "$out/$name-stacks.txt" 2>&1 || true
      done
      echo "   still running after $stacks_after s: stacks in $name-stacks.txt"
    fi
    wait "$leader" || code=$?
    kill -KILL -- "-$leader" 2> /dev/null || true  # what timeout's signal left: spawned ranks
    report "$name" "$code"
  }
  # chorus-bench on device buffers, N processes sharing the GPU.
  bench_cuda() {
    local name=$1 ranks=$2
    shift 2
    step "$name" 60 "$bin/chorus-run" -n "$ranks" -- "$bin/chorus-bench" --device cuda "$@"
  }
  # 8 B to 16 MiB by 8x, then 64 MiB (the targets' sizes).
  local sweep=(-b 8 -e 16M -f 8 --time-budget-ms 100) largest=(-b 64M -e 64M --time-budget-ms 300)
  # Reports a part that ran in the background and ended with `code`.
  ended() {
    echo "== $1 (ended by $((SECONDS - started)) s)"
    report "$1" "$2"
  }
  # Whether the run's parts include `part`.
  wants() { [ "$parts" = all ] || [[ ",$parts," == *",$1,"* ]]; }
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc; uname -r
    /usr/local/cuda/bin/nvcc --version | tail -n 2; python3 -c "import torch; print('torch', torch.__version__)"; } \
    2>&1 | tee "$out/gpu.txt" || true
  local torch_build=
  if wants torch || wants python; then
    # Compiling chorus.torch takes the CPUs, not the GPU: it runs beside the
    # stream-wait probe, and has ended before anything is timed.
    timeout 240 env -u LD_LIBRARY_PATH bash scripts/gpu-torch.sh build --out "$torch_package" \
      > "$out/torch_build.txt" 2>&1 &
    torch_build=$!
  fi
  wants probes && step stream_wait_probe 60 "$bin/chorus-cuda-stream-wait-probe"
  wants select && device_alone
  if [ -n "$torch_build" ]; then
    code=0
    wait "$torch_build" || code=$?
    ended torch_build "$code"
  fi
  wants probes && step copy_latency 60 "$bin/chorus-cuda-copy-latency" --processes 1,2,4
  wants torch && torch_part
  wants python && step python_cuda 90 "$bin/chorus-run" -n 2 -- env -u LD_LIBRARY_PATH \
    PYTHONPATH="$PWD/$torch_package" python3 test/cuda/python_cuda.py
  wants staged && staged
  wants mapped && mapped
  wants suite && suite
  wants select && select_auto
  wants order && stream_order
  wants ipc && ipc_messages
  wants bench && bench
  [[ ",$parts," == *",more,"* ]] && bench_more
  return "$status"
}

# test_cuda_device alone (no other process on the GPU): first the case of a
# worker growing its buffers while the caller's stream waits, with every
# thread's stack if it is still going after 15 s (it gives up at 30), then
# the whole binary.
device_alone() {
  step_watched device_fresh_worker 45 15 "$bin/test_cuda_device" "async calls of a fresh worker*"
  step_watched device_alone 150 100 "$bin/test_cuda_device"
}

# auto on one GPU shared by 4 and 2 processes, time-sliced (the leader, or
# staging where faster) and under MPS (the leader is not taken there), with
# the leader under MPS beside it; every run checked.
select_auto() {
  local ranks
  local op
  for ranks in 4 2; do
    bench_cuda "auto-sliced-$ranks" "$ranks" --check "${sweep[@]}"
    bench_cuda "auto-sliced-64M-$ranks" "$ranks" --check "${largest[@]}"
    # The other leaders (algorithms/shared_memory/mapped_leader.h), by name
    # only until these rows: each against auto (which does not take them
    # yet) and against the same calls over shm alone (no mapping at all).
    for op in broadcast allgather reduce_scatter; do
      bench_cuda "auto-sliced-$op-$ranks" "$ranks" --op "$op" --check "${sweep[@]}"
      bench_cuda "leader-sliced-$op-$ranks" "$ranks" --op "$op" --algo mapped_leader --check "${sweep[@]}"
      step "shm-sliced-$op-$ranks" 60 env CHORUS_TRANSPORT=shm "$bin/chorus-run" -n "$ranks" -- "$bin/chorus-bench" \
        --device cuda --op "$op" --check "${sweep[@]}"
    done
  done
  if ! command -v nvidia-cuda-mps-control > /dev/null; then
    echo "== select: no nvidia-cuda-mps-control; no MPS run"
    return 0
  fi
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/chorus-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/chorus-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! nvidia-cuda-mps-control -d; then
    echo "== select: nvidia-cuda-mps-control -d failed; no MPS run"
    return 0
  fi
  for ranks in 4 2; do
    bench_cuda "auto-mps-$ranks" "$ranks" --check "${sweep[@]}"
    bench_cuda "auto-mps-64M-$ranks" "$ranks" --check "${largest[@]}"
    bench_cuda "leader-mps-$ranks" "$ranks" --algo mapped_leader --check "${sweep[@]}"
    bench_cuda "leader-mps-64M-$ranks" "$ranks" --algo mapped_leader --check "${largest[@]}"
  done
  echo quit | nvidia-cuda-mps-control || true
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}

# The suite's parts need no quiet GPU: they run side by side, each to its
# own file, and are reported in order once all have ended (run's helpers).
suite() {
  local names=(test_cuda_host test_cuda_device conformance_cuda_ipc bench_ranks_checked) name pids=() index code
  timeout 60 "$bin/test_cuda_host" > "$out/test_cuda_host.txt" 2>&1 & pids+=($!)
  timeout 150 "$bin/test_cuda_device" > "$out/test_cuda_device.txt" 2>&1 & pids+=($!)
  timeout 150 env CHORUS_TEST_TRANSPORT=cuda_ipc CHORUS_TRANSPORT=cuda_ipc \
    "$bin/test_transport_conformance" '~[registry]' '~[large]' > "$out/conformance_cuda_ipc.txt" 2>&1 & pids+=($!)
  timeout 200 "$bin/run_bench_ranks.sh" "$bin/test_cuda_device" "$bin/chorus-run" "$bin/chorus-bench" \
    > "$out/bench_ranks_checked.txt" 2>&1 & pids+=($!)
  for index in "${!names[@]}"; do
    name=${names[$index]}
    code=0
    wait "${pids[$index]}" || code=$?
    ended "$name" "$code"
  done
}

# Small allreduces staged through pinned memory, time-sliced, at 4 and 2
# processes, checked (docs/cuda.md, "MPS": copies to the device under 32 KiB
# wait for the process's turn of the GPU).
staged() {
  bench_cuda staged-4 4 --check -b 8 -e 128K -f 4 --time-budget-ms 50
  # Small uploads as 32 KiB to device scratch, then on the device (memory/cuda/runtime.cc).
  step staged-4-padded 60 env CHORUS_CUDA_PADDED_UPLOAD=1 "$bin/chorus-run" -n 4 -- "$bin/chorus-bench" \
    --device cuda --check -b 8 -e 128K -f 4 --time-budget-ms 50
  bench_cuda staged-2 2 --check -b 8 -e 128K -f 4 --time-budget-ms 50
  bench_cuda staged-ring-4 4 --algo ring -b 1K -e 128K -f 2 --time-budget-ms 50
}

# mapped_leader (one process reduces for all: one turn of a time-sliced
# GPU per call, algorithms/shared_memory/mapped_allreduce.h) beside auto,
# every size of the targets, 4 and 2 processes, checked. Its numbers decide
# whether auto takes it.
mapped() {
  local ranks
  for ranks in 4 2; do
    bench_cuda "leader-$ranks" "$ranks" --algo mapped_leader --check -b 8 -e 16M -f 8 --time-budget-ms 100
    bench_cuda "leader-64M-$ranks" "$ranks" --algo mapped_leader --check -b 64M -e 64M --time-budget-ms 300
    bench_cuda "auto-64M-$ranks" "$ranks" --check -b 64M -e 64M --time-budget-ms 300
  done
}

# The benchmarks, each beside its peer (run's helpers and variables).
bench() {
  step kernel_rate 60 "$bin/test_cuda_device" '[rate]'
  local ranks have_torch=0
  env -u LD_LIBRARY_PATH python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null && have_torch=1
  for ranks in 4 2; do
    # auto (the mapped allreduce over cuda_ipc), checked; then the peer,
    # PyTorch's Gloo on CUDA tensors; then chorus's Plans (ring: staged
    # whole below 256 KiB, host chunks over shm above).
    bench_cuda "chorus-cuda-$ranks" "$ranks" --check "${sweep[@]}"
    bench_cuda "chorus-cuda-64M-$ranks" "$ranks" --check "${largest[@]}"
    if [ "$have_torch" = 1 ]; then
      step "gloo-cuda-$ranks" 90 env -u LD_LIBRARY_PATH python3 "$bin/torch_gloo_cuda.py" --ranks "$ranks" \
        --max-bytes 16M
      step "gloo-cuda-64M-$ranks" 60 env -u LD_LIBRARY_PATH python3 "$bin/torch_gloo_cuda.py" --ranks "$ranks" \
        --min-bytes 64M --max-bytes 64M --iters 5 --rounds 3
    fi
    bench_cuda "chorus-cuda-ring-$ranks" "$ranks" --algo ring "${sweep[@]}"
  done
}

# The executor's stream-ordered path (CHORUS_CUDA_STREAM_ORDERED=1: local
# steps queued on the worker's stream, their ends seen by events, no wait
# per step; docs/cuda.md) against a wait per step, on Plans over device
# memory (cuda_ipc's host chunks), time-sliced: alternated, two rounds,
# every run checked. Its numbers decide whether the path becomes the default.
stream_order() {
  local round ranks op mode
  step order-device-tests 120 env CHORUS_CUDA_STREAM_ORDERED=1 "$bin/test_cuda_device" \
    "collectives on device memory of ranks sharing one GPU*,a collective waits for the caller's stream*,async calls of a fresh worker*"
  for round in 1 2; do
    for ranks in 4 2; do
      for op in allreduce reduce_scatter allgather; do
        [ "$ranks" = 2 ] && [ "$op" != allreduce ] && continue
        for mode in 0 1; do
          step "order-$mode-$op-$ranks-r$round" 60 env CHORUS_CUDA_STREAM_ORDERED=$mode "$bin/chorus-run" \
            -n "$ranks" -- "$bin/chorus-bench" --device cuda --op "$op" --algo ring --check -b 1M -e 64M -f 4 \
            --time-budget-ms 100
        done
      done
    done
  done
}

# The IPC message protocol, off by default since it stalled on the H100
# and the H200. The stall was a send dropped unsettled when a polling
# caller finished its ack between two of the worker's looks
# (transport/cuda_ipc/device.cc, advance; reproduced and fixed without a
# GPU: test_mapped_allreduce). The probe's 20 s of 2 MiB ring allreduces
# stalled within 118-3773 calls before; then the protocol against the host
# chunks, alternated, checked: its numbers decide the default.
ipc_messages() {
  stall_probe
  local ranks mode
  for ranks in 4 2; do
    for mode in 0 1; do
      step "ipc-$mode-ring-$ranks" 60 env CHORUS_CUDA_IPC_MESSAGES=$mode "$bin/chorus-run" -n "$ranks" -- \
        "$bin/chorus-bench" --device cuda --algo ring --check -b 1M -e 64M -f 4 --time-budget-ms 100
    done
  done
}

# The rest, after chorus.torch: experiments for the thresholds, MPS, tcp,
# and the stalled protocol.
bench_more() {
  # Staged whole, 1 KiB to 128 KiB by 2x, under two host algorithms: the
  # first runs found 4 KiB about 8x slower than 32 KiB time-sliced.
  bench_cuda staged-ring-4 4 --algo ring -b 1K -e 128K -f 2 --time-budget-ms 50
  bench_cuda staged-rd-4 4 --algo recursive_doubling -b 1K -e 128K -f 2 --time-budget-ms 50
  # The two mapped variants side by side, for the one-shot threshold.
  bench_cuda chorus-cuda-one-shot-4 4 --algo mapped_one_shot --check -b 8 -e 4M -f 4 --time-budget-ms 100
  bench_cuda chorus-cuda-two-shot-4 4 --algo mapped_two_shot --check -b 8 -e 4M -f 4 --time-budget-ms 100
  if command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/chorus-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/chorus-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      bench_cuda chorus-cuda-4-mps 4 --check "${sweep[@]}"
      bench_cuda chorus-cuda-64M-4-mps 4 --check "${largest[@]}"
      bench_cuda chorus-cuda-2-mps 2 --check "${sweep[@]}"
      bench_cuda chorus-cuda-64M-2-mps 2 --check "${largest[@]}"
      bench_cuda chorus-cuda-ring-4-mps 4 --algo ring "${sweep[@]}"
      echo quit | nvidia-cuda-mps-control || true
    else
      echo "== MPS: nvidia-cuda-mps-control -d failed; no MPS run"
    fi
  fi
  # Device against host buffers over tcp (staged through pinned memory).
  step tcp-host 30 env CHORUS_TRANSPORT=tcp "$bin/chorus-run" -n 2 -- "$bin/chorus-bench" -b 4M -e 64M -f 4
  step tcp-cuda 30 env CHORUS_TRANSPORT=tcp "$bin/chorus-run" -n 2 -- "$bin/chorus-bench" --device cuda -b 4M -e 64M -f 4
  # The ring at 2 MiB by host chunks (the default now), where the IPC
  # message protocol stalled; then that protocol, probed (stall_probe).
  bench_cuda ring-2M-staged 2 --algo ring -b 2M -e 2M --time-budget-ms 5000 --rounds 2
  stall_probe
}

# chorus.torch on the machine's torch, once run's background build of it
# (against gpu-bundle's libchorus; its seconds are in torch_build.txt) has
# ended: a CPU all_reduce through it under chorus-run, then CUDA tensors:
# every collective bit-exact, DDP against gloo with its step time, timings
# (test/cuda/torch_cuda.py), at 2 and 4 processes. The ranks run without LD_LIBRARY_PATH, so that
# torch keeps its own CUDA libraries; the modules find gpu-bundle/lib by
# their RPATH.
torch_part() {
  step torch_smoke 60 bash scripts/gpu-torch.sh smoke --out "$torch_package" --chorus-run "$bin/chorus-run"
  step_watched torch_cuda 120 60 env -u LD_LIBRARY_PATH PYTHONPATH="$PWD/$torch_package" python3 \
    test/cuda/torch_cuda.py --rank-timeout 100
  step_watched torch_cuda_4 150 90 env -u LD_LIBRARY_PATH PYTHONPATH="$PWD/$torch_package" python3 \
    test/cuda/torch_cuda.py --ranks 4 --rank-timeout 130
}

# CHORUS_CUDA_IPC_MESSAGES=1 (the IPC message protocol, off by default since
# it stalled on the H100): the stalled configuration again, and once a
# device message has been in flight for 10 s (cuda_ipc says so), every
# thread's stack of every rank, by cuda-gdb (the machine has no gdb).
stall_probe() {
  echo "== stall-probe (at $((SECONDS - started)) s)"
  if [ $((SECONDS - started + 60)) -gt "$deadline" ]; then
    echo "   SKIPPED: past the run's budget of $deadline s"
    return 0
  fi
  local log=$out/stall-probe.txt
  CHORUS_CUDA_IPC_MESSAGES=1 CHORUS_TIMEOUT=40 timeout 50 "$bin/chorus-run" -n 2 -- "$bin/chorus-bench" --device cuda \
    --algo ring -b 2M -e 2M --time-budget-ms 10000 --rounds 2 > "$log" 2>&1 &
  local probe=$! waited=0
  until grep -q "has been in flight for" "$log" 2> /dev/null || ! kill -0 "$probe" 2> /dev/null || [ $waited -ge 45 ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if grep -q "has been in flight for" "$log"; then
    local gdb=/usr/local/cuda/bin/cuda-gdb pid
    command -v cuda-gdb > /dev/null && gdb=cuda-gdb
    for pid in $(pgrep -f "bin/chorus-bench --device cuda --algo ring"); do
      echo "=== stacks of pid $pid" >> "$out/stall-stacks.txt"
      timeout 20 "$gdb" -p "$pid" -batch -ex "thread apply all bt" >> "$out/stall-stacks.txt" 2>&1 || true
    done
    echo "   FAILED: stalled; stacks in stall-stacks.txt ($(grep -c '^Thread' "$out/stall-stacks.txt" || true) threads)"
    status=1
  else
    echo "   no stall in ${waited} s"
  fi
  kill "$probe" 2> /dev/null || true
  wait "$probe" 2> /dev/null || true
  tail -n 8 "$log"
}

case "$mode" in
  bundle) gather ;;
  run) run "${2:-all}" ;;
  *) echo "usage: $0 bundle | run [suite|bench|torch|all]" >&2; exit 2 ;;
esac
