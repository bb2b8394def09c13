"""Ranks that pass different shapes: every rank's op raises tf.errors.InvalidArgumentError naming what
differs. Each case on a Context of its own (a mismatch ends the Context it happened on)."""

import os

import numpy as np
import tensorflow as tf

import chorus
import chorus.tensorflow as hvd


def _on_fresh_context(case, call):
    """Runs call() on a new Context of the job; returns the TensorFlow error it raised."""
    hvd.shutdown()  # leaves open the Context the job passed to init
    context = chorus.connect_to_store(os.environ["CHORUS_STORE"], int(os.environ["CHORUS_RANK"]),
                                      int(os.environ["CHORUS_SIZE"]), f"tensorflow-mismatch-{case}", timeout=20)
    hvd.init(context=context)
    try:
        call()
    except tf.errors.OpError as error:
        return error
    finally:
        hvd.shutdown()
        context.close()
    return None


def check_mismatches(check):
    rank, size = hvd.rank(), hvd.size()
    main = hvd.context()
    other = rank == size - 1
    error = _on_fresh_context("allreduce", lambda: hvd.allreduce(tf.ones([5 if other else 4])))
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and "chorus allreduce" in str(error)
               and "rank" in str(error), f"allreduce of 4 against 5 elements: {error!r}")
    error = _on_fresh_context("allgather", lambda: hvd.allgather(tf.ones([2, 4 if other else 3])))
    expected = f"rank {size - 1} passed a float tensor of shape [2, 4] and rank 0 a float tensor of shape [2, 3]"
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and expected in str(error),
               f"allgather of [2, 3] against [2, 4]: {error!r}")
    error = _on_fresh_context("alltoall", lambda: hvd.alltoall(tf.ones([size, 3 if other else 2])))
    check.true(isinstance(error, tf.errors.InvalidArgumentError) and "rows of 3 elements" in str(error),
               f"alltoall of rows of 2 against 3 elements: {error!r}")
    error = _on_fresh_context("splits", lambda: hvd.alltoall(tf.ones([3]), splits=[3] + [0] * (size - 1)
                                                             if not other else [size] * size))
    check.true(isinstance(error, tf.errors.InvalidArgumentError if other else tf.errors.OpError)
               and f"rank {size - 1} passed splits" in str(error), f"splits not summing to the rows: {error!r}")
    hvd.init(main)
    check.equal(hvd.allreduce(tf.constant([1.0]), op=hvd.Sum), np.array([float(size)], np.float32),
                "the job's first Context still works after the others' mismatches")
