"""new_group at 4 ranks: two disjoint subgroups ({0, 1} and {2, 3}) each
reducing on its own, an overlapping one ({1, 2, 3}), and a subgroup's own
timeout: with a 2 s group, rank 0 gets a timeout there while rank 1 stays
away, and the default group (60 s) carries on afterwards.
Prints "groups OK <checks>"."""

import time
from datetime import timedelta

import torch
import torch.distributed as dist

import chorus
from common import Checker, init

rank, size = init()
check = Checker(rank)
check(size == 4, "run me with 4 ranks")

# Every rank calls new_group for every group, members or not (torch's rule).
low = dist.new_group([0, 1])
high = dist.new_group([2, 3])
overlap = dist.new_group([1, 2, 3])
mine = low if rank < 2 else high

check(dist.get_world_size(mine) == 2 and dist.get_rank(mine) == rank % 2, "group rank and size")
tensor = torch.full((100,), float(rank + 1))
dist.all_reduce(tensor, group=mine)
expected = 1.0 + 2.0 if rank < 2 else 3.0 + 4.0
check.equal(tensor, torch.full((100,), expected), "all_reduce in my subgroup")

# Subgroups of one job interleave with the default group in any order every member agrees on.
if rank in (1, 2, 3):
    tensor = torch.full((10,), float(rank), dtype=torch.float64)
    dist.all_reduce(tensor, group=overlap)
    check.equal(tensor, torch.full((10,), 6.0, dtype=torch.float64), "all_reduce in the overlapping group")
    gathered = [torch.empty(3, dtype=torch.int64) for _ in range(3)]
    dist.all_gather(gathered, torch.full((3,), rank, dtype=torch.int64), group=overlap)
    check.equal(torch.stack(gathered), torch.tensor([[1] * 3, [2] * 3, [3] * 3]), "all_gather in the overlapping group")
    # broadcast's src is a global rank: rank 3 is the overlapping group's rank 2.
    tensor = torch.full((5,), float(rank))
    dist.broadcast(tensor, src=3, group=overlap)
    check.equal(tensor, torch.full((5,), 3.0), "broadcast from a global rank in a subgroup")
tensor = torch.ones(7, dtype=torch.int32)
dist.all_reduce(tensor)
check.equal(tensor, torch.full((7,), 4, dtype=torch.int32), "all_reduce in the default group")

# A group's timeout is its own.
quick = dist.new_group([0, 1], timeout=timedelta(seconds=2))
if rank == 0:
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=quick)
        check(False, "all_reduce on a group whose other member stays away must time out")
    except chorus.TimeoutError as error:
        elapsed = time.monotonic() - started
        check(elapsed < 4, f"the 2 s group timed out after {elapsed:.1f} s")
        check("allreduce on rank 0 of 2" in str(error) and "timed out after 2000 ms" in str(error),
              f"the error names the call, the rank and the group's timeout: {error}")
elif rank == 1:
    time.sleep(4)  # longer than the group's timeout, far shorter than the default group's
dist.barrier()
check(True, "the default group carries on after a subgroup's timeout")

dist.destroy_process_group()
print(f"groups OK {check.count}", flush=True)
