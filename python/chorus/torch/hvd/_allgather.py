"""allgather and grouped_allgather: every rank's tensors, concatenated along dimension 0."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._allreduce import allreduce
from ._arguments import _check_tensor
from ._grouped_allreduce import grouped_allreduce
from ._handles import _submit, synchronize
from ._job import _require_init
from ._ops import Average
from ._packing import _check_group, _classes, _describe_group, _flat, _gather_uneven, _pieces, _row_elements
from ._process_sets import _resolve


def _as_rows(tensor):
    """tensor's data with at least one dimension (a scalar gathers as one row)."""
    local = tensor.detach().contiguous()
    return local.view(1) if local.dim() == 0 else local


def _start_allgather(tensor, name, process_set, what, with_counts=False):
    _check_tensor(tensor, what)
    _require_init(what)
    process_set = _resolve(process_set, what)
    local = _as_rows(tensor)
    # The descriptors the ranks agree on carry each rank's first dimension.
    descriptor = _negotiation.describe("allgather", local.dtype, local.shape)
    state = {}

    def issue(descriptors):
        counts = [d.first_dimension for d in descriptors]
        row = _row_elements(local)
        work, blocks = _gather_uneven(local.reshape(-1), [count * row for count in counts], process_set._group)
        state.update(counts=counts, blocks=blocks)
        return [work], finish

    def finish():
        gathered = torch.cat(state["blocks"]()).view((-1,) + tuple(local.shape[1:]))
        return (gathered, state["counts"]) if with_counts else gathered

    return _submit(issue, what, process_set, descriptor, name)


def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's tensor along dimension 0 (first dimensions may differ)."""
    return _start_allgather(tensor, name, process_set, "allgather_async")


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


def _start_grouped_allgather(tensors, name, process_set, what, with_counts=False):
    tensors = _check_group(tensors, what)
    _require_init(what)
    process_set = _resolve(process_set, what)
    members = [_as_rows(tensor) for tensor in tensors]
    descriptor = _describe_group("grouped_allgather", members, any_first_dimension=True)
    classes = _classes(members, lambda member: member.dtype)
    state = {}

    def issue(_descriptors):
        # Every rank's first dimensions, member by member (a descriptor has room for one).
        mine = torch.tensor([member.shape[0] for member in members], dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in process_set.ranks]
        dist.all_gather(everyone, mine, group=process_set._group)
        rows = [theirs.tolist() for theirs in everyone]
        works, gathers = [], []
        for dtype, indices in classes.items():
            lengths = [sum(their_rows[i] * _row_elements(members[i]) for i in indices) for their_rows in rows]
            work, blocks = _gather_uneven(_flat([members[i] for i in indices], dtype), lengths, process_set._group)
            works.append(work)
            gathers.append((indices, blocks))
        state.update(rows=rows, gathers=gathers)
        return works, finish

    def finish():
        outputs = [None] * len(members)
        for indices, blocks in state["gathers"]:
            parts = {index: [] for index in indices}
            for their_rows, block in zip(state["rows"], blocks()):
                shapes = [(their_rows[i],) + tuple(members[i].shape[1:]) for i in indices]
                for index, piece in zip(indices, _pieces(block, shapes)):
                    parts[index].append(piece)
            for index in indices:
                outputs[index] = torch.cat(parts[index])
        if with_counts:
            return tuple(outputs), [[their_rows[i] for their_rows in state["rows"]] for i in range(len(members))]
        return tuple(outputs)

    return _submit(issue, what, process_set, descriptor, name)


def grouped_allgather_async(tensors, name=None, process_set=None):
    """Starts allgathering each of the tensors, as one collective; synchronize() returns the results (a tuple)."""
    return _start_grouped_allgather(tensors, name, process_set, "grouped_allgather_async")


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
