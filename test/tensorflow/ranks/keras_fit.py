"""A 2-rank Keras model.fit with DistributedOptimizer and both callbacks ends with the weights of one
process training on the whole batch. Exact: a linear model, SGD with a power-of-two rate, small integer
data and power-of-two batches, so every float on both paths is exact whatever the order of its sums."""

import keras
import numpy as np
import tensorflow as tf

import chorus.tensorflow as hvd_tf
import chorus.tensorflow.keras as hvd

SAMPLES = 8
FEATURES = 3
EPOCHS = 3
RATE = 1.0 / 64


def data():
    x = (np.arange(SAMPLES * FEATURES).reshape(SAMPLES, FEATURES) % 5).astype(np.float32)
    y = ((np.arange(SAMPLES) * 3) % 7).astype(np.float32).reshape(SAMPLES, 1)
    return x, y


def model(initial):
    built = keras.Sequential([keras.Input((FEATURES,)),
                              keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(initial),
                                                 bias_initializer=keras.initializers.Constant(initial))])
    return built


class Record(keras.callbacks.Callback):
    def __init__(self, into):
        super().__init__()
        self.into = into

    def on_epoch_end(self, epoch, logs=None):
        self.into.append(float(logs["loss"]))


def check_fit(check):
    rank, size = hvd.rank(), hvd.size()
    x, y = data()
    # The reference: rank 0's starting weights, every sample in one batch.
    single = model(1.0)
    single.compile(optimizer=keras.optimizers.SGD(RATE), loss="mse")
    single.fit(x, y, batch_size=SAMPLES, epochs=EPOCHS, shuffle=False, verbose=0)

    # Each rank starts from other weights: the broadcast callback must make them rank 0's.
    distributed = model(1.0 + rank)
    distributed.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(RATE)), loss="mse")
    raw, averaged = [], []
    mine = slice(rank * SAMPLES // size, (rank + 1) * SAMPLES // size)
    distributed.fit(x[mine], y[mine], batch_size=SAMPLES // size, epochs=EPOCHS, shuffle=False, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), Record(raw),
                               hvd.callbacks.MetricAverageCallback(), Record(averaged)])
    for got, expected in zip(distributed.get_weights(), single.get_weights()):
        check.equal(got, expected, "Keras fit's weights against one process on the whole batch")
    check.true(single.get_weights()[1][0] != 1.0, "the reference trained at all")
    every_raw = hvd_tf.allgather(tf.constant([raw], tf.float64)).numpy()
    check.equal(np.array(averaged), every_raw.mean(axis=0), "MetricAverageCallback averages the logged loss")
    check.true(every_raw[0, -1] != every_raw[1, -1], "the ranks' losses differ before averaging")
