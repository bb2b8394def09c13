"""Errors, at 2 ranks. Rejected calls (a tensor off the CPU, a dtype or op
chorus has none for, lists of the wrong length) raise on the calling rank
before anything moves, naming the rank and what was expected, and the group
stays usable; a call chorus's API refuses (a bitwise op on floats) raises
too and finishes its group. Then rank 1 exits and rank 0's next collective raises
chorus.PeerLostError naming it. Prints "errors OK <checks>"."""

import os
import sys
import time

import torch
import torch.distributed as dist

import chorus
from common import Checker, init

rank, size = init(seconds=20)
check = Checker(rank)
check(size == 2, "run me with 2 ranks")


def expect(error_type, call, *words):
    try:
        call()
    except error_type as error:
        message = str(error)
        check(all(word in message for word in words), f"{error_type.__name__} {message!r} names {words}")
        return error
    check(False, f"expected {error_type.__name__} naming {words}")


def still_usable(what):
    tensor = torch.full((8,), float(rank + 1))
    dist.all_reduce(tensor)
    check.equal(tensor, torch.full((8,), 3.0), f"the group works after {what}")


# Only dense CPU tensors, except all_reduce's sparse SUM. (CUDA ones are refused
# naming issue 28, but torch without CUDA cannot make one, and torch dispatches
# no other device to a backend.)
expect(ValueError, lambda: dist.all_reduce(torch.eye(3).to_sparse(), op=dist.ReduceOp.MAX), f"rank {rank}",
       "only SUM")
still_usable("a sparse tensor")

# Bitwise ops are for integers: the API's rule, which chorus itself checks
# (the backend only translates the op), refusing the call on its group and
# finishing that group, as it does every call it refuses. On a group of its
# own here: the world's carries on.
bitwise_group = dist.new_group(list(range(size)))
expect(chorus.InvalidArgument, lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND, group=bitwise_group),
       f"rank {rank}", "band", "float32")
still_usable("a bitwise op on floats in another group")

# chorus has no int16 to reduce (it still moves it: see collectives.py).
expect(ValueError, lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), f"rank {rank}", "Short", "int64")
still_usable("a dtype chorus cannot reduce")

# Lists of the wrong length: one tensor per rank expected.
expect(ValueError, lambda: dist.reduce_scatter(torch.empty(2), [torch.ones(2)] * 3), f"rank {rank}",
       f"one list of {size} input tensors")
expect(ValueError, lambda: dist.all_gather([torch.empty(3), torch.empty(2)], torch.ones(3)), f"rank {rank}",
       "2 elements", "expected 3")
still_usable("lists of the wrong shape")

# A message to oneself (chorus itself would finish the group over it); torch
# 2.x refuses it in Python before the backend sees it, in its own words.
if int(torch.__version__.split(".")[0]) >= 2:
    expect(ValueError, lambda: dist.send(torch.ones(2), dst=rank), "should not be the same as the rank")
else:
    expect(ValueError, lambda: dist.send(torch.ones(2), dst=rank), f"rank {rank}", "this rank itself")
still_usable("a send to oneself")

# A rank that leaves without a goodbye: the other's next collective names it.
if rank == 1:
    dist.barrier()
    print(f"errors OK {check.count}", flush=True)
    os._exit(0)
dist.barrier()
started = time.monotonic()
error = expect(chorus.PeerLostError, lambda: [dist.all_reduce(torch.ones(4)) for _ in range(1000)], "rank 1")
check(error.peer == 1, f"PeerLostError.peer is 1, not {error.peer}")
check("allreduce on rank 0 of 2 failed" in str(error), f"the error names the call: {error}")
check(time.monotonic() - started < 20, "within the group's timeout")
# Every later call fails at once with the same error.
expect(chorus.PeerLostError, lambda: dist.broadcast(torch.ones(4), src=0), "rank 1")
dist.destroy_process_group()
print(f"errors OK {check.count}", flush=True)
sys.exit(0)
