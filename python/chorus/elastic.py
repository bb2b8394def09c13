"""Elastic training on chorus's shrink: the framework-free half of
chorus.torch.hvd.elastic and chorus.tensorflow.elastic (Horovod's
hvd.elastic API).

A training function decorated with the framework's run() gets a State and
runs on every rank. When a rank dies (or freezes) the survivors' next
collective fails naming it; run() then rolls the state back to its last
commit(), shrinks the job to the survivors (chorus.Context.shrink: they
agree through the job's store on who is left and renumber themselves
0..n-1), synchronizes the state from the new rank 0 and calls the function
again, so training goes on without a restart.

What Horovod's elastic does and this does not: adding ranks (Horovod's
driver starts new workers on discovered hosts; a chorus job only
shrinks), and host-update notifications (commit() does not raise
HostsUpdatedInterrupt: no driver sends them). The store must outlive
the dead rank: run under chorus-run (its store) or with CHORUS_STORE
naming a chorus-store or Redis.
"""

import functools

from . import _chorus


class State:
    """What an elastic job keeps across failures: save() what a commit keeps,
    restore() it, sync() it from rank 0 to the others. An abstract base, as
    Horovod's State is: ObjectState here, TorchState and TensorFlowState in
    the framework modules implement those three."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions to call after each reset (the job shrank), e.g. to scale the learning rate to the new size."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Keeps the state as it is now: a failure rolls back to here."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Horovod raises HostsUpdatedInterrupt here when its driver added or removed hosts; a chorus job
        only loses ranks, which the next collective reports, so there is nothing to check."""

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError

    def reset(self):
        """Called after the job shrank, before the state is synchronized again."""


class ObjectState(State):
    """Python values kept as attributes (the keyword arguments), synchronized with bcast_object."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attributes()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self):
        self._set_attributes()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attributes()

    def _set_attributes(self):
        for name, value in self._saved_state.items():
            setattr(self, name, value)


# The errors that mean the job lost a rank (a peer's connection, a timeout
# waiting for it, the abort another rank sent on seeing it die).
JOB_FAILURES = (_chorus.IoError, _chorus.TimeoutError, _chorus.Aborted)


def run_fn(func, is_failure, reset, most_resets=None):
    """func(state, ...) run until it returns: after a failure that is_failure(error) accepts, the state is
    restored, reset() shrinks the job and the state is synchronized again. Other errors propagate; so does a
    failure after most_resets resets (None: as many as the job has ranks to lose)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        resets = 0
        while True:
            try:
                state.sync()
                return func(state, *args, **kwargs)
            except Exception as error:  # noqa: BLE001  (is_failure decides)
                if not is_failure(error) or (most_resets is not None and resets >= most_resets):
                    raise
                failure = error
            resets += 1
            state.restore()
            reset(failure)
            state.on_reset()

    return wrapper
