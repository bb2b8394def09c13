"""allgather's collective, asynchronous and without autograd: the forms Adasum and sparse allreduce start
(_allgather.py makes allgather and grouped_allgather differentiable on it)."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._arguments import _check_tensor
from ._handles import _submit
from ._job import _require_init
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
