"""The job as this rank sees it: whether it joined, its place in it (rank, size, and the same on its host).

_lifecycle.py joins and leaves it (init, shutdown)."""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from .. import ProcessGroupChorus
from ._launcher import _launcher


class _State:
    created_group = False
    local = None  # (local_rank, local_size)
    rendezvous = None  # (store, rank, size) of the first init(), for the ones after a shutdown()
    timeout = timedelta(minutes=30)  # the groups': barrier() waits as long
    generation = 0  # init()s so far in this process: each later one meets under its own store prefix


_state = _State()


def is_initialized():
    return dist.is_initialized() and _launcher.running()


def _require_init(what):
    if not is_initialized():
        raise ValueError(f"chorus.torch.hvd.{what}: call hvd.init() first")


def rank():
    _require_init("rank")
    return dist.get_rank()


def size():
    _require_init("size")
    return dist.get_world_size()


def _chorus_backend():
    """The chorus backend of the default group, or None under another backend."""
    group = dist.distributed_c10d._get_default_group()  # noqa: SLF001  (no public accessor)
    if isinstance(group, ProcessGroupChorus):
        return group  # torch 1.x: the group is the backend
    get_backend = getattr(group, "_get_backend", None)  # torch 2.x: a backend per device type
    if get_backend is not None:
        try:
            backend = get_backend(torch.device("cpu"))
        except RuntimeError:
            return None
        if isinstance(backend, ProcessGroupChorus):
            return backend
    return None


def _local():
    if _state.local is None:
        backend = _chorus_backend()
        if backend is not None:
            # chorus's own host identity: the one its transports and algorithms use.
            _state.local = (backend.local_rank, backend.local_size)
        else:
            # Another backend: the ranks that share a host name.
            names = [None] * size()
            dist.all_gather_object(names, os.uname().nodename)
            mine = names[rank()]
            _state.local = (names[:rank()].count(mine), names.count(mine))
    return _state.local


def local_rank():
    """This rank's index among the job's ranks on its host."""
    _require_init("local_rank")
    return _local()[0]


def local_size():
    _require_init("local_size")
    return _local()[1]
