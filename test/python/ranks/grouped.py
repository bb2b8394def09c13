"""The grouped collectives on a job of at least 2 ranks: grouped_allreduce,
grouped_allgather and grouped_reduce_scatter, blocking and async, in place and
into out=, with empty members, bit-exact on every type; groups that split
one total differently (chorus.MismatchError on every rank, no buffer written);
and bad groups. Prints "grouped OK <checks>"."""

import os
import sys

import numpy as np

import chorus
from values import TYPES, encode

checks = 0
COUNTS = [3, 0, 17, 1, 100]


def check(condition, what):
    global checks
    if not condition:
        print(f"rank {rank}: FAILED: {what}", flush=True)
        sys.exit(1)
    checks += 1


def exactly(actual, expected):
    """Same storage type, shape and bits."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    return actual.dtype == expected.dtype and actual.shape == expected.shape and actual.tobytes() == expected.tobytes()


def fresh(phase):
    job = os.environ.get("CHORUS_JOB_ID", "none") + "/python-grouped/" + phase
    return chorus.connect_to_store(os.environ["CHORUS_STORE"], rank, size, job, timeout=20)


def marks(r, member, n):
    """Small integers, exact in every type (int8 summed over 3 ranks too), distinct per rank, member and element."""
    return (np.arange(n, dtype=np.int64) % 7 + member + 1) * (r + 1)


def call(ctx, name, is_async, *args, **kwargs):
    result = getattr(ctx, name + ("_async" if is_async else ""))(*args, **kwargs)
    return result.result() if is_async else result


def check_allreduce(ctx, type_name, is_async, in_place):
    storage, override = TYPES[type_name]
    buffers = [encode(marks(rank, m, n), type_name) for m, n in enumerate(COUNTS)]
    out = None if in_place else [np.full(n, 99, storage) for n in COUNTS]
    results = call(ctx, "grouped_allreduce", is_async, buffers, chorus.SUM, out=out, dtype=override)
    check(len(results) == len(COUNTS), "one result per buffer")
    for m, n in enumerate(COUNTS):
        expected = encode(sum(marks(r, m, n) for r in range(size)), type_name)
        check(exactly(results[m], expected), f"grouped_allreduce {type_name} member {m}")
        check(results[m] is (buffers[m] if in_place else out[m]), "the result is the caller's buffer")


def check_allgather(ctx, type_name, is_async, given_out):
    storage, override = TYPES[type_name]
    buffers = [encode(marks(rank, m, n), type_name) for m, n in enumerate(COUNTS)]
    out = [np.full(n * size, 99, storage) for n in COUNTS] if given_out else None
    results = call(ctx, "grouped_allgather", is_async, buffers, out=out, dtype=override)
    for m, n in enumerate(COUNTS):
        expected = encode(np.stack([marks(r, m, n) for r in range(size)]), type_name)
        check(exactly(results[m], expected.reshape(-1) if given_out else expected),
              f"grouped_allgather {type_name} member {m}")


def check_reduce_scatter(ctx, type_name, is_async, given_out):
    storage, override = TYPES[type_name]
    buffers = [encode(marks(rank, m, n * size), type_name) for m, n in enumerate(COUNTS)]
    out = [np.full(n, 99, storage) for n in COUNTS] if given_out else None
    results = call(ctx, "grouped_reduce_scatter", is_async, buffers, chorus.SUM, out=out, dtype=override)
    for m, n in enumerate(COUNTS):
        whole = sum(marks(r, m, n * size) for r in range(size))
        expected = encode(whole[rank * n:(rank + 1) * n], type_name)
        check(exactly(results[m], expected), f"grouped_reduce_scatter {type_name} member {m}")


def expect(error_type, action, *words):
    try:
        action()
    except error_type as error:
        message = str(error)
        check(all(word in message for word in words), f"{error_type.__name__} {message!r} names {words}")
        return
    check(False, f"expected {error_type.__name__} naming {words}")


with chorus.init() as ctx:
    rank, size = ctx.rank, ctx.size
    check(size >= 2, "run me with 2 or more ranks")
    for type_name in TYPES:
        for is_async in (False, True):
            for flag in (False, True):
                check_allreduce(ctx, type_name, is_async, flag)
                check_allgather(ctx, type_name, is_async, flag)
                check_reduce_scatter(ctx, type_name, is_async, flag)
    check(ctx.grouped_allreduce([]) == [], "an empty group")
    # Still in step with the plain calls.
    one = np.ones(1, np.int32)
    check(ctx.allreduce(one)[0] == size, "a plain allreduce after the groups")

# Buffers of two types: a TypeError before anything moves; the Context stays usable.
with fresh("types") as ctx:
    expect(TypeError, lambda: ctx.grouped_allreduce([np.zeros(2, np.float32), np.zeros(2, np.int32)]),
           "buffers[1] holds int32 but buffers[0] float32")
    expect(TypeError, lambda: ctx.grouped_allgather([np.zeros(2, np.float32)], out=42),
           "out must be a sequence of buffers")
    ctx.barrier()

# Sizes that do not fit: chorus.InvalidArgument naming this rank and the member.
with fresh("sizes") as ctx:
    expect(chorus.InvalidArgument,
           lambda: ctx.grouped_reduce_scatter([np.zeros(2 * size + 1, np.float32)]),
           f"rank {rank}", "grouped_reduce_scatter")

with fresh("outputs") as ctx:
    expect(chorus.InvalidArgument,
           lambda: ctx.grouped_allreduce([np.zeros(4, np.float32)], out=[np.zeros(4, np.float32)] * 2),
           f"rank {rank}", "one output per input")

# Rank 0 splits 8 elements 3 + 5, the others 5 + 3: MismatchError on every rank, nothing written.
with fresh("mismatch") as ctx:
    split = [3, 5] if rank == 0 else [5, 3]
    buffers = [np.full(n, 7, np.float32) for n in split]
    expect(chorus.MismatchError, lambda: ctx.grouped_allreduce(buffers), "grouped allreduce")
    check(all((b == 7).all() for b in buffers), "a mismatched group wrote into its buffers")

print(f"rank {rank}: grouped OK {checks}", flush=True)
