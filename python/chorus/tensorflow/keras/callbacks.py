"""Horovod's Keras callbacks: BroadcastGlobalVariablesCallback and MetricAverageCallback."""

import keras
import numpy as np
import tensorflow as tf

from .. import _ops
from .._variables import broadcast_variables


def _optimizer_variables(model):
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return []
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Sets every rank's model and optimizer variables to root_rank's: when
    training begins, so that every rank takes its first step from the same
    weights, and again after the first batch, as Horovod does, for the
    optimizer variables Keras makes in the first step."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False
        self._local = {id(variable) for variable in (local_variables or [])}

    def _broadcast(self):
        variables = [variable for variable in self.model.variables if id(variable) not in self._local]
        broadcast_variables(variables, root_rank=self.root_rank)
        broadcast_variables(_optimizer_variables(self.model), root_rank=self.root_rank)

    def on_train_begin(self, logs=None):
        self._broadcast()

    def on_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            self._broadcast()
            self.broadcast_done = True


class MetricAverageCallback(keras.callbacks.Callback):
    """At each epoch's end, the logged metrics averaged over the ranks (in
    name order, the same on every rank), for the callbacks after it."""

    def __init__(self, device=""):
        super().__init__()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        for metric in sorted(logs):
            value = tf.constant(np.asarray(logs[metric], dtype=np.float64))
            logs[metric] = float(_ops.allreduce(value, op=_ops.Average).numpy())
