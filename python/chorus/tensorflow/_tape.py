"""DistributedGradientTape: a tf.GradientTape whose gradient() allreduces
what it computed, Average by default, as Horovod's."""

import tensorflow as tf

from ._adasum import check_adasum
from ._compression import Compression
from ._ops import Adasum, Average, Sum, _check_process_set, allreduce, global_process_set
from . import _job


def reduce_gradients(gradients, compression, op, gradient_predivide_factor):
    if gradient_predivide_factor != 1.0:
        if op is not Average:
            raise ValueError("chorus.tensorflow: gradient_predivide_factor needs op=Average")
        # Horovod's split of the average: divide by the factor before the sum, by size/factor after.
        prescale, postscale = 1.0 / gradient_predivide_factor, gradient_predivide_factor / _job.size()
        op = Sum
    else:
        prescale = postscale = 1.0
    return [None if gradient is None else
            allreduce(gradient, compression=compression, op=op, prescale_factor=prescale, postscale_factor=postscale)
            for gradient in gradients]


class _DistributedGradientTape:
    """The methods a wrapped tape's class gains (see DistributedGradientTape)."""

    def gradient(self, target, sources, output_gradients=None, **options):
        gradients = super().gradient(target, sources, output_gradients, **options)
        flat = tf.nest.flatten(gradients)
        if self._chorus_sparse_as_dense:
            flat = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in flat]
        reduced = reduce_gradients(flat, **self._chorus_reduction)
        return tf.nest.pack_sequence_as(gradients, reduced)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True):
    """The tape, whose gradient() now returns the gradients allreduced over
    the ranks (op, Average by default). Grouping (num_groups, groups) is
    accepted and has no effect: each gradient is its own allreduce."""
    _check_process_set(process_set, "DistributedGradientTape")
    if op is not Average and op is not Sum and op is not Adasum:
        raise ValueError(f"chorus.tensorflow.DistributedGradientTape: op must be Average, Sum or Adasum, not {op!r}")
    if op is Adasum:
        check_adasum(None, "DistributedGradientTape")
    # A subclass of the tape's own class carrying its state: still an
    # instance of tf.GradientTape (and of whatever the tape was).
    base = type(gradtape)
    cls = type(base.__name__, (_DistributedGradientTape, base), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._chorus_reduction = {"compression": compression, "op": op,
                              "gradient_predivide_factor": gradient_predivide_factor}
    tape._chorus_sparse_as_dense = sparse_as_dense
    return tape
