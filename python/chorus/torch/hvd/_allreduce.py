"""allreduce and its in-place and asynchronous forms."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._adasum import adasum_into_async
from ._arguments import _check_tensor
from ._handles import _submit, synchronize
from ._job import _require_init
from ._ops import Adasum, Average, _op_code, _reduction_buffer, _resolve_op, _scale
from ._process_sets import _resolve, global_process_set


def _allreduce_into(tensor, output, op, what, name, prescale_factor, postscale_factor, process_set):
    _check_tensor(tensor, what)
    _require_init(what)
    if op is Adasum:
        if process_set not in (None, global_process_set):
            raise ValueError(f"chorus.torch.hvd.{what}: Adasum runs on the global process set only (as in Horovod)")
        return adasum_into_async(tensor, output, what)
    process_set = _resolve(process_set, what)
    dtype = _reduction_buffer(tensor, op)
    descriptor = _negotiation.describe("allreduce", tensor.dtype, tensor.shape, _op_code(op))
    if dtype == output.dtype and output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().to(dtype=dtype, copy=True).contiguous()
    world = len(process_set.ranks)

    def issue(_descriptors):
        _scale(buffer, prescale_factor)
        work = dist.all_reduce(buffer, op=op.torch_op, group=process_set._group, async_op=True)
        return [work], finish

    def finish():
        divisor = world if op is Average else 1
        _scale(buffer, postscale_factor, divisor)
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer.view_as(output))
        return output

    return _submit(issue, what, process_set, descriptor, name)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None):
    """Starts reducing a copy of tensor across ranks (op: Average by default); synchronize() returns it."""
    op = _resolve_op(average, op, "allreduce_async")
    _check_tensor(tensor, "allreduce_async")
    return _allreduce_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), op, "allreduce_async", name,
                           prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None):
    """Starts reducing tensor in place."""
    op = _resolve_op(average, op, "allreduce_async_")
    return _allreduce_into(tensor, tensor, op, "allreduce_async_", name, prescale_factor, postscale_factor,
                           process_set)


class _AllreduceFunction(torch.autograd.Function):
    """Differentiable, as Horovod defines it: the gradient is reduced as the tensor was (same op, scales, set)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.arguments = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor, postscale_factor,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        average, op, prescale_factor, postscale_factor, process_set = ctx.arguments
        grad = allreduce(grad_output, average=average, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set)
        return (grad,) + (None,) * 6


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """The reduction of tensor across ranks, as a new tensor (Average by default); differentiable."""
    _resolve_op(average, op, "allreduce")
    if compression is not None:
        tensor, context = compression.compress(tensor)
        result = _AllreduceFunction.apply(tensor, average, name, op, prescale_factor, postscale_factor, process_set)
        return compression.decompress(result, context)
    return _AllreduceFunction.apply(tensor, average, name, op, prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=None):
    """Reduces tensor in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))
