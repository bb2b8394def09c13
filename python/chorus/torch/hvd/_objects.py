"""Python objects, a model's parameters and an optimizer's state, set to the root rank's on every rank."""

import inspect
import io
import pickle  # noqa: S403  (objects come from the job's own root rank)

import torch
import torch.distributed as dist

from ._arguments import _check_root, _check_tensor
from ._broadcast import broadcast_async_
from ._handles import synchronize
from ._job import _require_init, rank


def broadcast_object(obj, root_rank=0):
    """root_rank's obj (pickled with torch.save, so tensors travel too) on every rank."""
    _require_init("broadcast_object")
    _check_root(root_rank, "broadcast_object")
    if rank() == root_rank:
        stream = io.BytesIO()
        torch.save(obj, stream, pickle_protocol=pickle.HIGHEST_PROTOCOL)
        payload = torch.frombuffer(bytearray(stream.getvalue()), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(length, src=root_rank)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=root_rank)
    if rank() == root_rank:
        return obj
    # Any object, as Horovod's broadcast_object takes: torch 2.6 and later
    # load only tensors and plain containers unless told otherwise. The bytes
    # come from the job's own root rank, whose connections proved the job's
    # secret (torch's own broadcast_object_list unpickles the same way).
    if "weights_only" in inspect.signature(torch.load).parameters:
        return torch.load(io.BytesIO(payload.numpy().tobytes()), weights_only=False)
    return torch.load(io.BytesIO(payload.numpy().tobytes()))


def broadcast_parameters(params, root_rank=0):
    """Sets every rank's parameters (a state_dict, named_parameters(), or tensors) to root_rank's, in place."""
    _require_init("broadcast_parameters")
    _check_root(root_rank, "broadcast_parameters")
    if isinstance(params, dict):
        tensors = [tensor for _, tensor in sorted(params.items())]
    else:
        tensors = [item[1] if isinstance(item, tuple) else item for item in params]
    handles = []
    for tensor in tensors:
        _check_tensor(tensor, "broadcast_parameters")
        handles.append(broadcast_async_(tensor.data if tensor.requires_grad else tensor, root_rank))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Sets every rank's optimizer state and hyperparameters to root_rank's (its state_dict, broadcast)."""
    _require_init("broadcast_optimizer_state")
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None, root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state)
