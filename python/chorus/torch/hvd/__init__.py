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

import inspect
import io
import os
import pickle  # noqa: S403  (objects come from the job's own root rank)
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist

from ... import _environment
from .. import ProcessGroupChorus

__all__ = [
    "Average", "Sum", "Min", "Max", "Product",
    "init", "is_initialized", "shutdown", "rank", "size", "local_rank", "local_size",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "allgather", "allgather_async", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "broadcast_object", "broadcast_parameters", "broadcast_optimizer_state",
    "poll", "synchronize", "DistributedOptimizer",
]


class _Op:
    def __init__(self, name, torch_op):
        self.name = name
        self.torch_op = torch_op

    def __repr__(self):
        return f"hvd.{self.name}"


Average = _Op("Average", dist.ReduceOp.SUM)  # summed (in float32 for 16-bit floats), then divided
Sum = _Op("Sum", dist.ReduceOp.SUM)
Min = _Op("Min", dist.ReduceOp.MIN)
Max = _Op("Max", dist.ReduceOp.MAX)
Product = _Op("Product", dist.ReduceOp.PRODUCT)

_HALF_TYPES = (torch.float16, torch.bfloat16)
_DEFAULT_FUSION_BYTES = 16 << 20
_FIRST_BUCKET_BYTES = 1 << 20


class _State:
    created_group = False
    local = None  # (local_rank, local_size)


_state = _State()


# ---- the job ----------------------------------------------------------------

def init(backend="chorus", timeout=None):
    """Joins the job (torch.distributed's default group, made with `backend` unless one exists).

    timeout: a timedelta or seconds bounding connecting and every collective
    (torch's default when None)."""
    if dist.is_initialized():
        return
    if timeout is not None and not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    if timeout is None:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, timeout=timeout)
    _state.created_group = True
    _state.local = None


def is_initialized():
    return dist.is_initialized()


def shutdown():
    """Leaves the job: destroys the default group if init() created it."""
    if _state.created_group and dist.is_initialized():
        dist.destroy_process_group()
    _state.created_group = False
    _state.local = None


def _require_init(what):
    if not dist.is_initialized():
        raise ValueError(f"chorus.torch.hvd.{what}: call hvd.init() first")


def rank():
    _require_init("rank")
    return dist.get_rank()


def size():
    _require_init("size")
    return dist.get_world_size()


def _chorus_backend():
    """The chorus backend of the default group, or None under another backend."""
    group = dist.distributed_c10d._get_default_group()  # noqa: SLF001  (no public accessor)
    if isinstance(group, ProcessGroupChorus):
        return group  # torch 1.x: the group is the backend
    get_backend = getattr(group, "_get_backend", None)  # torch 2.x: a backend per device type
    if get_backend is not None:
        try:
            backend = get_backend(torch.device("cpu"))
        except RuntimeError:
            return None
        if isinstance(backend, ProcessGroupChorus):
            return backend
    return None


def _local():
    if _state.local is None:
        backend = _chorus_backend()
        if backend is not None:
            # chorus's own host identity: the one its transports and algorithms use.
            _state.local = (backend.local_rank, backend.local_size)
        else:
            # Another backend: the ranks that share a host name.
            names = [None] * size()
            dist.all_gather_object(names, os.uname().nodename)
            mine = names[rank()]
            _state.local = (names[:rank()].count(mine), names.count(mine))
    return _state.local


def local_rank():
    """This rank's index among the job's ranks on its host."""
    _require_init("local_rank")
    return _local()[0]


def local_size():
    _require_init("local_size")
    return _local()[1]


# ---- handles ----------------------------------------------------------------

class _Handle:
    """An operation in flight; synchronize(handle) waits and returns its result."""

    def __init__(self, works, finish):
        self._works = works
        self._finish = finish
        self._result = None
        self._done = False

    def poll(self):
        return self._done or all(work.is_completed() for work in self._works)

    def wait(self):
        if not self._done:
            for work in self._works:
                work.wait()
            self._result = self._finish()
            self._done = True
        return self._result


