"""chorus.torch.hvd: Horovod's PyTorch API over chorus.

A single-process training script becomes a distributed one with Horovod's
changes, the import aside:

    import chorus.torch.hvd as hvd
    hvd.init()                                            # under chorus-run, torchrun, mpirun
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

Everything runs on torch.distributed's default process group, which init()
creates with the backend "chorus" (any backend works; the tests also run it
over "gloo").

DistributedOptimizer reduces gradients while the backward pass is still
running, through fusion buffers (docs/torch.md, "Horovod-style API"):
parameters are grouped into buckets of up to CHORUS_FUSION_BYTES (default
16 MiB; the first bucket, holding the gradients that are ready first, at
most 1 MiB so communication starts early), and a bucket is reduced as one
allreduce as soon as its last gradient is ready. Buckets are the same on
every rank and go out in the same order, which is what lets a collective
library fuse without Horovod's per-cycle negotiation between ranks: there is
no cycle time to tune. After the first step the buckets are rebuilt in the
order rank 0 saw gradients become ready.

Average reduces float16 and bfloat16 gradients in float32 (the sum of 64
float16 gradients of 2048 overflows float16; their average does not).
"""

# A private module per job (the job, handles, each collective family, the
# optimizer), so that new Horovod calls join their family's module or add one;
# this file only names the public API.
from ._allgather import allgather, allgather_async, grouped_allgather, grouped_allgather_async
from ._barrier import barrier
from ._allreduce import allreduce, allreduce_, allreduce_async, allreduce_async_
from ._alltoall import alltoall, alltoall_async
from ._broadcast import broadcast, broadcast_, broadcast_async, broadcast_async_
from ._grouped_allreduce import (grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                                 grouped_allreduce_async_)
from ._handles import poll, synchronize
from ._job import init, is_initialized, local_rank, local_size, rank, shutdown, size
from ._objects import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from ._ops import Average, Max, Min, Product, Sum
from ._optimizer import DistributedOptimizer
from ._process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from ._reducescatter import grouped_reducescatter, grouped_reducescatter_async, reducescatter, reducescatter_async

__all__ = [
    "Average", "Sum", "Min", "Max", "Product",
    "init", "is_initialized", "shutdown", "rank", "size", "local_rank", "local_size",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "grouped_allgather", "grouped_allgather_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "alltoall", "alltoall_async",
    "broadcast_object", "broadcast_parameters", "broadcast_optimizer_state",
    "poll", "synchronize", "DistributedOptimizer", "barrier",
    "ProcessSet", "add_process_set", "remove_process_set", "global_process_set",
]
