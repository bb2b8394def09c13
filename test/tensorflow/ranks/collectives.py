"""Every collective of chorus.tensorflow, for every dtype and op, bit-exact against numpy on small
integers: eagerly, inside a tf.function, their gradients, op=Adasum, and (at 2 ranks) a Keras model.fit. Then
mismatched shapes. One job per world size: TensorFlow's import is the expensive part."""

import numpy as np
import tensorflow as tf

import chorus
import chorus.tensorflow as hvd
from common import MOVABLE, REDUCIBLE, Checker

# A Context of the process's own, as Horovod's init(comm) takes one (kill.py runs the plain init()).
hvd.init(chorus.connect_from_env())
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)

INTEGER_OPS = ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor"]
FLOAT_OPS = ["sum", "prod", "min", "max", "avg"]
HOROVOD = {"sum": hvd.Sum, "prod": hvd.Product, "min": hvd.Min, "max": hvd.Max, "avg": hvd.Average}
CHORUS = {"band": chorus.BAND, "bor": chorus.BOR, "bxor": chorus.BXOR}


def inputs(op, peer, count=7):
    """Rank `peer`'s values for `op`: small enough that every result is exact in every dtype."""
    index = np.arange(count)
    if op == "prod":
        return 1 + (index + peer) % 2
    if op == "avg":
        return (index % 4) + 2 * peer  # sums to a multiple of size
    return (index * 3 + peer * 5) % 16 if op in ("band", "bor", "bxor") else (index + 2 * peer) % 5


def reference(op, count=7):
    stacked = np.stack([inputs(op, peer, count) for peer in range(size)]).astype(np.int64)
    if op == "avg":
        return stacked.sum(0) // size
    return {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "band": np.bitwise_and.reduce,
            "bor": np.bitwise_or.reduce, "bxor": np.bitwise_xor.reduce}[op](stacked, axis=0)


def reduce_op(op):
    return HOROVOD.get(op) or CHORUS[op]


