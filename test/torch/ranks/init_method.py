"""init_method="chorus://" at 2 ranks: a rank or size that contradicts
chorus's launcher is refused naming both, and gloo meets the other ranks at
chorus's store as well as chorus does. Prints "init_method OK <checks>"."""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from common import Checker

rank = int(os.environ["CHORUS_RANK"])
check = Checker(rank)
try:
    dist.init_process_group("chorus", init_method="chorus://", rank=1 - rank, world_size=2)
    check(False, "a rank that contradicts CHORUS_RANK must be refused")
except ValueError as error:
    check(f"rank={1 - rank}" in str(error) and f"says {rank}" in str(error), f"the error names both ranks: {error}")
check(not dist.is_initialized(), "nothing was initialized")

dist.init_process_group("gloo", init_method="chorus://", timeout=timedelta(seconds=30))
tensor = torch.full((3,), float(rank + 1))
dist.all_reduce(tensor)
check.equal(tensor, torch.full((3,), 3.0), "gloo's all_reduce over chorus's store")
dist.destroy_process_group()
print(f"init_method OK {check.count}", flush=True)
