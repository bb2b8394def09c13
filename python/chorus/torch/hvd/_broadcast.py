"""broadcast of a tensor and its in-place and asynchronous forms."""

import torch
import torch.distributed as dist

from ._arguments import _check_root, _check_tensor
from ._handles import _Handle, synchronize
from ._job import _require_init


def _broadcast_into(tensor, output, root_rank, what):
    _check_tensor(tensor, what)
    _require_init(what)
    _check_root(root_rank, what)
    if output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().clone(memory_format=torch.contiguous_format)
    work = dist.broadcast(buffer, src=root_rank, async_op=True)

    def finish():
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer)
        return output

    return _Handle([work], finish)


def broadcast_async(tensor, root_rank, name=None):  # noqa: ARG001
    """Starts broadcasting root_rank's tensor into a new tensor on every rank."""
    _check_tensor(tensor, "broadcast_async")
    return _broadcast_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), root_rank, "broadcast_async")


def broadcast_async_(tensor, root_rank, name=None):  # noqa: ARG001
    return _broadcast_into(tensor, tensor, root_rank, "broadcast_async_")


def broadcast(tensor, root_rank, name=None):
    return synchronize(broadcast_async(tensor, root_rank, name))


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))
