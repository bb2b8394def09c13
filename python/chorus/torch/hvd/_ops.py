"""The reduction operations (hvd.Average, Sum, Min, Max, Product) and the dtype each reduces in."""

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

_HALF_TYPES = (torch.float16, torch.bfloat16)


def _resolve_op(average, op, what):
    if average is not None and op is not None:
        raise ValueError(f"chorus.torch.hvd.{what}: give average= or op=, not both")
    if op is None:
        return Sum if average is False else Average
    if not isinstance(op, _Op):
        raise ValueError(f"chorus.torch.hvd.{what}: op must be hvd.Average, Sum, Min, Max or Product, not {op!r}")
    return op


def _reduction_buffer(tensor, op):
    """The tensor reduced in place: float32 for averaged 16-bit floats, else the tensor's dtype."""
    if op is Average and tensor.dtype in _HALF_TYPES:
        return torch.float32
    if op is Average and not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"chorus.torch.hvd: Average of {tensor.dtype} is not defined (use hvd.Sum and divide)")
    return tensor.dtype
