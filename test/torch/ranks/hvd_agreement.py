"""chorus.torch.hvd's agreement between ranks and its job-level calls:
mismatched calls (shapes, dtypes, roots, operations) raise RuntimeError on
every rank and the job goes on; name= is reserved while in flight; an
operation started before a barrier that another rank passes first; named
calls issued in different orders refused on every rank; process
sets (add, use, remove, errors); shutdown() then init() in one process."""

import torch

import chorus.torch.hvd as hvd
from common import Checker

torch.set_num_threads(1)
hvd.init(timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)


def expect_everywhere(call, *texts):
    """call() raises RuntimeError on this rank (and, the test being symmetric, on every rank)."""
    try:
        call()
        check(False, f"expected a RuntimeError containing {texts}")
    except RuntimeError as error:
        check(all(text in str(error) for text in texts), f"{texts} in {error}")


def carries_on(what):
    check.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum), torch.full((3,), float(size)), f"the job goes on after {what}")


# Shapes: same number of elements, different shape (chorus's own check sees counts only).
expect_everywhere(lambda: hvd.allreduce(torch.ones(6) if rank == 0 else torch.ones(2, 3)), "shape differs",
                  "[6]", "[2, 3]")
carries_on("a shape mismatch")
expect_everywhere(lambda: hvd.allreduce(torch.ones(4 + rank)), "shape differs")
carries_on("a count mismatch")
expect_everywhere(lambda: hvd.allreduce(torch.ones(4, dtype=torch.int32 if rank == 0 else torch.float32)),
                  "int32", "float32")
carries_on("a dtype mismatch")
# Roots: every rank names itself, so each would send and none receive.
expect_everywhere(lambda: hvd.broadcast(torch.ones(3), root_rank=rank), "root rank")
carries_on("a root mismatch")
# Operations: one rank reduces while the others broadcast.
expect_everywhere(lambda: hvd.allreduce(torch.ones(3)) if rank == 0 else hvd.broadcast(torch.ones(3), 0),
                  "calls allreduce", "calls broadcast")
carries_on("an operation mismatch")
expect_everywhere(lambda: hvd.allreduce(torch.ones(3), op=hvd.Max if rank == 0 else hvd.Min), "reduction ops")
# allgather may differ in the first dimension only.
ragged = hvd.allgather(torch.full((rank + 1, 2), float(rank)))
check.equal(ragged, torch.cat([torch.full((r + 1, 2), float(r)) for r in range(size)]), "ragged rows")
expect_everywhere(lambda: hvd.allgather(torch.ones(2, 2 + rank)), "past the first dimension")
carries_on("an allgather mismatch")

# name=: two operations of one name in flight are refused (ValueError) on the caller.
pending = hvd.allreduce_async(torch.ones(2), name="twice")
try:
    hvd.allreduce_async(torch.ones(2), name="twice")
    check(False, "a second operation named 'twice' was accepted")
except ValueError as error:
    check("'twice'" in str(error) and "in flight" in str(error), str(error))
check.equal(hvd.synchronize(pending), torch.ones(2), "the first 'twice' completes")
again = hvd.allreduce_async(torch.ones(2), op=hvd.Sum, name="twice")  # released once synchronized
check.equal(hvd.synchronize(again), torch.full((2,), float(size)), "the name is free again")

# Named calls issued in different orders on different ranks (as from a set,
# whose order differs between processes): Horovod matches calls by name;
# chorus, which matches them by order, refuses them on every rank, never
# summing one with the other.
order = ["first", "second"] if rank == 0 else ["second", "first"]
handles = {name: hvd.allreduce_async(torch.full((2,), float(100 * len(name) + rank)), op=hvd.Sum, name=name)
           for name in order}
for name in order:
    try:
        mixed = hvd.synchronize(handles[name])
        check(False, f"named calls in different orders returned {mixed.tolist()} for '{name}'")
    except RuntimeError as error:
        check("name their calls differently" in str(error), str(error))
carries_on("named calls in different orders")

# Rank 0 starts an allreduce and waits in a barrier that the others reach
# first, starting theirs only after it: the barrier is not queued behind it.
if rank == 0:
    early = hvd.allreduce_async(torch.full((2,), 1.0), op=hvd.Sum)
hvd.barrier()
if rank != 0:
    early = hvd.allreduce_async(torch.full((2,), 1.0), op=hvd.Sum)
check.equal(hvd.synchronize(early), torch.full((2,), float(size)), "an operation started before a barrier")
check(hvd.poll(early), "poll after synchronize")

# Process sets: every rank adds every set; only members call on it.
evens = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
odds = hvd.add_process_set(hvd.ProcessSet([r for r in range(size) if r % 2 == 1]))
mine, other = (evens, odds) if rank % 2 == 0 else (odds, evens)
check(mine.included() and not other.included(), "included()")
check(mine.size() == len(mine.ranks) and mine.rank() == mine.ranks.index(rank), "size() and rank() in the set")
check(hvd.global_process_set.size() == size and hvd.global_process_set.process_set_id == 0, "the global set")
summed = hvd.allreduce(torch.full((4,), float(rank)), op=hvd.Sum, process_set=mine)
check.equal(summed, torch.full((4,), float(sum(mine.ranks))), "Sum within a set")
gathered = hvd.allgather(torch.full((1,), float(rank)), process_set=mine)
check.equal(gathered, torch.tensor([float(r) for r in mine.ranks]), "allgather within a set")
root = mine.ranks[-1]  # a global rank, as in Horovod
check.equal(hvd.broadcast(torch.full((2,), float(rank)), root, process_set=mine), torch.full((2,), float(root)),
            "broadcast within a set from its last rank")
