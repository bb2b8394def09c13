"""Gradient compression (hvd.Compression): what DistributedOptimizer sends instead of each gradient."""

import torch


class Compressor:
    """compress(tensor) -> (tensor to reduce, context); decompress(reduced tensor, context) -> the result."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):  # noqa: ARG004
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 (half the bytes) and casts the result back; others as they are."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating_point and tensor.dtype != ctx:
            return tensor.to(ctx)
        return tensor


class Compression:
    """The compressors, as Horovod names them: Compression.none (the default) and Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
