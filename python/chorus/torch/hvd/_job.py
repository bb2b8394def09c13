"""The job: joining and leaving it, this rank's place in it (rank, size, and the same on its host)."""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from ... import _environment
from .. import ProcessGroupChorus, launcher_store


class _State:
    created_group = False
    local = None  # (local_rank, local_size)
    rendezvous = None  # (store, rank, size) of the first init(), for the ones after a shutdown()
    timeout = timedelta(minutes=30)  # the groups': barrier() waits as long
    generation = 0  # init()s so far in this process: each later one meets under its own store prefix


_state = _State()


def _rendezvous(timeout):
    """(store, rank, size): chorus's launcher variables, else torch's env:// (torchrun, MASTER_ADDR)."""
    if _state.rendezvous is None:
        if _environment.under_chorus_launcher():
            _state.rendezvous = launcher_store(timeout)
        else:
            _state.rendezvous = next(dist.rendezvous("env://", timeout=timeout))
    return _state.rendezvous


def init(comm=None, process_sets=None, backend="chorus", timeout=None):
    """Joins the job: torch.distributed's default group, made with `backend` unless one exists.

    comm: Horovod's MPI communicator or list of ranks; chorus takes the whole
    job only (None). A string is taken as the backend (chorus's earlier
    signature, init("gloo")). process_sets: hvd.ProcessSet objects (or lists
    of ranks) to add at once. timeout: a timedelta or seconds bounding
    connecting and every collective (torch's default when None).

    init() after shutdown() joins the job again, under a fresh store prefix
    (every rank must do the same number of init()s)."""
    if isinstance(comm, str):
        backend, comm = comm, None
    if comm is not None:
        raise ValueError("chorus.torch.hvd.init: comm= (an MPI communicator or a list of ranks) is not supported: "
                         "chorus runs every hvd job on all of its ranks; use hvd.add_process_set(ranks) for subsets")
    if timeout is not None and not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    if not dist.is_initialized():
        group_timeout = timeout if timeout is not None else timedelta(minutes=30)
        _state.timeout = group_timeout
        store, job_rank, job_size = _rendezvous(group_timeout)
        _state.generation += 1
        store = dist.PrefixStore(f"chorus.hvd/{_state.generation}/", store)
        dist.init_process_group(backend, store=store, rank=job_rank, world_size=job_size, timeout=group_timeout)
        _state.created_group = True
    elif _launcher.running():
        return  # initialized already: Horovod's init() is idempotent
    _state.local = None
    _launcher.start()
    _open_global(None)
    for process_set in process_sets or ():
        add_process_set(process_set)


def is_initialized():
    return dist.is_initialized() and _launcher.running()


def shutdown():
    """Leaves the job: issues what is queued, removes the process sets, destroys the default group if init() made it."""
    _launcher.stop()
    _forget_names()
    if dist.is_initialized():
        for group in _close_all():
            if group is not None and group != dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(group)
        if _state.created_group:
            dist.destroy_process_group()
    _state.created_group = False
    _state.local = None


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


# Below the functions above: these modules use _require_init, rank and size.
from ._handles import _forget_names  # noqa: E402
from ._launcher import _launcher  # noqa: E402
from ._process_sets import _close_all, _open_global, add_process_set  # noqa: E402
