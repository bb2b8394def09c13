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
    """The tensor reduced in place: float32 for averaged 16-bit floats, else the tensor's dtype.

    Integers average as Horovod's do: summed in their dtype, then divided in
    float64 and truncated toward zero."""
    if op is Average and tensor.dtype in _HALF_TYPES:
        return torch.float32
    return tensor.dtype


_CODES = {"Average": 1, "Sum": 2, "Min": 3, "Max": 4, "Product": 5}


def _op_code(op):
    """A small integer naming op, for the descriptor the ranks compare."""
    return _CODES.get(op.name, 6 + len(op.name))


def _op_of_code(code):
    return {1: Average, 2: Sum, 3: Min, 4: Max, 5: Product}[code]


def _identity(op, dtype, numel):
    """numel elements that leave op's result alone: what a joined rank contributes (join.py)."""
    if op in (Average, Sum):
        return torch.zeros(numel, dtype=dtype)
    if op is Product:
        return torch.ones(numel, dtype=dtype)
    if dtype == torch.bool:
        return torch.full((numel,), op is Min, dtype=dtype)
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    largest = float("inf") if dtype.is_floating_point else info.max
    smallest = float("-inf") if dtype.is_floating_point else info.min
    return torch.full((numel,), largest if op is Min else smallest, dtype=dtype)


def _scale(buffer, factor, divisor=1):
    """buffer *= factor / divisor in place (Horovod's prescale, postscale and Average).

    As Horovod scales on the CPU: 16-bit floats in float32, integers in
    float64 truncated toward zero, other types in their own. A plain
    Average divides (a sum of equal values comes back exactly)."""
    total = float(factor) / divisor
    if total == 1.0:
        return

    def scaled(values):
        return values.div_(divisor) if factor == 1.0 else values.mul_(total)

    with torch.no_grad():
        if buffer.dtype in _HALF_TYPES:
            buffer.copy_(scaled(buffer.to(torch.float32)))
        elif buffer.dtype.is_floating_point or buffer.dtype.is_complex:
            scaled(buffer)
        else:
            buffer.copy_(buffer.to(torch.float64).mul_(total).trunc_())


def _average_(buffer, world):
    """Divides the sum in buffer by world, in place, as Horovod averages (integers truncate toward zero)."""
    _scale(buffer, 1.0, world)
    return buffer
