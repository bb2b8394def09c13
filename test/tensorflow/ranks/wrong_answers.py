"""The three silent wrong answers chorus.tensorflow once gave, each checked against what Horovod computes:

1. prescale_factor and postscale_factor on integer tensors: Horovod multiplies in float64 and truncates toward
   zero (the factor itself a float32, as its op attribute is); chorus cast the factor to the integer type
   (0.5 became 0, so a sum of 10 came back 0).
2. tf.IndexedSlices with a scale factor, or with an op other than Sum and Average: Horovod raises
   NotImplementedError; chorus ignored the factors.
3. Two allreduces of one size in one TensorFlow 1 session.run: TensorFlow runs them in either order on each
   rank, and chorus matched them by order, so 107 of 300 runs summed one with the other. Now they are
   matched by name: 0 wrong in 1,000 runs, and a graph of many ops of every size (Horovod's *_fused tests)."""

import numpy as np
import tensorflow as tf

import chorus
import chorus.tensorflow as hvd
from common import Checker

hvd.init(chorus.connect_from_env())
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)

INTEGERS = [tf.int8, tf.uint8, tf.int32, tf.uint32, tf.int64, tf.uint64]


def values_of(peer, dtype):
    base = np.array([5, 7, 3, 11, 0, 1], np.int64) + peer
    if not dtype.is_unsigned:
        base = base * np.array([1, -1, 1, -1, 1, -1])  # truncation toward zero, not down
    return base


def horovod_scaled(values, factor):
    """Horovod's integer scaling: the float32 factor times the value in float64, truncated toward zero."""
    return np.trunc(values.astype(np.float64) * float(np.float32(factor))).astype(np.int64)


def check_integer_scaling():
    for dtype in INTEGERS:
        for prescale, postscale in ((0.5, 1.0), (1.0, 0.5), (0.3, 1.7), (1.0, 1.0)):
            for op in (hvd.Sum, hvd.Average):
                mine = tf.constant(values_of(rank, dtype), dtype)
                got = hvd.allreduce(mine, op=op, prescale_factor=prescale, postscale_factor=postscale)
                summed = sum(horovod_scaled(values_of(peer, dtype), prescale) for peer in range(size))
                post = float(np.float32(postscale)) / (size if op is hvd.Average else 1)
                expected = np.trunc(summed.astype(np.float64) * post).astype(np.int64)
                check.equal(got, tf.constant(expected, dtype),
                            f"allreduce {op} {dtype.name} prescale {prescale} postscale {postscale}")
                rows = tf.reshape(tf.tile(mine, [size]), [size, -1])
                got = hvd.reducescatter(rows, op=op, prescale_factor=prescale, postscale_factor=postscale)
                check.equal(got, tf.constant(expected.reshape(1, -1), dtype),
                            f"reducescatter {op} {dtype.name} prescale {prescale} postscale {postscale}")
    fives = hvd.allreduce(tf.constant([5], tf.int32), op=hvd.Sum, postscale_factor=0.5)
    check.equal(fives, np.array([int(5 * size * 0.5)], np.int32), "the reported case: a sum of 5s times 0.5")
    # Floats as Horovod scales them: float32 in float32, float16 through float32.
    for dtype in (tf.float16, tf.float32, tf.float64):
        got = hvd.allreduce(tf.constant([3.0, -5.0], dtype), op=hvd.Sum, prescale_factor=0.5, postscale_factor=0.25)
        check.equal(got, tf.constant([3.0 * 0.5 * size * 0.25, -5.0 * 0.5 * size * 0.25], dtype),
                    f"allreduce {dtype.name} scaled")


def raises(call, error_type, phrase):
    try:
        call()
    except error_type as error:
        return phrase in str(error)
    return False


def check_sparse_refusals():
    slices = tf.IndexedSlices(tf.constant([[4.0, 4.0]]), tf.constant([rank]), dense_shape=tf.constant([size, 2]))
    for keyword in ({"prescale_factor": 0.5}, {"postscale_factor": 0.5}):
        check.true(raises(lambda: hvd.allreduce(slices, **keyword), NotImplementedError, "scale"),
                   f"IndexedSlices with {keyword}: NotImplementedError")
        check.true(raises(lambda: hvd.grouped_allreduce([slices, tf.ones([2])], **keyword), NotImplementedError,
                          "scale"), f"grouped IndexedSlices with {keyword}: NotImplementedError")
    for op in (hvd.Min, hvd.Max, hvd.Product):
        check.true(raises(lambda: hvd.allreduce(slices, op=op), NotImplementedError, "Sum or Average"),
                   f"IndexedSlices with {op}: NotImplementedError")
    check.true(raises(lambda: hvd.allreduce(slices, op=hvd.Adasum), NotImplementedError, "Adasum"),
               "IndexedSlices with Adasum: NotImplementedError")
    summed = hvd.allreduce(slices, op=hvd.Sum)
    check.equal(summed.values, np.full([size, 2], 4.0, np.float32), "IndexedSlices Sum: the values gathered")
    check.equal(summed.indices, np.arange(size, dtype=np.int32), "IndexedSlices Sum: the indices gathered")


def check_graph_order(runs=1000):
    """Two allreduces of one size in one session.run, then a graph of many allreduces and allgathers of every
    dtype and size run at once: every run, every result is its own."""
    wrong = 0
    with tf.Graph().as_default():
        a = hvd.allreduce(tf.constant([1.0 + rank]), op=hvd.Sum)
        b = hvd.allreduce(tf.constant([100.0 * (rank + 1)]), op=hvd.Sum)
        with tf.compat.v1.Session() as session:
            for _ in range(runs):
                got_a, got_b = session.run([a, b])
                wrong += int(got_a[0] != size + size * (size - 1) / 2) + int(got_b[0] != 100.0 * size * (size + 1) / 2)
    check.true(wrong == 0, f"{wrong} wrong results in {runs} runs of two allreduces in one session.run")

    with tf.Graph().as_default():
        checks, expected = [], []
        for index, dtype in enumerate([tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64]):
            for dim in (1, 2, 3):
                tensor = tf.cast(tf.fill([17] * dim, index + 1), dtype)
                checks.append(hvd.allreduce(tensor, op=hvd.Sum))
                expected.append(np.full([17] * dim, (index + 1) * size))
                checks.append(hvd.allgather(tf.cast(tf.fill([rank + 1, dim], index), dtype)))
                expected.append(np.full([size * (size + 1) // 2, dim], index))
        with tf.compat.v1.Session() as session:
            for run in range(20):
                for got, want in zip(session.run(checks), expected):
                    check.equal(np.asarray(got, np.float64), want.astype(np.float64), f"fused graph run {run}")


check_integer_scaling()
check_sparse_refusals()
check_graph_order()
print(f"wrong answers OK {rank} {check.count}", flush=True)
