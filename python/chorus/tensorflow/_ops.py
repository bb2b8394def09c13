"""The collectives with Horovod's TensorFlow signatures and defaults (horovod.tensorflow's
allreduce, allgather, broadcast, reducescatter, alltoall), on the op library's kernels."""

import tensorflow as tf

import chorus

from . import _adasum, _job
from ._compression import Compression
from ._library import ops as _native_ops

# Horovod's reduction constants; the values are chorus's ReduceOps.
Average = chorus.AVG
Sum = chorus.SUM
Min = chorus.MIN
Max = chorus.MAX
Product = chorus.PROD


class _AdasumConstant:
    def __repr__(self):
        return "Adasum"


# Horovod's op=Adasum (allreduce, DistributedGradientTape, keras.DistributedOptimizer): _adasum.py.
Adasum = _AdasumConstant()


class _GlobalProcessSet:
    """Horovod's global_process_set: every rank. The only process set chorus.tensorflow has."""

    def size(self):
        return _job.size()

    def rank(self):
        return _job.rank()

    def __repr__(self):
        return "global_process_set"


global_process_set = _GlobalProcessSet()


def _check_process_set(process_set, call):
    if process_set is not global_process_set:
        raise ValueError(f"chorus.tensorflow.{call}: only global_process_set is supported, not {process_set!r}")


_OP_NAMES = {op: op.name.lower() for op in chorus.ReduceOp.__members__.values()}


def _op_name(op, call):
    """The op library's name for a Horovod or chorus reduction constant."""
    name = _OP_NAMES.get(op)
    if name is not None:
        return name
    if op is Adasum:
        raise ValueError(f"chorus.tensorflow.{call}: Adasum is an allreduce op; {call} takes Average, Sum, Min, "
                         "Max, Product or a chorus.ReduceOp")
    raise ValueError(f"chorus.tensorflow.{call}: op must be Average, Sum, Min, Max, Product, Adasum (allreduce) or "
                     f"a chorus.ReduceOp, not {op!r}")


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule: `average` (deprecated) and `op` exclusive; neither means Average."""
    if op is not None:
        if average is not None:
            raise ValueError("chorus.tensorflow.allreduce: pass op or average (deprecated), not both")
        return op
    if average is not None:
        return Average if average else Sum
    return Average


def _scaled(tensor, factor):
    return tensor if factor == 1.0 else tensor * tf.cast(factor, tensor.dtype)


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """The tensor reduced over every rank, Average unless op says otherwise.
    tf.IndexedSlices are allgathered (values and indices), as Horovod does."""
    _check_process_set(process_set, "allreduce")
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise ValueError("chorus.tensorflow.allreduce: tf.IndexedSlices reduce with Sum or Average only")
        values = allgather(tensor.values)
        if op == Average:
            values = values / tf.cast(_job.size(), values.dtype)
        return tf.IndexedSlices(values, allgather(tensor.indices), dense_shape=tensor.dense_shape)
    if op is Adasum:
        tensor = tf.convert_to_tensor(tensor)
        _adasum.check_adasum(tensor.dtype, "allreduce")
        compressed, ctx = compression.compress(_scaled(tensor, prescale_factor))
        return _scaled(compression.decompress(_adasum.adasum(compressed, name=name), ctx), postscale_factor)
    op_name = _op_name(op, "allreduce")
    if compression is Compression.none and prescale_factor == 1.0 and postscale_factor == 1.0:
        # The common call, without the wrapping's few microseconds.
        return _native_ops.chorus_allreduce(tensor, reduce_op=op_name, context=_job.handle(), name=name)
    compressed, ctx = compression.compress(_scaled(tf.convert_to_tensor(tensor), prescale_factor))
    reduced = _native_ops.chorus_allreduce(compressed, reduce_op=op_name, context=_job.handle(), name=name)
    return _scaled(compression.decompress(reduced, ctx), postscale_factor)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Every rank's tensor concatenated on the first dimension, in rank order; first dimensions may differ."""
    _check_process_set(process_set, "allgather")
    return _native_ops.chorus_allgather(tensor, context=_job.handle(), name=name)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set):
    """root_rank's tensor, on every rank."""
    _check_process_set(process_set, "broadcast")
    return _native_ops.chorus_broadcast(tensor, root_rank=root_rank, context=_job.handle(), name=name)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """The tensor reduced over every rank (Average by default), this rank's rows of it: rows / size,
    one more on the first rows % size ranks."""
    _check_process_set(process_set, "reducescatter")
    op_name = _op_name(op, "reducescatter")
    compressed, ctx = compression.compress(_scaled(tf.convert_to_tensor(tensor), prescale_factor))
    reduced = _native_ops.chorus_reducescatter(compressed, reduce_op=op_name, context=_job.handle(), name=name)
    return _scaled(compression.decompress(reduced, ctx), postscale_factor)


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Rows splits[p] go to rank p (an even split without splits); returns the rows received in rank
    order, and with splits given also how many came from each rank."""
    _check_process_set(process_set, "alltoall")
    given = tf.constant([], tf.int32) if splits is None else tf.cast(splits, tf.int32)
    received, received_splits = _native_ops.chorus_alltoall(tensor, given, context=_job.handle(), name=name)
    return received if splits is None else (received, received_splits)
