"""SyncBatchNormalization: Keras batch normalization whose batch statistics
are those of the whole batch across the ranks, as Horovod's.

Each rank's mean and variance (Keras's own, over its part of the batch)
become the global ones with one allreduce of [n·mean, n·(variance +
mean²), n], n being the rank's count of values per channel: the global
mean is Σn·mean / Σn and the global variance E[x²] - E[x]². Horovod
averages the ranks' statistics, which is the same when every rank has the
same batch size; weighting by n keeps it right when they differ."""

import keras
import tensorflow as tf

from . import _job
from ._ops import Sum
from ._reductions import allreduce


class SyncBatchNormalization(keras.layers.BatchNormalization):
    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("chorus.tensorflow.SyncBatchNormalization does not take fused=True (as in Horovod)")
        kwargs.setdefault("name", None)
        if not kwargs["name"]:
            kwargs["name"] = "sync_batch_normalization"
        super().__init__(**kwargs)

    def _moments(self, inputs, mask):
        mean, variance = super()._moments(inputs, mask)
        if _job.size() == 1:
            return mean, variance
        count = tf.cast(tf.size(inputs), mean.dtype) / tf.cast(tf.size(mean), mean.dtype)
        if mask is not None:
            count = tf.reduce_sum(tf.cast(mask, mean.dtype)) * count / tf.cast(tf.size(mask), mean.dtype)
        moments = tf.stack([count * mean, count * (variance + tf.square(mean)), tf.broadcast_to(count, tf.shape(mean))])
        total_sum, total_square, total_count = tf.unstack(allreduce(moments, op=Sum))
        global_mean = total_sum / total_count
        return global_mean, total_square / total_count - tf.square(global_mean)