def poll(handle):
    """True once the operation behind handle has finished (synchronize will not block)."""
    return handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (raises its error, naming the failed rank)."""
    return handle.wait()


# ---- allreduce ----------------------------------------------------------------

def _resolve_op(average, op, what):
    if average is not None and op is not None:
        raise ValueError(f"chorus.torch.hvd.{what}: give average= or op=, not both")
    if op is None:
        return Sum if average is False else Average
    if not isinstance(op, _Op):
        raise ValueError(f"chorus.torch.hvd.{what}: op must be hvd.Average, Sum, Min, Max or Product, not {op!r}")
    return op


def _reduction_buffer(tensor, op):
    """The tensor reduced in place: float32 for averaged 16-bit floats, else the tensor's dtype."""
    if op is Average and tensor.dtype in _HALF_TYPES:
        return torch.float32
    if op is Average and not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"chorus.torch.hvd: Average of {tensor.dtype} is not defined (use hvd.Sum and divide)")
    return tensor.dtype


def _check_tensor(tensor, what):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"chorus.torch.hvd.{what}: expected a torch.Tensor, got {type(tensor).__name__}")


def _allreduce_into(tensor, output, op, what):
    _check_tensor(tensor, what)
    _require_init(what)
    dtype = _reduction_buffer(tensor, op)
    if dtype == output.dtype and output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().to(dtype=dtype, copy=True).contiguous()
    work = dist.all_reduce(buffer, op=op.torch_op, async_op=True)
    world = size()

    def finish():
        if op is Average:
            buffer.div_(world)
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer.view_as(output))
        return output

    return _Handle([work], finish)


def allreduce_async(tensor, average=None, name=None, op=None):  # noqa: ARG001  (name: Horovod's, for its timeline)
    """Starts reducing a copy of tensor across ranks (op: Average by default); synchronize() returns it."""
    op = _resolve_op(average, op, "allreduce_async")
    _check_tensor(tensor, "allreduce_async")
    return _allreduce_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), op, "allreduce_async")


def allreduce_async_(tensor, average=None, name=None, op=None):  # noqa: ARG001
    """Starts reducing tensor in place."""
    op = _resolve_op(average, op, "allreduce_async_")
    return _allreduce_into(tensor, tensor, op, "allreduce_async_")


def allreduce(tensor, average=None, name=None, op=None):
    """The reduction of tensor across ranks, as a new tensor (Average by default)."""
    return synchronize(allreduce_async(tensor, average, name, op))


def allreduce_(tensor, average=None, name=None, op=None):
    """Reduces tensor in place and returns it."""
    return synchronize(allreduce_async_(tensor, average, name, op))


# ---- allgather and broadcast ------------------------------------------------

def allgather_async(tensor, name=None):  # noqa: ARG001
    """Starts concatenating every rank's tensor along dimension 0 (first dimensions may differ)."""
    _check_tensor(tensor, "allgather_async")
    _require_init("allgather_async")
    world = size()
    local = tensor.detach().contiguous()
    if local.dim() == 0:
        local = local.view(1)
    rows = torch.tensor([local.shape[0]], dtype=torch.int64)
    all_rows = [torch.empty_like(rows) for _ in range(world)]
    dist.all_gather(all_rows, rows)  # each rank's rows: the padding below needs them
    counts = [int(r.item()) for r in all_rows]
    longest = max(counts)
    padded = local
    if local.shape[0] < longest:
        padded = torch.zeros((longest,) + tuple(local.shape[1:]), dtype=local.dtype)
        padded[:local.shape[0]] = local
    gathered = [torch.empty_like(padded) for _ in range(world)]
    work = dist.all_gather(gathered, padded, async_op=True)

    def finish():
        return torch.cat([block[:count] for block, count in zip(gathered, counts)], dim=0)

    return _Handle([work], finish)


def allgather(tensor, name=None):
    return synchronize(allgather_async(tensor, name))


def _check_root(root_rank, what):
    world = size()
    if not isinstance(root_rank, int) or not 0 <= root_rank < world:
        raise ValueError(f"chorus.torch.hvd.{what}: root_rank {root_rank!r} is not a rank of this {world}-rank job")


def _broadcast_into(tensor, output, root_rank, what):
    _check_tensor(tensor, what)
    _require_init(what)
    _check_root(root_rank, what)
    if output.is_contiguous():
        buffer = output.detach()
        if output is not tensor:
            buffer.copy_(tensor.detach())
    else:
        buffer = tensor.detach().clone(memory_format=torch.contiguous_format)
    work = dist.broadcast(buffer, src=root_rank, async_op=True)

    def finish():
        if buffer.data_ptr() != output.data_ptr():
            with torch.no_grad():
                output.copy_(buffer)
        return output

    return _Handle([work], finish)


