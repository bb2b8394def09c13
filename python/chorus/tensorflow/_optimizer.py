"""DistributedOptimizer: Horovod's hvd.DistributedOptimizer. A TensorFlow 1
optimizer (tf.compat.v1.train.Optimizer) is wrapped here: compute_gradients
returns the gradients reduced over the ranks (aggregated locally over
backward_passes_per_step steps first, if asked), apply_gradients applies
them (and on the steps of an aggregation cycle that do not update, only
advances global_step). A Keras optimizer goes to keras.DistributedOptimizer."""

import tensorflow as tf

from . import _tape
from ._aggregation import LocalAggregation
from ._compression import Compression
from ._keras_optimizer import DistributedOptimizer as keras_optimizer
from ._ops import Adasum, Average, check_process_set, global_process_set


class _LegacyDistributedOptimizer(tf.compat.v1.train.Optimizer):
    def __init__(self, optimizer, name, use_locking, reduction, backward_passes_per_step,
                 average_aggregated_gradients, scale_local_gradients):
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}", use_locking=use_locking)
        self._optimizer = optimizer
        self._reduction = reduction
        self._local_vars = set()
        self._scale_local_gradients = scale_local_gradients
        self._agg_helper = None
        if backward_passes_per_step > 1:
            if tf.executing_eagerly():
                raise ValueError("chorus.tensorflow.DistributedOptimizer: backward_passes_per_step > 1 with a "
                                 "TensorFlow 1 optimizer needs a graph (as in Horovod); use a Keras optimizer eagerly")
            self._agg_helper = LocalAggregation(backward_passes_per_step, average_aggregated_gradients,
                                                reduction["sparse_as_dense"], self._reduce)

    def register_local_var(self, var):
        """var's gradient stays this rank's own (not reduced; divided by the ranks unless scale_local_gradients
        is False)."""
        self._local_vars.add(_tape.variable_key(var))

    def _reduce(self, grads, variables):
        is_local = [_tape.variable_key(v) in self._local_vars for v in variables]
        shared = [i for i, flag in enumerate(is_local) if not flag]
        results = list(grads)
        for i, r in zip(shared, _tape.reduce_gradients([grads[i] for i in shared], [variables[i] for i in shared],
                                                       **self._reduction)):
            results[i] = r
        if self._scale_local_gradients:
            results = [_tape.divided_by_ranks(g) if flag and g is not None else g for g, flag in zip(results, is_local)]
        return results

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's (gradient, variable) pairs, the gradients reduced over the ranks."""
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        if not pairs:
            return pairs
        grads, variables = (list(x) for x in zip(*pairs))
        reduced = self._agg_helper.accumulate(grads, variables) if self._agg_helper else self._reduce(grads, variables)
        return list(zip(reduced, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        if self._agg_helper is None:
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)

        def advance():
            return tf.no_op() if global_step is None else tf.compat.v1.assign_add(global_step, 1)

        return self._agg_helper.apply([g for g, _ in grads_and_vars],
                                      lambda: self._optimizer.apply_gradients(grads_and_vars, global_step, name),
                                      advance)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False, backward_passes_per_step=1,
                         op=Average, gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set, scale_local_gradients=True):
    """An optimizer like `optimizer` whose gradients are reduced over the ranks (Horovod's)."""
    check_process_set(process_set, "DistributedOptimizer")
    _tape.predivide_scales(op, gradient_predivide_factor)
    if op is Adasum and average_aggregated_gradients:
        raise ValueError("chorus.tensorflow.DistributedOptimizer: Adasum does not take average_aggregated_gradients "
                         "(as in Horovod)")
    if num_groups != 0 and groups is None:
        groups = num_groups
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        reduction = {"compression": compression, "op": op, "gradient_predivide_factor": gradient_predivide_factor,
                     "groups": groups, "sparse_as_dense": sparse_as_dense}
        return _LegacyDistributedOptimizer(optimizer, name, use_locking, reduction, backward_passes_per_step,
                                           average_aggregated_gradients, scale_local_gradients)
    return keras_optimizer(optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
                           gradient_predivide_factor=gradient_predivide_factor, op=op,
                           backward_passes_per_step=backward_passes_per_step,
                           average_aggregated_gradients=average_aggregated_gradients, groups=groups,
                           process_set=process_set, scale_local_gradients=scale_local_gradients)
