"""alltoall: each rank sends consecutive stretches of its tensor's rows to the set's ranks, and receives theirs.

splits[i] rows go to the set's i-th rank (without splits, the rows are
divided equally); the first sum(splits) rows are sent, as in Horovod. A
receiver does not know in advance how many rows each sender sends it, so
the issue first exchanges the split counts (an alltoall of one integer per
pair of ranks), then the rows.
"""

import torch
import torch.distributed as dist

from . import _negotiation
from ._arguments import _check_tensor
from ._handles import _submit, synchronize
from ._job import _require_init
from ._process_sets import _resolve


def _send_splits(splits, rows, world, what):
    """The rows for each rank of the set, checked against the tensor's rows (a ValueError on this rank)."""
    if splits is None:
        if rows % world != 0:
            raise ValueError(f"chorus.torch.hvd.{what}: without splits the tensor's {rows} rows are divided "
                             f"equally among the {world} ranks of the set, and {rows} is not a multiple of {world}")
        return [rows // world] * world
    if isinstance(splits, torch.Tensor):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or splits.dtype == torch.bool:
            raise ValueError(f"chorus.torch.hvd.{what}: splits must hold integers (int32, as Horovod's), not "
                             f"{splits.dtype}")
        if splits.dim() != 1:
            raise ValueError(f"chorus.torch.hvd.{what}: splits must be one-dimensional, not of shape "
                             f"{list(splits.shape)}")
        counts = splits.tolist()
    else:
        counts = list(splits)
        if any(not isinstance(count, int) or isinstance(count, bool) for count in counts):
            raise ValueError(f"chorus.torch.hvd.{what}: splits must be integers, got {splits!r}")
    if len(counts) != world:
        raise ValueError(f"chorus.torch.hvd.{what}: {len(counts)} splits, expected one for each of the {world} "
                         "ranks of the set")
    if any(count < 0 for count in counts):
        raise ValueError(f"chorus.torch.hvd.{what}: negative splits {counts}")
    if sum(counts) > rows:
        raise ValueError(f"chorus.torch.hvd.{what}: splits {counts} add up to {sum(counts)} rows, more than the "
                         f"tensor's {rows}")
    return counts


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts the exchange; synchronize() returns (the rows received, in rank order; the rows from each rank)."""
    what = "alltoall_async"
    _check_tensor(tensor, what)
    _require_init(what)
    process_set = _resolve(process_set, what)
    if tensor.dim() == 0:
        raise ValueError(f"chorus.torch.hvd.{what}: a scalar (0-dimensional tensor) has no rows to send")
    send = _send_splits(splits, tensor.shape[0], len(process_set.ranks), what)
    local = tensor.detach()[:sum(send)].contiguous()
    split_type, split_device = ((splits.dtype, splits.device) if isinstance(splits, torch.Tensor) else
                                (torch.int32, torch.device("cpu")))
    descriptor = _negotiation.describe("alltoall", tensor.dtype, tensor.shape)
    state = {}

    def issue(_descriptors):
        outgoing = torch.tensor(send, dtype=torch.int64)
        incoming = torch.empty_like(outgoing)
        dist.all_to_all_single(incoming, outgoing, group=process_set._group)
        received = incoming.tolist()
        output = torch.empty((sum(received),) + tuple(local.shape[1:]), dtype=local.dtype)
        work = dist.all_to_all_single(output, local, output_split_sizes=received, input_split_sizes=send,
                                      group=process_set._group, async_op=True)
        state.update(output=output, received=received)
        return [work], finish

    def finish():
        return state["output"], torch.tensor(state["received"], dtype=split_type, device=split_device)

    return _submit(issue, what, process_set, descriptor, name)


class _AlltoallFunction(torch.autograd.Function):
    """Differentiable, as Horovod defines it: the gradient goes back the way the rows came."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set, ctx.received, ctx.rows = process_set, received, tensor.shape[0]
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *_received_splits_grad):
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        if grad.shape[0] < ctx.rows:  # rows past sum(splits) were not sent: no gradient reaches them
            grad = torch.cat([grad, grad.new_zeros((ctx.rows - grad.shape[0],) + tuple(grad.shape[1:]))])
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """The rows the set's ranks sent this rank, in rank order, as a new tensor; with splits, also (as Horovod)
    the rows received from each rank: (output, received_splits). Differentiable."""
    return _AlltoallFunction.apply(tensor, splits, name, process_set)
