"""The job: joining and leaving it, this rank's place in it (rank, size, and the same on its host)."""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from .. import ProcessGroupChorus


class _State:
    created_group = False
    local = None  # (local_rank, local_size)


_state = _State()


def init(backend="chorus", timeout=None):
    """Joins the job (torch.distributed's default group, made with `backend` unless one exists).

    timeout: a timedelta or seconds bounding connecting and every collective
    (torch's default when None)."""
    if dist.is_initialized():
        return
    if timeout is not None and not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    if timeout is None:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, timeout=timeout)
    _state.created_group = True
    _state.local = None


def is_initialized():
    return dist.is_initialized()


def shutdown():
    """Leaves the job: destroys the default group if init() created it."""
    if _state.created_group and dist.is_initialized():
        dist.destroy_process_group()
    _state.created_group = False
    _state.local = None


def _require_init(what):
    if not dist.is_initialized():
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
