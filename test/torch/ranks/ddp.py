"""DDP training of a small MLP on synthetic data: `ddp.py <backend> [steps [hook]]`,
hook one of "none" (DDP's own allreduce), "fp16" (torch's fp16_compress_hook:
gradients reduced as float16) or "python" (a comm hook written here, chaining
the division onto the allreduce's future).
Every rank prints its loss at every step ("loss <step> <float.hex>") and a
digest of its parameters at the end ("params <sha256>"): the test compares
them across backends and across ranks, independently of the backend under
test. With CHORUS_TEST_EXIT_RANK=r and CHORUS_TEST_EXIT_STEP=s, rank r exits
at step s and the others must raise an error naming it within the timeout
(prints "lost OK <rank> <seconds>")."""

import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from common import Checker, init

backend = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
hook = sys.argv[3] if len(sys.argv) > 3 else "none"
timeout = 20
rank, size = init(backend, seconds=timeout)
check = Checker(rank)
exit_rank = int(os.environ.get("CHORUS_TEST_EXIT_RANK", "-1"))
exit_step = int(os.environ.get("CHORUS_TEST_EXIT_STEP", "-1"))

# Different initial weights per rank: DDP must broadcast rank 0's.
torch.manual_seed(100 + rank)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4))
# Small buckets: several allreduces per step, overlapping the backward pass.
ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)


def mean_hook(state, bucket):
    future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return future.then(lambda done: done.value()[0].div_(size))


if hook == "fp16":
    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
elif hook == "python":
    ddp.register_comm_hook(None, mean_hook)
else:
    check(hook == "none", f"unknown hook {hook}")
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
data = torch.Generator().manual_seed(1000 + rank)
target_map = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))

try:
    for step in range(steps):
        if rank == exit_rank and step == exit_step:
            print(f"rank {rank} leaves at step {step}", flush=True)
            os._exit(0)  # no goodbye: the others see a lost peer
        started = time.monotonic()
        inputs = torch.randn(32, 16, generator=data)
        loss = torch.nn.functional.mse_loss(ddp(inputs), inputs @ target_map)
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
    dist.destroy_process_group()  # a finished group still shuts down cleanly
    sys.exit(0)
check(exit_rank < 0, "a lost rank must make training fail")

digest = hashlib.sha256()
for parameter in model.parameters():
    digest.update(parameter.detach().contiguous().numpy().tobytes())
print(f"params {digest.hexdigest()}", flush=True)
dist.destroy_process_group()
print(f"ddp OK {check.count}", flush=True)
