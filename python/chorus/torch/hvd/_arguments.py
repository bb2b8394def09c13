"""Checks of the arguments the collectives share, with the errors they raise."""

import torch

from ._job import size


def _check_tensor(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"chorus.torch.hvd.{what}: expected a torch.Tensor, got {type(tensor).__name__}")


def _check_root(root_rank, what):
    world = size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < world:
        raise ValueError(f"chorus.torch.hvd.{what}: root_rank {root_rank!r} is not a rank of this {world}-rank job")

