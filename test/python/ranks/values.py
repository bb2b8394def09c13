"""Deterministic small-integer inputs and their exact expected results, the
same on every rank, so that each rank can check every output bit for bit."""

import numpy as np

import chorus

# chorus type -> (numpy storage dtype, dtype= override or None)
TYPES = {
    "int8": (np.int8, None),
    "uint8": (np.uint8, None),
    "int32": (np.int32, None),
    "uint32": (np.uint32, None),
    "int64": (np.int64, None),
    "uint64": (np.uint64, None),
    "float16": (np.float16, None),
    "bfloat16": (np.uint16, chorus.bfloat16),
    "float32": (np.float32, None),
    "float64": (np.float64, None),
}
FLOATING = {"float16", "bfloat16", "float32", "float64"}


def encode(values, type_name):
    """Exact small integers (any numeric numpy array) as type_name's storage."""
    storage, _ = TYPES[type_name]
    values = np.asarray(values)
    if type_name == "bfloat16":
        # Small integers are exact in bfloat16: its bits are float32's upper half.
        bits = values.astype(np.float32).view(np.uint32)
        assert not np.any(bits & 0xFFFF), "value not exact in bfloat16"
        return (bits >> 16).astype(np.uint16)
    encoded = values.astype(storage)
    assert np.array_equal(encoded.astype(np.float64), values.astype(np.float64)), "value not exact"
    return encoded


def op_input(op, rank, size, count):
    """Rank's input for op, chosen so the exact result fits every type."""
    i = np.arange(count, dtype=np.int64)
    if op == "sum":
        return (i % 5) + rank + 1
    if op == "prod":
        return 1 + (i + rank) % 2
    if op in ("min", "max"):
        return (i + 3 * rank) % 7
    if op == "avg":
        # The sum over ranks is divisible by size: avg is exact for integers too.
        return (i % 7) * 1 + 2 * rank
    return (i * 3 + rank * 5) & 0x7F  # band, bor, bxor


def reduced(op, size, count):
    inputs = [op_input(op, r, size, count) for r in range(size)]
    if op == "sum":
        return np.sum(inputs, axis=0)
    if op == "prod":
        return np.prod(inputs, axis=0)
    if op == "min":
        return np.min(inputs, axis=0)
    if op == "max":
        return np.max(inputs, axis=0)
    if op == "avg":
        return (np.arange(count) % 7) + (size - 1)
    combine = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
    return combine.reduce(np.array(inputs), axis=0)


def block(rank, count, salt=0):
    """A distinct small-integer block per rank (for the moving collectives)."""
    return (np.arange(count, dtype=np.int64) * 7 + rank * 11 + salt) % 97


def same_bits(actual, expected):
    return np.asarray(actual).tobytes() == np.asarray(expected).tobytes()
