"""chorus.tensorflow.keras: Horovod's Keras API (horovod.tensorflow.keras) over chorus.tensorflow.

    import chorus.tensorflow.keras as hvd    # was: import horovod.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

For the Keras that ships with TensorFlow 2.16 and later (Keras 3).
"""

from .. import (Average, Compression, Max, Min, Product, Sum, allgather, allreduce, alltoall, broadcast,
                broadcast_variables, init, is_initialized, local_rank, local_size, rank, reducescatter, shutdown,
                size)
from . import callbacks
from ._optimizer import DistributedOptimizer

__all__ = [
    "Average", "Compression", "DistributedOptimizer", "Max", "Min", "Product", "Sum", "allgather", "allreduce",
    "alltoall", "broadcast", "broadcast_variables", "callbacks", "init", "is_initialized", "local_rank",
    "local_size", "rank", "reducescatter", "shutdown", "size",
]