def broadcast_async(tensor, root_rank, name=None):  # noqa: ARG001
    """Starts broadcasting root_rank's tensor into a new tensor on every rank."""
    _check_tensor(tensor, "broadcast_async")
    return _broadcast_into(tensor, torch.empty(tensor.shape, dtype=tensor.dtype), root_rank, "broadcast_async")


def broadcast_async_(tensor, root_rank, name=None):  # noqa: ARG001
    return _broadcast_into(tensor, tensor, root_rank, "broadcast_async_")


def broadcast(tensor, root_rank, name=None):
    return synchronize(broadcast_async(tensor, root_rank, name))


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


def broadcast_object(obj, root_rank=0):
    """root_rank's obj (pickled with torch.save, so tensors travel too) on every rank."""
    _require_init("broadcast_object")
    _check_root(root_rank, "broadcast_object")
    if rank() == root_rank:
        stream = io.BytesIO()
        torch.save(obj, stream, pickle_protocol=pickle.HIGHEST_PROTOCOL)
        payload = torch.frombuffer(bytearray(stream.getvalue()), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    dist.broadcast(length, src=root_rank)
    if rank() != root_rank:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    dist.broadcast(payload, src=root_rank)
    if rank() == root_rank:
        return obj
    # Any object, as Horovod's broadcast_object takes: torch 2.6 and later
    # load only tensors and plain containers unless told otherwise. The bytes
    # come from the job's own root rank, whose connections proved the job's
    # secret (torch's own broadcast_object_list unpickles the same way).
    if "weights_only" in inspect.signature(torch.load).parameters:
        return torch.load(io.BytesIO(payload.numpy().tobytes()), weights_only=False)
    return torch.load(io.BytesIO(payload.numpy().tobytes()))


def broadcast_parameters(params, root_rank=0):
    """Sets every rank's parameters (a state_dict, named_parameters(), or tensors) to root_rank's, in place."""
    _require_init("broadcast_parameters")
    _check_root(root_rank, "broadcast_parameters")
    if isinstance(params, dict):
        tensors = [tensor for _, tensor in sorted(params.items())]
    else:
        tensors = [item[1] if isinstance(item, tuple) else item for item in params]
    handles = []
    for tensor in tensors:
        _check_tensor(tensor, "broadcast_parameters")
        handles.append(broadcast_async_(tensor.data if tensor.requires_grad else tensor, root_rank))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Sets every rank's optimizer state and hyperparameters to root_rank's (its state_dict, broadcast)."""
    _require_init("broadcast_optimizer_state")
    state = broadcast_object(optimizer.state_dict() if rank() == root_rank else None, root_rank)
    if rank() != root_rank:
        optimizer.load_state_dict(state)


# ---- the optimizer ------------------------------------------------------------

class _Bucket:
    def __init__(self, dtype):
        self.dtype = dtype  # of the fusion buffer
        self.indices = []
        self.offsets = []
        self.elements = 0
        self.unready = 0
        self.buffer = None
        self.work = None

    def nbytes(self):
        return self.elements * torch.empty(0, dtype=self.dtype).element_size()


class _GradientFusion:
    """The gradients of one DistributedOptimizer: buckets, hooks, and the allreduces in flight."""

    def __init__(self, params, names, op, fusion_bytes, backward_passes_per_step):
        self.params = params
        self.names = names
        self.op = op
        self.fusion_bytes = fusion_bytes
        self.passes_per_step = backward_passes_per_step
        self.passes = [0] * len(params)
        self.first_step = True
        self.ready_order = []
        self._hooks = []
        self.buckets = []
        self.bucket_of = []
        self.next_launch = 0
        self.ready_count = 0
        # Expected readiness: backward runs from the last layer to the first.
        self._plan(list(reversed(range(len(params)))))
        for index, param in enumerate(params):
            self._hooks.append(self._hook(index, param))

    def _hook(self, index, param):
        def ready(*_):
            self._ready(index)

        if hasattr(param, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            return param.register_post_accumulate_grad_hook(lambda _param: ready())
        # torch 1.x: the gradient accumulator of the parameter (kept alive here).
        accumulator = param.expand_as(param).grad_fn.next_functions[0][0]
        handle = accumulator.register_hook(ready)
        return (accumulator, handle)

    def _buffer_dtype(self, param):
        if self.op is Average and param.dtype in _HALF_TYPES:
            return torch.float32
        return param.dtype

    def _plan(self, order):
        """Buckets over the parameters in `order`: consecutive ones of one buffer dtype, up to the fusion size."""
        self.buckets = []
        self.bucket_of = [None] * len(self.params)
        open_bucket = {}
        for index in order:
            param = self.params[index]
            dtype = self._buffer_dtype(param)
            bucket = open_bucket.get(dtype)
            if bucket is not None:
                limit = min(_FIRST_BUCKET_BYTES, self.fusion_bytes) if bucket is self.buckets[0] else self.fusion_bytes
                element = torch.empty(0, dtype=dtype).element_size()
                if (bucket.elements + param.numel()) * element > limit:
                    bucket = None  # full: this parameter opens the next one
            if bucket is None:
                bucket = _Bucket(dtype)
                self.buckets.append(bucket)
                open_bucket[dtype] = bucket
            bucket.indices.append(index)
            bucket.offsets.append(bucket.elements)
            bucket.elements += param.numel()
            self.bucket_of[index] = bucket
        self._reset_counts()

    def _reset_counts(self):
        for bucket in self.buckets:
            bucket.unready = len(bucket.indices)
            bucket.work = None
        self.passes = [0] * len(self.params)
        self.next_launch = 0
        self.ready_count = 0

    def _ready(self, index):
        self.passes[index] += 1
        if self.passes[index] > self.passes_per_step:
            raise RuntimeError(
                f"chorus.torch.hvd: the gradient of {self.names[index]} was computed {self.passes[index]} times "
                f"before optimizer.step() (backward_passes_per_step={self.passes_per_step}); call step() or "
                f"synchronize() after every {self.passes_per_step} backward pass(es)")
        if self.passes[index] < self.passes_per_step:
            return
        if self.first_step:
            self.ready_order.append(index)
        self.ready_count += 1
        self.bucket_of[index].unready -= 1
        self._launch_ready()

    def _launch_ready(self):
        # In bucket order only: every rank issues the same allreduces in the same order.
        while self.next_launch < len(self.buckets) and self.buckets[self.next_launch].unready == 0:
            self._launch(self.buckets[self.next_launch])
            self.next_launch += 1

    def _launch(self, bucket):
        if bucket.buffer is None or bucket.buffer.numel() != bucket.elements:
            bucket.buffer = torch.empty(bucket.elements, dtype=bucket.dtype)
        with torch.no_grad():
            for index, offset in zip(bucket.indices, bucket.offsets):
                param = self.params[index]
                if param.grad is None:
                    # Unused on this rank (maybe not on others): it contributes zeros.
                    param.grad = torch.zeros_like(param)
                if param.grad.is_sparse:
                    raise ValueError(f"chorus.torch.hvd: {self.names[index]} has a sparse gradient, which "
                                     f"DistributedOptimizer does not reduce")
                bucket.buffer[offset:offset + param.numel()].copy_(param.grad.reshape(-1))
        bucket.work = dist.all_reduce(bucket.buffer, op=self.op.torch_op, async_op=True)

    def pending(self):
        """Whether gradients were computed for reduction since the last synchronize."""
        return self.ready_count > 0

    def synchronize(self):
        # Buckets whose gradients never became ready go out now, in order.
        while self.next_launch < len(self.buckets):
            self._launch(self.buckets[self.next_launch])
            self.next_launch += 1
        world = dist.get_world_size()
        with torch.no_grad():
            for bucket in self.buckets:
                bucket.work.wait()
                if self.op is Average:
                    bucket.buffer.div_(world)
                for index, offset in zip(bucket.indices, bucket.offsets):
                    param = self.params[index]
                    param.grad.copy_(bucket.buffer[offset:offset + param.numel()].view_as(param.grad))
        if self.first_step:
            self.first_step = False
            self._rebuild()
        self._reset_counts()

    def _rebuild(self):
        """Buckets in the order rank 0 saw gradients become ready (the same on every rank)."""
        seen = set(self.ready_order)
        order = self.ready_order + [i for i in reversed(range(len(self.params))) if i not in seen]
        order = torch.tensor(order, dtype=torch.int64)
        dist.broadcast(order, src=0)
        self._plan([int(i) for i in order.tolist()])
        self.ready_order = []


class _DistributedOptimizer:
    """Methods of the class DistributedOptimizer makes: a subclass of the wrapped optimizer's class."""

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the results into the .grad tensors."""
        self._chorus_fusion.synchronize()
        self._chorus_synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (call synchronize() before it, e.g. to clip)."""
        self._chorus_skip = True
        try:
            yield
        finally:
            self._chorus_skip = False

    def step(self, closure=None):
        if not self._chorus_skip and not self._chorus_synchronized:
            self.synchronize()
        self._chorus_synchronized = False
        return super(self.__class__, self).step(closure)  # noqa: UP008  (the class is made at run time)

    def zero_grad(self, *args, **kwargs):
        if self._chorus_fusion.pending() and not self._chorus_synchronized:
            raise RuntimeError("chorus.torch.hvd: optimizer.zero_grad() was called after loss.backward() but "
                               "before optimizer.step() or optimizer.synchronize(): the gradients being reduced "
                               "would be lost")
        return super(self.__class__, self).zero_grad(*args, **kwargs)  # noqa: UP008


def DistributedOptimizer(optimizer, named_parameters=None, op=Average, backward_passes_per_step=1,  # noqa: N802
                         fusion_bytes=None):
    """optimizer, with every gradient reduced across ranks (op: Average by default) before each step.

    named_parameters: model.named_parameters(), for error messages. fusion_bytes: the most bytes one
    allreduce fuses (CHORUS_FUSION_BYTES, default 16 MiB). backward_passes_per_step: backward passes
    accumulated locally before the gradients are reduced."""
    _require_init("DistributedOptimizer")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"chorus.torch.hvd.DistributedOptimizer: expected a torch.optim.Optimizer, got "
                        f"{type(optimizer).__name__}")
    if not isinstance(op, _Op) or op not in (Average, Sum, Min, Max, Product):
        raise ValueError(f"chorus.torch.hvd.DistributedOptimizer: op must be hvd.Average or Sum, ..., not {op!r}")
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
        raise ValueError(f"chorus.torch.hvd.DistributedOptimizer: backward_passes_per_step must be 1 or more, "
                         f"not {backward_passes_per_step!r}")
    fusion = _environment.fusion_bytes(_DEFAULT_FUSION_BYTES) if fusion_bytes is None else int(fusion_bytes)
    if fusion < 1:
        raise ValueError(f"chorus.torch.hvd.DistributedOptimizer: fusion_bytes must be 1 or more, not {fusion}")
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    if len({id(p) for p in params}) != len(params):
        raise ValueError("chorus.torch.hvd.DistributedOptimizer: a parameter appears in two parameter groups")
    if named_parameters is not None:
        named = list(named_parameters)
        names_by_id = {id(p): name for name, p in named}
        if len({name for name, _ in named}) != len(named):
            raise ValueError("chorus.torch.hvd.DistributedOptimizer: named_parameters has duplicate names")
        unnamed = [i for i, p in enumerate(params) if id(p) not in names_by_id]
        if unnamed:
            raise ValueError(f"chorus.torch.hvd.DistributedOptimizer: {len(unnamed)} of the optimizer's parameters "
                             f"are not in named_parameters (the first is parameter {unnamed[0]})")
        names = [names_by_id[id(p)] for p in params]
    else:
        names = [f"parameter {i}" for i in range(len(params))]

    methods = {key: value for key, value in _DistributedOptimizer.__dict__.items()
               if key not in ("__dict__", "__weakref__", "__module__", "__qualname__")}
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    distributed = cls.__new__(cls)
    # The same state, parameter groups and defaults: a view of the wrapped optimizer, not a copy.
    distributed.__dict__.update(optimizer.__dict__)
    distributed._chorus_fusion = _GradientFusion(params, names, op, fusion, backward_passes_per_step)
    distributed._chorus_synchronized = False
    distributed._chorus_skip = False
    return distributed
