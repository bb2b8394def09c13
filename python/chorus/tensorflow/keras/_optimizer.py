"""DistributedOptimizer for Keras 3: the given optimizer, whose apply()
first allreduces the gradients (Average by default).

Keras 3's optimizers funnel every update through apply(grads, variables)
(apply_gradients and model.fit's train step both call it), so the wrapper is
a subclass of the optimizer's own class, made from its config, that
overrides apply alone."""

from .. import _tape
from .._adasum import check_adasum
from .._compression import Compression
from .._ops import Adasum, Average, _check_process_set, global_process_set


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A Keras optimizer like `optimizer` (a new one, of its class and config)
    whose gradients are allreduced over the ranks before each update."""
    _check_process_set(process_set, "keras.DistributedOptimizer")
    if backward_passes_per_step != 1:
        raise ValueError("chorus.tensorflow.keras.DistributedOptimizer: backward_passes_per_step other than 1 "
                         "(local gradient aggregation) is not supported")
    if op is Adasum:
        check_adasum(None, "keras.DistributedOptimizer")
    if not hasattr(optimizer, "apply"):
        raise ValueError("chorus.tensorflow.keras.DistributedOptimizer: expected a Keras 3 optimizer (with apply), "
                         f"got {type(optimizer).__name__}")
    reduction = {"compression": compression, "op": op, "gradient_predivide_factor": gradient_predivide_factor}

    def apply(self, grads, trainable_variables=None):
        grads = [_dense(grad) if sparse_as_dense else grad for grad in grads]
        return super(cls, self).apply(_tape.reduce_gradients(list(grads), **reduction), trainable_variables)

    base = type(optimizer)
    cls = type(base.__name__, (base,), {"apply": apply, "_chorus_distributed": True})
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return cls.from_config(config)


def _dense(grad):
    import tensorflow as tf
    return tf.convert_to_tensor(grad) if isinstance(grad, tf.IndexedSlices) else grad
