"""Horovod's view of the job across hosts: cross_rank, cross_size, is_homogeneous.

Horovod's cross communicator holds the ranks that share this rank's
local_rank, one per host, in rank order: cross_size is how many hosts have a
rank with this local_rank, cross_rank this host's place among them. Every
rank learns every rank's (local_rank, local_size) once, in hvd.init() (a
collective every rank makes), so that these calls never communicate."""

import torch

from ._allgather import allgather
from ._job import _require_init, local_rank, local_size, rank


class _Topology:
    cross = None  # (cross_rank, cross_size, is_homogeneous)


_topology = _Topology()


def learn_topology():
    """Gathers every rank's (local_rank, local_size); called by hvd.init() on every rank."""
    mine = local_rank()
    every = allgather(torch.tensor([[mine, local_size()]], dtype=torch.int64)).tolist()
    same_local = [r for r, (local, _) in enumerate(every) if local == mine]
    homogeneous = len({size for _, size in every}) == 1
    _topology.cross = (same_local.index(rank()), len(same_local), homogeneous)


def forget_topology():
    _topology.cross = None


def _cross(what):
    _require_init(what)
    if _topology.cross is None:
        raise ValueError(f"chorus.torch.hvd.{what}: known after hvd.init() (the job was joined some other way)")
    return _topology.cross


def cross_rank():
    """This host's index among the hosts that have a rank with this local_rank."""
    return _cross("cross_rank")[0]


def cross_size():
    """How many hosts have a rank with this local_rank."""
    return _cross("cross_size")[1]


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    return _cross("is_homogeneous")[2]
