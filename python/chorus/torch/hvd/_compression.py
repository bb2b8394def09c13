"""Gradient compression (hvd.Compression): what DistributedOptimizer sends instead of each gradient."""

import torch


class Compressor:
    """The interface, as Horovod's: a subclass defines compress(tensor) -> (tensor to reduce, context) and
    decompress(reduced tensor, context) -> the result."""

    @classmethod
    def compress(cls, tensor):
        raise TypeError(f"chorus.torch.hvd: {cls.__name__} is a Compressor without compress(): a subclass "
                        "defines compress(tensor) -> (tensor, ctx)")

    @classmethod
    def decompress(cls, tensor, ctx):
        raise TypeError(f"chorus.torch.hvd: {cls.__name__} is a Compressor without decompress(): a subclass "
                        "defines decompress(tensor, ctx) -> tensor")


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
