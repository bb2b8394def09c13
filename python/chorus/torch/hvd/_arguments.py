"""Checks of the arguments the collectives share, with the errors they raise."""

import torch

from ._job import size


def _check_tensor(tensor, what, sparse=False):
    """tensor is a torch.Tensor, dense unless `sparse` (the sparse call's own check follows)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"chorus.torch.hvd.{what}: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.is_sparse and not sparse:
        # As Horovod: a sparse tensor goes through sparse_allreduce_async (values and indices allgathered,
        # never scaled); the dense collectives do not take one.
        raise ValueError(f"chorus.torch.hvd.{what}: a sparse tensor: use hvd.sparse_allreduce_async (or "
                         f"tensor.to_dense())")


def _check_root(root_rank, what):
    world = size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < world:
        raise ValueError(f"chorus.torch.hvd.{what}: root_rank {root_rank!r} is not a rank of this {world}-rank job")

