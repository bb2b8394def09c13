"""hvd.Adasum: Horovod's adaptive summation of the ranks' tensors (arXiv:2006.02924).

Two vectors combine as a·(1 - a·b / 2|a|²) + b·(1 - a·b / 2|b|²): parallel
ones average, orthogonal ones add. Ranks combine in pairs, then pairs of
pairs (Horovod's recursive halving), so the result is defined for a
power-of-two number of ranks only. Here every rank gathers every tensor and
combines the same tree in the same order, so all ranks get the same bits;
dot products and norms are accumulated in float64, as Horovod does."""

import torch

from ._gather import allgather_async
from ._composite import _CompositeHandle
from ._job import size

_ADASUM_TYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# Horovod leaves a vector's coefficient at 1 when its squared norm is below sqrt(DBL_MIN).
_TINY_NORM = torch.finfo(torch.float64).tiny ** 0.5


def _check_adasum(tensor, what):
    world = size()
    if world & (world - 1):
        raise ValueError(f"chorus.torch.hvd.{what}: Adasum combines ranks in pairs, pairs of pairs, ... and needs "
                         f"a power-of-two number of ranks; this job has {world}")
    if tensor.dtype not in _ADASUM_TYPES:
        raise ValueError(f"chorus.torch.hvd.{what}: Adasum is defined for floating-point tensors, not {tensor.dtype}")


def _combine(a, b):
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    dot = float(torch.dot(a64, b64))
    a_norm, b_norm = float(torch.dot(a64, a64)), float(torch.dot(b64, b64))
    a_coefficient = 1.0 - dot / a_norm * 0.5 if a_norm >= _TINY_NORM else 1.0
    b_coefficient = 1.0 - dot / b_norm * 0.5 if b_norm >= _TINY_NORM else 1.0
    return a * a_coefficient + b * b_coefficient


def _adasum_of(rows):
    """The tree combination of the rows (one per rank, rank order): pairs first, then pairs of pairs."""
    level = list(rows)
    while len(level) > 1:
        level = [_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def adasum_into_async(tensor, output, what):
    """Starts the Adasum of tensor over the ranks; synchronize writes it into output and returns output."""
    _check_adasum(tensor, what)
    gathered = allgather_async(tensor.detach().reshape(1, -1))

    def finish(results):
        combined = _adasum_of(results[0])
        with torch.no_grad():
            output.copy_(combined.view_as(output))
        return output

    return _CompositeHandle([gathered], finish)
