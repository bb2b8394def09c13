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

Horovod's extras are here with its names and defaults: Compression,
Adasum, sparse_allreduce_async, allgather_object, SyncBatchNorm, the
timeline, HorovodInternalError, cross_rank/cross_size and the build
questions (docs/torch.md says how each maps onto chorus).
"""

# A private module per job (the job, handles, each collective family, the
# optimizer), so that new Horovod calls join their family's module or add one;
# this file only names the public API. The collectives are exported through
# _calls.public_call: the timeline records them, and chorus's errors reach
# the caller as HorovodInternalError too.
from . import (_allgather, _allreduce, _alltoall, _broadcast, _gather, _grouped_allreduce, _handles, _reducescatter,
               _sparse, elastic)
from ..._horovod_build import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built, mpi_enabled,
                     mpi_threads_supported, nccl_built, rocm_built)
from ._calls import public_call, public_synchronize
from ._compression import Compression, Compressor
from ._errors import HorovodInternalError
from ._barrier import barrier
from ._job import is_initialized, local_rank, local_size, rank, size
from ._join import join
from ._lifecycle import init, shutdown
from ._objects import allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters
from ._ops import Adasum, Average, Max, Min, Product, Sum
from ._optimizer import DistributedOptimizer
from ._process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from ._sync_batch_norm import SyncBatchNorm
from ._timeline import start_timeline, stop_timeline
from ._topology import cross_rank, cross_size, forget_topology, is_homogeneous, learn_topology


allreduce = public_call("allreduce", _allreduce.allreduce)
allreduce_ = public_call("allreduce", _allreduce.allreduce_)
allreduce_async = public_call("allreduce", _allreduce.allreduce_async, returns_handle=True)
allreduce_async_ = public_call("allreduce", _allreduce.allreduce_async_, returns_handle=True)
allgather = public_call("allgather", _allgather.allgather)
allgather_async = public_call("allgather", _gather.allgather_async, returns_handle=True)
broadcast = public_call("broadcast", _broadcast.broadcast)
broadcast_ = public_call("broadcast", _broadcast.broadcast_)
broadcast_async = public_call("broadcast", _broadcast.broadcast_async, returns_handle=True)
broadcast_async_ = public_call("broadcast", _broadcast.broadcast_async_, returns_handle=True)
grouped_allreduce = public_call("allreduce", _grouped_allreduce.grouped_allreduce)
grouped_allreduce_ = public_call("allreduce", _grouped_allreduce.grouped_allreduce_)
grouped_allreduce_async = public_call("allreduce", _grouped_allreduce.grouped_allreduce_async, returns_handle=True)
grouped_allreduce_async_ = public_call("allreduce", _grouped_allreduce.grouped_allreduce_async_, returns_handle=True)
grouped_allgather = public_call("allgather", _allgather.grouped_allgather)
grouped_allgather_async = public_call("allgather", _gather.grouped_allgather_async, returns_handle=True)
reducescatter = public_call("reducescatter", _reducescatter.reducescatter)
reducescatter_async = public_call("reducescatter", _reducescatter.reducescatter_async, returns_handle=True)
grouped_reducescatter = public_call("reducescatter", _reducescatter.grouped_reducescatter)
grouped_reducescatter_async = public_call("reducescatter", _reducescatter.grouped_reducescatter_async,
                                          returns_handle=True)
alltoall = public_call("alltoall", _alltoall.alltoall)
alltoall_async = public_call("alltoall", _alltoall.alltoall_async, returns_handle=True)
sparse_allreduce_async = public_call("allreduce", _sparse.sparse_allreduce_async, returns_handle=True)
synchronize = public_synchronize(_handles.synchronize)
poll = _handles.poll

__all__ = [
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "init", "is_initialized", "shutdown", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "is_homogeneous",
    "mpi_built", "mpi_enabled", "mpi_threads_supported", "gloo_built", "gloo_enabled", "nccl_built",
    "ddl_built", "ccl_built", "cuda_built", "rocm_built", "HorovodInternalError",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "sparse_allreduce_async",
    "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "broadcast_object", "allgather_object", "broadcast_parameters", "broadcast_optimizer_state",
    "poll", "synchronize", "DistributedOptimizer", "Compression", "Compressor", "SyncBatchNorm",
    "start_timeline", "stop_timeline", "barrier", "join",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "grouped_allgather", "grouped_allgather_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "alltoall", "alltoall_async",
    "ProcessSet", "add_process_set", "remove_process_set", "global_process_set", "elastic",
]
