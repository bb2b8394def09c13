"""The ops' gradients, registered with TensorFlow by op type. They follow
Horovod's (horovod/tensorflow/mpi_ops.py), so that a model's gradients are
the numbers Horovod gives:
- allreduce: the gradient allreduced with the same op (Sum or Average; the
  others have no gradient here and say so);
- allgather: this rank's rows of the gradient averaged over the ranks;
- broadcast: the gradient averaged over the ranks on the root, zeros elsewhere;
- reducescatter: the gradients allgathered (times size for Sum, as Horovod);
- alltoall: the gradient sent back, each rank's rows to where they came from.
"""

import tensorflow as tf
from tensorflow.python.framework import ops as _framework_ops

from . import _job
from ._library import ops as _native_ops

_LINEAR = ("sum", "avg")


def _allreduce(tensor, op_name, handle):
    return _native_ops.chorus_allreduce(tensor, reduce_op=op_name, context=handle)


@_framework_ops.RegisterGradient("ChorusAllreduce")
def _allreduce_gradient(op, grad):
    op_name = op.get_attr("reduce_op").decode()
    if op_name not in _LINEAR:
        raise ValueError(f"chorus.tensorflow: allreduce with op {op_name} has no gradient (sum and average have)")
    return _allreduce(grad, op_name, op.get_attr("context"))


@_framework_ops.RegisterGradient("ChorusAllgather")
def _allgather_gradient(op, grad):
    handle = op.get_attr("context")
    averaged = _allreduce(grad, "avg", handle)
    rows = tf.reshape(tf.shape(op.inputs[0], out_type=tf.int64)[0], [1])
    every_rows = _native_ops.chorus_allgather(rows, context=handle)
    return tf.split(averaged, every_rows, axis=0)[_job.rank()]


@_framework_ops.RegisterGradient("ChorusBroadcast")
def _broadcast_gradient(op, grad):
    averaged = _allreduce(grad, "avg", op.get_attr("context"))
    return averaged if _job.rank() == op.get_attr("root_rank") else averaged * 0


@_framework_ops.RegisterGradient("ChorusReducescatter")
def _reducescatter_gradient(op, grad):
    op_name = op.get_attr("reduce_op").decode()
    if op_name not in _LINEAR:
        raise ValueError(f"chorus.tensorflow: reducescatter with op {op_name} has no gradient (sum and average "
                         "have)")
    if op_name == "sum":
        grad = grad * tf.cast(_job.size(), grad.dtype)
    return _native_ops.chorus_allgather(grad, context=op.get_attr("context"))


@_framework_ops.RegisterGradient("ChorusAlltoall")
def _alltoall_gradient(op, grad, received_splits_gradient):
    sent_back, _ = _native_ops.chorus_alltoall(grad, op.outputs[1], context=op.get_attr("context"))
    return [sent_back, None]
