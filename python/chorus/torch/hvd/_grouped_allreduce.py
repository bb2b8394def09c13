"""grouped_allreduce: a list of tensors reduced as one collective (one all_reduce per buffer dtype).

The members are packed into one flat buffer per dtype they reduce in, so a
group of many small tensors costs one round of messages, as Horovod's fused
groups do; the ranks agree on the whole group (every member's dtype and
shape) before anything moves.
"""

import torch
import torch.distributed as dist

from ._handles import _submit, synchronize
from ._job import _require_init
from ._ops import Average, _op_code, _reduction_buffer, _resolve_op, _scale
from ._packing import _check_group, _classes, _describe_group, _flat, _pieces
from ._process_sets import _resolve


def _grouped_allreduce_into(tensors, outputs, op, what, name, prescale_factor, postscale_factor, process_set):
    _require_init(what)
    process_set = _resolve(process_set, what)
    descriptor = _describe_group("grouped_allreduce", tensors, _op_code(op))
    classes = _classes(tensors, lambda tensor: _reduction_buffer(tensor, op))
    buffers = {dtype: _flat([tensors[i] for i in indices], dtype) for dtype, indices in classes.items()}
    world = len(process_set.ranks)

    def issue(_descriptors):
        works = []
        for buffer in buffers.values():
            _scale(buffer, prescale_factor)
            works.append(dist.all_reduce(buffer, op=op.torch_op, group=process_set._group, async_op=True))
        return works, finish

    def finish():
        divisor = world if op is Average else 1
        with torch.no_grad():
            for dtype, indices in classes.items():
                _scale(buffers[dtype], postscale_factor, divisor)
                for index, piece in zip(indices, _pieces(buffers[dtype], [tensors[i].shape for i in indices])):
                    outputs[index].copy_(piece)
        return tuple(outputs)

    return _submit(issue, what, process_set, descriptor, name)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=None):
    """Starts reducing copies of the tensors as one collective; synchronize() returns them (a tuple)."""
    op = _resolve_op(average, op, "grouped_allreduce_async")
    tensors = _check_group(tensors, "grouped_allreduce_async")
    outputs = [torch.empty(tensor.shape, dtype=tensor.dtype) for tensor in tensors]
    return _grouped_allreduce_into(tensors, outputs, op, "grouped_allreduce_async", name, prescale_factor,
                                   postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    """Starts reducing the tensors in place, as one collective."""
    op = _resolve_op(average, op, "grouped_allreduce_async_")
    tensors = _check_group(tensors, "grouped_allreduce_async_")
    return _grouped_allreduce_into(tensors, tensors, op, "grouped_allreduce_async_", name, prescale_factor,
                                   postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    """Reduces the tensors in place, as one collective; returns them (a tuple)."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


class _GroupedAllreduceFunction(torch.autograd.Function):
    """Differentiable: each gradient is reduced as its tensor was (same op, scales and set)."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.arguments = (average, op, prescale_factor, postscale_factor, process_set)
        return synchronize(grouped_allreduce_async(list(tensors), average, name, op, prescale_factor,
                                                   postscale_factor, process_set))

    @staticmethod
    def backward(ctx, *grad_outputs):
        average, op, prescale_factor, postscale_factor, process_set = ctx.arguments
        grads = grouped_allreduce(list(grad_outputs), average=average, op=op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, process_set=process_set)
        return (None,) * 6 + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    """The reductions of the tensors across ranks (Average by default) as new tensors, a list; differentiable."""
    _resolve_op(average, op, "grouped_allreduce")
    tensors = _check_group(tensors, "grouped_allreduce")
    if compression is None:
        return list(_GroupedAllreduceFunction.apply(average, name, op, prescale_factor, postscale_factor,
                                                    process_set, *tensors))
    compressed, contexts = zip(*[compression.compress(tensor) for tensor in tensors])
    reduced = _GroupedAllreduceFunction.apply(average, name, op, prescale_factor, postscale_factor, process_set,
                                              *compressed)
    return [compression.decompress(tensor, context) for tensor, context in zip(reduced, contexts)]
