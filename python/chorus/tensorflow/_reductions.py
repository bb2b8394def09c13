"""allreduce, grouped_allreduce, reducescatter and grouped_reducescatter,
with Horovod's signatures, defaults and results (horovod.tensorflow).

Scaling is Horovod's, computed in the kernels as Horovod computes it
(adapters/tensorflow/scaling.h): prescale_factor multiplies each rank's
tensor before the reduction, postscale_factor the result, integers in
float64 truncated toward zero, and Average is a sum whose postscale is
divided by the ranks. tf.IndexedSlices are allgathered (values and
indices), reduced with Sum or Average only and never scaled, as in
Horovod, which refuses the rest with NotImplementedError."""

import tensorflow as tf

from . import _adasum, _job
from ._compression import Compression
from ._library import ops as _native_ops
from ._movement import allgather, grouped_allgather
from ._ops import (Adasum, Average, Sum, check_process_set, global_process_set,
                   handle_average_backwards_compatibility, matching, op_name)


def _check_sparse(op, prescale_factor, postscale_factor, call):
    if op is Adasum:
        raise NotImplementedError(f"chorus.tensorflow.{call}: Adasum does not take tf.IndexedSlices (as in Horovod); "
                                  "pass sparse_as_dense=True to reduce them as dense tensors")
    if op is not Sum and op is not Average:
        raise NotImplementedError(f"chorus.tensorflow.{call}: tf.IndexedSlices reduce with Sum or Average only (as in "
                                  f"Horovod), not {op!r}")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError(f"chorus.tensorflow.{call}: prescale_factor and postscale_factor are not supported "
                                  "with tf.IndexedSlices (as in Horovod)")


def _reduced_slices(slices, values, indices, op):
    """The allgathered values and indices as one tf.IndexedSlices, divided by the ranks for Average."""
    if op is Average:
        values = values / tf.cast(_job.size(), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _scaled(tensor, factor):
    # Adasum only (floating-point tensors): the others scale in the kernel.
    return tensor if factor == 1.0 else tensor * tf.cast(factor, tensor.dtype)


# Eager calls' attributes, by what they depend on: the same few on every step.
_eager_attributes = {}


def _reduction_attributes(op, prescale_factor, postscale_factor, name, call):
    def made():
        return {"reduce_op": op_name(op, call), "prescale_factor": float(prescale_factor),
                "postscale_factor": float(postscale_factor), **matching(name, call)}
    if not tf.executing_eagerly():
        return made()  # (a graph numbers its calls: never reused)
    try:
        key = (op, float(prescale_factor), float(postscale_factor), name, call, _job.handle())
        attributes = _eager_attributes.get(key)
    except TypeError:  # an argument that is not hashable: made afresh
        return made()
    if attributes is None:
        if len(_eager_attributes) > 4096:
            _eager_attributes.clear()
        attributes = _eager_attributes[key] = made()
    return attributes


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """The tensor reduced over every rank, Average unless op says otherwise.
    tf.IndexedSlices are allgathered (values and indices), as Horovod does."""
    check_process_set(process_set, "allreduce")
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor, "allreduce")
        return _reduced_slices(tensor, allgather(tensor.values), allgather(tensor.indices), op)
    if op is Adasum:
        tensor = tf.convert_to_tensor(tensor)
        _adasum.check_adasum(tensor.dtype, "allreduce")
        compressed, ctx = compression.compress(_scaled(tensor, prescale_factor))
        return _scaled(compression.decompress(_adasum.adasum(compressed, name=name), ctx), postscale_factor)
    attributes = _reduction_attributes(op, prescale_factor, postscale_factor, name, "allreduce")
    if compression is Compression.none:
        # The common call, without the wrapping's few microseconds.
        return _native_ops.chorus_allreduce(tensor, name=name, **attributes)
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    return compression.decompress(_native_ops.chorus_allreduce(compressed, name=name, **attributes), ctx)


def _grouped(indexed, compression, name, run):
    """Each (index, tensor) compressed, reduced by run(tensors of one dtype, name) -> outputs, one call per
    dtype in the order each dtype first appears, and decompressed: {index: result}."""
    compressed = {i: compression.compress(tf.convert_to_tensor(t)) for i, t in indexed}
    by_dtype = {}
    for i, (tensor, _) in compressed.items():
        by_dtype.setdefault(tensor.dtype, []).append(i)
    results = {}
    for dtype, indices in by_dtype.items():
        group_name = name if name is None or len(by_dtype) == 1 else f"{name}.{dtype.name}"
        for i, reduced in zip(indices, run([compressed[i][0] for i in indices], group_name)):
            results[i] = compression.decompress(reduced, compressed[i][1])
    return results


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """Each tensor reduced over every rank, as one collective per dtype (Horovod's grouped_allreduce):
    tf.IndexedSlices among them are allgathered as a group."""
    check_process_set(process_set, "grouped_allreduce")
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    results = [None] * len(tensors)
    sparse = [(i, t) for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [(i, t) for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor, "grouped_allreduce")
        values = grouped_allgather([t.values for _, t in sparse])
        indices = grouped_allgather([t.indices for _, t in sparse])
        for (i, t), v, x in zip(sparse, values, indices):
            results[i] = _reduced_slices(t, v, x, op)
    if dense and op is Adasum:
        for i, t in dense:
            results[i] = allreduce(t, compression=compression, op=op, prescale_factor=prescale_factor,
                                   postscale_factor=postscale_factor)
    elif dense:
        def run(group, group_name):
            return _native_ops.chorus_grouped_allreduce(
                group, name=group_name,
                **_reduction_attributes(op, prescale_factor, postscale_factor, group_name, "grouped_allreduce"))
        for i, result in _grouped(dense, compression, name, run).items():
            results[i] = result
    return results


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """The tensor reduced over every rank (Average by default), this rank's rows of it: rows / size,
    one more on the first rows % size ranks."""
    check_process_set(process_set, "reducescatter")
    attributes = _reduction_attributes(op, prescale_factor, postscale_factor, name, "reducescatter")
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    return compression.decompress(_native_ops.chorus_reducescatter(compressed, name=name, **attributes), ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0, name=None):
    """Each tensor reducescattered, as one collective per dtype (Horovod's grouped_reducescatter)."""
    check_process_set(process_set, "grouped_reducescatter")
    if not tensors:
        return tensors

    def run(group, group_name):
        return _native_ops.chorus_grouped_reducescatter(
            group, name=group_name,
            **_reduction_attributes(op, prescale_factor, postscale_factor, group_name, "grouped_reducescatter"))
    results = _grouped(enumerate(tensors), compression, name, run)
    return [results[i] for i in range(len(tensors))]
