"""Every collective of the backend, every dtype, on small integers (exact in
every dtype and whatever the reduction order), checked bit for bit against
results computed locally from every rank's inputs. Prints "collectives OK <checks>"."""

from datetime import timedelta

import torch
import torch.distributed as dist

import chorus
from common import BYTE_ONLY, DTYPES, FLOATS, INTEGERS, Checker, init

rank, size = init()
check = Checker(rank)
R = dist.ReduceOp
SIZES = [1, 37, 5003]  # a single element, an odd count, one that algorithms chunk


def inputs(op, r, n, dtype):
    """Rank r's input for op: small integers whose op over the ranks fits every dtype exactly."""
    i = torch.arange(n, dtype=torch.int64)
    if op == R.AVG:
        values = i % 5 + size * r            # the sum is a multiple of size: the mean is exact
    elif op == R.PRODUCT:
        values = 1 + (i + r) % 2             # at most 2**3
    elif op in (R.MIN, R.MAX):
        values = (i * 7 + r * 3) % 11
    elif op in (R.BAND, R.BOR, R.BXOR):
        values = (i * 5 + r * 3) % 64
    else:
        values = i % 5 + 3 * r
    return values.to(dtype)


def expected_reduction(op, n, dtype):
    every = torch.stack([inputs(op, r, n, torch.int64) for r in range(size)])
    if op == R.SUM:
        result = every.sum(0)
    elif op == R.AVG:
        result = every.sum(0) // size
    elif op == R.PRODUCT:
        result = every.prod(0)
    elif op == R.MIN:
        result = every.min(0).values
    elif op == R.MAX:
        result = every.max(0).values
    else:
        result = every[0].clone()
        for other in every[1:]:
            if op == R.BAND:
                result &= other
            elif op == R.BOR:
                result |= other
            else:
                result ^= other
    return result.to(dtype)


def name(op):
    return next(n for n in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR") if op == getattr(R, n))


def ops_for(dtype):
    ops = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX]
    return ops + [R.BAND, R.BOR, R.BXOR] if dtype in INTEGERS else ops


def moved(r, n, dtype):
    """Rank r's data for collectives that only move it: distinct per rank and element."""
    values = (torch.arange(n) * 3 + r * 7) % 50
    return (values % 2).to(dtype) if dtype == torch.bool else values.to(dtype)


# allreduce: every op and dtype, in place.
for dtype in DTYPES:
    for op in ops_for(dtype):
        for n in SIZES:
            tensor = inputs(op, rank, n, dtype)
            dist.all_reduce(tensor, op=op)
            check.equal(tensor, expected_reduction(op, n, dtype), f"all_reduce {name(op)} {dtype} n={n}")

# reduce: root gets the result; the others keep their input.
for dtype in DTYPES:
    for root in range(size):
        for op in (R.SUM, R.MAX):
            tensor = inputs(op, rank, 37, dtype)
            dist.reduce(tensor, dst=root, op=op)
            expected = expected_reduction(op, 37, dtype) if rank == root else inputs(op, rank, 37, dtype)
            check.equal(tensor, expected, f"reduce {name(op)} {dtype} root {root}")

# broadcast from every root, reducible and byte-only dtypes.
for dtype in DTYPES + BYTE_ONLY:
    for root in range(size):
        tensor = moved(rank, 37, dtype)
        dist.broadcast(tensor, src=root)
        check.equal(tensor, moved(root, 37, dtype), f"broadcast {dtype} root {root}")

# all_gather (a list of outputs) and all_gather_into_tensor.
for dtype in DTYPES + BYTE_ONLY:
    outputs = [torch.empty(37, dtype=dtype) for _ in range(size)]
    dist.all_gather(outputs, moved(rank, 37, dtype))
    for r in range(size):
        check.equal(outputs[r], moved(r, 37, dtype), f"all_gather {dtype} block {r}")
    flat = torch.empty(37 * size, dtype=dtype)
    dist.all_gather_into_tensor(flat, moved(rank, 37, dtype))
    check.equal(flat, torch.cat([moved(r, 37, dtype) for r in range(size)]), f"all_gather_into_tensor {dtype}")

