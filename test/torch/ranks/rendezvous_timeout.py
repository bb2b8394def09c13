"""A group member that comes too late, at 2 ranks: new_group's timeout bounds
the group's rendezvous, and the rank that waited names the one missing.
Prints "late OK <checks>"."""

import time
from datetime import timedelta

import torch.distributed as dist

from common import Checker, init

rank, size = init()
check = Checker(rank)
check(size == 2, "run me with 2 ranks")

if rank == 1:
    time.sleep(4)  # twice the group's timeout
started = time.monotonic()
try:
    dist.new_group([0, 1], timeout=timedelta(seconds=2))
    check(False, "a group whose member comes after its timeout must fail")
except Exception as error:  # noqa: BLE001  (chorus's error, or torch's own barrier timing out)
    elapsed = time.monotonic() - started
    check(elapsed < 10, f"failed after {elapsed:.1f} s, not hung")
    if rank == 0:
        check("waiting for rank 1 to join" in str(error), f"rank 0's error names rank 1: {error}")
dist.destroy_process_group()
print(f"late OK {check.count}", flush=True)
