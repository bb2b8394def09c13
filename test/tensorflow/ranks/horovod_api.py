"""Horovod's TensorFlow API beyond the collectives (collectives.py): the grouped calls, the build questions,
the *_op tensors, object collectives, in-place and global-variable broadcasts, local sources and layers,
local gradient aggregation (Keras 3 and TensorFlow 1 optimizers), SyncBatchNormalization, the newly moved
dtypes, and the gradients in a TensorFlow 1 graph. Bit-exact on small integers."""

import keras
import numpy as np
import tensorflow as tf

import chorus
import chorus.tensorflow as hvd
import chorus.tensorflow.keras as hvd_keras
from common import Checker

hvd.init(chorus.connect_from_env())
rank, size = hvd.rank(), hvd.size()
total = size * (size + 1) // 2  # the sum of rank + 1
check = Checker(rank)


def check_grouped():
    tensors = [tf.fill([3], float(rank + 1)), tf.fill([2, 2], float(2 * (rank + 1))), tf.fill([1], rank + 1)]
    summed = hvd.grouped_allreduce(tensors, op=hvd.Sum)
    check.equal(summed[0], np.full([3], total, np.float32), "grouped_allreduce member 0")
    check.equal(summed[1], np.full([2, 2], 2 * total, np.float32), "grouped_allreduce member 1")
    check.equal(summed[2], np.full([1], total, np.int32), "grouped_allreduce int32 member (a dtype of its own)")
    scaled = hvd.grouped_allreduce(tensors[:2], op=hvd.Average, prescale_factor=2.0, postscale_factor=0.5)
    check.equal(scaled[0], np.full([3], total / size, np.float32), "grouped Average with scale factors")
    gathered = hvd.grouped_allgather([tf.fill([rank + 1, 2], rank), tf.fill([1], float(rank))])
    check.equal(gathered[0], np.concatenate([np.full([r + 1, 2], r, np.int32) for r in range(size)]),
                "grouped_allgather, per-rank rows")
    check.equal(gathered[1], np.arange(size, dtype=np.float32), "grouped_allgather member 1")
    rows = 2 * size + 1
    pieces = hvd.grouped_reducescatter([tf.ones([rows, 2]), tf.fill([size], float(rank + 1))], op=hvd.Sum)
    mine = rows // size + (1 if rank < rows % size else 0)
    check.equal(pieces[0], np.full([mine, 2], size, np.float32), "grouped_reducescatter, uneven rows")
    check.equal(pieces[1], np.full([1], total, np.float32), "grouped_reducescatter member 1")


def check_job_questions():
    check.true(not any([hvd.mpi_built(), hvd.gloo_built(), hvd.ccl_built(), hvd.cuda_built(), hvd.rocm_built(),
                        hvd.ddl_built(), hvd.mpi_enabled(), hvd.gloo_enabled()]) and hvd.nccl_built() == 0,
               "the build questions answer for chorus")
    check.true(int(hvd.rank_op()) == rank and int(hvd.size_op()) == size, "rank_op, size_op")
    check.true(int(hvd.local_rank_op()) == hvd.local_rank() and int(hvd.local_size_op()) == hvd.local_size(),
               "local_rank_op, local_size_op")
    check.true(hvd._executing_eagerly(), "_executing_eagerly")


def check_objects():
    obj = {"rank": rank, "list": [1, 2, rank]} if rank == 0 else None
    check.true(hvd.broadcast_object(obj, root_rank=0) == {"rank": 0, "list": [1, 2, 0]}, "broadcast_object")
    everyone = hvd.allgather_object({"r": rank, "extra": "x" * rank})
    check.true(everyone == [{"r": r, "extra": "x" * r} for r in range(size)], f"allgather_object: {everyone}")


