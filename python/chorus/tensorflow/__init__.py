"""chorus.tensorflow: Horovod's TensorFlow API over chorus.

A Horovod TensorFlow script changes its import only:

    import chorus.tensorflow as hvd          # was: import horovod.tensorflow as hvd
    hvd.init()                               # under chorus-run, torchrun, mpirun
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    hvd.broadcast_variables(model.variables, root_rank=0)

The collectives are TensorFlow ops (a C++ op library built against the
installed TensorFlow, python/tensorflow/), asynchronous kernels whose chorus
call runs on a thread of the Context's own, so TensorFlow's threads never
wait on the network. They run eagerly and inside tf.function, in program
order (they are stateful ops), on CPU tensors; chorus's errors (a lost peer
naming its rank, a timeout, ranks passing different shapes) become
TensorFlow errors (tf.errors.UnavailableError, DeadlineExceededError,
InvalidArgumentError, AbortedError). docs/tensorflow.md has the Horovod
table: what is here and what is not.
"""

# One private module per job: the job, the library and its handles, the
# collectives, their gradients, variables, the tape. This file names the API.
from . import _gradients  # noqa: F401  (registers the ops' gradients)
from ._compression import Compression, Compressor
from ._job import context, init, is_initialized, local_rank, local_size, rank, shutdown, size
from ._ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allreduce, alltoall, broadcast,
                   global_process_set, handle_average_backwards_compatibility, reducescatter)
from ._tape import DistributedGradientTape
from ._variables import broadcast_variables

__all__ = [
    "Adasum", "Average", "Compression", "Compressor", "DistributedGradientTape", "Max", "Min", "Product", "Sum",
    "allgather", "allreduce", "alltoall", "broadcast", "broadcast_variables", "context", "global_process_set",
    "handle_average_backwards_compatibility", "init", "is_initialized", "local_rank", "local_size", "rank",
    "reducescatter", "shutdown", "size",
]
