"""allgather and grouped_allgather: every rank's tensors, concatenated along dimension 0, differentiable
(the collective itself, and the asynchronous forms, are _gather.py's)."""

import torch

from ._allreduce import allreduce
from ._gather import _start_allgather, _start_grouped_allgather
from ._grouped_allreduce import grouped_allreduce
from ._handles import synchronize
from ._ops import Average
from ._packing import _check_group
from ._process_sets import _resolve


def _own_rows(grad, counts, process_set):
    """This rank's stretch of a gradient of the concatenation (counts: every rank's rows, in set order)."""
    position = process_set.rank()
    offset = sum(counts[:position])
    return grad.narrow(0, offset, counts[position])


class _AllgatherFunction(torch.autograd.Function):
    """Differentiable, as Horovod defines it: the gradient is averaged across the set, and each rank keeps the
    rows its tensor contributed."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        gathered, counts = synchronize(_start_allgather(tensor, name, process_set, "allgather", with_counts=True))
        ctx.shape, ctx.counts, ctx.process_set = tensor.shape, counts, process_set
        return gathered

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        return _own_rows(reduced, ctx.counts, _resolve(ctx.process_set, "allgather")).reshape(ctx.shape), None, None


def allgather(tensor, name=None, process_set=None):
    """Every rank's tensor concatenated along dimension 0, as a new tensor; differentiable."""
    return _AllgatherFunction.apply(tensor, name, process_set)


class _GroupedAllgatherFunction(torch.autograd.Function):
    """Differentiable as allgather is, member by member (the gradients averaged as one group)."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        gathered, counts = synchronize(_start_grouped_allgather(list(tensors), name, process_set,
                                                                "grouped_allgather", with_counts=True))
        ctx.shapes, ctx.counts, ctx.process_set = [t.shape for t in tensors], counts, process_set
        return gathered

    @staticmethod
    def backward(ctx, *grad_outputs):
        reduced = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        process_set = _resolve(ctx.process_set, "grouped_allgather")
        grads = [_own_rows(grad, counts, process_set).reshape(shape)
                 for grad, counts, shape in zip(reduced, ctx.counts, ctx.shapes)]
        return (None, None) + tuple(grads)


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of each of the tensors, as one collective: a tuple of new tensors; differentiable."""
    return _GroupedAllgatherFunction.apply(name, process_set, *_check_group(tensors, "grouped_allgather"))
