"""Python objects, a model's parameters and an optimizer's state, set to the root rank's on every rank."""

import inspect
import io
import pickle  # noqa: S403  (objects come from the job's own root rank)

import torch

from ._allgather import allgather
from ._arguments import _check_root, _check_tensor
from ._broadcast import broadcast_, broadcast_async_
from ._handles import synchronize
from ._job import _require_init, rank


def _to_bytes(obj):
    """obj pickled with torch.save (so tensors travel too), as a uint8 tensor."""
    stream = io.BytesIO()
    torch.save(obj, stream, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(stream.getvalue()), dtype=torch.uint8)


def _from_bytes(payload):
    # Any object, as Horovod's object calls take: torch 2.6 and later load
    # only tensors and plain containers unless told otherwise. The bytes
    # come from the job's own ranks, whose connections proved the job's
    # secret (torch's own broadcast_object_list unpickles the same way).
    if "weights_only" in inspect.signature(torch.load).parameters:
        return torch.load(io.BytesIO(payload.numpy().tobytes()), weights_only=False)
    return torch.load(io.BytesIO(payload.numpy().tobytes()))


def broadcast_object(obj, root_rank=0, name=None, process_set=None):  # noqa: ARG001  (name: Horovod's timeline)
    """root_rank's obj on every rank of process_set (root_rank: a global rank)."""
    _require_init("broadcast_object")
    if rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    broadcast_(length, root_rank, process_set=process_set)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_(payload, root_rank, process_set=process_set)
    if rank() == root_rank:
        return obj
    return _from_bytes(payload)


def allgather_object(obj, name=None, process_set=None):  # noqa: ARG001
    """Every rank's obj, in rank order (a list as long as process_set)."""
    _require_init("allgather_object")
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64), process_set=process_set).tolist()
    gathered = allgather(payload, process_set=process_set)
    objects, start = [], 0
    for length in lengths:
        objects.append(_from_bytes(gathered[start:start + length]))
        start += length
    return objects


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


def _initialize_state(optimizer, model):
    """Gives a new optimizer its state, as Horovod does: a step on zero gradients (sparse ones for
    SparseAdam and for a model's sparse embeddings), so that the root's state has somewhere to go."""
    sparse = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.requires_grad:
                param.grad = torch.zeros_like(param)
                if isinstance(optimizer, torch.optim.SparseAdam) or id(param) in sparse:
                    param.grad = param.grad.to_sparse()
    # A DistributedOptimizer's own step() would reduce gradients, which only works when every rank steps.
    if type(optimizer).__module__ == __package__:
        super(type(optimizer), optimizer).step()
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank=0, model=None):
    """Sets every rank's optimizer state and hyperparameters to root_rank's (its state_dict, broadcast).

    model: optional, to find sparse embeddings (as in Horovod)."""
    _require_init("broadcast_optimizer_state")
    # (L-BFGS cannot step without a closure; its state, once it has one, is broadcast like any other.)
    if not optimizer.state_dict()["state"] and not isinstance(optimizer, torch.optim.LBFGS):
        _initialize_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None, root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state)
