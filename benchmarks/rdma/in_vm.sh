#!/bin/sh
# Inside rxe-run's VM (benchmarks/rdma/run.sh starts it): chorus over verbs
# beside perftest on the same two Soft-RoCE devices, and beside chorus over
# TCP on the same veth pair, in one run. Even ranks on rxe0, odd on rxe1.
# $1: the build directory; $2 (optional): gloo-bench (benchmarks/peers/build.sh),
# run over Gloo's own ibverbs transport beside them.
set -eu
build=$1
gloo=${2:-}
ulimit -l unlimited
cat > /tmp/alternate.sh <<'SCRIPT'
#!/bin/sh
if [ $((CHORUS_RANK % 2)) -eq 0 ]; then export CHORUS_SOCKET_IFNAME=veth0; else export CHORUS_SOCKET_IFNAME=veth1; fi
exec "$@"
SCRIPT
chmod +x /tmp/alternate.sh

perftest() {  # perftest PROGRAM ARGS...: server on rxe1, client on rxe0
  program=$1; shift
  "$program" -d rxe1 -x "$RXE_GID1" "$@" > /tmp/server.log 2>&1 &
  sleep 3
  "$program" -d rxe0 -x "$RXE_GID0" "$@" "$RXE_IP1" || { cat /tmp/server.log; return 1; }
  wait
}
bench() {  # bench TRANSPORT ARGS...: 2 ranks of chorus-bench across the pair
  transport=$1; shift
  CHORUS_TRANSPORT=$transport CHORUS_SOCKET_IFNAME=veth0 "$build/tools/chorus-run" -n 2 -- \
    /tmp/alternate.sh "$build/benchmarks/chorus-bench" --rounds 3 --time-budget-ms 1500 "$@"
}
for round in 1 2; do
  echo "== round $round"
  echo "-- ib_write_bw, 4 MiB"; perftest ib_write_bw -s 4194304 -n 100 -F
  # Both directions at once, as every 2-rank allreduce moves its data.
  echo "-- ib_write_bw -b (bidirectional), 4 MiB"; perftest ib_write_bw -b -s 4194304 -n 100 -F
  echo "-- registration (pin + unpin) cost on rxe0"; "$build/benchmarks/chorus-registration-cost" rxe0
  echo "-- ib_send_bw, 4 MiB"; perftest ib_send_bw -s 4194304 -n 100 -F
  echo "-- ib_send_lat, 8 B"; perftest ib_send_lat -s 8 -n 1000 -F
  echo "-- chorus ibverbs: broadcast (one transfer) 8 B .. 4 MiB"; bench ibverbs --op broadcast -b 8 -e 4M -f 8
  echo "-- chorus ibverbs: allreduce 16 MiB"; bench ibverbs --op allreduce -b 16M -e 16M
  # A rooted call also checks its root with its neighbours; allreduce has no root.
  echo "-- chorus ibverbs: allreduce 8 B .. 512 B"; bench ibverbs --op allreduce -b 8 -e 512 -f 8
  echo "-- chorus tcp: broadcast 8 B .. 4 MiB"; bench tcp --op broadcast -b 8 -e 4M -f 8
  echo "-- chorus tcp: allreduce 16 MiB"; bench tcp --op allreduce -b 16M -e 16M
  if [ -n "$gloo" ]; then
    # Gloo's broadcast needs unbound buffers, which its ibverbs transport lacks: allreduce only.
    echo "-- gloo ibverbs: allreduce ring 16 MiB"
    rm -rf /tmp/gloo-store && mkdir -p /tmp/gloo-store
    GLOO_BENCH_TRANSPORT=ibverbs GLOO_BENCH_STORE_DIR=/tmp/gloo-store "$build/tools/chorus-run" -n 2 -- sh -c \
      'if [ $((CHORUS_RANK % 2)) -eq 0 ]; then d=rxe0 g=$RXE_GID0; else d=rxe1 g=$RXE_GID1; fi;
       GLOO_BENCH_IB_DEVICE=$d GLOO_BENCH_IB_GID=$g exec "$0" "$@"' "$gloo" \
      --op allreduce --algo ring -b 16M -e 16M --rounds 3 --time-budget-ms 1500
  fi
done
