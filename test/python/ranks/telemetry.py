"""Context.statistics() and the Chrome trace from Python: `telemetry.py <trace path>`.
Each rank connects with trace=, runs a known set of calls, checks its
counters, and closes (which puts its events on disk)."""

import sys

import numpy as np

import chorus

trace_path = sys.argv[1]
with chorus.init(trace=trace_path, trace_steps=False, timeout=30) as ctx:
    rank, size = ctx.rank, ctx.size
    before = ctx.statistics()
    assert before["collectives"] == 0 and before["bytes_sent"] == 0, before
    data = np.ones(4096, np.float32)
    for _ in range(3):
        ctx.allreduce(data)
    ctx.allreduce_async(data).wait()
    ctx.broadcast(data, root=size - 1)
    if rank == 0:
        ctx.send(np.arange(5, dtype=np.int64), 1, tag=3)
    elif rank == 1:
        ctx.recv(np.empty(5, np.int64), 0, tag=3)
    after = ctx.statistics()
    assert after["collectives"] == 5, after
    assert after["failed_collectives"] == 0, after
    assert after["messages_sent"] == (1 if rank == 0 else 0), after
    assert after["messages_received"] == (1 if rank == 1 else 0), after
    assert after["bytes_sent"] > 0 and after["bytes_received"] > 0, after
    assert after["time_in_collectives"] > 0 and after["time_waiting"] > 0, after
    print(f"stats {rank} {after['bytes_sent']} {after['bytes_received']}", flush=True)
print(f"telemetry OK {rank}", flush=True)
