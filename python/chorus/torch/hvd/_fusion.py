"""Gradient fusion for DistributedOptimizer: buckets of gradients, each reduced as one allreduce."""

import torch
import torch.distributed as dist

from . import _negotiation
from ._compression import NoneCompressor
from ._launcher import _launcher
from ._ops import _HALF_TYPES, Average, Sum, _average_, _op_code
from ._process_sets import global_process_set

_FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    def __init__(self, dtype):
        self.dtype = dtype  # of the fusion buffer
        self.indices = []
        self.offsets = []
        self.elements = 0
        self.unready = 0
        self.buffer = None
        self.work = None
        self.sparse = []  # (parameter index, handle) of the sparse gradients reduced beside the bucket

    def nbytes(self):
        return self.elements * torch.empty(0, dtype=self.dtype).element_size()


class _GradientFusion:
    """The gradients of one DistributedOptimizer: buckets, hooks, and the allreduces in flight."""

    def __init__(self, params, names, op, fusion_bytes, backward_passes_per_step, compression=NoneCompressor,
                 predivide_factor=1.0, sparse_as_dense=False, process_set=None):
        self.params = params
        self.process_set = process_set or global_process_set
        self.names = names
        self.op = op
        self.compression = compression
        self.predivide_factor = predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.contexts = [None] * len(params)  # each gradient's compression context, this step
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
        if self.compression is not NoneCompressor:
            # What the compressor sends decides (fp16 halves the bytes: no float32 accumulation then).
            return self.compression.compress(torch.zeros(1, dtype=param.dtype))[0].dtype
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
        sparse_grads = []
        with torch.no_grad():
            for index, offset in zip(bucket.indices, bucket.offsets):
                param = self.params[index]
                if param.grad is None:
                    # Unused on this rank (maybe not on others): it contributes zeros.
                    param.grad = torch.zeros_like(param)
                grad = param.grad
                if grad.is_sparse and not self.sparse_as_dense:
                    # Reduced on its own, as Horovod does: an allgather of
                    # its indices and values (sparse.py), after the bucket;
                    # its slot in the bucket holds zeros.
                    sparse_grads.append((index, grad))
                    bucket.buffer[offset:offset + param.numel()].zero_()
                    continue
                if grad.is_sparse:
                    grad = grad.to_dense()
                compressed, self.contexts[index] = self.compression.compress(grad)
                bucket.buffer[offset:offset + param.numel()].copy_(compressed.reshape(-1))
            if self.op is Average and self.predivide_factor != 1.0:
                bucket.buffer.mul_(1.0 / self.predivide_factor)
        buffer, torch_op, group = bucket.buffer, self.op.torch_op, self.process_set._group
        descriptor = _negotiation.describe("allreduce", buffer.dtype, buffer.shape, _op_code(self.op))
        set_ranks = self.process_set.ranks

        def issue(_descriptors):
            # Through the launcher, in this rank's one order of collectives
            # (launcher.py). The descriptor goes out like any call's, so that
            # a rank that joined (join.py) knows what to add; but the data
            # follows at once, unwaited: a bucket is the same on every rank
            # by construction, and waiting would put a round trip on the
            # step's critical path for each bucket (checked at synchronize).
            exchange = _negotiation.exchange_async(descriptor, group, set_ranks)
            return exchange, dist.all_reduce(buffer, op=torch_op, group=group, async_op=True)

        bucket.work = _launcher.submit(issue, None, self.process_set, "DistributedOptimizer")
        bucket.sparse = [(index, self._reduce_sparse(index, grad)) for index, grad in sparse_grads]

    def _reduce_sparse(self, index, grad):
        from ._sparse import sparse_allreduce_async  # (sparse.py imports the collectives this module does not)
        if self.op not in (Average, Sum):
            raise ValueError(f"chorus.torch.hvd.DistributedOptimizer: {self.names[index]} has a sparse gradient, "
                             f"which reduces with hvd.Average or hvd.Sum only, not {self.op!r}")
        return sparse_allreduce_async(grad, op=self.op, process_set=self.process_set)

    def pending(self):
        """Whether gradients were computed for reduction since the last synchronize."""
        return self.ready_count > 0

    def synchronize(self):
        try:
            self._synchronize()
        except BaseException:
            # The step's reductions are lost (a rank died, the ranks
            # disagreed): start the next step afresh, so that an elastic job
            # that rolls back and goes on (elastic.py) can zero_grad().
            self._reset_counts()
            raise

    def _synchronize(self):
        # Buckets whose gradients never became ready go out now, in order.
        while self.next_launch < len(self.buckets):
            self._launch(self.buckets[self.next_launch])
            self.next_launch += 1
        world = len(self.process_set.ranks)
        with torch.no_grad():
            for bucket in self.buckets:
                (exchange_work, descriptors), reduction = bucket.work.wait_issued()
                exchange_work.wait()
                reduction.wait()
                _negotiation.check(_negotiation.descriptors_of(descriptors, self.process_set.ranks),
                                   "DistributedOptimizer")
                if self.op is Average and self.predivide_factor != 1.0:
                    bucket.buffer.mul_(self.predivide_factor / world)  # Horovod's postscale
                elif self.op is Average:
                    _average_(bucket.buffer, world)
                sparse = dict(bucket.sparse)
                for index, offset in zip(bucket.indices, bucket.offsets):
                    if index in sparse:
                        self.params[index].grad = sparse[index].wait()
                    else:
                        self._write_back(index, bucket.buffer[offset:offset + self.params[index].numel()])
        if self.first_step:
            self.first_step = False
            self._rebuild()
        self._reset_counts()

    def _write_back(self, index, reduced):
        param = self.params[index]
        reduced = self.compression.decompress(reduced.view(param.shape), self.contexts[index])
        self.contexts[index] = None
        if param.grad.is_sparse:
            param.grad = reduced.to(param.grad.dtype).to_sparse()  # sparse_as_dense: back to sparse, as Horovod
        else:
            param.grad.copy_(reduced)

    def _rebuild(self):
        """Buckets in the order rank 0 saw gradients become ready (the same on every rank)."""
        seen = set(self.ready_order)
        order = self.ready_order + [i for i in reversed(range(len(self.params))) if i not in seen]
        order = torch.tensor(order, dtype=torch.int64)
        root, group = self.process_set.ranks[0], self.process_set._group
        descriptor = _negotiation.describe("broadcast", order.dtype, order.shape, root=root)
        _launcher.submit(lambda _descriptors: dist.broadcast(order, src=root, group=group), descriptor,
                         self.process_set, "DistributedOptimizer").wait_issued()
        self._plan([int(i) for i in order.tolist()])
        self.ready_order = []
