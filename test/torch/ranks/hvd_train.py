"""The MLP of ddp.py trained through chorus.torch.hvd's DistributedOptimizer:
`hvd_train.py <backend> [steps [fusion_bytes]]`. Prints what ddp.py prints
("loss <step> <float.hex>", "params <sha256>"), so the test compares the two
runs step by step. Different initial weights and optimizer states per rank:
broadcast_parameters and broadcast_optimizer_state must make them rank 0's.
With CHORUS_TEST_EXIT_RANK=r and CHORUS_TEST_EXIT_STEP=s, rank r exits at
step s and the others must raise an error naming it within the timeout."""

import hashlib
import os
import sys
import time

import torch

import chorus.torch.hvd as hvd
from common import Checker

backend = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
fusion_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else None
timeout = 20
torch.set_num_threads(1)
hvd.init(backend, timeout=timeout)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
check(0 <= hvd.local_rank() < hvd.local_size() <= size, f"local rank {hvd.local_rank()} of {hvd.local_size()}")
exit_rank = int(os.environ.get("CHORUS_TEST_EXIT_RANK", "-1"))
exit_step = int(os.environ.get("CHORUS_TEST_EXIT_STEP", "-1"))

torch.manual_seed(100 + rank)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
# A rank-specific momentum buffer: broadcast_optimizer_state must replace it with rank 0's (none yet there).
if rank != 0:
    for parameter in model.parameters():
        optimizer.state[parameter]["momentum_buffer"] = torch.full_like(parameter, float(rank))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
check(all(not state for state in optimizer.state.values()), "rank 0's empty optimizer state everywhere")
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     fusion_bytes=fusion_bytes)
check(isinstance(optimizer, torch.optim.SGD), "the distributed optimizer is still an SGD")
data = torch.Generator().manual_seed(1000 + rank)
target_map = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))

try:
    for step in range(steps):
        if rank == exit_rank and step == exit_step:
            print(f"rank {rank} leaves at step {step}", flush=True)
            os._exit(0)
        started = time.monotonic()
        inputs = torch.randn(32, 16, generator=data)
        loss = torch.nn.functional.mse_loss(model(inputs), inputs @ target_map)
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
    print(f"lost OK {exit_rank} {elapsed:.1f} {type(error).__name__}", flush=True)
    hvd.shutdown()
    sys.exit(0)
check(exit_rank < 0, "a lost rank must make training fail")

digest = hashlib.sha256()
for parameter in model.parameters():
    digest.update(parameter.detach().contiguous().numpy().tobytes())
print(f"params {digest.hexdigest()}", flush=True)
print(f"buckets {len(optimizer._chorus_fusion.buckets)}", flush=True)
hvd.shutdown()
print(f"hvd_train OK {check.count}", flush=True)
