"""op=Adasum: Horovod's adaptive summation of the ranks' tensors (arXiv:2006.02924), as TensorFlow ops.

Two vectors combine as a·(1 - a·b / 2|a|²) + b·(1 - a·b / 2|b|²): parallel
ones average, orthogonal ones add. Ranks combine in pairs, then pairs of
pairs, so the result is defined for a power-of-two number of ranks only.
As in chorus.torch.hvd, every rank allgathers every tensor (the op library's
allgather) and combines the same tree in the same order, so every rank gets
the same bits; dot products and norms are taken in float64, as Horovod's.

The combination is ordinary TensorFlow ops after the allgather, so it runs
eagerly and inside tf.function, and its gradient is TensorFlow's own through
them (the allgather's gradient is registered in _gradients.py)."""

import numpy as np
import tensorflow as tf

from . import _job
from ._library import ops as _native_ops

_ADASUM_TYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
# Horovod leaves a vector's coefficient at 1 when its squared norm is below sqrt(DBL_MIN).
_TINY_NORM = float(np.finfo(np.float64).tiny) ** 0.5


def check_adasum(dtype, call):
    """Raises ValueError where Adasum is undefined: a world that is not a power of two, a non-float dtype
    (dtype None: the world only)."""
    world = _job.size()
    if world & (world - 1):
        raise ValueError(f"chorus.tensorflow.{call}: Adasum combines ranks in pairs, pairs of pairs, ... and needs "
                         f"a power-of-two number of ranks; this job has {world}")
    if dtype is not None and dtype not in _ADASUM_TYPES:
        raise ValueError(f"chorus.tensorflow.{call}: Adasum is defined for floating-point tensors, not {dtype.name}")


def _coefficient(dot, squared_norm):
    # The division is by a safe denominator: tf.where's other branch must not be a NaN, or its gradient is.
    usable = squared_norm >= _TINY_NORM
    denominator = tf.where(usable, squared_norm, tf.ones_like(squared_norm))
    return tf.where(usable, 1.0 - dot / denominator * 0.5, tf.ones_like(squared_norm))


def _combine(a, b):
    a64, b64 = tf.cast(a, tf.float64), tf.cast(b, tf.float64)
    dot = tf.reduce_sum(a64 * b64)
    a_coefficient = _coefficient(dot, tf.reduce_sum(a64 * a64))
    b_coefficient = _coefficient(dot, tf.reduce_sum(b64 * b64))
    return a * tf.cast(a_coefficient, a.dtype) + b * tf.cast(b_coefficient, b.dtype)


def adasum(tensor, name=None):
    """The Adasum of `tensor` over the ranks, in its shape and dtype (check_adasum first)."""
    tensor = tf.convert_to_tensor(tensor)
    shape = tf.shape(tensor)
    # One row per rank: the allgather refuses ranks whose element counts differ.
    rows = _native_ops.chorus_allgather(tf.reshape(tensor, [1, -1]), context=_job.handle(), name=name)
    level = tf.unstack(rows, num=_job.size(), axis=0)
    while len(level) > 1:
        level = [_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return tf.reshape(level[0], shape)
