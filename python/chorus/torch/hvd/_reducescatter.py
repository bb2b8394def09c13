"""reducescatter and grouped_reducescatter: tensors reduced across the set, each rank keeping a share of the rows.

Dimension 0 is divided as Horovod divides it: with R rows on N ranks, every
rank gets R // N rows and the first R % N ranks one more. torch's
reduce_scatter moves equal blocks, so each rank's block travels padded to
the larger share (padding rows are reduced, then dropped). A group is one
reduce_scatter per buffer dtype: block i holds every member's rows for rank
i, one member after the other.
"""

import torch
import torch.distributed as dist

from . import _negotiation
from ._allgather import allgather, grouped_allgather
from ._arguments import _check_tensor
from ._handles import _submit, synchronize
from ._job import _require_init
from ._ops import Average, Sum, _op_code, _reduction_buffer, _scale
from ._packing import _check_group, _classes, _describe_group, _pieces
from ._process_sets import _resolve


def _shares(rows, world):
    """Rows each rank of the set keeps, in set order."""
    return [rows // world + (1 if position < rows % world else 0) for position in range(world)]


def _check_reducescatter(tensors, op, what):
    if op is None:
        op = Average
    if op is not Average and op is not Sum:
        # A RuntimeError, as Horovod's (its HorovodInternalError) for the same call.
        raise RuntimeError(f"chorus.torch.hvd.{what}: reducescatter supports hvd.Average and hvd.Sum, not {op!r}")
    for tensor in tensors:
        _check_tensor(tensor, what)
        if tensor.dim() == 0:
            raise ValueError(f"chorus.torch.hvd.{what}: a scalar (0-dimensional tensor) has no rows to scatter; "
                             "give tensors of at least one dimension")
    _require_init(what)
    return op


def _blocks(members, dtype, world):
    """The reduce_scatter input: world equal flat blocks of dtype, the rows of one tensor; block i holds each
    member's share for the set's i-th rank, padded to the member's larger share."""
    padded = []
    for member in members:
        rows = member.shape[0]
        larger = -(-rows // world)
        spread = torch.zeros((world, larger) + tuple(member.shape[1:]), dtype=dtype)
        start = 0
        for position, share in enumerate(_shares(rows, world)):
            spread[position, :share] = member[start:start + share]
            start += share
        padded.append(spread.view(world, -1))
    return torch.cat(padded, dim=1)


def _start_reducescatter(tensors, op, what, name, process_set, prescale_factor, postscale_factor, descriptor,
                         single=False):
    process_set = _resolve(process_set, what)
    world = len(process_set.ranks)
    position = process_set.rank()
    members = [tensor.detach() for tensor in tensors]
    classes = _classes(members, lambda member: _reduction_buffer(member, op))
    inputs = {dtype: _blocks([members[i] for i in indices], dtype, world) for dtype, indices in classes.items()}
    outputs = {dtype: torch.empty_like(blocks[0]) for dtype, blocks in inputs.items()}

    def issue(_descriptors):
        works = []
        for dtype, blocks in inputs.items():
            _scale(blocks, prescale_factor)
            works.append(dist.reduce_scatter(outputs[dtype], list(blocks.unbind(0)), op=op.torch_op,
                                             group=process_set._group, async_op=True))
        return works, finish

    def finish():
        results = [None] * len(members)
        divisor = world if op is Average else 1
        for dtype, indices in classes.items():
            _scale(outputs[dtype], postscale_factor, divisor)
            padded_shapes = [(-(-members[i].shape[0] // world),) + tuple(members[i].shape[1:]) for i in indices]
            for index, piece in zip(indices, _pieces(outputs[dtype], padded_shapes)):
                share = _shares(members[index].shape[0], world)[position]
                # A tensor of its own (not a view into the buffer), as Horovod's outputs are.
                results[index] = piece[:share].to(members[index].dtype, copy=True)
        return results[0] if single else tuple(results)

    return _submit(issue, what, process_set, descriptor, name)


def reducescatter_async(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing tensor across the set (Average by default) and scattering its rows; synchronize() returns
    this rank's rows."""
    op = _check_reducescatter([tensor], op, "reducescatter_async")
    descriptor = _negotiation.describe("reducescatter", tensor.dtype, tensor.shape, _op_code(op))
    return _start_reducescatter([tensor], op, "reducescatter_async", name, process_set, prescale_factor,
                                postscale_factor, descriptor, single=True)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=None, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Starts reducescatter of each of the tensors, as one collective; synchronize() returns the results (a
    tuple)."""
    tensors = _check_group(tensors, "grouped_reducescatter_async")
    op = _check_reducescatter(tensors, op, "grouped_reducescatter_async")
    descriptor = _describe_group("grouped_reducescatter", tensors, _op_code(op))
    return _start_reducescatter(tensors, op, "grouped_reducescatter_async", name, process_set, prescale_factor,
                                postscale_factor, descriptor)


def _gradient_scale(op, process_set, prescale_factor, postscale_factor):
    """What Horovod multiplies a reducescatter's gradient by before gathering it."""
    factor = float(prescale_factor) * float(postscale_factor)
    if op is Sum:
        factor *= len(_resolve(process_set, "reducescatter").ranks)
    return factor


class _ReducescatterFunction(torch.autograd.Function):
    """Differentiable, as Horovod defines it: the gradient, scaled (by the set's size for Sum, and by the
    prescale and postscale factors), is allgathered."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = process_set
        ctx.factor = _gradient_scale(op, process_set, prescale_factor, postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = grad_output * ctx.factor if ctx.factor != 1.0 else grad_output
        return allgather(grad, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average, process_set=None, prescale_factor=1.0,
                  postscale_factor=1.0):
    """tensor reduced across the set (Average by default), this rank's share of the rows as a new tensor;
    differentiable."""
    op = _check_reducescatter([tensor], op, "reducescatter")
    if compression is None:
        return _ReducescatterFunction.apply(tensor, name, op, process_set, prescale_factor, postscale_factor)
    compressed, context = compression.compress(tensor)
    reduced = _ReducescatterFunction.apply(compressed, name, op, process_set, prescale_factor, postscale_factor)
    return compression.decompress(reduced, context)


class _GroupedReducescatterFunction(torch.autograd.Function):
    """Differentiable as reducescatter is, member by member (the gradients gathered as one group)."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = process_set
        ctx.factor = _gradient_scale(op, process_set, prescale_factor, postscale_factor)
        return synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set, prescale_factor,
                                                       postscale_factor))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [grad * ctx.factor for grad in grad_outputs] if ctx.factor != 1.0 else list(grad_outputs)
        return (None,) * 5 + tuple(grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, process_set=None, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each of the tensors, as one collective: a list of new tensors; differentiable."""
    tensors = _check_group(tensors, "grouped_reducescatter")
    op = _check_reducescatter(tensors, op, "grouped_reducescatter")
    if compression is None:
        return list(_GroupedReducescatterFunction.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                        *tensors))
    compressed, contexts = zip(*[compression.compress(tensor) for tensor in tensors])
    reduced = _GroupedReducescatterFunction.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                  *compressed)
    return [compression.decompress(tensor, context) for tensor, context in zip(reduced, contexts)]
