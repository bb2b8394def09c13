"""Python objects between ranks, as Horovod's TensorFlow API moves them:
broadcast_object, broadcast_object_fn (TensorFlow 1 sessions) and
allgather_object. Objects travel pickled (cloudpickle where it is
installed, as Horovod uses it, so lambdas and local classes travel too),
as uint8 tensors through the op library."""

import io
import pickle  # noqa: S403  (objects come from the job's own ranks, whose connections proved its secret)

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops as _framework_ops

from . import _job
from ._movement import allgather, broadcast
from ._ops import check_process_set, global_process_set

try:
    import cloudpickle as _pickler
except ImportError:  # pickle serves every object cloudpickle does but lambdas and local classes
    _pickler = pickle


def _dumps(obj):
    stream = io.BytesIO()
    _pickler.dump(obj, stream)
    return np.frombuffer(stream.getvalue(), dtype=np.uint8)


def _loads(array):
    return pickle.loads(np.asarray(array, dtype=np.uint8).tobytes())  # noqa: S301


def _evaluator(session):
    """Runs a tensor: eagerly it is a value already; in a graph, in `session` or the default one."""
    def evaluate(tensor):
        if tf.executing_eagerly():
            return tensor.numpy()
        chosen = session or _framework_ops.get_default_session()
        if chosen is None:
            raise ValueError("chorus.tensorflow: in a TensorFlow 1 graph, pass session= (or run inside a "
                             "`with session.as_default()`) to move a Python object")
        return chosen.run(tensor)
    return evaluate


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's obj, on every rank."""
    check_process_set(process_set, "broadcast_object")
    # (Horovod names it by obj's type, which may differ between the root and the others.)
    name = name or "broadcast_object"
    evaluate = _evaluator(session)
    if _job.rank() == root_rank:
        payload = _dumps(obj)
        evaluate(broadcast(tf.constant([payload.size], tf.int64), root_rank, name=f"{name}.size"))
        evaluate(broadcast(tf.constant(payload), root_rank, name=f"{name}.bytes"))
        return obj
    length = evaluate(broadcast(tf.constant([0], tf.int64), root_rank, name=f"{name}.size"))
    payload = evaluate(broadcast(tf.zeros([int(length[0])], tf.uint8), root_rank, name=f"{name}.bytes"))
    return _loads(payload)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """For TensorFlow 1 sessions: a function obj -> root_rank's obj, whose ops are built once."""
    check_process_set(process_set, "broadcast_object_fn")
    name = name or "broadcast_object_fn"
    size_in = tf.compat.v1.placeholder(tf.int64, [1], name=f"{name}.size_in")
    size_out = broadcast(size_in, root_rank, name=f"{name}.size")
    bytes_in = tf.compat.v1.placeholder(tf.uint8, [None], name=f"{name}.bytes_in")
    bytes_out = broadcast(bytes_in, root_rank, name=f"{name}.bytes")

    def broadcast_one(obj):
        chosen = session or _framework_ops.get_default_session()
        if _job.rank() == root_rank:
            payload = _dumps(obj)
            chosen.run(size_out, feed_dict={size_in: [payload.size]})
            chosen.run(bytes_out, feed_dict={bytes_in: payload})
            return obj
        length = chosen.run(size_out, feed_dict={size_in: [0]})
        return _loads(chosen.run(bytes_out, feed_dict={bytes_in: np.zeros(int(length[0]), np.uint8)}))
    return broadcast_one


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's obj, in rank order."""
    check_process_set(process_set, "allgather_object")
    name = name or "allgather_object"
    evaluate = _evaluator(session)
    payload = _dumps(obj)
    lengths = evaluate(allgather(tf.constant([payload.size], tf.int64), name=f"{name}.size"))
    gathered = evaluate(allgather(tf.constant(payload), name=f"{name}.bytes"))
    objects, start = [], 0
    for length in lengths.tolist():
        objects.append(_loads(gathered[start:start + length]))
        start += length
    return objects
