"""join: this rank has run out of data; the others' allreduces go on without it.

Horovod's answer to uneven data: a rank that calls join() takes part in
every allreduce that the ranks still working make, adding zeros, until
every rank has joined; Average still divides by the whole set's size.
Horovod adds zeros whatever the op; chorus adds the op's identity (zeros
for Sum and Average, as Horovod; the dtype's largest value for Min, its
smallest for Max, ones for Product), so that a joined rank never changes a
Min or a Max. Other operations fail on the working ranks while a rank has
joined (MismatchError), as in Horovod. join() returns the rank that joined
last, the same on every rank.

It works through the agreement (negotiation.py): a joined rank sends the
"join" descriptor in every round and, when the working ranks agree on an
allreduce, reduces a buffer of that identity, of the dtype and size their
descriptors name. The descriptor's aux counts the rounds a rank has spent joined: the
ranks with 0 in the round where all have joined are the last to join.
"""

import torch
import torch.distributed as dist

from . import _negotiation
from ._job import _require_init
from ._launcher import _launcher
from ._ops import _HALF_TYPES, Average, _identity, _op_of_code
from ._process_sets import global_process_set


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
        op = _op_of_code(_negotiation.op_code_of(wanted))
        dtype = _negotiation.dtype_of(wanted)
        if op is Average and dtype in _HALF_TYPES:
            dtype = torch.float32  # what they reduce Average of 16-bit floats in (ops.py)
        neutral = _identity(op, dtype, _negotiation.numel_of(wanted))
        dist.all_reduce(neutral, op=op.torch_op, group=process_set._group)


def join(device=-1):  # noqa: ARG001  (device: Horovod's GPU to use; chorus joins on the CPU)
    """Blocks until every rank has joined, adding zeros to the others' allreduces; the rank that joined last."""
    _require_init("join")
    process_set = global_process_set
    return _launcher.submit(lambda _descriptors: _joined(process_set), None, process_set, "join").wait_issued()
