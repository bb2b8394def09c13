"""join: this rank has run out of data; the others' allreduces go on with its zeros.

Horovod's answer to uneven data: a rank that calls join() takes part in
every allreduce (Sum or Average) that the ranks still working make, adding
zeros, until every rank has joined; Average still divides by the whole
set's size. Other operations fail on the working ranks while a rank has
joined (RuntimeError), as in Horovod. join() returns the rank that joined
last, the same on every rank.

It works through the agreement (negotiation.py): a joined rank sends the
"join" descriptor in every round and, when the working ranks agree on an
allreduce, reduces a zero buffer of the dtype and size their descriptors
name. The descriptor's aux counts the rounds a rank has spent joined: the
ranks with 0 in the round where all have joined are the last to join.
"""

import torch
import torch.distributed as dist

from . import _negotiation
from ._job import _require_init
from ._launcher import _launcher
from ._ops import _HALF_TYPES
from ._process_sets import global_process_set

_AVERAGE = 1


def _joined(process_set):
    rounds = 0
    while True:
        slots = _negotiation.describe("join", aux=rounds)
        descriptors = _negotiation.exchange(slots, process_set._group, process_set.ranks)
        if all(d.kind == "join" for d in descriptors):
            return max(d.rank for d in descriptors if d.aux == 0)
        rounds += 1
        wanted = _negotiation.joined_rank_joins_in(descriptors)
        if wanted is None:
            continue  # the working ranks raise; nothing moves
        dtype = _negotiation.dtype_of(wanted)
        if _negotiation.op_code_of(wanted) == _AVERAGE and dtype in _HALF_TYPES:
            dtype = torch.float32  # what they reduce Average of 16-bit floats in (ops.py)
        zeros = torch.zeros(_negotiation.numel_of(wanted), dtype=dtype)
        dist.all_reduce(zeros, op=dist.ReduceOp.SUM, group=process_set._group)


def join(device=-1):  # noqa: ARG001  (device: Horovod's GPU to use; chorus joins on the CPU)
    """Blocks until every rank has joined, adding zeros to the others' allreduces; the rank that joined last."""
    _require_init("join")
    process_set = global_process_set
    return _launcher.submit(lambda _descriptors: _joined(process_set), None, process_set, "join").wait_issued()
