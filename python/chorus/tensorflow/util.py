"""What Horovod's horovod.tensorflow.util offers that scripts (and Horovod's own tests) import."""

import tensorflow as tf


def _executing_eagerly():
    """True where ops run at once (eager execution), False while a graph or a tf.function is being built."""
    return tf.executing_eagerly()