def check_variables():
    variables = [tf.Variable(tf.fill([3], float(rank))), tf.Variable(tf.fill([2], rank))]
    values = hvd.broadcast_(variables, root_rank=size - 1)
    check.equal(values[0], np.full([3], size - 1, np.float32), "broadcast_ returns root's values")
    check.equal(variables[1], np.full([2], size - 1, np.int32), "broadcast_ sets the variables in place")
    with tf.Graph().as_default():
        global_variable = tf.compat.v1.Variable(tf.fill([2], float(rank)))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(hvd.broadcast_global_variables(0))
            check.equal(session.run(global_variable), np.zeros(2, np.float32), "broadcast_global_variables")
    try:
        hvd.broadcast_global_variables(0)
        check.true(False, "broadcast_global_variables ran eagerly")
    except RuntimeError:
        check.true(True, "broadcast_global_variables refuses eager execution")


def check_dtypes():
    for dtype in (tf.int16, tf.uint16, tf.complex64, tf.complex128):
        mine = tf.cast(tf.fill([rank + 1, 2], rank + 3), dtype)
        expected = tf.concat([tf.cast(tf.fill([r + 1, 2], r + 3), dtype) for r in range(size)], 0)
        check.equal(hvd.allgather(mine), expected, f"allgather {dtype.name}")
        check.equal(hvd.broadcast(mine[:1], 0), tf.cast(tf.fill([1, 2], 3), dtype), f"broadcast {dtype.name}")
        rows = tf.cast(tf.reshape(tf.range(size * 2) + 10 * rank, [size, 2]), dtype)
        expected = tf.cast(tf.stack([tf.range(2 * rank, 2 * rank + 2) + 10 * r for r in range(size)]), dtype)
        check.equal(hvd.alltoall(rows), expected, f"alltoall {dtype.name}")


def check_carried_and_not():
    """Small calls complete with their data in the negotiation; an allgather where some ranks' rows fit it and
    others' do not runs as a collective on every rank."""
    rows_of = [1 if r == 0 else 300 for r in range(size)]
    mine = tf.fill([rows_of[rank], 2], float(rank))
    expected = np.concatenate([np.full([rows_of[r], 2], float(r), np.float32) for r in range(size)])
    check.equal(hvd.allgather(mine), expected, "allgather of rows that fit a negotiation record beside ones that do not")
    for count in (1, 128, 129, 4096):  # 128 float32 fit a record, 129 do not
        check.equal(hvd.allreduce(tf.fill([count], float(rank + 1)), op=hvd.Sum, prescale_factor=2.0),
                    np.full([count], 2.0 * total, np.float32), f"allreduce of {count} float32 prescaled")
        check.equal(hvd.broadcast(tf.fill([count], rank), size - 1), np.full([count], size - 1, np.int32),
                    f"broadcast of {count} int32")


def check_local_sources():
    shared, local = tf.Variable([1.0, 1.0]), tf.Variable([1.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(shared * float(rank + 1)) + tf.reduce_sum(local * float(rank + 1))
    tape = hvd.DistributedGradientTape(tape, op=hvd.Sum)
    tape.register_local_source(local)
    got_shared, got_local = tape.gradient(loss, [shared, local])
    check.equal(got_shared, np.full([2], total, np.float32), "a shared source's gradient is reduced")
    check.equal(got_local, np.full([1], (rank + 1) / size, np.float32),
                "a local source's gradient is its own, divided by the ranks")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, kernel_initializer="ones"),
                              keras.layers.Dense(1, kernel_initializer="ones")])
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(model(tf.ones([1, 2])) * float(rank + 1))
    plain = tape.gradient(loss, model.trainable_variables)
    tape = hvd.PartialDistributedGradientTape(tape, local_layers=[model.layers[0]], op=hvd.Sum)
    partial = tape.gradient(loss, model.trainable_variables)
    local_grads, shared_grads = tape.get_local_and_global_gradients(loss, model.trainable_variables)
    check.equal(partial[0], plain[0] / size, "PartialDistributedGradientTape: a local layer's gradient")
    check.equal(partial[2], plain[2] / (rank + 1) * total, "PartialDistributedGradientTape: a shared layer's")
    check.true(len(local_grads) == 2 and len(shared_grads) == 2, "get_local_and_global_gradients splits them")


