"""The ops' gradients, registered with TensorFlow by op type. They follow
Horovod's (horovod/tensorflow/mpi_ops.py), so that a model's gradients are
the numbers Horovod gives:
- allreduce (one or a group): the gradients allreduced with the same op and
  the same scale factors (Sum and Average; the others have no gradient
  here and say so: Horovod reduces their gradient with the same op, which
  is not their derivative);
- allgather (one or a group): this rank's rows of the gradient averaged
  over the ranks;
- broadcast: the gradient averaged over the ranks on the root, zeros elsewhere;
- reducescatter (one or a group): the gradients allgathered, times size
  for Sum and times the scale factors, as Horovod;
- alltoall: the gradient sent back, each rank's rows to where they came from.
Each gradient op is matched across ranks as the op it belongs to would be
(in program order, or by name in a TensorFlow 1 graph).
"""

import tensorflow as tf
from tensorflow.python.framework import ops as _framework_ops

from . import _job
from ._library import ops as _native_ops
from ._ops import matching

_LINEAR = ("sum", "avg")


def _linear_op(op, call):
    reduce_op = op.get_attr("reduce_op").decode()
    if reduce_op not in _LINEAR:
        raise ValueError(f"chorus.tensorflow: {call} with op {reduce_op} has no gradient (sum and average have)")
    return reduce_op


def _scales(op):
    return {"prescale_factor": op.get_attr("prescale_factor"), "postscale_factor": op.get_attr("postscale_factor")}


@_framework_ops.RegisterGradient("ChorusAllreduce")
def _allreduce_gradient(op, grad):
    return _native_ops.chorus_allreduce(grad, reduce_op=_linear_op(op, "allreduce"), **_scales(op),
                                       **matching(None, "allreduce gradient"))


@_framework_ops.RegisterGradient("ChorusGroupedAllreduce")
def _grouped_allreduce_gradient(op, *grads):
    # TensorFlow may hand float32 zeros for an unconnected output of another type: reduced one by one then.
    reduce_op = _linear_op(op, "grouped_allreduce")
    if len({g.dtype for g in grads}) == 1:
        return _native_ops.chorus_grouped_allreduce(list(grads), reduce_op=reduce_op, **_scales(op),
                                                    **matching(None, "grouped_allreduce gradient"))
    return [_native_ops.chorus_allreduce(g, reduce_op=reduce_op, **_scales(op),
                                       **matching(None, "allreduce gradient")) for g in grads]


def _my_rows(grad, tensor):
    """This rank's rows of the averaged gradient of an allgather of `tensor`."""
    averaged = _native_ops.chorus_allreduce(grad, reduce_op="avg", **matching(None, "allgather gradient"))
    rows = tf.reshape(tf.shape(tensor, out_type=tf.int64)[0], [1])
    every_rows = tf.reshape(_native_ops.chorus_allgather(rows, **matching(None, "allgather gradient rows")), [_job.size()])
    return tf.split(averaged, every_rows, num=_job.size(), axis=0)[_job.rank()]


@_framework_ops.RegisterGradient("ChorusAllgather")
def _allgather_gradient(op, grad):
    return _my_rows(grad, op.inputs[0])


@_framework_ops.RegisterGradient("ChorusGroupedAllgather")
def _grouped_allgather_gradient(op, *grads):
    return [_my_rows(grad, tensor) for grad, tensor in zip(grads, op.inputs)]


@_framework_ops.RegisterGradient("ChorusBroadcast")
def _broadcast_gradient(op, grad):
    averaged = _native_ops.chorus_allreduce(grad, reduce_op="avg", **matching(None, "broadcast gradient"))
    return averaged if _job.rank() == op.get_attr("root_rank") else averaged * 0


def _reducescatter_scaled(op, grad):
    if _linear_op(op, "reducescatter") == "sum":
        grad = grad * tf.cast(_job.size(), grad.dtype)
    for factor in _scales(op).values():
        if factor != 1.0:
            grad = grad * tf.cast(factor, grad.dtype)
    return grad


@_framework_ops.RegisterGradient("ChorusReducescatter")
def _reducescatter_gradient(op, grad):
    return _native_ops.chorus_allgather(_reducescatter_scaled(op, grad), **matching(None, "reducescatter gradient"))


@_framework_ops.RegisterGradient("ChorusGroupedReducescatter")
def _grouped_reducescatter_gradient(op, *grads):
    return [_native_ops.chorus_allgather(_reducescatter_scaled(op, g),
                                         **matching(None, "reducescatter gradient")) for g in grads]


@_framework_ops.RegisterGradient("ChorusAlltoall")
def _alltoall_gradient(op, grad, received_splits_gradient):
    sent_back, _ = _native_ops.chorus_alltoall(grad, op.outputs[1], **matching(None, "alltoall gradient"))
    return [sent_back, None]