# reduce_scatter (a list of inputs) and reduce_scatter_tensor: block r of every rank's input, reduced, to rank r.
for dtype in DTYPES:
    for op in ops_for(dtype):
        every = [inputs(op, rank, 37 * size, dtype)]
        blocks = list(every[0].split(37))
        output = torch.empty(37, dtype=dtype)
        dist.reduce_scatter(output, blocks, op=op)
        expected = expected_reduction(op, 37 * size, dtype)[rank * 37:(rank + 1) * 37]
        check.equal(output, expected, f"reduce_scatter {name(op)} {dtype}")
        output = torch.empty(37, dtype=dtype)
        dist.reduce_scatter_tensor(output, every[0], op=op)
        check.equal(output, expected, f"reduce_scatter_tensor {name(op)} {dtype}")


def block(source, destination, rows, dtype):
    """What `source` sends `destination` in alltoall: rows of 3, naming both."""
    values = (torch.arange(rows * 3) + source * 13 + destination * 5) % 100
    return values.reshape(rows, 3).to(dtype)


# all_to_all_single with equal splits, with unequal ones (rank r sends r + p + 1 rows to p), and all_to_all (lists).
for dtype in DTYPES + BYTE_ONLY:
    send = torch.cat([block(rank, p, 2, dtype) for p in range(size)])
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send)
    check.equal(received, torch.cat([block(p, rank, 2, dtype) for p in range(size)]), f"all_to_all_single {dtype}")

    in_splits = [rank + p + 1 for p in range(size)]
    out_splits = [p + rank + 1 for p in range(size)]
    send = torch.cat([block(rank, p, in_splits[p], dtype) for p in range(size)])
    received = torch.empty(sum(out_splits), 3, dtype=dtype)
    dist.all_to_all_single(received, send, output_split_sizes=out_splits, input_split_sizes=in_splits)
    check.equal(received, torch.cat([block(p, rank, out_splits[p], dtype) for p in range(size)]),
                f"all_to_all_single unequal {dtype}")

    outputs = [torch.empty(p + 1, 3, dtype=dtype) for p in range(size)]
    dist.all_to_all(outputs, [block(rank, p, rank + 1, dtype) for p in range(size)])
    for p in range(size):
        check.equal(outputs[p], block(p, rank, p + 1, dtype), f"all_to_all {dtype} from {p}")

# Aliased buffers: the in-place layouts (this rank's block inside the other buffer), one tensor as
# both sides of all_to_all_single, and an overlap that is no in-place layout (chorus would refuse it).
flat = torch.zeros(5 * size)
flat[rank * 5:(rank + 1) * 5] = moved(rank, 5, torch.float32)
dist.all_gather_into_tensor(flat, flat[rank * 5:(rank + 1) * 5])
check.equal(flat, torch.cat([moved(r, 5, torch.float32) for r in range(size)]), "all_gather_into_tensor in place")
data = inputs(R.SUM, rank, 5 * size, torch.float32)
dist.reduce_scatter_tensor(data[rank * 5:(rank + 1) * 5], data)
check.equal(data[rank * 5:(rank + 1) * 5], expected_reduction(R.SUM, 5 * size, torch.float32)[rank * 5:(rank + 1) * 5],
            "reduce_scatter_tensor in place")
shared = torch.cat([block(rank, p, 2, torch.int32) for p in range(size)])
dist.all_to_all_single(shared, shared)
check.equal(shared, torch.cat([block(p, rank, 2, torch.int32) for p in range(size)]), "all_to_all_single in place")
flat = torch.zeros(5 * size)
flat[0:5] = moved(rank, 5, torch.float32)
dist.all_gather_into_tensor(flat, flat[0:5])  # block 0 of the output: in place on rank 0 only
check.equal(flat, torch.cat([moved(r, 5, torch.float32) for r in range(size)]), "all_gather_into_tensor overlapping")

# gather and scatter, from and to every root.
for dtype in DTYPES + BYTE_ONLY:
    for root in range(size):
        outputs = [torch.empty(37, dtype=dtype) for _ in range(size)] if rank == root else None
        dist.gather(moved(rank, 37, dtype), outputs, dst=root)
        if rank == root:
            for r in range(size):
                check.equal(outputs[r], moved(r, 37, dtype), f"gather {dtype} root {root} block {r}")
        output = torch.empty(37, dtype=dtype)
        pieces = [moved(r + 10, 37, dtype) for r in range(size)] if rank == root else None
        dist.scatter(output, pieces, src=root)
        check.equal(output, moved(rank + 10, 37, dtype), f"scatter {dtype} root {root}")

