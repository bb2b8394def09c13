"""The reduction operations (hvd.Average, Sum, Adasum, Min, Max, Product) and the dtype each reduces in."""

import torch
import torch.distributed as dist


class _Op:
    def __init__(self, name, torch_op):
        self.name = name
        self.torch_op = torch_op

    def __repr__(self):
        return f"hvd.{self.name}"


Average = _Op("Average", dist.ReduceOp.SUM)  # summed (in float32 for 16-bit floats), then divided
Sum = _Op("Sum", dist.ReduceOp.SUM)
Min = _Op("Min", dist.ReduceOp.MIN)
Max = _Op("Max", dist.ReduceOp.MAX)
Product = _Op("Product", dist.ReduceOp.PRODUCT)
# Not a torch reduction: every rank gathers the others' tensors and combines them (_adasum.py).
Adasum = _Op("Adasum", None)

_HALF_TYPES = (torch.float16, torch.bfloat16)


def _resolve_op(average, op, what):
    if average is not None and op is not None:
        raise ValueError(f"chorus.torch.hvd.{what}: give average= or op=, not both")
    if op is None:
        return Sum if average is False else Average
    if not isinstance(op, _Op):
        raise ValueError(f"chorus.torch.hvd.{what}: op must be hvd.Average, Sum, Adasum, Min, Max or Product, "
                         f"not {op!r}")
    return op


def _reduction_buffer(tensor, op):
    """The tensor reduced in place: float32 for averaged 16-bit floats, else the tensor's dtype."""
    if op is Average and tensor.dtype in _HALF_TYPES:
        return torch.float32
    return tensor.dtype


def _average_(buffer, world):
    """Divides the sum in buffer by world, in place, as Horovod averages.

    Integers: Horovod scales the integer sum by the double 1/size and converts
    back, truncating toward zero (-3 averaged over 2 ranks is -1, not -2)."""
    if buffer.dtype.is_floating_point or buffer.dtype.is_complex:
        return buffer.div_(world)
    return buffer.copy_((buffer.to(torch.float64) * (1.0 / world)).trunc())
