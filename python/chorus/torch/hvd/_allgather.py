"""allgather: every rank's tensor, concatenated along dimension 0."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._arguments import _check_tensor
from ._handles import _submit, synchronize
from ._job import _require_init
from ._process_sets import _resolve


def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's tensor along dimension 0 (first dimensions may differ)."""
    _check_tensor(tensor, "allgather_async")
    _require_init("allgather_async")
    process_set = _resolve(process_set, "allgather_async")
    local = tensor.detach().contiguous()
    if local.dim() == 0:
        local = local.view(1)
    # The descriptors the ranks agree on carry each rank's first dimension.
    descriptor = _negotiation.describe("allgather", local.dtype, local.shape)
    state = {}

    def issue(descriptors):
        counts = [d.first_dimension for d in descriptors]
        longest = max(counts)
        padded = local
        if local.shape[0] < longest:
            padded = torch.zeros((longest,) + tuple(local.shape[1:]), dtype=local.dtype)
            padded[:local.shape[0]] = local
        gathered = [torch.empty_like(padded) for _ in counts]
        state.update(counts=counts, gathered=gathered)
        return [dist.all_gather(gathered, padded, group=process_set._group, async_op=True)], finish

    def finish():
        return torch.cat([block[:count] for block, count in zip(state["gathered"], state["counts"])], dim=0)

    return _submit(issue, "allgather_async", process_set, descriptor, name)


def allgather(tensor, name=None, process_set=None):
    return synchronize(allgather_async(tensor, name, process_set))