hvd.barrier(process_set=mine)
# DistributedOptimizer on a set, made on every rank: its members reduce
# among themselves (Sum of gradients r + 1, exact), the others step alone.
weight = torch.nn.Parameter(torch.zeros(2))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD([weight], lr=0.5), op=hvd.Sum, process_set=evens)
optimizer.zero_grad()
(weight * float(rank + 1)).sum().backward()
optimizer.step()
reduced_over = evens.ranks if evens.included() else [rank]
check.equal(weight.detach(), torch.full((2,), -0.5 * sum(r + 1 for r in reduced_over)),
            "the optimizer's process set reduces its members' gradients only")
for call, text in [
    (lambda: hvd.allreduce(torch.ones(1), process_set=other), "is not in"),
    (lambda: hvd.broadcast(torch.ones(1), other.ranks[0], process_set=mine), "not a rank of"),
    (lambda: hvd.add_process_set(list(mine.ranks)), "exists already"),
    (lambda: hvd.add_process_set([size]), "not a non-empty set"),
    (lambda: hvd.ProcessSet([0, 0]), "appears twice"),
]:
    try:
        call()
        check(False, f"expected an error containing {text!r}")
    except ValueError as error:
        check(text in str(error), f"{text!r} in {error}")
check(hvd.remove_process_set(odds) and hvd.remove_process_set(evens), "remove_process_set")
check(not hvd.remove_process_set(evens) and not hvd.remove_process_set(hvd.global_process_set), "removed once only")
try:
    hvd.allreduce(torch.ones(1), process_set=mine)
    check(False, "a removed set was usable")
except ValueError as error:
    check("was not added" in str(error), str(error))
carries_on("the process sets")

# join: each rank in turn runs out of data first; the others' allreduces go
# on with its zeros (Average still divides by the job's size), other
# operations raise on the working ranks, and join() returns the rank that
# joined last, the same everywhere.
for first in range(size):
    if rank == first:
        last = hvd.join()
    else:
        mine = torch.full((5,), float(rank + 1))
        others = sum(r + 1 for r in range(size) if r != first)
        check.equal(hvd.allreduce(mine, op=hvd.Sum), torch.full((5,), float(others)), f"Sum with rank {first} joined")
        ints = torch.full((3,), 2 * size, dtype=torch.int64)
        check.equal(hvd.allreduce(ints), torch.full((3,), 2 * (size - 1), dtype=torch.int64),
                    f"Average with rank {first} joined divides by the job's size")
        halves = hvd.allreduce(torch.full((2,), 1.0, dtype=torch.float16), op=hvd.Sum)
        check.equal(halves, torch.full((2,), float(size - 1), dtype=torch.float16), "float16 with a joined rank")
        expect_everywhere(lambda: hvd.allgather(torch.ones(2)), "have joined")
        # Min and Max: the joined rank adds the op's identity, so it changes nothing.
        check.equal(hvd.allreduce(torch.full((2,), float(rank + 1)), op=hvd.Max), torch.full((2,), float(max(
            r + 1 for r in range(size) if r != first))), f"Max with rank {first} joined")
        check.equal(hvd.allreduce(torch.full((2,), rank + 1, dtype=torch.int32), op=hvd.Min), torch.full(
            (2,), min(r + 1 for r in range(size) if r != first), dtype=torch.int32), f"Min with rank {first} joined")
        check.equal(hvd.allreduce(torch.full((2,), 2.0), op=hvd.Product), torch.full((2,), 2.0 ** (size - 1)),
                    f"Product with rank {first} joined")
        last = hvd.join()
    check(last != first, f"join() returned {last}, the rank that joined first")
    everyone = hvd.allgather(torch.tensor([last]))
    check.equal(everyone, torch.full((size,), last, dtype=torch.int64), "join() returns one rank everywhere")
carries_on("join")

# join with DistributedOptimizer on uneven data: rank r has r + 1 batches.
# The loss (w * x).sum() has the gradient x = r + 1 whatever w is, so with
# op=Sum and lr 0.5 every step's update is exact: at step s the working
# ranks (r + 1 > s) add their x, the joined ones zeros.
weight = torch.nn.Parameter(torch.zeros(4))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD([weight], lr=0.5), named_parameters=[("w", weight)], op=hvd.Sum)
for step in range(rank + 1):
    optimizer.zero_grad()
    (weight * float(rank + 1)).sum().backward()
    optimizer.step()
last = hvd.join()
check(last == size - 1, f"join() after uneven data returned {last}, expected rank {size - 1} (the most batches)")
expected = -0.5 * sum(sum(q + 1 for q in range(size) if q + 1 > s) for s in range(rank + 1))
check.equal(weight.detach(), torch.full((4,), expected), f"uneven data: rank {rank}'s weights after {rank + 1} steps")
carries_on("join with the optimizer")

# shutdown() then init() in one process: a fresh job on the same launcher.
hvd.shutdown()
check(not hvd.is_initialized(), "shutdown")
hvd.init(timeout=30)
check(hvd.is_initialized() and hvd.rank() == rank and hvd.size() == size, "init again")
carries_on("shutdown and init")
ends = hvd.add_process_set([0, size - 1] if size > 2 else [size - 1])
if ends.included():
    check.equal(hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ends), torch.full((1,), float(len(ends.ranks))),
                "a set after init")
hvd.shutdown()
print(f"hvd_agreement OK {check.count}", flush=True)
