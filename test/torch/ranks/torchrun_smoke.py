"""Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; torch's own
TCPStore): the default group and a subgroup. Prints "torchrun OK <checks>"."""

import os

import torch
import torch.distributed as dist

from common import Checker, init

check = Checker(int(os.environ["RANK"]))
check("CHORUS_RANK" not in os.environ, "torchrun, not chorus-run, started me")
rank, size = init()
check(rank == int(os.environ["RANK"]) and size == int(os.environ["WORLD_SIZE"]), "rank and size are torchrun's")
tensor = torch.arange(10, dtype=torch.float32) + rank
dist.all_reduce(tensor)
check.equal(tensor, torch.arange(10, dtype=torch.float32) * size + sum(range(size)), "all_reduce")
group = dist.new_group([size - 1])
if rank == size - 1:
    alone = torch.ones(3)
    dist.all_reduce(alone, group=group)
    check.equal(alone, torch.ones(3), "all_reduce in a group of one")
gathered = torch.empty(size, dtype=torch.int64)
dist.all_gather_into_tensor(gathered, torch.tensor([rank * 10]))
check.equal(gathered, torch.arange(size) * 10, "all_gather_into_tensor")
dist.destroy_process_group()
print(f"torchrun OK {check.count}", flush=True)
