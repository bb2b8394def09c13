"""Horovod's rank_op, local_rank_op, size_op, local_size_op and
process_set_included_op: the job's numbers as int32 scalars read when the
op runs, so a graph built before the job started is still right."""

from tensorflow.python.framework import ops as _framework_ops

from . import _job
from ._library import ops as _native_ops

_framework_ops.NotDifferentiable("ChorusJobValue")


def _value(which, name):
    return _native_ops.chorus_job_value(which=which, context=_job.handle(), name=name)


def rank_op(name=None):
    return _value("rank", name)


def local_rank_op(name=None):
    return _value("local_rank", name)


def size_op(process_set_id=0, name=None):
    _check_set(process_set_id, "size_op")
    return _value("size", name)


def local_size_op(name=None):
    return _value("local_size", name)


def process_set_included_op(process_set_id=0, name=None):
    """1: this rank is in the process set (chorus.tensorflow has the global one only, id 0)."""
    _check_set(process_set_id, "process_set_included_op")
    import tensorflow as tf
    return tf.ones_like(_value("rank", name))


def _check_set(process_set_id, call):
    if process_set_id != 0:
        raise ValueError(f"chorus.tensorflow.{call}: only the global process set (id 0) exists, not {process_set_id}")
