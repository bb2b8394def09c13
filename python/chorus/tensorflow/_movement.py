"""The collectives that move without reducing, with Horovod's signatures:
allgather and grouped_allgather (first dimensions may differ between
ranks), broadcast and the in-place broadcast_, alltoall. Any dtype
TensorFlow has a fixed size for moves (as bytes)."""

import tensorflow as tf
from tensorflow.python.ops import resource_variable_ops

from ._library import ops as _native_ops
from ._ops import check_process_set, global_process_set, matching


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Every rank's tensor concatenated on the first dimension, in rank order; first dimensions may differ."""
    check_process_set(process_set, "allgather")
    return _native_ops.chorus_allgather(tensor, name=name, **matching(name, "allgather"))


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Each tensor allgathered, as one collective per dtype (Horovod's grouped_allgather)."""
    check_process_set(process_set, "grouped_allgather")
    if not tensors:
        return tensors
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    groups = {}
    for index, tensor in enumerate(tensors):
        groups.setdefault(tensor.dtype, []).append(index)
    results = [None] * len(tensors)
    for dtype, indices in groups.items():
        group_name = name if name is None or len(groups) == 1 else f"{name}.{dtype.name}"
        gathered = _native_ops.chorus_grouped_allgather([tensors[i] for i in indices], name=group_name,
                                                        **matching(group_name, "grouped_allgather"))
        for i, g in zip(indices, gathered):
            results[i] = g
    return results


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=global_process_set):
    """root_rank's tensor, on every rank."""
    check_process_set(process_set, "broadcast")
    return _native_ops.chorus_broadcast(tensor, root_rank=root_rank, name=name, **matching(name, "broadcast"))


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Sets each variable to root_rank's value in place; returns their values after it (Horovod's broadcast_)."""
    check_process_set(process_set, "broadcast_")
    variables = list(variables)
    resource = [resource_variable_ops.is_resource_variable(v) for v in variables]
    names = [None if name is None else f"{name}.{i}" for i in range(len(variables))]
    if all(resource):
        assignments = [v.assign(broadcast(v, root_rank, name=n), read_value=False)
                       for v, n in zip(variables, names)]
        with tf.control_dependencies([a for a in assignments if a is not None]):
            return [v.read_value() for v in variables]
    if not any(resource):
        return [tf.compat.v1.assign(v, broadcast(v, root_rank, name=n)) for v, n in zip(variables, names)]
    raise ValueError("chorus.tensorflow.broadcast_: the variables must all be resource variables or all reference "
                     "variables, as in Horovod")


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Rows splits[p] go to rank p (an even split without splits); returns the rows received in rank
    order, and with splits given also how many came from each rank."""
    check_process_set(process_set, "alltoall")
    given = tf.constant([], tf.int32) if splits is None else tf.cast(splits, tf.int32)
    received, received_splits = _native_ops.chorus_alltoall(tensor, given, name=name, **matching(name, "alltoall"))
    return received if splits is None else (received, received_splits)
