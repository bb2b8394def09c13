"""What every rank script of test/torch shares: joining the job, checks that
name the rank, and bit-exact comparison of tensors."""

import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import chorus.torch  # noqa: F401  (registers the backend "chorus")

# Two cores run several ranks: one thread each keeps them from fighting.
torch.set_num_threads(1)

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.int8, torch.uint8, torch.int32, torch.int64]
DTYPES = FLOATS + INTEGERS
# Moved as bytes (chorus has no such type): collectives that do not reduce take them too.
BYTE_ONLY = [torch.bool, torch.int16]

# Same-width integer views: comparing them compares bits (-0.0 != 0.0, NaN == itself).
_BITS = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.count = 0

    def __call__(self, condition, what):
        if not condition:
            print(f"rank {self.rank}: FAILED: {what}", flush=True)
            sys.exit(1)
        self.count += 1

    def equal(self, got, expected, what):
        """Bit-exact: same dtype, shape and bits."""
        same = got.dtype == expected.dtype and got.shape == expected.shape
        if same:
            view = _BITS.get(got.dtype)
            a = got.contiguous().view(view) if view else got
            b = expected.contiguous().view(view) if view else expected
            same = torch.equal(a, b)
        self(same, f"{what}: got {got.tolist()} ({got.dtype}), expected {expected.tolist()} ({expected.dtype})")


def init(backend="chorus", seconds=60):
    dist.init_process_group(backend, timeout=timedelta(seconds=seconds))
    return dist.get_rank(), dist.get_world_size()
