"""DistributedOptimizer(op=hvd.Adasum): Horovod's delta optimizer.

Each rank applies the wrapped optimizer to its own gradients; the steps it
took (new parameters minus old) are combined across ranks by Adasum and
added to the old parameters, on every rank alike. Adasum combines steps,
not gradients, so that optimizers with state (momentum, Adam) keep their
meaning. All of a step's deltas travel in one allgather, in the optimizer's
parameter order (the same on every rank), after the backward pass; each
parameter is combined on its own, as Horovod combines each tensor."""

from contextlib import contextmanager

import torch

from ._adasum import _adasum_of, _check_adasum
from ._allgather import allgather
from ._wrapping import wrap_optimizer


class _AdasumOptimizer:
    """Methods of the class DistributedOptimizer makes for op=hvd.Adasum."""

    def synchronize(self):
        """Nothing to wait for: the steps are combined inside step()."""

    @contextmanager
    def skip_synchronize(self):
        raise ValueError("chorus.torch.hvd: skip_synchronize() does not apply with op=hvd.Adasum: step() itself "
                         "combines the ranks' steps")
        yield  # (unreachable; makes this a generator for contextmanager)

    def step(self, closure=None):
        params = self._chorus_adasum_params
        starts = [param.detach().clone() for param in params]
        loss = super(self.__class__, self).step(closure)  # noqa: UP008  (the class is made at run time)
        with torch.no_grad():
            deltas = torch.cat([(param.detach() - start).reshape(-1).to(torch.float64)
                                for param, start in zip(params, starts)])
            every_rank = allgather(deltas.reshape(1, -1))
            offset = 0
            for param, start in zip(params, starts):
                count = param.numel()
                combined = _adasum_of(every_rank[:, offset:offset + count])
                param.copy_((start.to(torch.float64) + combined).view_as(param))
                offset += count
        return loss


def adasum_optimizer(optimizer, params):
    """optimizer as an instance of a subclass whose step() combines the ranks' steps by Adasum."""
    for param in params:
        _check_adasum(param, "DistributedOptimizer")
    distributed = wrap_optimizer(optimizer, _AdasumOptimizer)
    distributed._chorus_adasum_params = params
    return distributed
