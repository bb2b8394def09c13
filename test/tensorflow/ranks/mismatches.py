"""Ranks whose calls differ: every rank's op raises tf.errors.FailedPreconditionError naming both ranks and
what differs (shape, type, root, op, name, element count), as Horovod raises it, and nothing is sent, so the
job goes on on the same Context. A bad argument on one rank (alltoall's splits) raises InvalidArgumentError on
every rank, naming that rank."""

import numpy as np
import tensorflow as tf

import chorus.tensorflow as hvd


def _error(call):
    try:
        call()
    except tf.errors.OpError as error:
        return error
    return None


def check_mismatches(check):
    rank, size = hvd.rank(), hvd.size()
    last = size - 1
    other = rank == last

    def mismatch(what, call, *phrases):
        error = _error(call)
        check.true(isinstance(error, tf.errors.FailedPreconditionError) and "nothing was sent" in str(error)
                   and all(phrase in str(error) for phrase in phrases), f"{what}: {error!r}")

    mismatch("allreduce of 4 against 5 elements", lambda: hvd.allreduce(tf.ones([5 if other else 4])),
             "rank 0 passes a float tensor of shape [4]", f"rank {last} a float tensor of shape [5]")
    mismatch("allreduce of one count in two shapes", lambda: hvd.allreduce(tf.ones([2, 3] if other else [3, 2])),
             "shape [3, 2]", "shape [2, 3]")
    mismatch("allreduce of two types", lambda: hvd.allreduce(tf.ones([3], tf.float64 if other else tf.float32)),
             "float tensor", "double tensor", "one type")
    mismatch("allreduce with two ops", lambda: hvd.allreduce(tf.ones([3]), op=hvd.Max if other else hvd.Sum),
             "reduces with sum", "with max")
    mismatch("allreduce with two postscales",
             lambda: hvd.allreduce(tf.ones([3]), op=hvd.Sum, postscale_factor=2.0 if other else 1.0), "scales by")
    mismatch("allreduce with two names", lambda: hvd.allreduce(tf.ones([3]), name="b" if other else "a"),
             "rank 0 calls it 'a'", f"rank {last} 'b'")
    mismatch("allreduce against broadcast",
             lambda: hvd.broadcast(tf.ones([3]), 0) if other else hvd.allreduce(tf.ones([3])),
             "rank 0 calls allreduce", f"rank {last} calls broadcast")
    mismatch("broadcast from two roots", lambda: hvd.broadcast(tf.ones([3]), last if other else 0),
             "names root rank 0", f"root rank {last}")
    mismatch("allgather of [2, 3] against [2, 4]", lambda: hvd.allgather(tf.ones([2, 4 if other else 3])),
             "shape [2, 3]", "shape [2, 4]", "first dimension only")
    mismatch("alltoall of rows of 2 against 3 elements", lambda: hvd.alltoall(tf.ones([size, 3 if other else 2])),
             f"shape [{size}, 2]", f"shape [{size}, 3]")
    mismatch("reducescatter of two shapes", lambda: hvd.reducescatter(tf.ones([size, 3 if other else 2])),
             f"shape [{size}, 2]")
    mismatch("grouped allreduce of two group sizes",
             lambda: hvd.grouped_allreduce([tf.ones([2])] * (3 if other else 2)), "passes 2 tensors")
    # A mismatch the message used to state as a digest: the element counts of a reducescatter are exact.
    mismatch("reducescatter of 18x18x18 against 17x17x17",
             lambda: hvd.reducescatter(tf.ones([18 if other else 17] * 3)),
             "shape [17, 17, 17]", "shape [18, 18, 18]")

    error = _error(lambda: hvd.alltoall(tf.ones([3]), splits=[size] * size if other else [3] + [0] * (size - 1)))
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and f"rank {last}: chorus alltoall" in str(error)
               and "passed splits" in str(error), f"splits not summing to the rows, on one rank: {error!r}")
    error = _error(lambda: hvd.alltoall(tf.ones([size + 1])))
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and "do not split evenly" in str(error),
               f"rows that do not split evenly, on every rank: {error!r}")
    error = _error(lambda: hvd.broadcast(tf.ones([2]), size))
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and "is not a rank of this job" in str(error),
               f"a root that is not a rank: {error!r}")
    check.equal(hvd.allreduce(tf.constant([1.0]), op=hvd.Sum), np.array([float(size)], np.float32),
                "the job's Context still works after the mismatches")