def check_keras_aggregation():
    """backward_passes_per_step=3: the gradients of 3 steps summed locally, then reduced once; the weights
    move every third step only, and the optimizer counts every step."""
    variable = tf.Variable([0.0, 0.0])
    optimizer = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=3, op=hvd.Sum)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = -tf.reduce_sum(variable) * float(rank + 1)
        optimizer.apply(tape.gradient(loss, [variable]), [variable])

    for index in range(7):
        step()
        updates = (index + 1) // 3
        check.equal(variable, np.full([2], 3.0 * total * updates, np.float32), f"aggregated step {index}")
    check.true(int(optimizer.iterations) == 7 and int(optimizer._agg_helper.counter) == 1,
               f"iterations {int(optimizer.iterations)}, counter {int(optimizer._agg_helper.counter)}")
    averaged = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                              average_aggregated_gradients=True)
    variable.assign([0.0, 0.0])
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_sum(variable) * float(rank + 1)
        averaged.apply(tape.gradient(loss, [variable]), [variable])
    check.equal(variable, np.full([2], total / size, np.float32), "average_aggregated_gradients divides by the steps")


def check_legacy_aggregation():
    """A TensorFlow 1 optimizer in a graph: DistributedOptimizer reduces in compute_gradients and, with
    backward_passes_per_step=2, applies every second step while global_step counts every step."""
    with tf.Graph().as_default():
        variable = tf.compat.v1.Variable([0.0])
        global_step = tf.compat.v1.Variable(0, dtype=tf.int64)
        loss = -variable * float(rank + 1)
        optimizer = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(1.0),
                                             backward_passes_per_step=2, op=hvd.Sum)
        train = optimizer.apply_gradients(optimizer.compute_gradients(loss, [variable]), global_step=global_step)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for index in range(4):
                session.run(train)
                got, steps = session.run([variable, global_step])
                check.equal(got, np.full([1], 2.0 * total * ((index + 1) // 2), np.float32),
                            f"TensorFlow 1 aggregated step {index}")
                check.true(steps == index + 1, f"global_step {steps} after {index + 1} steps")


def check_graph_gradients():
    """Gradients built by tf.gradients in a TensorFlow 1 graph: allgather's needs the ranks' row counts at run
    time (its tf.split once could not infer them)."""
    with tf.Graph().as_default():
        mine = tf.ones([rank + 1, 2])
        gathered = hvd.allgather(mine)
        weights = tf.constant(np.arange(total * 2, dtype=np.float32).reshape(total, 2))
        gradient = tf.gradients(tf.reduce_sum(gathered * weights), mine)[0]
        same = tf.ones([2, 2])
        reduced = tf.gradients(tf.reduce_sum(hvd.allreduce(same, op=hvd.Sum)) * float(rank + 1), same)[0]
        with tf.compat.v1.Session() as session:
            got, got_reduced = session.run([gradient, reduced])
    first = rank * (rank + 1) // 2
    check.equal(got, np.arange(total * 2, dtype=np.float32).reshape(total, 2)[first:first + rank + 1],
                "allgather's gradient in a TensorFlow 1 graph")
    check.equal(got_reduced, np.full([2, 2], total, np.float32), "allreduce's gradient in a graph")


def check_sync_batch_norm():
    # Rank r's batch: two rows; the whole batch's statistics are those of every rank's rows together.
    mine = np.array([[rank, 2.0 * rank], [rank + 2.0, 2.0 * rank + 4.0]], np.float32)
    everyone = np.concatenate([np.array([[r, 2.0 * r], [r + 2.0, 2.0 * r + 4.0]], np.float32) for r in range(size)])
    layer = hvd.SyncBatchNormalization(epsilon=0.0, momentum=0.5)
    got = layer(tf.constant(mine), training=True)
    mean, variance = everyone.mean(0), everyone.var(0)
    check.true(np.allclose(got, (mine - mean) / np.sqrt(variance), atol=1e-6),
               f"SyncBatchNormalization normalizes with the whole batch's statistics: {got}")
    check.true(np.allclose(np.asarray(layer.moving_mean), 0.5 * mean, atol=1e-6), "the moving mean moves toward it")


check_grouped()
check_job_questions()
check_objects()
check_variables()
check_dtypes()
check_carried_and_not()
check_local_sources()
check_keras_aggregation()
check_legacy_aggregation()
check_graph_gradients()
check_sync_batch_norm()
print(f"horovod_api OK {rank} {check.count}", flush=True)
