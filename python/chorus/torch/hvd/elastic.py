"""hvd.elastic for chorus.torch.hvd (Horovod's horovod.torch.elastic):
TorchState, ElasticSampler and run, on chorus's shrink (chorus/elastic.py
says how a job goes on after losing a rank).

hvd's collectives run on torch.distributed's default group, which torch
cannot shrink in place. So the first run() connects a small chorus Context
of its own through the launcher's store (chorus-run's), which only keeps
the membership: after a failure the survivors shrink it, which tells each
its new rank and the new size, then hvd re-initializes on them (a fresh
default group, under a store prefix of its own) and the state is
synchronized from the new rank 0. Works with any torch.distributed
backend; needs chorus-run's store (CHORUS_STORE).
"""

import copy
import math
import random

import torch

from ... import InvalidArgument, MismatchError, _environment, connect_to_store
from ... import elastic as _elastic
from . import _job
from ._lifecycle import init, shutdown  # the public forms: timeline and topology kept in step
from ._objects import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class _Membership:
    context = None


def _membership():
    """The Context that keeps who is in the job (made by the first run())."""
    if _Membership.context is None:
        store, job = _environment.launcher_store()
        if not store:
            raise ValueError("chorus.torch.hvd.elastic.run: elastic jobs run under chorus-run (or with CHORUS_STORE "
                             "naming a chorus-store or Redis), whose store outlives a failed rank")
        timeout = _job._state.timeout.total_seconds()  # noqa: SLF001
        _Membership.context = connect_to_store(store, _job.rank(), _job.size(), f"{job}.hvd-elastic",
                                               timeout=timeout)
    return _Membership.context


def _is_failure(error):
    """A lost rank: chorus's I/O, timeout and abort errors (hvd raises them as HorovodInternalError too), and
    torch.distributed's own errors of a failed collective under another backend. Not a mismatch or a bad
    argument: those are the program's."""
    if isinstance(error, (MismatchError, InvalidArgument)):
        return False
    if isinstance(error, _elastic.JOB_FAILURES):
        return True
    distributed = getattr(torch.distributed, "DistBackendError", None)
    return distributed is not None and isinstance(error, distributed)


def _reset(failure):
    survivors = _membership().shrink()
    _Membership.context = survivors
    store, _, _ = _job._state.rendezvous  # noqa: SLF001  (the launcher's store, which outlived the failure)
    shutdown()
    _job._state.rendezvous = (store, survivors.rank, survivors.size)  # noqa: SLF001
    init(timeout=_job._state.timeout)  # noqa: SLF001


def run(func):
    """Decorates func(state, ...): run on every rank, rolled back to state's last commit and run again among
    the survivors whenever a rank dies."""
    def wrapper(state, *args, **kwargs):
        _membership()
        return _elastic.run_fn(func, _is_failure, _reset)(state, *args, **kwargs)
    return wrapper


class _Handler:
    """Keeps one object's state (a model, an optimizer or an ElasticSampler: its state_dict) and synchronizes
    it from rank 0 with `sync(value)`."""

    def __init__(self, value, sync):
        self.value = value
        self._sync = sync
        self.save()

    def set_value(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def sync(self):
        self._sync(self.value)


def _sync_sampler(sampler):
    sampler.load_state_dict(broadcast_object(sampler.state_dict()))


def _handler_of(value):
    if isinstance(value, torch.nn.Module):
        return _Handler(value, lambda model: broadcast_parameters(model.state_dict(), root_rank=0))
    if isinstance(value, torch.optim.Optimizer):
        return _Handler(value, lambda optimizer: broadcast_optimizer_state(optimizer, root_rank=0))
    if isinstance(value, ElasticSampler):
        return _Handler(value, _sync_sampler)
    return None


class TorchState(_elastic.ObjectState):
    """A model, an optimizer and other keyword arguments: modules, optimizers and ElasticSamplers by their
    state_dict, the rest as Python objects, all exposed as attributes (Horovod's TorchState)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_of(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=_job.rank, **plain)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)


class ElasticSampler(torch.utils.data.Sampler):
    """Partitions a dataset among the ranks, and the rest of an epoch among the survivors after a reset
    (Horovod's ElasticSampler): record_batch after each batch, set_epoch at each epoch's end."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """A batch of batch_size samples done on every rank."""
        self.processed_num += batch_size * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_num = state_dict["processed_num"]
        self.reset()

    def reset(self):
        self.num_replicas = _job.size()
        self.rank = _job.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        # Padded with the first ones to an even split, as DistributedSampler does.
        padded = self.remaining_indices + self.remaining_indices[:self.total_size - len(self.remaining_indices)]
        self.indices = padded[self.rank:self.total_size:self.num_replicas]
        return iter(self.indices)

    def __len__(self):
        return self.num_samples


ObjectState = _elastic.ObjectState

__all__ = ["ElasticSampler", "ObjectState", "TorchState", "run"]