def check_reductions():
    for dtype in REDUCIBLE:
        for op in FLOAT_OPS if dtype.is_floating else INTEGER_OPS:
            expected = tf.cast(reference(op), dtype)
            got = hvd.allreduce(tf.cast(inputs(op, rank), dtype), op=reduce_op(op))
            check.equal(got, expected, f"allreduce {op} {dtype.name}")
            # Horovod's rows: rows // size each, one more on the first rows % size ranks.
            rows = 2 * size + 1
            whole = tf.reshape(tf.cast(np.tile(inputs(op, rank, rows), 2), dtype), [2, rows])
            whole = tf.transpose(whole)
            first = rank * (rows // size) + min(rank, rows % size)
            mine = rows // size + (1 if rank < rows % size else 0)
            expected_rows = np.stack([reference(op, rows)] * 2, axis=1)[first:first + mine]
            got = hvd.reducescatter(whole, op=reduce_op(op))
            check.equal(got, tf.cast(expected_rows, dtype), f"reducescatter {op} {dtype.name}")
    check.equal(hvd.allreduce(tf.constant([1.0, 3.0]) * (rank + 1)),
                np.array([1.0, 3.0], np.float32) * (size + 1) / 2, "allreduce's default is Average")
    check.equal(hvd.allreduce(tf.constant([2.0]), average=False), np.array([2.0 * size], np.float32),
                "average=False is Sum")


def rows_of(peer, dtype, rows, columns=3):
    values = (np.arange(rows * columns).reshape(rows, columns) + 7 * peer) % 100
    return tf.cast(values % 2 if dtype == tf.bool else values, dtype)


def check_movement():
    for dtype in MOVABLE:
        gathered = hvd.allgather(rows_of(rank, dtype, rank + 1))
        expected = tf.concat([rows_of(peer, dtype, peer + 1) for peer in range(size)], 0)
        check.equal(gathered, expected, f"allgather {dtype.name}")
        for root in range(size):
            check.equal(hvd.broadcast(rows_of(rank, dtype, 2), root), rows_of(root, dtype, 2),
                        f"broadcast {dtype.name} from {root}")
        even = hvd.alltoall(rows_of(rank, dtype, 2 * size))
        expected = tf.concat([rows_of(peer, dtype, 2 * size)[2 * rank:2 * rank + 2] for peer in range(size)], 0)
        check.equal(even, expected, f"alltoall {dtype.name}")
        splits_of = [[(peer + p) % 3 for p in range(size)] for peer in range(size)]
        sent = rows_of(rank, dtype, sum(splits_of[rank]))
        received, received_splits = hvd.alltoall(sent, splits=splits_of[rank])
        pieces = []
        for peer in range(size):
            start = sum(splits_of[peer][:rank])
            pieces.append(rows_of(peer, dtype, sum(splits_of[peer]))[start:start + splits_of[peer][rank]])
        check.equal(received, tf.concat(pieces, 0), f"alltoall with splits {dtype.name}")
        check.equal(received_splits, np.array([splits_of[peer][rank] for peer in range(size)], np.int32),
                    f"alltoall's received splits {dtype.name}")


@tf.function
def graph(tensor):
    summed = hvd.allreduce(tensor, op=hvd.Sum)
    gathered = hvd.allgather(tensor[:rank + 1])
    return summed, gathered, hvd.broadcast(tensor, size - 1), hvd.alltoall(tf.tile(tensor[:1], [size]))


def check_graph():
    for step in range(3):
        values = tf.constant([rank + step, 2.0, 3.0, 4.0])
        summed, gathered, broadcast, exchanged = graph(values)
        check.equal(summed, [sum(peer + step for peer in range(size)), 2.0 * size, 3.0 * size, 4.0 * size],
                    "tf.function allreduce")
        expected = np.concatenate([np.array([peer + step, 2.0, 3.0, 4.0], np.float32)[:peer + 1]
                                   for peer in range(size)])
        check.equal(gathered, expected, "tf.function allgather")
        check.equal(broadcast, np.array([size - 1 + step, 2.0, 3.0, 4.0], np.float32), "tf.function broadcast")
        check.equal(exchanged, np.array([peer + step for peer in range(size)], np.float32), "tf.function alltoall")


def gradient_of(function, value):
    variable = tf.Variable(value)
    with tf.GradientTape() as tape:
        loss = function(variable)
    return tape.gradient(loss, variable)


def check_gradients():
    weight = float(rank + 1)  # each rank's loss weighs the op's output differently
    total = size * (size + 1) / 2
    x = tf.constant([1.0, 2.0, 3.0])
    check.equal(gradient_of(lambda v: tf.reduce_sum(hvd.allreduce(v, op=hvd.Sum) * weight), x),
                np.full(3, total, np.float32), "allreduce Sum's gradient: the gradients summed")
    check.equal(gradient_of(lambda v: tf.reduce_sum(hvd.allreduce(v) * weight), x),
                np.full(3, total / size, np.float32), "allreduce Average's gradient: the gradients averaged")
    row_weights = 2.0 * (rank + 1) + np.arange(size * (size + 1) // 2, dtype=np.float32)
    mine = tf.ones([rank + 1, 1])
    got = gradient_of(lambda v: tf.reduce_sum(hvd.allgather(v)[:, 0] * row_weights), mine)
    average = (size + 1) + np.arange(size * (size + 1) // 2, dtype=np.float32)
    first = rank * (rank + 1) // 2
    check.equal(got, average[first:first + rank + 1].reshape(-1, 1), "allgather's gradient: this rank's rows")
    got = gradient_of(lambda v: tf.reduce_sum(hvd.broadcast(v, 0) * weight), x)
    check.equal(got, np.full(3, total / size if rank == 0 else 0.0, np.float32), "broadcast's gradient")
    rows = tf.ones([size, 2])
    got = gradient_of(lambda v: tf.reduce_sum(hvd.reducescatter(v, op=hvd.Sum) * weight), rows)
    check.equal(got, np.repeat(np.arange(1, size + 1, dtype=np.float32) * size, 2).reshape(size, 2),
                "reducescatter Sum's gradient: allgathered, times size")
    splits = [1 + (rank + p) % 2 for p in range(size)]
    sent = tf.ones([sum(splits)])
    got = gradient_of(lambda v: tf.reduce_sum(hvd.alltoall(v, splits=splits)[0] * weight), sent)
    check.equal(got, np.concatenate([np.full(splits[p], p + 1.0, np.float32) for p in range(size)]),
                "alltoall's gradient: each row's receiver's weight")
    variable = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(variable * weight)
    tape = hvd.DistributedGradientTape(tape)
    check.true(isinstance(tape, tf.GradientTape), "DistributedGradientTape is a GradientTape")
    check.equal(tape.gradient(loss, [variable])[0], np.full(2, total / size, np.float32),
                "DistributedGradientTape averages")

    @tf.function
    def step():
        with tf.GradientTape() as inner:
            inner_loss = tf.reduce_sum(variable * weight)
        return hvd.DistributedGradientTape(inner, op=hvd.Sum).gradient(inner_loss, variable)
    check.equal(step(), np.full(2, total, np.float32), "DistributedGradientTape in a tf.function")


def raises_value_error(call, phrase):
    """True when call() raises ValueError with phrase in its message."""
    try:
        call()
    except ValueError as error:
        return phrase in str(error)
    return False


def adasum_tree(vectors):
    """Adasum as the formula reads, in float64: a(1 - a·b/2|a|²) + b(1 - a·b/2|b|²), pairs, then pairs of pairs."""
    def combine(a, b):
        dot = float(np.dot(a, b))
        a_norm, b_norm = float(np.dot(a, a)), float(np.dot(b, b))
        a_coefficient = 1.0 - dot / a_norm * 0.5 if a_norm > 0 else 1.0
        b_coefficient = 1.0 - dot / b_norm * 0.5 if b_norm > 0 else 1.0
        return a * a_coefficient + b * b_coefficient
    level = [np.asarray(v, np.float64) for v in vectors]
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def check_adasum():
    """op=Adasum: orthogonal vectors add, equal ones stay, others as the formula computes (every dot product
    of small integers, so one bit pattern); in tf.function and through DistributedGradientTape; a power of
    two ranks only."""
    if size & (size - 1):
        check.true(raises_value_error(lambda: hvd.allreduce(tf.ones([2]), op=hvd.Adasum), "power-of-two"),
                   "Adasum at a world that is not a power of two: ValueError")
        check.true(raises_value_error(lambda: hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Adasum),
                                      "power-of-two"), "DistributedGradientTape(op=Adasum) likewise")
        return
    one_hot = np.array([float(rank == i) for i in range(size)], np.float32)
    for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
        check.equal(hvd.allreduce(tf.cast(one_hot, dtype), op=hvd.Adasum), tf.ones([size], dtype),
                    f"Adasum of orthogonal vectors: their sum ({dtype.name})")
    check.equal(hvd.allreduce(tf.constant([[3.0, -1.5]]), op=hvd.Adasum), np.array([[3.0, -1.5]], np.float32),
                "Adasum of equal vectors: the vector, in its shape")
    everyone = {1: [[3.0, 4.0, 0.0]], 2: [[3.0, 4.0, 0.0], [1.0, 2.0, 2.0]],
                4: [[3.0, 4.0, 0.0], [4.0, -3.0, 0.0], [1.0, 2.0, 2.0], [1.0, 2.0, 2.0]]}[size]
    expected = adasum_tree(everyone)
    check.true(not np.array_equal(expected, np.sum(everyone, axis=0)) or size == 1,
               "Adasum differs from the sum here (the test can tell)")
    mine = tf.reshape(tf.constant(everyone[rank], tf.float64), [3, 1])
    check.equal(hvd.allreduce(mine, op=hvd.Adasum), expected.reshape(3, 1), "Adasum of general vectors")
    with_zero = [[0.0, 0.0]] + [[1.0, 2.0]] * (size - 1)  # a zero vector: its coefficient stays 1, no 0/0
    check.equal(hvd.allreduce(tf.constant(with_zero[rank], tf.float64), op=hvd.Adasum), adasum_tree(with_zero),
                "Adasum with a zero vector")
    check.equal(tf.function(lambda t: hvd.allreduce(t, op=hvd.Adasum))(tf.constant(one_hot)), np.ones(size, np.float32),
                "Adasum in a tf.function")
    # Each rank's gradient is (rank + 1) * [1, 1]: parallel vectors, whose Adasum is their average.
    variable = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(variable * float(rank + 1))
    got = hvd.DistributedGradientTape(tape, op=hvd.Adasum).gradient(loss, [variable])[0]
    check.equal(got, np.full(2, (size + 1) / 2, np.float32), "DistributedGradientTape(op=Adasum): parallel average")
    check.true(raises_value_error(lambda: hvd.allreduce(tf.ones([2], tf.int32), op=hvd.Adasum), "floating-point"),
               "Adasum of integers: ValueError")
    check.true(raises_value_error(lambda: hvd.reducescatter(tf.ones([size]), op=hvd.Adasum), "allreduce op"),
               "reducescatter(op=Adasum): ValueError")


def check_pooled_outputs():
    """Outputs of 1 MiB and more come from a pool of kept blocks: a block goes back only when its
    tensor dies. Results of earlier calls, still held, must keep their values while later calls of
    the same size run, and a block given back must serve the next call whole."""
    count = 3 << 18  # 3 MiB of float32
    ramp = np.arange(count, dtype=np.float32) % 1000

    def same(got, expected, what):
        got = np.asarray(got)
        check.true(got.shape == expected.shape and np.array_equal(got, expected),
                   f"{what}: {got.shape} {got.ravel()[:4]}... != {expected.shape} {expected.ravel()[:4]}...")

    held = []
    for call in range(4):
        tensor = tf.constant(ramp + rank + call)
        held.append((call, hvd.allreduce(tensor, op=hvd.Sum)))
        gathered = hvd.allgather(tf.reshape(tensor, [-1, 1024]))
        same(gathered, np.concatenate([ramp + peer + call for peer in range(size)]).reshape(-1, 1024),
             f"pooled allgather, call {call}")
        same(hvd.broadcast(tensor, 0), ramp + call, f"pooled broadcast, call {call}")
        if call % 2:
            del held[0]  # its block goes back to the pool, for the next call
    for call, result in held:
        same(result, size * (ramp + call) + size * (size - 1) // 2, f"pooled allreduce of call {call}, held")


check_reductions()
check_movement()
check_graph()
check_gradients()
check_adasum()
check_pooled_outputs()
if size == 2:
    import keras_fit
    keras_fit.check_fit(check)
import mismatches  # noqa: E402
mismatches.check_mismatches(check)
print(f"collectives OK {rank} {check.count}", flush=True)
