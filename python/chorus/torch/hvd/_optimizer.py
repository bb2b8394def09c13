"""DistributedOptimizer: a torch optimizer whose step() uses the gradients reduced across ranks."""

from contextlib import contextmanager

import torch

from ... import _environment
from ._fusion import _GradientFusion
from ._job import _require_init
from ._ops import Average, Max, Min, Product, Sum, _Op

_DEFAULT_FUSION_BYTES = 16 << 20


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
    methods["__module__"] = __package__  # shown as chorus.torch.hvd.<optimizer>, not this private module
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    distributed = cls.__new__(cls)
    # The same state, parameter groups and defaults: a view of the wrapped optimizer, not a copy.
    distributed.__dict__.update(optimizer.__dict__)
    distributed._chorus_fusion = _GradientFusion(params, names, op, fusion, backward_passes_per_step)
    distributed._chorus_synchronized = False
    distributed._chorus_skip = False
    return distributed
