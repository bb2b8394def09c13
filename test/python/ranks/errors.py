"""Errors as Python exceptions, on a job of at least 2 ranks: an invalid root,
a count that differs across ranks, roots that differ, a rank that exits without closing. Each
phase runs on a fresh Context (an error finishes the Context it happens on).
Prints "errors OK <checks>"."""

import os
import sys
import time

import numpy as np

import chorus

checks = 0


def check(condition, what):
    global checks
    if not condition:
        print(f"rank {rank}: FAILED: {what}", flush=True)
        sys.exit(1)
    checks += 1


def fresh(phase, timeout=20):
    job = os.environ.get("CHORUS_JOB_ID", "none") + "/python-errors/" + phase
    return chorus.connect_to_store(os.environ["CHORUS_STORE"], rank, size, job, timeout=timeout)


def expect(error_type, call, *words):
    try:
        call()
    except error_type as error:
        message = str(error)
        check(all(word in message for word in words), f"{error_type.__name__} {message!r} names {words}")
        return error
    check(False, f"expected {error_type.__name__}")


with chorus.init() as first:
    rank, size = first.rank, first.size
    check(size >= 2, "run me with 2 or more ranks")

# An invalid root: chorus.InvalidArgument, a ValueError, naming this rank and the root.
with fresh("root") as ctx:
    data = np.zeros(4, np.float32)
    error = expect(chorus.InvalidArgument, lambda: ctx.broadcast(data, size), f"rank {rank}", "root")
    check(isinstance(error, ValueError) and isinstance(error, chorus.Error) and error.peer is None,
          "InvalidArgument is a ValueError and a chorus.Error")
    # A rejected call finishes the Context: the next raises again.
    expect(chorus.Error, lambda: ctx.allreduce(data))

# Local problems with a buffer: TypeError/ValueError before anything moves; the Context stays usable.
with fresh("buffers") as ctx:
    expect(TypeError, lambda: ctx.allreduce("text"), "buffer protocol", "str")
    expect(ValueError, lambda: ctx.allreduce(np.zeros((4, 4), np.float32)[:, 0]), "not C-contiguous")
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    expect(ValueError, lambda: ctx.allreduce(frozen), "read-only")
    expect(TypeError, lambda: ctx.allreduce(np.zeros(4, np.int16)), "format 'h'")
    expect(TypeError, lambda: ctx.allreduce(np.zeros(4, np.complex64)), "no chorus type")
    expect(ValueError, lambda: ctx.allreduce(np.zeros(4, np.float32), dtype=chorus.bfloat16), "2-byte")
    expect(TypeError, lambda: ctx.allreduce(np.zeros(4, np.float32), out=np.zeros(4, np.int32)), "one type")
    expect(ValueError, lambda: ctx.allreduce(np.zeros(4, np.float32), "median"), "unknown reduce op")
    ones = np.ones(3, np.int32)
    ctx.allreduce(ones)
    check(np.array_equal(ones, np.full(3, size, np.int32)), "Context usable after local buffer errors")

# A size that does not fit: InvalidArgument (and the Context aborted, so peers fail too).
with fresh("sizes") as ctx:
    expect(chorus.InvalidArgument, lambda: ctx.allreduce(np.zeros(4, np.float32), out=np.zeros(5, np.float32)),
           "allreduce")

# A count that differs across ranks: some rank must report the mismatch itself.
with fresh("mismatch") as ctx:
    count = 1001 if rank == size - 1 else 1000
    error = expect(chorus.Error, lambda: ctx.allreduce(np.zeros(count, np.float32)), "rank ")
    mine = int(isinstance(error, chorus.MismatchError))
    print(f"rank {rank}: mismatched count: {type(error).__name__}: {error}", flush=True)
with fresh("mismatch-report") as ctx:
    reports = ctx.allgather(np.array([mine], np.int32))
    check(int(reports.sum()) >= 1, "at least one rank raised chorus.MismatchError")

# Ranks disagreeing on a broadcast's root (each names itself): chorus.MismatchError
# on every rank, the roots included, in that call or the next (a root that only
# writes does not wait for its check: docs/failures.md), long before the timeout.
def broadcast_then_barrier(ctx, data):
    ctx.broadcast(data, rank)
    ctx.barrier()


with fresh("roots") as ctx:
    data = np.full(4, rank, np.float32)
    started = time.monotonic()
    error = expect(chorus.MismatchError, lambda: broadcast_then_barrier(ctx, data), f"rank {rank}", "root")
    check(time.monotonic() - started < 10, "disagreeing roots fail well within the timeout")
    print(f"rank {rank}: disagreeing roots: {error}", flush=True)

# A bounded wait on a Work that cannot finish yet: False, then the real result.
with fresh("wait-timeout") as ctx:
    if rank == 0:
        work = ctx.allreduce_async(np.ones(4, np.int32))
        check(work.wait(timeout=0.05) is False and not work.test(), "wait(timeout) returns False while running")
        try:
            work.result(timeout=0.01)
            check(False, "result(timeout) raises while running")
        except TimeoutError:
            checks += 1
        ctx.barrier()  # rank 0 joins the barrier only after its own allreduce: ranks >0 wait here
    else:
        time.sleep(1.0)
        ctx.allreduce(np.ones(4, np.int32))
        ctx.barrier()
    if rank == 0:
        check(np.array_equal(work.result(), np.full(4, size, np.int32)), "the late allreduce's result")

# A peer that is alive but does not join: chorus.TimeoutError (also the builtin) within the
# per-call timeout, saying what it waited for; the others then fail with chorus errors too.
with fresh("timeout") as ctx:
    if rank == 0:
        started = time.monotonic()
        error = expect(chorus.TimeoutError, lambda: ctx.allreduce(np.ones(4, np.int32), timeout=0.5), "rank 0")
        check(isinstance(error, TimeoutError) and time.monotonic() - started < 5, "timed out within the timeout")
        print(f"rank 0: timeout: {error}", flush=True)
        expect(chorus.TimeoutError, lambda: ctx.barrier())  # the Context stays finished with that error
    else:
        time.sleep(1.5)
        expect(chorus.Error, lambda: ctx.allreduce(np.ones(4, np.int32)))

# The last rank exits without closing: the survivors' next call raises
# chorus.PeerLostError naming it, within the timeout, and they shrink.
ctx = fresh("peer-lost", timeout=10)
victim = size - 1
token = np.ones(1, np.int32)
if rank == victim:
    # Only after every survivor is connected (a send to each: they answer below).
    for peer in range(victim):
        ctx.recv(token, peer, 9)
    print(f"rank {rank}: errors OK {checks}; exiting on purpose without closing", flush=True)
    os._exit(0)
ctx.send(token, victim, 9)
started = time.monotonic()
error = expect(chorus.PeerLostError, lambda: ctx.allreduce(np.ones(16, np.float32)), f"rank {victim}")
check(error.peer == victim and isinstance(error, chorus.IoError) and isinstance(error, ConnectionError),
      f"PeerLostError.peer is {victim}: {error.peer}")
check(time.monotonic() - started < 10, "the dead rank is named within the timeout")
expect(chorus.PeerLostError, lambda: ctx.barrier())  # the Context stays finished with that error
survivors = ctx.shrink()
check(survivors.size == size - 1 and survivors.rank == rank, "shrink renumbers the survivors")
check(int(survivors.allreduce(np.ones(1, np.int64))[0]) == size - 1, "the survivors go on")
survivors.close()
ctx.close()
print(f"rank {rank}: errors OK {checks}", flush=True)
