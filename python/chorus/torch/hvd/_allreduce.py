"""allreduce and its in-place and asynchronous forms."""

import torch
import torch.distributed as dist

from ._arguments import _check_tensor
from ._handles import _Handle, synchronize
from ._job import _require_init, size
from ._adasum import adasum_into_async
from ._ops import Adasum, Average, _average_, _reduction_buffer, _resolve_op


def _allreduce_into(tensor, output, op, what):
    _check_tensor(tensor, what)
    _require_init(what)
    if op is Adasum:
        return adasum_into_async(tensor, output, what)
    dtype = _reduction_buffer(tensor, op)
    if dtype == output.dtype and output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().to(dtype=dtype, copy=True).contiguous()
    work = dist.all_reduce(buffer, op=op.torch_op, async_op=True)
    world = size()

    def finish():
        if op is Average:
            _average_(buffer, world)
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer.view_as(output))
        return output

    return _Handle([work], finish)


def allreduce_async(tensor, average=None, name=None, op=None):  # noqa: ARG001  (name: Horovod's, for its timeline)
    """Starts reducing a copy of tensor across ranks (op: Average by default); synchronize() returns it."""
    op = _resolve_op(average, op, "allreduce_async")
    _check_tensor(tensor, "allreduce_async")
    return _allreduce_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), op, "allreduce_async")


def allreduce_async_(tensor, average=None, name=None, op=None):  # noqa: ARG001
    """Starts reducing tensor in place."""
    op = _resolve_op(average, op, "allreduce_async_")
    return _allreduce_into(tensor, tensor, op, "allreduce_async_")


def allreduce(tensor, average=None, name=None, op=None):
    """The reduction of tensor across ranks, as a new tensor (Average by default)."""
    return synchronize(allreduce_async(tensor, average, name, op))


def allreduce_(tensor, average=None, name=None, op=None):
    """Reduces tensor in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op))
