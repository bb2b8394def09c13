"""Horovod's gradient compression for the TensorFlow API: Compression.none and Compression.fp16."""

import tensorflow as tf


class Compressor:
    """compress(tensor) -> (tensor, context); decompress(tensor, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        raise TypeError("a Compressor subclass must define compress(tensor) -> (tensor, context)")

    @staticmethod
    def decompress(tensor, ctx):
        raise TypeError("a Compressor subclass must define decompress(tensor, context) -> tensor")


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their own dtype."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
