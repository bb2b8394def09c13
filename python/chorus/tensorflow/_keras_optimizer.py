"""DistributedOptimizer and PartialDistributedOptimizer for Keras 3 (chorus.tensorflow.keras's; also
what chorus.tensorflow.DistributedOptimizer makes of a Keras optimizer): the
given optimizer, whose updates use gradients reduced over the ranks
(Average by default).

Keras 3's optimizers funnel every update through apply(grads, variables)
(apply_gradients and model.fit's train step both call it), so the wrapper
is a subclass of the optimizer's own class, made from its config, that
overrides apply. Horovod's own hooks are there too: _compute_gradients
(which returns reduced gradients, as Horovod's does; apply then does not
reduce them again), register_local_var, and _agg_helper with its counter
for local gradient aggregation (backward_passes_per_step > 1,
_aggregation.py)."""

import tensorflow as tf

from . import _tape
from ._adasum import check_adasum
from ._aggregation import LocalAggregation
from ._compression import Compression
from ._ops import Adasum, Average, Sum, check_process_set, global_process_set


class _Distributed:
    """What the wrapped optimizer's class gains. The reduction settings are
    class attributes (set by DistributedOptimizer), so that a copy made
    with from_config reduces the same way; per-instance state is made on
    first use."""

    _chorus_reduction = {}
    _chorus_aggregation = None  # (backward_passes_per_step, average_aggregated_gradients) or None
    _chorus_scale_local_gradients = True

    @property
    def _agg_helper(self):
        """Horovod's name for the local gradient aggregation (None without backward_passes_per_step > 1)."""
        if self._chorus_aggregation is None:
            return None
        helper = self.__dict__.get("_chorus_agg_helper")
        if helper is None:
            steps, average = self._chorus_aggregation
            helper = LocalAggregation(steps, average, self._chorus_reduction.get("sparse_as_dense", False),
                                      self._chorus_reduce)
            self.__dict__["_chorus_agg_helper"] = helper
        return helper

    def _chorus_local(self):
        return self.__dict__.setdefault("_chorus_local_vars", set())

    def register_local_var(self, var):
        """var's gradient stays this rank's own: not reduced (divided by the ranks unless
        scale_local_gradients=False), as in Horovod."""
        self._chorus_local().add(_tape.variable_key(var))

    def _chorus_reduce(self, grads, variables):
        local = self._chorus_local()
        is_local = [v is not None and _tape.variable_key(v) in local for v in variables]
        shared = [i for i, flag in enumerate(is_local) if not flag]
        results = list(grads)
        reduced = _tape.reduce_gradients([grads[i] for i in shared], [variables[i] for i in shared],
                                         **self._chorus_reduction)
        for i, r in zip(shared, reduced):
            results[i] = r
        if self._chorus_scale_local_gradients:
            results = [_tape.divided_by_ranks(g) if flag and g is not None else g for g, flag in zip(results, is_local)]
        return results

    def _chorus_reduced(self, grads, variables):
        """The gradients as the update uses them: reduced, or aggregated locally and reduced every
        backward_passes_per_step-th step."""
        helper = self._agg_helper
        if helper is None:
            return self._chorus_reduce(list(grads), list(variables))
        return helper.accumulate(list(grads), list(variables))

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """[(gradient, variable)] of loss (a tensor computed under tape, or a callable), reduced across the
        ranks (Horovod's)."""
        var_list = list(var_list)
        if tape is None:
            tape = tf.GradientTape()
        if callable(loss):
            with tape:
                tape.watch(var_list)
                loss = loss()
        grads = tape.gradient(loss, var_list, grad_loss)
        self.__dict__["_chorus_gradients_reduced"] = True
        return list(zip(self._chorus_reduced(grads, var_list), var_list))

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def apply_gradients(self, grads_and_vars, experimental_aggregate_gradients=True, **kwargs):
        """Keras 3's, taking Keras 2's experimental_aggregate_gradients (which scripts written for Horovod
        pass; the reduction happens in apply either way)."""
        return super().apply_gradients(grads_and_vars, **kwargs)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = list(trainable_variables) if trainable_variables is not None else list(self._trainable_variables)
        base = super(_Distributed, self)
        if not self.__dict__.pop("_chorus_gradients_reduced", False):
            grads = self._chorus_reduced(grads, variables)
        helper = self._agg_helper
        if helper is None:
            return base.apply(grads, trainable_variables)
        if not self.built:
            # Before the tf.cond: a branch cannot make the optimizer's variables.
            self.build(variables)
        return helper.apply(grads, lambda: base.apply(grads, variables), lambda: self.iterations.assign_add(1))


def _check(optimizer, op, gradient_predivide_factor, num_groups, groups, process_set, call):
    check_process_set(process_set, call)
    if op is not Average and op is not Sum and op is not Adasum:
        raise ValueError(f"chorus.tensorflow.keras.{call}: op must be Average, Sum or Adasum, not {op!r}")
    if op is Adasum:
        check_adasum(None, call)
    _tape.predivide_scales(op, gradient_predivide_factor)
    if num_groups != 0 and groups is None:
        groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError(f"chorus.tensorflow.keras.{call}: groups must be a positive number or a list of lists of "
                         "variables (as in Horovod)")
    if not hasattr(optimizer, "apply"):
        raise ValueError(f"chorus.tensorflow.keras.{call}: expected a Keras 3 optimizer (with apply), got "
                         f"{type(optimizer).__name__}")
    return groups


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras optimizer like `optimizer` (a new one, of its class and config)
    whose gradients are reduced over the ranks before each update."""
    groups = _check(optimizer, op, gradient_predivide_factor, num_groups, groups, process_set, "DistributedOptimizer")
    if backward_passes_per_step < 1:
        raise ValueError(f"chorus.tensorflow.keras.DistributedOptimizer: backward_passes_per_step must be 1 or more, "
                         f"not {backward_passes_per_step}")
    base = type(optimizer)
    attributes = {
        "_chorus_reduction": {"compression": compression, "op": op,
                              "gradient_predivide_factor": gradient_predivide_factor, "groups": groups,
                              "sparse_as_dense": sparse_as_dense},
        "_chorus_aggregation": ((backward_passes_per_step, average_aggregated_gradients)
                                if backward_passes_per_step > 1 else None),
        "_chorus_scale_local_gradients": scale_local_gradients,
    }
    cls = type(base.__name__, (_Distributed, base), attributes)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    distributed = cls.from_config(config)
    # Made now, outside any tf.function: its counter is a variable.
    distributed._agg_helper  # noqa: B018
    return distributed


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                                sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False, groups=None,
                                process_set=global_process_set, local_layers=None, scale_local_gradients=True):
    """DistributedOptimizer whose local_layers' gradients are not reduced (Horovod's)."""
    distributed = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                                       gradient_predivide_factor, op, backward_passes_per_step,
                                       average_aggregated_gradients, 0, groups, process_set, scale_local_gradients)
    for variable in _tape.local_variables_of(local_layers, "keras.PartialDistributedOptimizer"):
        distributed.register_local_var(variable)
    return distributed
