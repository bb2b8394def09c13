"""chorus.tensorflow.keras: Horovod's Keras API (horovod.tensorflow.keras and horovod.keras) over chorus.tensorflow.

    import chorus.tensorflow.keras as hvd    # was: import horovod.tensorflow.keras as hvd
    hvd.init()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()])

For the Keras that ships with TensorFlow 2.16 and later (Keras 3).
"""

from .. import (Average, Compression, Max, Min, Product, Sum, allgather, allreduce, alltoall, broadcast,
                broadcast_global_variables, broadcast_variables, ccl_built, cuda_built, ddl_built, global_process_set,
                gloo_built, gloo_enabled, init, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                mpi_threads_supported, nccl_built, rank, reducescatter, rocm_built, shutdown, size)
from . import callbacks, elastic
from .._keras_optimizer import DistributedOptimizer, PartialDistributedOptimizer

__all__ = [
    "Average", "Compression", "DistributedOptimizer", "Max", "Min", "PartialDistributedOptimizer", "Product", "Sum",
    "allgather", "allreduce", "alltoall", "broadcast", "broadcast_global_variables", "broadcast_variables",
    "callbacks", "ccl_built", "cuda_built", "ddl_built", "elastic", "global_process_set", "gloo_built",
    "gloo_enabled", "init", "is_initialized", "local_rank", "local_size", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "nccl_built", "rank", "reducescatter", "rocm_built", "shutdown", "size",
]
