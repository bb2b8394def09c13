"""broadcast of a tensor and its in-place and asynchronous forms."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._allreduce import allreduce
from ._arguments import _check_tensor
from ._handles import _submit, synchronize
from ._job import _require_init, rank
from ._ops import Average
from ._process_sets import _group_rank, _resolve


def _broadcast_into(tensor, output, root_rank, what, name, process_set):
    _check_tensor(tensor, what)
    _require_init(what)
    process_set = _resolve(process_set, what)
    _group_rank(process_set, root_rank, what)
    descriptor = _negotiation.describe("broadcast", tensor.dtype, tensor.shape, root=root_rank)
    if output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().clone(memory_format=torch.contiguous_format)

    def issue(_descriptors):
        # src is a global rank, as Horovod's root_rank is, in torch's API too.
        return [dist.broadcast(buffer, src=root_rank, group=process_set._group, async_op=True)], finish

    def finish():
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer)
        return output

    return _submit(issue, what, process_set, descriptor, name)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts broadcasting root_rank's tensor into a new tensor on every rank."""
    _check_tensor(tensor, "broadcast_async")
    return _broadcast_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), root_rank, "broadcast_async", name,
                           process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    return _broadcast_into(tensor, tensor, root_rank, "broadcast_async_", name, process_set)


class _BroadcastFunction(torch.autograd.Function):
    """Differentiable, as Horovod defines it: the gradient is averaged across the set and kept by the root only
    (the other ranks' tensors did not reach the result)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """root_rank's tensor on every rank of the set, as a new tensor; differentiable."""
    return _BroadcastFunction.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))
