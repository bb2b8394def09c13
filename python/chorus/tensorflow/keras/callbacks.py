"""Horovod's Keras callbacks: BroadcastGlobalVariablesCallback,
MetricAverageCallback, LearningRateScheduleCallback and
LearningRateWarmupCallback, for Keras 3."""

import keras
import numpy as np
import tensorflow as tf

from .. import _ops
from .._reductions import allreduce
from .._tape import variable_key
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
        self._local = {variable_key(variable) for variable in (local_variables or [])}

    def register_local_var(self, var):
        """var keeps this rank's value: it is not broadcast (Horovod's)."""
        self._local.add(variable_key(var))

    def _broadcast(self):
        variables = [variable for variable in self.model.variables if variable_key(variable) not in self._local]
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
            logs[metric] = float(allreduce(value, op=_ops.Average).numpy())


def _get(value):
    return float(value.numpy()) if hasattr(value, "numpy") else float(value)


def _set(optimizer, name, value):
    current = getattr(optimizer, name)
    if hasattr(current, "assign"):
        current.assign(value)
    else:
        setattr(optimizer, name, value)


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the optimizer's learning rate to initial_lr * multiplier(epoch) from start_epoch until end_epoch:
    at each epoch's start (staircase), or at each batch with the epoch's fraction (staircase=False).
    multiplier may be a number (raised to the epochs since start_epoch) or a function of the epoch. With
    momentum_correction, an optimizer whose momentum is a variable has it scaled by new_lr / old_lr for the
    batch the rate changes in (a momentum that is a Python number is built into Keras 3's traced update
    and is left alone)."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        if initial_lr is None:
            raise ValueError("chorus.tensorflow.keras.LearningRateScheduleCallback: initial_lr is required")
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier ** (epoch - start_epoch))
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self.restore_momentum = None

    def _steps_per_epoch(self):
        if self.params.get("steps"):
            return self.params["steps"]
        raise ValueError(f"chorus.tensorflow.keras.{type(self).__name__}: pass steps_per_epoch (fit() did not say "
                         "how many steps an epoch has)")

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def _adjust(self, epoch):
        optimizer = self.model.optimizer
        old_lr = _get(optimizer.learning_rate)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set(optimizer, "learning_rate", new_lr)
        momentum = getattr(optimizer, "momentum", None)
        if self.momentum_correction and hasattr(momentum, "assign") and old_lr:
            self.restore_momentum = _get(momentum)
            momentum.assign(self.restore_momentum * new_lr / old_lr)

    def on_batch_begin(self, batch, logs=None):
        if self.current_epoch < self.start_epoch or (self.end_epoch is not None and
                                                     self.current_epoch >= self.end_epoch):
            return
        if self.staircase and batch == 0:
            self._adjust(self.current_epoch)
        elif not self.staircase:
            self._adjust(self.current_epoch + float(batch) / self.steps_per_epoch)

    def on_batch_end(self, batch, logs=None):
        if self.restore_momentum is not None:
            self.model.optimizer.momentum.assign(self.restore_momentum)
            self.restore_momentum = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from initial_lr / size to initial_lr over warmup_epochs (Goyal et al.,
    as Horovod's)."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch
            ranks = _ops.global_process_set.size()
            return 1.0 / ranks * (epoch * (ranks - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and _ops.global_process_set.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{_get(self.model.optimizer.learning_rate):g}.")
