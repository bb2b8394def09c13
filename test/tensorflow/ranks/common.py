"""What the rank scripts share: quiet TensorFlow, the dtypes chorus and TensorFlow both have, exact checks."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REDUCIBLE = [tf.int8, tf.uint8, tf.int32, tf.uint32, tf.int64, tf.uint64, tf.float16, tf.bfloat16, tf.float32,
             tf.float64]
MOVABLE = REDUCIBLE + [tf.bool]


def as_exact(array):
    """numpy of a tensor, bfloat16 and float16 widened (exactly) for comparison."""
    array = np.asarray(array.numpy() if hasattr(array, "numpy") else array)
    if array.dtype.kind == "V" or str(array.dtype) in ("bfloat16", "float16"):
        return array.astype(np.float64)
    return array


class Checker:
    """Counts checks; a failed one raises with what was expected and got."""

    def __init__(self, rank):
        self.rank = rank
        self.count = 0

    def equal(self, got, expected, what):
        got, expected = as_exact(got), as_exact(expected)
        self.count += 1
        if got.shape != expected.shape or not np.array_equal(got, expected):
            raise AssertionError(f"rank {self.rank}: {what}: expected {expected.tolist()} (shape {expected.shape}), "
                                 f"got {got.tolist()} (shape {got.shape})")

    def true(self, condition, what):
        self.count += 1
        if not condition:
            raise AssertionError(f"rank {self.rank}: {what}")
