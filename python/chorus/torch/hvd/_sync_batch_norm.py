"""hvd.SyncBatchNorm: batch normalization whose training statistics are those of the whole job's batch.

Each rank sums its batch's values and squares per channel (in float64, so
that the variance E[x²] - E[x]² keeps its digits) and the sums are
allreduced; the normalized output and the gradients are those of one
BatchNorm over every rank's batch. The backward pass allreduces the two
per-channel sums that the input's gradient needs; the weight's and bias's
gradients stay this rank's share (DistributedOptimizer reduces them)."""

import torch
import torch.nn.functional as F  # noqa: N812
from torch.nn.modules.batchnorm import _BatchNorm

from ._allreduce import allreduce
from ._job import size
from ._ops import Sum


def _channel_sums(tensor):
    """Per channel (dimension 1) sums of a float64 tensor (N, C, ...)."""
    return tensor.transpose(0, 1).reshape(tensor.shape[1], -1).sum(1)


def _channel_view(vector, like):
    return vector.view((1, -1) + (1,) * (like.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, running_mean, running_var, eps, momentum):  # noqa: A002, PLR0913
        values = input.to(torch.float64)
        count_local = torch.tensor([input.numel() // input.shape[1]], dtype=torch.float64)
        channels = input.shape[1]
        # One allreduce: the sums of x and x², and the number of values per channel.
        total = allreduce(torch.cat([_channel_sums(values), _channel_sums(values * values), count_local]), op=Sum)
        sums = total[:2 * channels].view(2, channels)
        count = float(total[-1])
        if count <= 1:
            raise ValueError(f"chorus.torch.hvd.SyncBatchNorm: expected more than 1 value per channel over the "
                             f"job when training, got {int(count)}")
        mean = sums[0] / count
        var = (sums[1] / count - mean * mean).clamp_(min=0)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
            running_var.mul_(1 - momentum).add_((var * count / (count - 1)).to(running_var.dtype), alpha=momentum)
        invstd = torch.rsqrt(var + eps)
        normalized = (values - _channel_view(mean, input)) * _channel_view(invstd, input)
        ctx.save_for_backward(normalized, weight, invstd)
        ctx.count = count
        output = normalized
        if weight is not None:
            output = output * _channel_view(weight.to(torch.float64), input) + _channel_view(
                bias.to(torch.float64), input)
        return output.to(input.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        normalized, weight, invstd = ctx.saved_tensors
        grad = grad_output.to(torch.float64)
        local = torch.stack([_channel_sums(grad), _channel_sums(grad * normalized)])
        grad_bias_local, grad_weight_local = local[0], local[1]
        total = allreduce(local, op=Sum)
        scale = invstd if weight is None else invstd * weight.to(torch.float64)
        grad_input = _channel_view(scale, grad) * (
            grad - _channel_view(total[0] / ctx.count, grad) - normalized * _channel_view(total[1] / ctx.count, grad))
        grad_weight = grad_bias = None
        if weight is not None:
            grad_weight = grad_weight_local.to(weight.dtype)
            grad_bias = grad_bias_local.to(weight.dtype)
        return grad_input.to(grad_output.dtype), grad_weight, grad_bias, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over inputs (N, C, ...) whose training statistics span every rank's batch (Horovod's
    hvd.SyncBatchNorm; arguments as torch.nn.BatchNorm1d). In evaluation it uses its running statistics,
    like any BatchNorm; on one rank it is one."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() < 2:
            raise ValueError(f"chorus.torch.hvd.SyncBatchNorm: expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average, as torch's BatchNorm
                momentum = 1.0 / float(self.num_batches_tracked)
        if (not self.training and self.track_running_stats) or size() == 1:
            use_batch = self.training or not self.track_running_stats
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
                                momentum, self.eps)
        running_mean = self.running_mean if self.training else None
        running_var = self.running_var if self.training else None
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean, running_var, self.eps,
                                            momentum)
