"""Process sets: collectives among some of the job's ranks (hvd.add_process_set, process_set=).

A process set is a torch.distributed group of its ranks. Under the chorus
backend each group is a chorus Context of its own, connected through the
job's store when the set is added: torch's new_group hands a backend only a
store, rank and size, so the set cannot be carved out of the world's
Context with Context::split from here (the C++ and Python cores do split).
As in Horovod, every rank of the job adds and removes every set, in the
same order (torch's groups need every rank to take part in making one);
ranks outside a set hold it too, and may not call collectives on it.
"""

import torch.distributed as dist

from ._job import _require_init, rank, size
from ._launcher import _launcher


class ProcessSet:
    """Ranks that run collectives together: hvd.ProcessSet([0, 2]), then hvd.add_process_set(it) or init(process_sets=)."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("chorus.torch.hvd.ProcessSet: expected a list of ranks (chorus has no mpi4py "
                             f"communicators), got {type(ranks_or_comm).__name__}") from None
        if any(not isinstance(member, int) or isinstance(member, bool) for member in ranks):
            raise ValueError(f"chorus.torch.hvd.ProcessSet: ranks must be integers, got {ranks_or_comm!r}")
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"chorus.torch.hvd.ProcessSet: a rank appears twice in {ranks_or_comm!r}")
        self.ranks = ranks
        self._group = None

    def size(self):
        """The number of ranks in the set (None until the set is added)."""
        return None if self.process_set_id is None else len(self.ranks)

    def rank(self):
        """This rank's index in the set (None until the set is added, or when this rank is outside it)."""
        if self.process_set_id is None or not self.included():
            return None
        return self.ranks.index(rank())

    def included(self):
        """Whether this rank belongs to the set (None before hvd.init() for the global set)."""
        if self.ranks is None:
            return None
        return rank() in self.ranks

    def _invalidate(self):
        self.process_set_id = None
        self._group = None

    def __str__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


class _Sets:
    by_id = {}  # process_set_id -> ProcessSet, the global set excluded
    next_id = 1


_sets = _Sets()


def _open_global(world_group):
    """At init(): the global set is every rank of the job, on the group init() made."""
    global_process_set.ranks = list(range(size()))
    global_process_set.process_set_id = 0
    global_process_set._group = world_group
    _sets.by_id = {}
    _sets.next_id = 1


def _close_all():
    """At shutdown(): every added set is invalid; their groups, for the caller to destroy."""
    groups = [process_set._group for process_set in _sets.by_id.values()]
    for process_set in list(_sets.by_id.values()):
        process_set._invalidate()
    _sets.by_id = {}
    global_process_set._group = None
    return groups


def add_process_set(process_set):
    """Adds a set (a ProcessSet or a list of ranks) on every rank and returns it, ready for process_set=."""
    _require_init("add_process_set")
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    world = size()
    if not process_set.ranks or process_set.ranks[0] < 0 or process_set.ranks[-1] >= world:
        raise ValueError(f"chorus.torch.hvd.add_process_set: ranks {process_set.ranks} are not a non-empty set of "
                         f"ranks of this {world}-rank job")
    if process_set.ranks == global_process_set.ranks or any(
            existing.ranks == process_set.ranks for existing in _sets.by_id.values()):
        raise ValueError(f"chorus.torch.hvd.add_process_set: a process set with ranks {process_set.ranks} exists "
                         "already (Horovod allows one set per list of ranks)")
    if process_set.process_set_id is not None:
        raise ValueError(f"chorus.torch.hvd.add_process_set: {process_set} was added already")
    # In the launcher's order: a set added between collectives is made after
    # the earlier ones were issued, on every rank alike.
    process_set._group = _launcher.run_in_order(lambda: dist.new_group(process_set.ranks))
    process_set.process_set_id = _sets.next_id
    _sets.next_id += 1
    _sets.by_id[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes an added set on every rank; True if it was removed (False for the global set or one not added)."""
    _require_init("remove_process_set")
    if not isinstance(process_set, ProcessSet) or process_set.process_set_id in (None, 0):
        return False
    if _sets.by_id.get(process_set.process_set_id) is not process_set:
        return False
    group = process_set._group
    del _sets.by_id[process_set.process_set_id]
    process_set._invalidate()
    if group is not None and group != dist.GroupMember.NON_GROUP_MEMBER:
        _launcher.run_in_order(lambda: dist.destroy_process_group(group))
    return True


def _resolve(process_set, what, member=True):
    """The set a call runs on (the global one for None), checked: added, and (member) holding this rank."""
    if process_set is None:
        process_set = global_process_set
    if not isinstance(process_set, ProcessSet):
        raise ValueError(f"chorus.torch.hvd.{what}: process_set must be an hvd.ProcessSet, not "
                         f"{type(process_set).__name__}")
    if process_set.process_set_id is None or (process_set is not global_process_set and
                                               _sets.by_id.get(process_set.process_set_id) is not process_set):
        raise ValueError(f"chorus.torch.hvd.{what}: {process_set} was not added (hvd.add_process_set) or was "
                         "removed")
    if member and not process_set.included():
        raise ValueError(f"chorus.torch.hvd.{what}: rank {rank()} is not in {process_set}: only its ranks may "
                         "call collectives on it")
    return process_set


def _group_rank(process_set, global_rank, what, argument="root_rank"):
    """A global rank's index in the set (roots are global ranks in Horovod's API), checked."""
    if not isinstance(global_rank, int) or isinstance(global_rank, bool) or global_rank not in process_set.ranks:
        raise ValueError(f"chorus.torch.hvd.{what}: {argument} {global_rank!r} is not a rank of {process_set} "
                         f"(ranks {process_set.ranks})")
    return process_set.ranks.index(global_rank)
