"""Async Work details: callbacks (on the chorus-callbacks thread, or at once
when already done), buffers kept alive by the Work, the GIL released while
waiting. Prints "callbacks OK <checks>"."""

import gc
import sys
import threading
import time

import numpy as np

import chorus

checks = 0


def check(condition, what):
    global checks
    if not condition:
        print(f"rank {ctx.rank}: FAILED: {what}", flush=True)
        sys.exit(1)
    checks += 1


with chorus.init(timeout=60) as ctx:
    rank, size = ctx.rank, ctx.size
    expected_sum = size * (size - 1) // 2

    # Callbacks on works still running run on the watcher thread, in order of completion.
    seen = []
    done = threading.Event()
    works = []
    for k in range(4):
        work = ctx.allreduce_async(np.full(50000, rank + k, np.int64))
        work.add_done_callback(lambda w, k=k: seen.append((k, threading.current_thread().name, w.exception())))
        works.append(work)
    works[-1].add_done_callback(lambda w: done.set())
    check(done.wait(30), "the callbacks ran")
    time.sleep(0.05)
    check(sorted(k for k, _, _ in seen) == [0, 1, 2, 3], f"every callback ran once: {seen}")
    check(all(error is None for _, _, error in seen), "no errors reported to callbacks")
    check(all(name in ("chorus-callbacks", threading.current_thread().name) for _, name, _ in seen),
          "callbacks run on chorus-callbacks (or here when already done)")
    for k, work in enumerate(works):
        check(int(work.result()[0]) == expected_sum + size * k, f"work {k} result")

    # A callback on a finished Work runs at once, in this thread.
    here = []
    works[0].add_done_callback(lambda w: here.append(threading.current_thread().name))
    check(here == [threading.current_thread().name], "callback on a done Work runs immediately")

    # The Work holds the only reference to its buffer: the result survives the caller dropping it.
    work = ctx.allreduce_async(np.full(100000, rank + 1, np.int32))
    gc.collect()
    result = work.result()
    check(result.shape == (100000,) and int(result[-1]) == size * (size + 1) // 2, "Work keeps its buffer alive")

    # While one thread waits in a collective, others run Python (the GIL is released).
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.01)
    if rank == 0:
        time.sleep(0.5)  # the others wait in the barrier meanwhile
    before = len(ticks)
    ctx.barrier()
    waited_ticks = len(ticks) - before
    stop.set()
    thread.join()
    if rank != 0:
        check(waited_ticks >= 20, f"another thread ran while this one waited in barrier ({waited_ticks} ticks)")

    # split: sub-groups by parity, each ranked by key, collectives on them independent.
    child = ctx.split(rank % 2, key=-rank)
    members = [r for r in range(size) if r % 2 == rank % 2]
    check(child.size == len(members) and child.rank == len(members) - 1 - members.index(rank), "split ranks")
    total = child.allreduce(np.array([rank], np.int64))
    check(int(total[0]) == sum(members), "allreduce on a split child")
    others = ctx.split(chorus.NO_COLOR if rank == 0 else 1)
    check((others is None) == (rank == 0), "NO_COLOR takes part and gets None")
    if others is not None:
        check(others.size == size - 1, "the colored ranks' child")
        others.close()
    child.close()
    check(0 <= ctx.local_rank < ctx.local_size and ctx.hosts >= 1, "topology queries")
    transport, streams = ctx.link_to((rank + 1) % size) if size > 1 else ("self", 1)
    check(isinstance(transport, str) and streams >= 1, "link_to")
    ctx.timeout = 12.5
    check(ctx.timeout == 12.5, "timeout property round-trips in seconds")
    ctx.barrier()
    print(f"callbacks OK {checks}", flush=True)
check(ctx.closed, "leaving the with block closes the Context")
try:
    ctx.barrier()
    check(False, "a closed Context refuses calls")
except ValueError:
    checks += 1
