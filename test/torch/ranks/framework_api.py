"""The torch.distributed API that frameworks build on, beyond the plain
collectives: coalesced calls (fused), the coalescing manager, batch_isend_irecv,
object collectives, new_subgroups, sparse all_reduce, receives from any source,
sequence numbers,
monitored_barrier (torch 2.x asks the backend; 1.13 reserves it to gloo), the
"cpu:chorus" form of init_process_group, and roots that ranks disagree on. Bit-exact, at 2 and 3 ranks.
Prints "framework_api OK <checks>" at the end."""

import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import chorus
import chorus.torch  # noqa: F401  (registers the backend)
from common import Checker

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# "cpu:chorus" names the backend per device type (torch 2.x).
dist.init_process_group("cpu:chorus" if TORCH2 else "chorus", timeout=timedelta(seconds=30))
rank, size = dist.get_rank(), dist.get_world_size()
check = Checker(rank)
check(dist.get_backend() in ("chorus", "cpu:chorus"), f"the default group is chorus's: {dist.get_backend()}")
total = sum(range(size))

# all_reduce_coalesced: tensors of different shapes in one fused call.
tensors = [torch.full((3,), float(rank)), torch.full((2, 2), float(rank + 1)), torch.full((1,), 10.0 * rank)]
dist.all_reduce_coalesced(tensors)
check.equal(tensors[0], torch.full((3,), float(total)), "all_reduce_coalesced tensor 0")
check.equal(tensors[1], torch.full((2, 2), float(total + size)), "all_reduce_coalesced tensor 1")
check.equal(tensors[2], torch.full((1,), 10.0 * total), "all_reduce_coalesced tensor 2")
maxima = [torch.tensor([rank, -rank], dtype=torch.int32)]
dist.all_reduce_coalesced(maxima, op=dist.ReduceOp.MAX)
check.equal(maxima[0], torch.tensor([size - 1, 0], dtype=torch.int32), "all_reduce_coalesced MAX int32")
try:
    dist.all_reduce_coalesced([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    check(False, "all_reduce_coalesced of mixed dtypes must fail")
except (RuntimeError, ValueError) as error:  # torch checks first (ValueError); chorus too
    check("dtype" in str(error) or "one type for all" in str(error), f"mixed dtypes named: {error}")

# all_gather_coalesced: a list per rank of the inputs' shapes.
if hasattr(dist, "all_gather_coalesced"):
    inputs = [torch.full((2,), float(rank)), torch.full((3, 1), 100.0 + rank)]
    outputs = [[torch.zeros(2), torch.zeros(3, 1)] for _ in range(size)]
    dist.all_gather_coalesced(outputs, inputs)
    for r in range(size):
        check.equal(outputs[r][0], torch.full((2,), float(r)), f"all_gather_coalesced rank {r} tensor 0")
        check.equal(outputs[r][1], torch.full((3, 1), 100.0 + r), f"all_gather_coalesced rank {r} tensor 1")

# The coalescing manager: several calls, one fused collective each kind.
if TORCH2:
    from torch.distributed.distributed_c10d import _coalescing_manager
    sums = [torch.full((4,), float(rank + k)) for k in range(3)]
    with _coalescing_manager():
        for tensor in sums:
            dist.all_reduce(tensor)
    for k, tensor in enumerate(sums):
        check.equal(tensor, torch.full((4,), float(total + size * k)), f"coalesced all_reduce {k}")
    gathered = [torch.zeros(2 * size), torch.zeros(3 * size)]
    with _coalescing_manager():
        dist.all_gather_into_tensor(gathered[0], torch.full((2,), float(rank)))
        dist.all_gather_into_tensor(gathered[1], torch.full((3,), 50.0 + rank))
    check.equal(gathered[0], torch.cat([torch.full((2,), float(r)) for r in range(size)]), "coalesced all_gather 0")
    check.equal(gathered[1], torch.cat([torch.full((3,), 50.0 + r) for r in range(size)]), "coalesced all_gather 1")
    scattered = [torch.zeros(2), torch.zeros(1)]
    with _coalescing_manager():
        dist.reduce_scatter_tensor(scattered[0], torch.arange(2.0 * size) + rank)
        dist.reduce_scatter_tensor(scattered[1], torch.arange(1.0 * size) * 10)
    check.equal(scattered[0], torch.arange(2.0 * rank, 2.0 * rank + 2) * size + total, "coalesced reduce_scatter 0")
    check.equal(scattered[1], torch.tensor([10.0 * rank * size]), "coalesced reduce_scatter 1")

# batch_isend_irecv: a ring, each rank sending to the next and receiving from the previous.
send = torch.full((5,), float(rank))
received = torch.zeros(5)
operations = [dist.P2POp(dist.isend, send, (rank + 1) % size), dist.P2POp(dist.irecv, received, (rank - 1) % size)]
for work in dist.batch_isend_irecv(operations):
    work.wait()
check.equal(received, torch.full((5,), float((rank - 1) % size)), "batch_isend_irecv ring")

# Receive from any source: rank 0 takes every other rank's message, each once, and learns the sender.
if rank == 0:
    senders = []
    for _ in range(size - 1):
        message = torch.zeros(3)
        sender = dist.recv(message, tag=5)
        check.equal(message, torch.full((3,), 10.0 * sender), f"the message from any source came from {sender}")
        senders.append(sender)
    check(sorted(senders) == list(range(1, size)), f"each sender once: {senders}")
    pending = dist.irecv(torch.zeros(3), tag=6)
    dist.send(torch.zeros(1), dst=1, tag=7)   # tells rank 1 to send now
    pending.wait()
    check(pending.source_rank() == 1, f"irecv from any source names its sender: {pending.source_rank()}")
else:
    dist.send(torch.full((3,), 10.0 * rank), dst=0, tag=5)
    if rank == 1:
        dist.recv(torch.zeros(1), src=0, tag=7)
        dist.send(torch.full((3,), 1.0), dst=0, tag=6)

# Object collectives.
objects = [None] * size
dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
check(objects == [{"rank": r, "name": f"r{r}"} for r in range(size)], f"all_gather_object: {objects}")
broadcast = [f"from {rank}", rank]
dist.broadcast_object_list(broadcast, src=size - 1)
check(broadcast == [f"from {size - 1}", size - 1], f"broadcast_object_list: {broadcast}")
gathered_objects = [None] * size if rank == 0 else None
dist.gather_object(("x", rank), gathered_objects, dst=0)
if rank == 0:
    check(gathered_objects == [("x", r) for r in range(size)], f"gather_object: {gathered_objects}")
scattered_object = [None]
dist.scatter_object_list(scattered_object, [r * 7 for r in range(size)] if rank == 0 else None, src=0)
check(scattered_object == [rank * 7], f"scatter_object_list: {scattered_object}")

# new_subgroups: groups of consecutive ranks, each a chorus group of its own.
if TORCH2 and size % 2 == 0:  # torch 1.13 creates subgroups only where CUDA is
    subgroup, _ = dist.new_subgroups(group_size=2)
    value = torch.tensor([float(rank)])
    dist.all_reduce(value, group=subgroup)
    first = rank - rank % 2
    check.equal(value, torch.tensor([float(first + first + 1)]), "all_reduce in a subgroup of new_subgroups")

# Sparse all_reduce: entries of every rank, summed where indices meet.
indices = torch.tensor([[0, rank + 1], [rank, 2]])
sparse = torch.sparse_coo_tensor(indices, torch.tensor([1.0, float(rank)]), (size + 1, 3))
dense_expected = sum(torch.sparse_coo_tensor(torch.tensor([[0, r + 1], [r, 2]]), torch.tensor([1.0, float(r)]),
                                             (size + 1, 3)).to_dense() for r in range(size))
dist.all_reduce(sparse)
check.equal(sparse.to_dense(), dense_expected, "sparse all_reduce")

# Sequence numbers agree across ranks (torch compares them to find desynchronized groups).
group = dist.distributed_c10d._get_default_group()
if hasattr(group, "_get_sequence_number_for_group"):
    numbers = [None] * size
    dist.all_gather_object(numbers, group._get_sequence_number_for_group())
    check(len(set(numbers)) == 1 and numbers[0] > 0, f"sequence numbers agree: {numbers}")

# chorus's errors are RuntimeErrors; a timeout says "Timed out".
check(issubclass(chorus.TimeoutError, RuntimeError) and issubclass(chorus.MismatchError, RuntimeError),
      "chorus's errors derive from RuntimeError")

# monitored_barrier: passes when everyone comes; names the rank that does not.
if TORCH2:
    dist.monitored_barrier(timeout=timedelta(seconds=10))
    dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=True)
    dist.barrier()
    # The last rank stays away from a group of its own (the failure finishes that group).
    watched = dist.new_group(list(range(size)))
    if rank == 0:
        try:
            dist.monitored_barrier(watched, timeout=timedelta(seconds=1))
            check(False, "monitored_barrier must fail when a rank stays away")
        except RuntimeError as error:
            check(f"Rank {size - 1} failed to pass monitoredBarrier" in str(error), f"names the absent rank: {error}")
    elif rank != size - 1:
        try:
            dist.monitored_barrier(watched, timeout=timedelta(seconds=1))
            check(False, "monitored_barrier must fail on ranks that came when rank 0 reports a failure")
        except RuntimeError as error:
            check(f"Rank {rank} successfully reached monitoredBarrier" in str(error), f"says it came: {error}")
    dist.barrier()

# Ranks that disagree on a root: MismatchError on every rank, the root
# included (each rank names itself), in that call or the group's next (a
# root that only writes does not wait for its check: docs/failures.md), in
# a group of their own (the failure finishes that group).
disagreeing = dist.new_group(list(range(size)))
try:
    dist.broadcast(torch.full((4,), float(rank)), src=rank, group=disagreeing)
    dist.barrier(group=disagreeing)
    check(False, "a broadcast whose ranks name different roots must fail")
except chorus.MismatchError as error:
    check("root" in str(error), f"the mismatch names the roots: {error}")
dist.barrier()

dist.destroy_process_group()
print(f"framework_api OK {check.count}", flush=True)
sys.exit(0)
