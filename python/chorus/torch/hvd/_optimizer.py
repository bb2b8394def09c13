"""DistributedOptimizer: a torch optimizer whose step() uses the gradients reduced across ranks."""

import warnings
from contextlib import contextmanager

import torch

from ... import _environment
from ._process_sets import _resolve, global_process_set
from ._compression import Compression, Compressor
from ._fusion import _GradientFusion
from ._adasum_optimizer import adasum_optimizer
from ._job import _require_init, size
from ._ops import Adasum, Average, Max, Min, Product, Sum, _Op
from ._wrapping import wrap_optimizer

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
        if self._chorus_synchronized and not self._chorus_skip:
            # As Horovod warns: harmless here (nothing is reduced twice), but
            # the script meant skip_synchronize().
            warnings.warn("optimizer.step() called without optimizer.skip_synchronize() after "
                          "optimizer.synchronize(): chorus.torch.hvd does not reduce the gradients again, but "
                          "wrap step() in `with optimizer.skip_synchronize():` to say so", stacklevel=2)
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


class _NoReduction:
    """The gradients of a rank outside the optimizer's process set: its own, reduced with nobody (as Horovod's)."""

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def pending():
        return False


def _check_horovod_options(compression, op, gradient_predivide_factor, num_groups, groups, process_set):
    what = "chorus.torch.hvd.DistributedOptimizer"
    if not (isinstance(compression, type) and issubclass(compression, Compressor)) and not (
            hasattr(compression, "compress") and hasattr(compression, "decompress")):
        raise TypeError(f"{what}: compression must be hvd.Compression.none, .fp16 or a Compressor, not "
                        f"{compression!r}")
    if not isinstance(op, _Op) or op not in (Average, Sum, Adasum, Min, Max, Product):
        raise ValueError(f"{what}: op must be hvd.Average, Sum, Adasum, Min, Max or Product, not {op!r}")
    if op is Adasum and compression is not Compression.none:
        raise ValueError(f"{what}: compression with op=hvd.Adasum is not provided: the steps Adasum combines "
                         f"travel in float64, uncompressed")
    if gradient_predivide_factor != 1.0 and op is not Average:
        raise ValueError(f"{what}: gradient_predivide_factor={gradient_predivide_factor} needs op=hvd.Average "
                         f"(it splits the averaging around the sum), not {op!r}")
    if not gradient_predivide_factor > 0:
        raise ValueError(f"{what}: gradient_predivide_factor must be positive, not {gradient_predivide_factor!r}")
    if num_groups or groups is not None:
        raise ValueError(f"{what}: groups/num_groups (Horovod's explicit grouping of allreduces) are not "
                         f"provided: gradients are fused into buckets of fusion_bytes (CHORUS_FUSION_BYTES), the "
                         f"same on every rank, which is what Horovod's groups are for")


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,  # noqa: N802, PLR0913
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False, process_set=None, fusion_bytes=None):
    """optimizer, with every gradient reduced across ranks (op: Average by default) before each step.

    Horovod's arguments: named_parameters (model.named_parameters(), for error messages); compression
    (hvd.Compression.fp16 sends 16-bit gradients); backward_passes_per_step (passes accumulated locally
    before the gradients are reduced); gradient_predivide_factor f (Average only: gradients are scaled by
    1/f before the sum and by f/size after it); sparse_as_dense (sparse gradients are reduced as dense ones
    and handed back sparse); op=hvd.Adasum (Horovod's delta optimizer: each rank steps alone, the steps are
    combined by Adasum); process_set (the ranks whose gradients are averaged; a rank outside it steps on
    its own gradients, as in Horovod). groups/num_groups are refused
    (fusion replaces them). fusion_bytes (chorus's): the
    most bytes one allreduce fuses (CHORUS_FUSION_BYTES, default 16 MiB)."""
    _require_init("DistributedOptimizer")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"chorus.torch.hvd.DistributedOptimizer: expected a torch.optim.Optimizer, got "
                        f"{type(optimizer).__name__}")
    _check_horovod_options(compression, op, gradient_predivide_factor, num_groups, groups, process_set)
    process_set = _resolve(process_set, "DistributedOptimizer", member=False)
    if op is Adasum and process_set is not global_process_set:
        raise ValueError("chorus.torch.hvd.DistributedOptimizer: op=hvd.Adasum runs on the global process set only "
                         "(as in Horovod)")
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

    if op is Adasum and size() > 1:
        distributed = adasum_optimizer(optimizer, params)
    else:
        if op is Adasum:
            op = Sum  # Adasum of one rank's gradient is that gradient
        distributed = wrap_optimizer(optimizer, _DistributedOptimizer)
        if process_set.included():
            distributed._chorus_fusion = _GradientFusion(params, names, op, fusion, backward_passes_per_step,
                                                         compression, float(gradient_predivide_factor),
                                                         bool(sparse_as_dense), process_set)
        else:
            distributed._chorus_fusion = _NoReduction()
        distributed._chorus_synchronized = False
        distributed._chorus_skip = False
    distributed._parameter_names = dict(zip(params, names))  # Horovod's attribute (scripts read it)
    return distributed
