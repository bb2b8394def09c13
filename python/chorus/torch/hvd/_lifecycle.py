"""Joining and leaving the job: init() and shutdown(), raw and public (the timeline and the topology kept in step).

Above the job's state (_job.py) and what init() starts and shutdown() stops:
the launcher, the handles' names and the process sets."""

from datetime import timedelta

import torch.distributed as dist

from ... import _environment
from .. import launcher_store
from ._calls import public_init, public_shutdown
from ._handles import _forget_names
from ._job import _state
from ._launcher import _launcher
from ._process_sets import _close_all, _open_global, add_process_set
from ._topology import forget_topology, learn_topology


def _rendezvous(timeout):
    """(store, rank, size): chorus's launcher variables, else torch's env:// (torchrun, MASTER_ADDR)."""
    if _state.rendezvous is None:
        if _environment.under_chorus_launcher():
            _state.rendezvous = launcher_store(timeout)
        else:
            _state.rendezvous = next(dist.rendezvous("env://", timeout=timeout))
    return _state.rendezvous


def _init(comm=None, process_sets=None, backend="chorus", timeout=None):
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


def _shutdown():
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


def _init_and_learn(*args, **kwargs):
    _init(*args, **kwargs)
    learn_topology()


def _shutdown_and_forget(*args, **kwargs):
    forget_topology()
    return _shutdown(*args, **kwargs)


init = public_init(_init_and_learn)
init.__doc__ = _init.__doc__
shutdown = public_shutdown(_shutdown_and_forget)
