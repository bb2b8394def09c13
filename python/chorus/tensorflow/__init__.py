"""chorus.tensorflow: Horovod's TensorFlow API over chorus.

A Horovod TensorFlow script changes its import only:

    import chorus.tensorflow as hvd          # was: import horovod.tensorflow as hvd
    hvd.init()                               # under chorus-run, torchrun, mpirun
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    hvd.broadcast_variables(model.variables, root_rank=0)

The collectives are TensorFlow ops (a C++ op library built against the
installed TensorFlow, adapters/tensorflow/): asynchronous kernels on CPU
tensors, eagerly, in tf.function and in TensorFlow 1 graphs. Before any
data moves, each call is matched with the other ranks' (in program order
where every rank has one, by name in a TensorFlow 1 graph, whose ops run
in any order) and compared: ranks whose calls differ get
tf.errors.FailedPreconditionError naming both, as in Horovod, and the job
goes on. chorus's other errors become TensorFlow errors too (a lost peer
UnavailableError, a timeout DeadlineExceededError, a bad argument
InvalidArgumentError). docs/tensorflow.md has the Horovod table: what is
here and what is not.
"""

# A private module per job: the job, the library and its handles, what the
# collectives share, each family of collectives, their gradients, objects,
# variables, the tape and the optimizers. This file names the API.
from . import _gradients  # noqa: F401  (registers the ops' gradients)
from . import elastic
from .._horovod_build import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled,
                              mpi_threads_supported, nccl_built, rocm_built)
from ._compression import Compression, Compressor
from ._job import context, init, is_initialized, local_rank, local_size, rank, shutdown, size
from ._job_ops import local_rank_op, local_size_op, process_set_included_op, rank_op, size_op
from ._movement import allgather, alltoall, broadcast, broadcast_, grouped_allgather
from ._objects import allgather_object, broadcast_object, broadcast_object_fn
from ._ops import (Adasum, Average, Max, Min, Product, Sum, global_process_set,
                   handle_average_backwards_compatibility)
from ._optimizer import DistributedOptimizer
from ._reductions import allreduce, grouped_allreduce, grouped_reducescatter, reducescatter
from ._sync_batch_norm import SyncBatchNormalization
from ._tape import DistributedGradientTape, PartialDistributedGradientTape
from ._variables import BroadcastGlobalVariablesHook, broadcast_global_variables, broadcast_variables
from .util import _executing_eagerly


__all__ = [
    "Adasum", "Average", "BroadcastGlobalVariablesHook", "Compression", "Compressor", "DistributedGradientTape",
    "DistributedOptimizer", "Max", "Min", "PartialDistributedGradientTape", "Product", "Sum",
    "SyncBatchNormalization", "_executing_eagerly", "allgather", "allgather_object", "allreduce", "alltoall",
    "broadcast", "broadcast_", "broadcast_global_variables", "broadcast_object", "broadcast_object_fn",
    "broadcast_variables", "ccl_built", "context", "cuda_built", "ddl_built", "elastic", "global_process_set",
    "gloo_built", "gloo_enabled", "grouped_allgather", "grouped_allreduce", "grouped_reducescatter",
    "handle_average_backwards_compatibility", "init", "is_initialized", "local_rank", "local_rank_op", "local_size",
    "local_size_op", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "process_set_included_op",
    "rank", "rank_op", "reducescatter", "rocm_built", "shutdown", "size", "size_op",
]
