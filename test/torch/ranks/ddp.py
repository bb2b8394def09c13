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

import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from common import Checker, init, make_mlp, train_mlp

backend = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
hook = sys.argv[3] if len(sys.argv) > 3 else "none"
timeout = 20
rank, size = init(backend, seconds=timeout)
check = Checker(rank)

# Different initial weights per rank: DDP must broadcast rank 0's.
model = make_mlp(rank)
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
train_mlp(rank, check, model, ddp, optimizer, steps, timeout, dist.destroy_process_group)
dist.destroy_process_group()
print(f"ddp OK {check.count}", flush=True)
if backend == "gloo":
    # torch 1.13's Gloo group can still be running a finished allreduce's
    # future callbacks (the comm hooks') on its own thread when Python
    # finalizes; that thread then takes the GIL of a dead interpreter and the
    # process aborts ("terminate called without an active exception", about
    # 1 run in 6 here). The reference run skips finalization; chorus's own
    # backend drains its calls at exit (docs/torch.md) and exits normally.
    sys.stdout.flush()
    os._exit(0)
