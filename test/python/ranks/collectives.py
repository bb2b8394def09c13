"""Every collective, every type, blocking and async, checked bit for bit.
Run as a chorus-run job of any size; prints "collectives OK <checks>"."""

import array
import sys

import numpy as np

import chorus
from values import FLOATING, TYPES, block, encode, op_input, reduced, same_bits

OPS = ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor"]
checks = 0


def check(condition, what):
    global checks
    if not condition:
        print(f"rank {ctx.rank}: FAILED: {what}", flush=True)
        sys.exit(1)
    checks += 1


def finish(result, is_async):
    """The output of a blocking call, or of an async one after its Work."""
    if not is_async:
        return result
    check(isinstance(result, chorus.Work), "an _async call returns a Work")
    return result.result()


def call(name, is_async, *args, **kwargs):
    method = getattr(ctx, name + "_async" if is_async else name)
    return finish(method(*args, **kwargs), is_async)


def reductions(type_name, is_async, count):
    _, override = TYPES[type_name]
    rank, size = ctx.rank, ctx.size
    for op in OPS:
        if op in ("band", "bor", "bxor") and type_name in FLOATING:
            continue
        expected = encode(reduced(op, size, count), type_name)
        data = encode(op_input(op, rank, size, count), type_name)
        result = call("allreduce", is_async, data, op, dtype=override)
        check(result is data and same_bits(data, expected), f"allreduce {type_name} {op} in place")
        out = np.zeros_like(data)
        source = encode(op_input(op, rank, size, count), type_name)
        result = call("allreduce", is_async, source, getattr(chorus, op.upper()), out=out, dtype=override)
        check(result is out and same_bits(out, expected), f"allreduce {type_name} {op} out=")
        check(same_bits(source, encode(op_input(op, rank, size, count), type_name)), "allreduce input untouched")

    expected = encode(reduced("sum", size, count), type_name)
    for root in range(size):
        data = encode(op_input("sum", rank, size, count), type_name)
        result = call("reduce", is_async, data, root=root, dtype=override)
        if rank == root:
            check(result is data and same_bits(data, expected), f"reduce {type_name} in place root {root}")
        else:
            check(result is None, "reduce returns None off root")
        out = np.zeros_like(data) if rank == root else None
        result = call("reduce", is_async, encode(op_input("sum", rank, size, count), type_name), "sum", root,
                      out=out, dtype=override)
        if rank == root:
            check(result is out and same_bits(out, expected), f"reduce {type_name} out= root {root}")

    # reduce_scatter: size blocks of `count`; block r of every input is summed into rank r.
    whole = encode(np.concatenate([op_input("sum", rank, size, count) + 3 * r for r in range(size)]), type_name)
    mine = encode(reduced("sum", size, count) + 3 * rank * size, type_name)
    result = call("reduce_scatter", is_async, whole, dtype=override)
    check(same_bits(result, mine) and result.shape == (count,), f"reduce_scatter {type_name}")
    shaped = whole.reshape(size, count)
    result = call("reduce_scatter", is_async, shaped, "sum", dtype=override)
    check(same_bits(result, mine) and result.shape == (count,), f"reduce_scatter {type_name} 2-D")
    out = np.zeros(count, whole.dtype)
    check(call("reduce_scatter", is_async, whole, out=out, dtype=override) is out and same_bits(out, mine),
          f"reduce_scatter {type_name} out=")
    # In place: out is this rank's block of the input itself (C++ sees the aliasing pointers).
    inside = whole.copy()
    own = inside[rank * count:(rank + 1) * count]
    check(call("reduce_scatter", is_async, inside, out=own, dtype=override) is own and same_bits(own, mine),
          f"reduce_scatter {type_name} in place")

    counts = [(r % 3) + count // 2 for r in range(size)]
    if size > 1:
        counts[0] = 0  # an empty block
    full = np.concatenate([op_input("sum", rank, size, counts[r]) + r for r in range(size)])
    expected_v = reduced("sum", size, counts[rank]) + size * rank
    result = call("reduce_scatter_v", is_async, encode(full, type_name), counts, dtype=override)
    check(same_bits(result, encode(expected_v, type_name)), f"reduce_scatter_v {type_name} {counts}")


def movement(type_name, is_async, count):
    _, override = TYPES[type_name]
    rank, size = ctx.rank, ctx.size
    blocks = [encode(block(r, count), type_name) for r in range(size)]
    stacked = np.stack(blocks)

    for root in range(size):
        data = blocks[root].copy() if rank == root else np.zeros_like(blocks[root])
        check(call("broadcast", is_async, data, root, dtype=override) is data and same_bits(data, blocks[root]),
              f"broadcast {type_name} root {root}")

    result = call("allgather", is_async, blocks[rank], dtype=override)
    check(result.shape == (size, count) and same_bits(result, stacked), f"allgather {type_name}")
    out = np.zeros_like(stacked)
    out[rank] = blocks[rank]
    check(call("allgather", is_async, None, out=out, dtype=override) is out and same_bits(out, stacked),
          f"allgather {type_name} in place")

    counts = [(r * 2 + 1) % (count + 1) for r in range(size)]
    pieces = [encode(block(r, counts[r], 5), type_name) for r in range(size)]
    joined = np.concatenate(pieces)
    result = call("allgatherv", is_async, pieces[rank], counts, dtype=override)
    check(same_bits(result, joined), f"allgatherv {type_name} {counts}")
    out = np.zeros_like(joined)
    start = sum(counts[:rank])
    out[start:start + counts[rank]] = pieces[rank]
    check(same_bits(call("allgatherv", is_async, None, counts, out=out, dtype=override), joined),
          f"allgatherv {type_name} in place")

    for root in range(size):
        result = call("gather", is_async, blocks[rank], root, dtype=override)
        check(same_bits(result, stacked) if rank == root else result is None, f"gather {type_name} root {root}")
        result = call("gatherv", is_async, pieces[rank], counts, root, dtype=override)
        check(same_bits(result, joined) if rank == root else result is None, f"gatherv {type_name} root {root}")
        if rank == root:  # in place on root: its input is its own block of the output
            out = np.zeros_like(stacked)
            out[root] = blocks[root]
            check(same_bits(call("gather", is_async, out[root], root, out=out, dtype=override), stacked),
                  f"gather {type_name} in place root {root}")
        else:
            check(call("gather", is_async, blocks[rank], root, dtype=override) is None, "gather: None off root")
        source = stacked if rank == root else None
        if rank == root:  # in place on root: its output is its own block of the input
            whole_copy = stacked.copy()
            check(same_bits(call("scatter", is_async, whole_copy, root, out=whole_copy[root], dtype=override),
                            blocks[root]), f"scatter {type_name} in place root {root}")
        else:
            check(same_bits(call("scatter", is_async, None, root, out=np.zeros_like(blocks[rank]), dtype=override),
                            blocks[rank]), f"scatter {type_name} beside an in-place root")
        out = np.zeros_like(blocks[rank])
        check(call("scatter", is_async, source, root, out=out, dtype=override) is out and
              same_bits(out, blocks[rank]), f"scatter {type_name} root {root}")
        result = call("scatter", is_async, stacked, root, dtype=override)  # shape from data on every rank
        check(result.shape == (count,) and same_bits(result, blocks[rank]), f"scatter {type_name} allocated")
        result = call("scatterv", is_async, joined if rank == root else None, counts, root,
                      dtype=override or joined.dtype.name)
        check(same_bits(result, pieces[rank]), f"scatterv {type_name} root {root}")

    # alltoall: block p of rank r's input is (r, p)'s mark; rank r receives (p, r) from every p.
    send = np.concatenate([encode(block(rank * size + p, count), type_name) for p in range(size)])
    expected = np.concatenate([encode(block(p * size + rank, count), type_name) for p in range(size)])
    check(same_bits(call("alltoall", is_async, send, dtype=override), expected), f"alltoall {type_name}")

    def amount(sender, receiver):
        return (sender + 2 * receiver) % 3

    send_counts = [amount(rank, p) for p in range(size)]
    recv_counts = [amount(p, rank) for p in range(size)]
    send = np.concatenate([encode(block(rank * size + p, amount(rank, p), 9), type_name) for p in range(size)])
    expected = np.concatenate([encode(block(p * size + rank, amount(p, rank), 9), type_name) for p in range(size)])
    check(same_bits(call("alltoallv", is_async, send, send_counts, recv_counts, dtype=override), expected),
          f"alltoallv {type_name}")

    if size > 1:
        right, left = (rank + 1) % size, (rank - 1) % size
        incoming = np.zeros_like(blocks[left])
        receiving = ctx.recv_async(incoming, left, 7, dtype=override)
        call("send", is_async, blocks[rank], right, 7, dtype=override)
        check(receiving.result() is incoming and same_bits(incoming, blocks[left]), f"send/recv {type_name}")
        # Every other rank sends to rank 0, which takes them from any peer.
        # One check on every rank (the driver compares the ranks' counts).
        ok, seen = True, []
        if rank == 0:
            for k in range(size - 1):
                incoming = np.zeros_like(blocks[0])
                if is_async:
                    work = ctx.recv_any_async(incoming, 8, dtype=override)
                    ok = ok and work.result() is incoming
                    source = work.source_rank()
                else:
                    source = ctx.recv_any(incoming, 8, dtype=override)
                ok = ok and 0 < source < size and same_bits(incoming, blocks[source])
                seen.append(source)
            ok = ok and sorted(seen) == list(range(1, size))
        else:
            ctx.send(blocks[rank], 0, 8, dtype=override)
        check(ok, f"recv_any {type_name}: every sender once with its block (took {seen})")


def other_buffers():
    """The buffer protocol beyond numpy: bytearray, memoryview, array.array."""
    rank, size = ctx.rank, ctx.size
    data = array.array("i", [rank + 1, 2 * rank, 7])
    ctx.allreduce(data)
    check(list(data) == [size * (size + 1) // 2, size * (size - 1), 7 * size], "array.array int32 allreduce")
    raw = bytearray([rank, 1, 2, 3])
    ctx.allreduce(raw, chorus.MAX)
    check(raw == bytearray([size - 1, 1, 2, 3]), "bytearray uint8 max")
    doubles = array.array("d", [0.5 * rank, 1.0])
    ctx.allreduce(memoryview(doubles))
    check(list(doubles) == [0.25 * size * (size - 1), float(size)], "memoryview of array.array('d')")
    grid = np.arange(12, dtype=np.int64).reshape(3, 4) * (rank + 1)
    ctx.allreduce(grid)
    check(same_bits(grid, np.arange(12, dtype=np.int64).reshape(3, 4) * (size * (size + 1) // 2)), "2-D array")
    # The root only reads: immutable bytes will do there.
    payload = bytes(range(16)) if rank == 0 else bytearray(16)
    check(ctx.broadcast(payload, 0) is payload and bytes(payload) == bytes(range(16)), "broadcast from bytes")
    dlpack_tensors()


class DlpackOnly:
    """An array offered through DLPack alone, as JAX's and TensorFlow's are."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def dlpack_tensors():
    """DLPack: an object with nothing else, and PyTorch's CPU tensors (no buffer protocol)."""
    rank, size = ctx.rank, ctx.size
    data = DlpackOnly(np.arange(6, dtype=np.int32) * (rank + 1))
    check(ctx.allreduce(data) is data and same_bits(data.array, np.arange(6, dtype=np.int32) * (size * (size + 1) // 2)),
          "DLPack int32 allreduce")
    blocks = ctx.allgather(DlpackOnly(np.full((2, 2), rank, np.float64)))
    check(blocks.shape == (size, 2, 2) and all((blocks[r] == r).all() for r in range(size)), "DLPack allgather")
    try:
        import torch
    except ImportError:
        return
    tensor = torch.full((3, 4), float(rank + 1))
    check(ctx.allreduce(tensor) is tensor and bool((tensor == size * (size + 1) / 2).all()), "torch CPU allreduce")
    halves = torch.full((5,), float(rank), dtype=torch.bfloat16)
    ctx.allreduce(halves, chorus.MAX)
    check(bool((halves == size - 1).all()), "torch bfloat16 max")
    shared = torch.arange(8, dtype=torch.int64) if rank == size - 1 else torch.zeros(8, dtype=torch.int64)
    check(ctx.broadcast(shared, size - 1) is shared and torch.equal(shared, torch.arange(8)), "torch broadcast")


def async_overlap():
    """Several Works in flight at once complete in order, each with its own output."""
    rank, size = ctx.rank, ctx.size
    works = [ctx.allreduce_async(np.full(1000, rank + k, np.int64)) for k in range(8)]
    for k, work in enumerate(works):
        expected = np.full(1000, size * (size - 1) // 2 + size * k, np.int64)
        check(same_bits(work.result(), expected), f"overlapped allreduce {k}")
        check(work.test() and work.done() and work.exception() is None, "finished Work reports done")
    barrier = ctx.barrier_async()
    check(barrier.wait() is True and barrier.result() is None, "barrier_async")


# "--connections on-demand": every pair connects when a call first needs it.
options = {"connections": sys.argv[sys.argv.index("--connections") + 1]} if "--connections" in sys.argv else {}
with chorus.init(timeout=60, **options) as ctx:
    for is_async in (False, True):
        for type_name in TYPES:
            reductions(type_name, is_async, 7)
            movement(type_name, is_async, 5)
    reductions("float32", False, 70000)      # past the small-message algorithms
    movement("int32", True, 20000)
    other_buffers()
    async_overlap()
    ctx.barrier()
    print(f"collectives OK {checks}", flush=True)
