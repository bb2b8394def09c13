"""Under mpirun with CHORUS_STORE set (and no MASTER_ADDR): the rank and size
are Open MPI's, the store chorus's (rank 0 hosts it). Prints "mpirun OK <checks>"."""

import os

import torch
import torch.distributed as dist

from common import Checker, init

check = Checker(int(os.environ["OMPI_COMM_WORLD_RANK"]))
rank, size = init()
check(rank == int(os.environ["OMPI_COMM_WORLD_RANK"]) and size == int(os.environ["OMPI_COMM_WORLD_SIZE"]),
      "rank and size are Open MPI's")
tensor = torch.full((4,), float(rank + 1), dtype=torch.float64)
dist.all_reduce(tensor)
check.equal(tensor, torch.full((4,), float(size * (size + 1) // 2), dtype=torch.float64), "all_reduce")
dist.destroy_process_group()
print(f"mpirun OK {check.count}", flush=True)
