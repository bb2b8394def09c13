"""allgather: every rank's tensor, concatenated along dimension 0."""

import torch
import torch.distributed as dist

from ._arguments import _check_tensor
from ._handles import _Handle, synchronize
from ._job import _require_init, size


def allgather_async(tensor, name=None):  # noqa: ARG001
    """Starts concatenating every rank's tensor along dimension 0 (first dimensions may differ)."""
    _check_tensor(tensor, "allgather_async")
    _require_init("allgather_async")
    world = size()
    local = tensor.detach().contiguous()
    if local.dim() == 0:
        local = local.view(1)
    rows = torch.tensor([local.shape[0]], dtype=torch.int64)
    all_rows = [torch.empty_like(rows) for _ in range(world)]
    dist.all_gather(all_rows, rows)  # each rank's rows: the padding below needs them
    counts = [int(r.item()) for r in all_rows]
    longest = max(counts)
    padded = local
    if local.shape[0] < longest:
        padded = torch.zeros((longest,) + tuple(local.shape[1:]), dtype=local.dtype)
        padded[:local.shape[0]] = local
    gathered = [torch.empty_like(padded) for _ in range(world)]
    work = dist.all_gather(gathered, padded, async_op=True)

    def finish():
        return torch.cat([block[:count] for block, count in zip(gathered, counts)], dim=0)

    return _Handle([work], finish)


def allgather(tensor, name=None):
    return synchronize(allgather_async(tensor, name))
