"""hvd.elastic for chorus.tensorflow (Horovod's horovod.tensorflow.elastic):
TensorFlowState, TensorFlowKerasState and run, on chorus's shrink
(chorus/elastic.py says how a job goes on after losing a rank).

After a shrink the ops keep their context handle: the op library rebinds
it to the survivors' Context, so functions TensorFlow traced before the
failure (a Keras train step) run on the new one."""

import numpy as np
import tensorflow as tf

from .. import elastic as _elastic
from . import _job
from ._objects import broadcast_object, broadcast_object_fn
from ._variables import broadcast_variables


def _is_failure(error):
    """True for the errors that mean the job lost a rank: chorus's own, and an op's Unavailable,
    DeadlineExceeded or Aborted (inside a tf.function TensorFlow reports an op's Unavailable as an
    InternalError that says so)."""
    if isinstance(error, _elastic.JOB_FAILURES):
        return True
    message = getattr(error, "message", "") or ""
    if "chorus" not in message:
        return False
    failures = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError)
    return isinstance(error, failures) or (isinstance(error, tf.errors.InternalError) and
                                           "originally returned UnavailableError" in message)


def _reset(failure):
    _job.shrink()


def run(func):
    """Decorates func(state, ...): run on every rank, rolled back to state's last commit and run again among
    the survivors whenever a rank dies."""
    return _elastic.run_fn(func, _is_failure, _reset)


def _values(variables, session):
    if tf.executing_eagerly():
        return [np.array(v.numpy()) for v in variables]
    return (session or tf.compat.v1.get_default_session()).run(list(variables))


def _assign(variables, values, session):
    if tf.executing_eagerly():
        for variable, value in zip(variables, values):
            variable.assign(value)
    else:
        chosen = session or tf.compat.v1.get_default_session()
        for variable, value in zip(variables, values):
            variable.load(value, chosen)


class TensorFlowState(_elastic.ObjectState):
    """Variables (default: every global variable) and the keyword arguments as attributes."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = list(variables) if variables is not None else tf.compat.v1.global_variables()
        self.session = session or (None if tf.executing_eagerly() else tf.compat.v1.get_default_session())
        self._broadcast = None if tf.executing_eagerly() else broadcast_variables(self.variables, root_rank=0)
        self._saved = _values(self.variables, self.session)
        broadcaster = broadcast_object if tf.executing_eagerly() else broadcast_object_fn(session=self.session)
        super().__init__(bcast_object=broadcaster, get_rank=_job.rank, **kwargs)

    def save(self):
        self._saved = _values(self.variables, self.session)
        super().save()

    def restore(self):
        _assign(self.variables, self._saved, self.session)
        super().restore()

    def sync(self):
        if self._broadcast is None:
            broadcast_variables(self.variables, root_rank=0)
        else:
            self.session.run(self._broadcast)
        self._saved = _values(self.variables, self.session)
        super().sync()


def _optimizer_variables(optimizer):
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


class TensorFlowKerasState(_elastic.ObjectState):
    """A Keras model and its optimizer (its own, or the model's), and the keyword arguments as attributes."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not getattr(model, "built", True):
            raise ValueError("chorus.tensorflow.elastic: the model must be built first (model.build(input_shape)), "
                             "as in Horovod")
        self.model = model
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        self._save_model()
        super().__init__(bcast_object=broadcast_object, get_rank=_job.rank, **kwargs)

    def _variables(self):
        return list(self.model.variables) + _optimizer_variables(self.optimizer)

    def _save_model(self):
        self._saved = [np.array(v.numpy()) for v in self._variables()]

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        for variable, value in zip(self._variables(), self._saved):
            variable.assign(value)
        super().restore()

    def sync(self):
        broadcast_variables(self.model.variables, root_rank=0)
        broadcast_variables(_optimizer_variables(self.optimizer), root_rank=0)
        self._save_model()
        super().sync()


__all__ = ["TensorFlowKerasState", "TensorFlowState", "run"]
