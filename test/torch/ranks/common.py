"""What every rank script of test/torch shares: joining the job, checks that
name the rank, and bit-exact comparison of tensors."""

import hashlib
import os
import sys
import time
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


def make_mlp(rank):
    """The small MLP of the training tests, with different initial weights on every rank."""
    torch.manual_seed(100 + rank)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def train_mlp(rank, check, model, forward, optimizer, steps, timeout, shutdown):
    """50 (steps) steps on synthetic data, printing "loss <step> <float.hex>" at each and
    "params <sha256>" at the end. With CHORUS_TEST_EXIT_RANK=r and CHORUS_TEST_EXIT_STEP=s,
    rank r exits at step s and every other rank must fail with an error naming it within
    the timeout (printing "lost OK <rank> <seconds> <error type>", then exiting 0)."""
    exit_rank = int(os.environ.get("CHORUS_TEST_EXIT_RANK", "-1"))
    exit_step = int(os.environ.get("CHORUS_TEST_EXIT_STEP", "-1"))
    data = torch.Generator().manual_seed(1000 + rank)
    target_map = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    try:
        for step in range(steps):
            if rank == exit_rank and step == exit_step:
                print(f"rank {rank} leaves at step {step}", flush=True)
                os._exit(0)  # no goodbye: the others see a lost peer
            started = time.monotonic()
            inputs = torch.randn(32, 16, generator=data)
            loss = torch.nn.functional.mse_loss(forward(inputs), inputs @ target_map)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"loss {step} {loss.item().hex()}", flush=True)
    except Exception as error:  # noqa: BLE001  (the lost-rank test expects one)
        elapsed = time.monotonic() - started
        check(exit_rank >= 0, f"step {step} failed: {error}")
        message = str(error)
        check(f"rank {exit_rank}" in message, f"the error names the lost rank {exit_rank}: {message}")
        check(elapsed < timeout, f"the error came after {elapsed:.1f} s, within the {timeout} s timeout")
        # Through DDP's reducer and autograd the error arrives as a RuntimeError
        # (direct calls raise chorus.PeerLostError); the message is chorus's.
        print(f"lost OK {exit_rank} {elapsed:.1f} {type(error).__name__}", flush=True)
        shutdown()  # a finished group still shuts down cleanly
        sys.exit(0)
    check(exit_rank < 0, "a lost rank must make training fail")
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().contiguous().numpy().tobytes())
    print(f"params {digest.hexdigest()}", flush=True)