# send/recv around a ring (isend/irecv, so nobody waits on a send first), with tags.
for dtype in DTYPES + BYTE_ONLY:
    right, left = (rank + 1) % size, (rank - 1) % size
    received = torch.empty(37, dtype=dtype)
    sending = dist.isend(moved(rank, 37, dtype), right, tag=7)
    receiving = dist.irecv(received, left, tag=7)
    sending.wait()
    receiving.wait()
    check.equal(received, moved(left, 37, dtype), f"send/recv {dtype} from {left}")

# Non-contiguous tensors are staged through a contiguous copy and written back.
matrix = torch.zeros(6, 4, dtype=torch.float32)
matrix[:, 1] = torch.arange(6, dtype=torch.float32) + rank
column = matrix[:, 1]
check(not column.is_contiguous(), "a column is not contiguous")
dist.all_reduce(column)
expected = torch.arange(6, dtype=torch.float32) * size + sum(range(size))
check.equal(matrix[:, 1], expected, "all_reduce of a non-contiguous column")
check.equal(matrix[:, 0], torch.zeros(6), "all_reduce leaves the other columns alone")
transposed = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
dist.broadcast(transposed, src=size - 1)
check.equal(transposed, torch.arange(12, dtype=torch.float64).reshape(3, 4).t(), "broadcast of a transposed view")

# Empty tensors move nothing and finish.
empty = torch.zeros(0)
dist.all_reduce(empty)
dist.broadcast(empty, src=0)
dist.all_gather([torch.zeros(0) for _ in range(size)], empty)
dist.all_gather_into_tensor(torch.zeros(0), empty)
dist.reduce_scatter_tensor(torch.zeros(0), empty)
dist.all_to_all_single(torch.zeros(size, 0), torch.zeros(size, 0))
check(empty.numel() == 0, "empty tensors")

dist.barrier()

# Async calls: several in flight, completed in order, futures with the output tensors.
tensors = [torch.full((1000,), float(rank + k), dtype=torch.float32) for k in range(4)]
works = [dist.all_reduce(t, async_op=True) for t in tensors]
futures = [w.get_future() for w in works]
chained = futures[-1].then(lambda f: f.value()[0] * 2)
for k, (work, future) in enumerate(zip(works, futures)):
    value = future.wait()
    check(isinstance(value, list) and len(value) == 1 and value[0] is not None, f"future {k} holds the output list")
    work.wait()
    check(work.is_completed(), f"work {k} completed")
    check.equal(tensors[k], torch.full((1000,), float(sum(range(size)) + size * k)), f"async all_reduce {k}")
check.equal(chained.wait(), torch.full((1000,), 2.0 * (sum(range(size)) + size * 3)), "a callback chained on a future")

# A receive still waiting for its sender holds back neither a later collective's wait() nor the
# sender's collective: rank 0 posts irecv, then both reduce, then the last rank sends.
if rank == 0:
    received = torch.zeros(3)
    receiving = dist.irecv(received, src=size - 1, tag=11)
    # wait(timeout) on it gives up with a TimeoutError; the receive itself goes on.
    try:
        receiving.wait(timeout=timedelta(milliseconds=300))
        check(False, "wait(timeout) must time out on a receive nobody sent yet")
    except chorus.TimeoutError as error:
        check("recv on rank 0" in str(error) and "300 ms" in str(error), f"the timeout names the call: {error}")
total = torch.ones(3)
dist.all_reduce(total)
check.equal(total, torch.full((3,), float(size)), "all_reduce while a receive is pending")
if rank == size - 1:
    dist.send(torch.full((3,), 5.0), dst=0, tag=11)
if rank == 0:
    receiving.wait()
    check.equal(received, torch.full((3,), 5.0), "the pending receive completes after the collective")

dist.destroy_process_group()
print(f"collectives OK {check.count}", flush=True)
